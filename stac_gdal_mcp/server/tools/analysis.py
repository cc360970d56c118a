"""Analysis tools: cloud cover inside an AOI, time series and composites over a search, exact
statistics per zone (field, district) and per item or day.

Each tool body is one `run_operation` (operations.py): its Session method as a job (progress to
the client: one step per item for cloud_cover_stats, dask tasks for the loads; a cancelled request
stops the work), then the result's outputs saved in the same job (time_series: CSV and chart;
composite: the COG; zonal_stats: its GeoParquet) and answered as its kind says
(operations/registry.py). zonal_stats's answer carries the rows that fit limits.max_result_bytes
(the rest in the saved table, linked as a resource), the zones with the first statistic for the
map app, and with `per="day"` a chart of the per-zone series as an image (class fractions: a
chart of them).
"""

import re
from typing import Annotated, Any, Literal

from fastmcp import Context
from fastmcp.dependencies import CurrentContext
from pydantic import Field

from ...operations import cloud, series
from ...operations import composite as composites
from ...operations.zonal import result as zonal_result
from ...session import Session
from ..images import QuicklookArg
from ..resources import OUTPUT_URI
from . import READ_ONLY, WRITES_OUTPUT, session_tool
from .args import DryRunArg, SearchArg, SearchOrItemsArg, json_text, search_kwargs
from .confirm import ConfirmArg
from .operations import run_operation

AoiArg = json_text(list[float] | dict[str, Any], "bbox [west, south, east, north] or GeoJSON geometry, WGS84")
MaxItemsArg = Annotated[int | None, Field(ge=1, description="items at most (default 50)")]
LoadMaxItemsArg = Annotated[int | None, Field(ge=1, description="items at most (default 100)")]
ResolutionArg = Annotated[float | None, Field(gt=0, description="pixel size in CRS units; default: native")]
MaskCloudsArg = Annotated[bool, Field(description="drop cloudy pixels (each item's mask)")]
CrsArg = Annotated[str | None, Field(description="output CRS, e.g. EPSG:32633; default: the items'")]


@session_tool(READ_ONLY, app=True, task=True, estimates=True)
async def cloud_cover_stats(
    session: Session,
    aoi: AoiArg,
    search: SearchOrItemsArg = None,
    resolution: ResolutionArg = None,
    max_items: MaxItemsArg = None,
    sort: Annotated[
        Literal["clear", "cloud", "datetime", "-datetime", "search"],
        Field(description="clear: clearest first; cloud: least cloud; search: as found"),
    ] = "clear",
    dry_run: DryRunArg = False,
    confirm: ConfirmArg = False,
    ctx: Context = CurrentContext(),
) -> cloud.CloudCoverResult:
    """How cloudy was *this area* in each scene? Per item, from its mask (SCL, QA_PIXEL, Fmask...)
    in the AOI only: cloud, shadow, cirrus, snow, water, clear, no-data fractions.

    Example: cloud_cover_stats(aoi=[13.55, 45.85, 13.75, 45.98], search={"catalog": "sample",
    "collections": ["sentinel-2-l2a"], "datetime": "2024-06"}).
    """
    arguments = dict(resolution=resolution, max_items=max_items, sort=sort, dry_run=dry_run)
    return await run_operation(
        ctx, session, "cloud_cover", aoi, confirm=confirm, **arguments, **search_kwargs(search)
    )


@session_tool(WRITES_OUTPUT, app=True, task=True, estimates=True)
async def time_series(
    session: Session,
    aoi: AoiArg,
    search: SearchArg = None,
    expression: Annotated[
        str,
        Field(description='ndvi, ndwi, nbr, ndbi, a band ("nir") or a formula: (nir-red)/(nir+red)'),
    ] = "ndvi",
    reducer: Annotated[
        Literal["mean", "median", "min", "max", "count"],
        Field(description="how a day's AOI pixels become one value"),
    ] = "mean",
    mask_clouds: MaskCloudsArg = True,
    resolution: ResolutionArg = None,
    crs: CrsArg = None,
    max_items: LoadMaxItemsArg = None,
    dry_run: DryRunArg = False,
    confirm: ConfirmArg = False,
    ctx: Context = CurrentContext(),
) -> series.TimeSeriesResult:
    """One value per solar day: `reducer` of `expression` over the AOI's cloud-free pixels, with
    the valid fraction and item ids; writes a CSV and a chart (also as an image).

    Example: time_series(aoi=[13.6, 45.92, 13.62, 45.935], search={"catalog": "sample",
    "collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-08-31"}).
    """
    load = dict(mask_clouds=mask_clouds, resolution=resolution, crs=crs, max_items=max_items)
    arguments = dict(reducer=reducer, dry_run=dry_run, **load, **search_kwargs(search))
    return await run_operation(ctx, session, "time_series", aoi, expression, confirm=confirm, **arguments)


@session_tool(WRITES_OUTPUT, app=True, task=True, estimates=True)
async def composite(
    session: Session,
    aoi: AoiArg,
    bands: json_text(list[str], 'band names or asset keys: ["red", "green", "blue"]'),
    search: SearchArg = None,
    method: Annotated[
        Literal["median", "mean", "min", "max"], Field(description="per-pixel statistic over time")
    ] = "median",
    mask_clouds: MaskCloudsArg = True,
    resolution: ResolutionArg = None,
    crs: CrsArg = None,
    max_items: LoadMaxItemsArg = None,
    quicklook: QuicklookArg = False,
    dry_run: DryRunArg = False,
    confirm: ConfirmArg = False,
    ctx: Context = CurrentContext(),
) -> composites.CompositeResult:
    """A cloud-free picture of the AOI: per pixel, the `method` over time of each band's
    cloud-masked reflectances, as a float32 COG (NaN where never clear).

    Example: composite(aoi=[13.6, 45.92, 13.62, 45.935], bands=["red", "green", "blue"],
    search={"catalog": "sample", "collections": ["sentinel-2-l2a"], "datetime": "2024-06"}).
    """
    load = dict(mask_clouds=mask_clouds, resolution=resolution, crs=crs, max_items=max_items)
    arguments = dict(method=method, dry_run=dry_run, quicklook=quicklook, **load, **search_kwargs(search))
    return await run_operation(ctx, session, "composite", aoi, bands, confirm=confirm, **arguments)


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
