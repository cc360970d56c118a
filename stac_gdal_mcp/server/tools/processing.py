"""Processing tools: inspect_asset, reproject_asset, convert_asset, preview, list_outputs,
delete_output; resources stac-gdal://outputs/{output_id} (record) and .../{output_id}/file.

Each tool is one call of a Session method. Long tools run it as a job through `run_operation`
(operations.py: confirm, job, answer): progress goes to the client, and a cancelled request
cancels the job, whose output is then removed before the cancellation completes.
"""

from typing import Annotated, Literal

from fastmcp import Context
from fastmcp.dependencies import CurrentContext
from pydantic import Field

from ...outputs import OutputList, OutputRecord, OutputSummary
from ...processing.grids import RESAMPLING
from ...processing.inspect import AssetInfo
from ...processing.requests import AssetRef
from ...session import Session
from ..images import QuicklookArg
from ..resources import OUTPUT_FILE_URI, OUTPUT_URI
from . import READ_ONLY, WRITES_OUTPUT, session_resource, session_tool
from .args import AssetArg, CatalogArg, CollectionIdArg, DryRunArg, HrefArg, ItemIdArg, json_text
from .confirm import ConfirmArg
from .operations import run_operation

LOCAL_READ = {"readOnlyHint": True, "openWorldHint": False}
LOCAL_DELETE = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": True,
    "openWorldHint": False,
}

BBox = json_text(
    Annotated[list[float], Field(min_length=4, max_length=4)] | None,
    "[west, south, east, north] in bbox_crs",
)
BBoxCrs = Annotated[str, Field(description="CRS of bbox")]
OutputName = Annotated[str | None, Field(description="file name; default: generated")]


def _call(values: dict) -> tuple[AssetRef, dict]:
    """A tool's arguments (its `locals()` on entry): its input as one AssetRef, and the others as
    they go to the Session method (the session, the context, quicklook and confirm left out)."""
    ref = AssetRef(*(values.pop(name) for name in ("href", "collection_id", "item_id", "asset", "catalog")))
    return ref, {k: v for k, v in values.items() if k not in ("session", "ctx", "quicklook", "confirm")}


@session_tool(READ_ONLY)
async def inspect_asset(
    session: Session,
    href: HrefArg = None,
    collection_id: CollectionIdArg = None,
    item_id: ItemIdArg = None,
    asset: AssetArg = None,
    catalog: CatalogArg = None,
    ctx: Context = CurrentContext(),
) -> AssetInfo:
    """A raster's header: size, bands, dtypes, nodata, scale/offset, CRS, transform, bounds,
    blocks, overviews, compression, COG validity.

    Example: inspect_asset(catalog="sample", collection_id="sentinel-2-l2a",
    item_id="S2A_33TUL_20240808_0_L2A", asset="red").
    """
    ref, _ = _call(locals())
    return await run_operation(ctx, session, "inspect", ref)


@session_tool(WRITES_OUTPUT, app=True, task=True, estimates=True)
async def reproject_asset(
    session: Session,
    dst_crs: Annotated[str, Field(description="target CRS, e.g. EPSG:4326, EPSG:32633")],
    href: HrefArg = None,
    collection_id: CollectionIdArg = None,
    item_id: ItemIdArg = None,
    asset: AssetArg = None,
    catalog: CatalogArg = None,
    resolution: Annotated[
        float | None,
        Field(gt=0, description="pixel size in dst_crs units; default: the source's"),
    ] = None,
    bbox: BBox = None,
    bbox_crs: BBoxCrs = "EPSG:4326",
    resampling: Annotated[
        Literal[RESAMPLING],
        Field(description="nearest keeps values (classes, masks); bilinear...: continuous data"),
    ] = "nearest",
    output_format: Annotated[
        Literal["COG", "GTiff", "netCDF"], Field(description="COG has internal overviews")
    ] = "COG",
    output_name: OutputName = None,
    quicklook: QuicklookArg = False,
    dry_run: DryRunArg = False,
    confirm: ConfirmArg = False,
    ctx: Context = CurrentContext(),
) -> OutputRecord:
    """Warp an asset (or its part in bbox) to another CRS as a COG output, reading only the tiles
    needed.

    Example: reproject_asset(catalog="sample", collection_id="sentinel-2-l2a",
    item_id="S2A_33TUL_20240808_0_L2A", asset="red", dst_crs="EPSG:4326").
    """
    ref, arguments = _call(locals())  # resolved in the worker thread: it may call the catalog
    return await run_operation(
        ctx, session, "reproject", ref, confirm=confirm, quicklook=quicklook, **arguments
    )


@session_tool(WRITES_OUTPUT, app=True, task=True, estimates=True)
async def convert_asset(
    session: Session,
    output_format: Annotated[
        Literal["COG", "GTiff", "PNG", "JPEG", "netCDF"],
        Field(description="PNG/JPEG: stretched 8-bit pictures; others keep the values"),
    ],
    href: HrefArg = None,
    collection_id: CollectionIdArg = None,
    item_id: ItemIdArg = None,
    asset: AssetArg = None,
    catalog: CatalogArg = None,
    bbox: BBox = None,
    bbox_crs: BBoxCrs = "EPSG:4326",
    bands: json_text(list[int] | None, "band numbers from 1; PNG/JPEG: 1 or 3") = None,
    creation_options: json_text(
        dict[str, str | int] | None, 'GDAL creation options, e.g. {"COMPRESS": "ZSTD"}'
    ) = None,
    output_name: OutputName = None,
    dry_run: DryRunArg = False,
    confirm: ConfirmArg = False,
    ctx: Context = CurrentContext(),
) -> OutputRecord:
    """Convert an asset (some bands, its window in bbox; nothing resampled) to another format.

    Example: convert_asset(catalog="sample", collection_id="sentinel-2-l2a",
    item_id="S2A_33TUL_20240808_0_L2A", asset="visual", output_format="PNG").
    """
    ref, arguments = _call(locals())
    return await run_operation(ctx, session, "convert", ref, confirm=confirm, **arguments)


@session_tool(WRITES_OUTPUT, estimates=True, app=True)
async def preview(
    session: Session,
    href: HrefArg = None,
    collection_id: CollectionIdArg = None,
    item_id: ItemIdArg = None,
    asset: AssetArg = None,
    catalog: CatalogArg = None,
    assets: json_text(
        list[str] | None,
        "1 asset (colormap) or 3 (RGB); default: visual or red, green, blue",
    ) = None,
    bbox: json_text(
        Annotated[list[float], Field(min_length=4, max_length=4)] | None,
        "[west, south, east, north] in WGS84",
    ) = None,
    max_size: Annotated[int, Field(ge=16, le=2048, description="longest side in pixels")] = 512,
    dry_run: DryRunArg = False,
    ctx: Context = CurrentContext(),
) -> OutputRecord:
    """A quicklook PNG of an item (true colour) or an asset (colormap, colour bar), returned as
    an image and saved; reads overviews (quick).

    Example: preview(catalog="sample", collection_id="sentinel-2-l2a", item_id="S2A_33TUL_20240808_0_L2A").
    """
    ref, arguments = _call(locals())  # (before any other name is bound here)
    return await run_operation(ctx, session, "preview", ref, **arguments)


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
