"""The save_search tool: every item of a search taken away as one file in the workspace (or a
folder of hive-partitioned stac-geoparquet files, `partition_by`).

One Session call as a job (`jobs.run_job`: progress per page, cancel removes the partial file);
the answer is the output's record with links to its resources, as for any output.
"""

from typing import Annotated, Literal

from fastmcp import Context
from fastmcp.dependencies import CurrentContext
from pydantic import Field

from ...outputs import OutputRecord
from ...session import Session
from ..links import linked_result
from . import WRITES_OUTPUT, session_tool
from .args import SearchArg, json_text, search_kwargs
from .discovery import FieldsArg
from .jobs import run_job


def _saved(session: Session, *, job, **arguments):
    record = session.save_search(job=job, **arguments)
    folder = bool(arguments.get("partition_by"))  # a folder is no file resource: the record's link only
    return linked_result(record, [record], 0 if folder else session.settings.limits.max_resource_bytes)


@session_tool(WRITES_OUTPUT, task=True, estimates=False)
async def save_search(
    session: Session,
    search: SearchArg = None,
    bbox: json_text(list[float] | None, "WGS84") = None,
    format: Annotated[
        Literal["geoparquet", "ndjson"], Field(description="ndjson: an item a line")
    ] = "geoparquet",
    max_items: Annotated[int | None, Field(description="default: limits.max_items")] = None,
    fields: FieldsArg = None,
    partition_by: json_text(
        list[Literal["collection", "year", "month"]] | None, "hive folders, e.g. [collection, year]"
    ) = None,
    ctx: Context = CurrentContext(),
) -> OutputRecord:
    """Save a whole search's full items to the workspace as one (stac-geoparquet) file, or with
    partition_by a folder of hive folders (collection=/year=/month=) for DuckDB or rustac."""
    arguments = {**search_kwargs(search), **({"bbox": bbox} if bbox is not None else {})}
    if partition_by:
        arguments["partition_by"] = partition_by
    return await run_job(
        ctx, session, _saved, session, format=format, max_items=max_items, fields=fields, **arguments
    )
