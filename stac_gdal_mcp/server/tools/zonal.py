"""The zonal statistics tool: exact statistics per zone (field, district) and per item or day.

One `run_operation` (operations.py): the Session call as a job (progress per item, cancel stops
the reads), then the table saved as GeoParquet in the same job, as a notebook user would with
`session.save`, and answered by operations/zonal/result.py. The answer carries the rows that fit limits.max_result_bytes (the rest in the saved table, linked
as a resource), the zones with the first statistic for the map app, and with `per="day"` a
chart of the per-zone series as an image (class fractions: a chart of them).
"""

import re
from typing import Annotated, Any, Literal

from fastmcp import Context
from fastmcp.dependencies import CurrentContext
from pydantic import Field

from ...operations.zonal import result as zonal_result
from ...session import Session
from ..resources import OUTPUT_URI
from . import WRITES_OUTPUT, session_tool
from .analysis import MaskCloudsArg, ResolutionArg
from .args import DryRunArg, SearchOrItemsArg, json_text, search_kwargs
from .confirm import ConfirmArg
from .operations import run_operation

_OUTPUT = re.compile(re.escape(OUTPUT_URI.split("{", 1)[0]) + r"([^/]+)(?:/file)?")

GeometriesArg = json_text(
    dict[str, Any] | list[dict[str, Any]] | str,
    "GeoJSON (FeatureCollection, Features, polygon), a workspace file or output URI",
)


def _zones(session: Session, geometries):
    """A stac-gdal://outputs/ URI as the output's file in the workspace; anything else as given."""
    if isinstance(geometries, str):
        found = _OUTPUT.fullmatch(geometries.strip())
        if found:
            return str(session.outputs.path(found.group(1)))
    return geometries


@session_tool(WRITES_OUTPUT, app=True, task=True, estimates=True)
async def zonal_stats(
    session: Session,
    geometries: GeometriesArg,
    search: SearchOrItemsArg = None,
    id_property: Annotated[str | None, Field(description="property naming each zone")] = None,
    expression: Annotated[str, Field(description="ndvi, ndwi, a band, an asset (scl) or a formula")] = "ndvi",
    stats: json_text(list[str], "mean, median, min, max, count, majority, frac, quantile(q=0.9)...") = (
        "mean",
        "count",
    ),
    per: Annotated[
        Literal["item", "day"], Field(description="a row per zone and item, or solar day")
    ] = "item",
    mask_clouds: MaskCloudsArg = True,
    resolution: ResolutionArg = None,
    min_valid_fraction: Annotated[
        float, Field(ge=0, le=1, description="least valid share of a zone; 0: all")
    ] = 0.5,
    dry_run: DryRunArg = False,
    confirm: ConfirmArg = False,
    ctx: Context = CurrentContext(),
) -> zonal_result.ZonalResult:
    """Exact statistics per zone (coverage-weighted, native grid) per scene or day; saves a
    GeoParquet. Class fractions: stats=["frac"], mask_clouds=false."""
    arguments = dict(
        id_property=id_property,
        expression=expression,
        stats=stats,
        per=per,
        mask_clouds=mask_clouds,
        resolution=resolution,
        min_valid_fraction=min_valid_fraction,
        **search_kwargs(search),
    )
    zones = _zones(session, geometries)
    return await run_operation(
        ctx, session, "zonal_stats", zones, confirm=confirm, dry_run=dry_run, **arguments
    )
