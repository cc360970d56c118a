"""Analysis tools: cloud cover inside an AOI, time series and composites over a search.

Each tool runs its Session method in a worker thread (`run_job`): progress goes to the client
(one step per item for cloud_cover_stats, dask tasks for the loads) and a cancelled request
stops the work. time_series and composite then save their result as outputs, as a notebook
user would with `session.save`.
"""

from typing import Annotated, Any, Literal

from fastmcp import Context
from fastmcp.dependencies import CurrentContext
from pydantic import Field

from ...discovery.query import SearchArgs, search_args
from ...session import Session
from ..images import QuicklookArg, chart_content, quicklook_content
from ..links import estimate_result, linked_result, or_estimate
from ..map_app import map_app_config
from ..tasks import task_config
from . import READ_ONLY, WRITES_OUTPUT, tool
from .args import CatalogArg, json_text, with_search_args
from .processing import run_job

AoiArg = json_text(
    list[float] | dict[str, Any],
    "area of interest: bbox [west, south, east, north] or a GeoJSON geometry, WGS84",
)
MaxItemsArg = Annotated[
    int | None, Field(ge=1, description="at most this many items (default 50, capped by limits.max_items)")
]
LoadMaxItemsArg = Annotated[
    int | None, Field(ge=1, description="at most this many items (default 100, capped by limits.max_items)")
]
ResolutionArg = Annotated[
    float | None, Field(gt=0, description="pixel size in the CRS units (metres for UTM); default: native")
]
MaskCloudsArg = Annotated[
    bool, Field(description="drop cloud, shadow and cirrus pixels using each item's mask")
]
CrsArg = Annotated[str | None, Field(description="output CRS, e.g. EPSG:32633; default: the items' own")]
DryRunArg = Annotated[
    bool,
    Field(
        description="true: search and read only the COG headers, and answer what the call would do - items "
        "and assets, output size, bytes and requests it would read (from the tile index), whether a limit "
        "would refuse it; nothing is written"
    ),
]


