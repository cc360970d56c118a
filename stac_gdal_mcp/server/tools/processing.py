"""The workspace's outputs: the tools list_outputs and delete_output; the resources
stac-gdal://outputs/{output_id} (record) and .../{output_id}/file. (The operations' tools, which
write the outputs, are made from their classes: operations.py.)"""

from typing import Annotated

from pydantic import Field

from ...outputs import OutputList, OutputSummary
from ...session import Session
from ..resources import OUTPUT_FILE_URI, OUTPUT_URI
from . import session_resource, session_tool

LOCAL_READ = {"readOnlyHint": True, "openWorldHint": False}
LOCAL_DELETE = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": True,
    "openWorldHint": False,
}


@session_tool(LOCAL_READ)
def list_outputs(session: Session) -> OutputList:
    """The workspace's outputs, newest first."""
    store = session.outputs
    return OutputList(outputs=[r.summary() for r in store.list()], workspace=str(store.root))


@session_tool(LOCAL_DELETE)
def delete_output(
    session: Session,
    output_id: Annotated[str, Field(description="output id")],
) -> OutputSummary:
    """Delete an output's file and record; returns what was deleted."""
    return session.outputs.delete(output_id).summary()


@session_resource(OUTPUT_URI, mime_type="application/geo+json")
def output_record(session: Session, output_id: str) -> str:
    """An output's STAC-like record: footprint, proj, raster bands, processing, checksum, derived_from."""
    return session.outputs.get(output_id).model_dump_json()


@session_resource(
    OUTPUT_FILE_URI,
    mime_type="application/octet-stream",
    description=lambda session: (
        "An output's file (text for CSV/JSON, else binary), if at most limits.max_resource_bytes "
        f"({session.settings.limits.max_resource_bytes} bytes)."
    ),
)
def output_file(session: Session, output_id: str):
    from fastmcp.resources import ResourceContent, ResourceResult

    from ...errors import LimitExceeded

    store, limit = session.outputs, session.settings.limits.max_resource_bytes
    record = store.get(output_id)
    path = store.path(output_id)
    size = path.stat().st_size
    if size > limit:
        name = path.relative_to(store.workspace).as_posix()
        raise LimitExceeded(
            f"output '{output_id}' is {size} bytes, more than limits.max_resource_bytes={limit}, so it is "
            f"not served as a resource; it is {name} in the server's workspace (or convert a smaller bbox)"
        )
    data = store.read_bytes(output_id)  # refuses a symbolic link at open (O_NOFOLLOW)
    media = record.file.type or ""
    if media.startswith("text/") or media.split(";")[0].endswith(("json", "+xml")):
        try:  # text (a CSV table, JSON) as text, which hosts show and models read, not base64
            return ResourceResult([ResourceContent(data.decode("utf-8"), mime_type=media)])
        except UnicodeDecodeError:
            pass
    return ResourceResult([ResourceContent(data, mime_type=media or None)])