def register(mcp, session: Session) -> None:
    from ...processing import cloud, estimate, series, tables
    from ...processing import composite as composites

    limit = session.settings.limits.max_resource_bytes

    def answer(result, records=(), images=()):
        """A dry run's estimate, or the result with links to the outputs it wrote (and `images`,
        image content blocks, first)."""
        if isinstance(result, estimate.Estimate):
            return estimate_result(result)
        return linked_result(result, records, limit, extra=images)

    @tool(
        mcp,
        READ_ONLY,
        app=map_app_config(),
        task=task_config(),
        output_schema=or_estimate(cloud.CloudCoverResult),
    )
    @with_search_args
    async def cloud_cover_stats(
        aoi: AoiArg,
        items: json_text(
            list[dict[str, str]] | None,
            'explicit items [{"collection_id": ..., "item_id": ...}] instead of a search',
        ) = None,
        search: SearchArgs = None,
        catalog: CatalogArg = None,
        resolution: ResolutionArg = None,
        max_items: MaxItemsArg = None,
        sort: Annotated[
            Literal["clear", "cloud", "datetime", "-datetime", "search"],
            Field(
                description="clear: clearest first (default); cloud: least cloud first; datetime; -datetime; search: as found"
            ),
        ] = "clear",
        dry_run: DryRunArg = False,
        ctx: Context = CurrentContext(),
    ) -> cloud.CloudCoverResult:
        """How cloudy was *this area* in each scene? Per item: cloud, shadow, cirrus, snow, water
        and clear fractions of the valid pixels inside the AOI, the no-data fraction of the AOI,
        the scene-wide eo:cloud_cover for comparison, and which mask was used (Sentinel-2 SCL,
        Landsat QA_PIXEL, HLS Fmask, or any asset with the classification extension).

        Reads only the AOI's window of each mask, in its own CRS. `resolution` coarser than the
        mask's (20 m SCL, 30 m QA_PIXEL) reads an overview: faster, slightly less exact.
        Example: cloud_cover_stats(aoi=[13.55, 45.85, 13.75, 45.98], collections=["sentinel-2-l2a"],
        datetime="2024-06-01/2024-08-31", max_items=30) -> clearest scenes first; an item that
        cannot be read has `error` set and the others are still measured.
        """

        def work(job):
            if dry_run:
                return estimate.estimate_cloud_cover(
                    session.core,
                    aoi,
                    items=items,
                    catalog=catalog,
                    resolution=resolution,
                    max_items=max_items,
                    sort=sort,
                    **search_args(search),
                )
            frame = session.cloud_cover(
                aoi,
                items=items,
                catalog=catalog,
                resolution=resolution,
                max_items=max_items,
                sort=sort,
                job=job,
                **search,
            )
            return tables.cloud_cover_result(frame)

        return answer(await run_job(ctx, work))

    @tool(mcp, WRITES_OUTPUT, task=task_config(), output_schema=or_estimate(series.TimeSeriesResult))
    @with_search_args
    async def time_series(
        aoi: AoiArg,
        search: SearchArgs = None,
        expression: Annotated[
            str,
            Field(
                description='an index (ndvi, ndwi, nbr, ndbi), a band (e.g. "nir") or a formula of band common names like (nir-red)/(nir+red)'
            ),
        ] = "ndvi",
        reducer: Annotated[
            Literal["mean", "median", "min", "max", "count"],
            Field(description="how the AOI pixels of a day become one value"),
        ] = "mean",
        mask_clouds: MaskCloudsArg = True,
        resolution: ResolutionArg = None,
        crs: CrsArg = None,
        catalog: CatalogArg = None,
        max_items: LoadMaxItemsArg = None,
        dry_run: DryRunArg = False,
        ctx: Context = CurrentContext(),
    ) -> series.TimeSeriesResult:
        """A time series over the AOI: one value per day (items of the same solar day are merged),
        from the pixels left after cloud masking, with its valid fraction and item ids. Loads with
        odc-stac on dask (locally, or on the cluster in settings.dask_scheduler). Band names are
        common names (red, nir, swir16...) found in each collection; raster:bands scale/offset are
        applied, so values are reflectances. Writes a CSV and a PNG chart as outputs (see `csv`,
        `chart`: read their uri); the chart also comes back as image content.

        Example: time_series(aoi=[13.55, 45.85, 13.75, 45.98], collections=["sentinel-2-l2a"],
        datetime="2024-04-01/2024-09-30", expression="ndvi", reducer="median").
        """

        def work(job):
            if dry_run:
                return estimate.estimate_time_series(
                    session.core,
                    aoi,
                    expression=expression,
                    reducer=reducer,
                    mask_clouds=mask_clouds,
                    resolution=resolution,
                    crs=crs,
                    catalog=catalog,
                    max_items=max_items,
                    **search_args(search),
                ), ()
            frame = session.time_series(
                aoi,
                expression,
                reducer=reducer,
                mask_clouds=mask_clouds,
                resolution=resolution,
                crs=crs,
                catalog=catalog,
                max_items=max_items,
                job=job,
                **search,
            )
            csv = session.save(frame, job=job)
            chart = session.save(frame, format="png", job=job)
            return series.result(frame, csv, chart), (csv, chart), chart_content(session, chart)

        return answer(*await run_job(ctx, work))

    @tool(
        mcp,
        WRITES_OUTPUT,
        app=map_app_config(),
        task=task_config(),
        output_schema=or_estimate(composites.CompositeResult),
    )
    @with_search_args
    async def composite(
        aoi: AoiArg,
        bands: json_text(list[str], 'band common names or asset keys, e.g. ["red", "green", "blue"]'),
        search: SearchArgs = None,
        method: Annotated[
            Literal["median", "mean", "min", "max"], Field(description="per-pixel statistic over time")
        ] = "median",
        mask_clouds: MaskCloudsArg = True,
        resolution: ResolutionArg = None,
        crs: CrsArg = None,
        catalog: CatalogArg = None,
        max_items: LoadMaxItemsArg = None,
        quicklook: QuicklookArg = False,
        dry_run: DryRunArg = False,
        ctx: Context = CurrentContext(),
    ) -> composites.CompositeResult:
        """A cloud-free picture of the AOI: per pixel, the median (or mean/min/max) over time of
        each band's cloud-masked values, as a float32 COG of reflectances (NaN where no clear
        value was seen). The output record lists every contributing item in `derived_from`.

        Example: composite(aoi=[13.55, 45.85, 13.75, 45.98], bands=["red", "green", "blue"],
        collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-08-31").
        Then preview or convert the output, or read its record at `output.uri`; quicklook=true
        also returns a small PNG of it as image content.
        """

        def work(job):
            if dry_run:
                return estimate.estimate_composite(
                    session.core,
                    aoi,
                    bands=bands,
                    method=method,
                    mask_clouds=mask_clouds,
                    resolution=resolution,
                    crs=crs,
                    catalog=catalog,
                    max_items=max_items,
                    **search_args(search),
                ), ()
            array = session.composite(
                aoi,
                bands,
                method=method,
                mask_clouds=mask_clouds,
                resolution=resolution,
                crs=crs,
                catalog=catalog,
                max_items=max_items,
                job=job,
                **search,
            )
            record = session.save(array, job=job)
            images = quicklook_content(session, record) if quicklook else []
            return composites.result(array, record), (record,), images

        return answer(*await run_job(ctx, work))
