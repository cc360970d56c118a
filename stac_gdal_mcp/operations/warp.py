"""reproject_asset: warp the part of an asset inside an AOI to another CRS, as a valid COG.

Steps (each decided from the header, before any pixel is read):
1. the output grid (`grids.warp_grid`): the footprint, or its part inside `bbox`, at `resolution`;
2. the size limits (`grids.check_output_size`);
3. the source overview: the coarsest one still at least as fine as the target resolution;
4. the read budget: the source pixels of that overview under the output (limits.max_read_pixels);
5. warp strip by strip into a working GeoTIFF through a WarpedVRT (GDAL reads only the source
   blocks each strip needs; a failed read fails the job, it is never warped as no-data;
   progress, cancellation and the time limit between strips), then copy into the output format
   (cancellable inside GDAL, see formats.finish).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field

from ..outputs import OutputRecord
from ..processing import formats
from ..processing.access import check_read_size, gdal_errors, open_raster, open_reader
from ..processing.formats import creation_options, finish, overview_resampling, row_strips, write_chunks
from ..processing.grids import (
    RESAMPLING,
    check_output_size,
    choose_overview,
    crs_label,
    native_resolution_in,
    parse_crs,
    parse_resampling,
    source_pixels_read,
    warp_grid,
)
from ..processing.jobs import Job, timed
from ..processing.records import describe_raster
from .base import Tool
from .convert import commit_raster
from .params import BBoxArg, BBoxCrsArg, OnAsset, OutputNameArg

if TYPE_CHECKING:
    from ..core import Core
    from ..processing.estimate import Estimate

WARP_FORMATS = ("COG", "GTiff", "netCDF")
WARP_THREADS = 2  # GDAL warper threads per strip


class ReprojectAsset(OnAsset):
    """Warp an asset (or its part inside `bbox`) to `dst_crs` and write it into the workspace
    (a valid COG by default); only the source tiles needed are read. Returns the output's
    STAC-like record. Inputs as for `asset`; `job` reports progress and can cancel;
    `dry_run=True` returns what it would read and write instead (an `Estimate`).

    >>> record = session.reproject(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "red",
    ...                            dst_crs="EPSG:4326", bbox=aoi)
    >>> record.properties.proj_code, record.file.type.split(";")[0]
    ('EPSG:4326', 'image/tiff')
    """

    name: ClassVar[str] = "reproject_asset"
    library_name: ClassVar[str] = "reproject"
    tool: ClassVar[Tool] = Tool(quicklook=True)
    description: ClassVar[str] = """Warp an asset (or its part in bbox) to another CRS as a COG,
    reading only the tiles needed.

    Example: inspect_asset's example with dst_crs="EPSG:4326"."""
    answer_model: ClassVar[type] = OutputRecord

    dst_crs: Annotated[str, Field(description="target CRS, e.g. EPSG:4326, EPSG:32633")]
    resolution: Annotated[
        float | None,
        Field(gt=0, description="pixel size in dst_crs units; default: the source's"),
    ] = None
    bbox: BBoxArg = None
    bbox_crs: BBoxCrsArg = "EPSG:4326"
    resampling: Annotated[
        Literal[RESAMPLING],
        Field(description="nearest keeps classes, masks; bilinear...: continuous data"),
    ] = "nearest"
    output_format: Annotated[
        Literal["COG", "GTiff", "netCDF"], Field(description="COG has internal overviews")
    ] = "COG"
    output_name: OutputNameArg = None

    def plan(self, core: Core) -> ReprojectAsset:
        """The input resolved, then the format, the target CRS and the resampling parsed."""
        super().plan(core)
        self.fmt, self.crs, self.resampling_method  # noqa: B018 - checked before anything is read
        return self

    @cached_property
    def fmt(self):
        return formats.output_format(self.output_format, allowed=WARP_FORMATS)

    @cached_property
    def crs(self):
        return parse_crs(self.dst_crs)

    @cached_property
    def resampling_method(self):
        return parse_resampling(self.resampling)

    def estimate(self, core: Core) -> Estimate:
        """What `run` would read and write (header only)."""
        from ..processing.estimate import estimate_reproject

        return estimate_reproject(core, self.plan(core))

    def run(self, core: Core, job: Job | None = None) -> OutputRecord:
        """The output's record (`warp`)."""
        return warp(core, self.plan(core), job)


def reproject_asset(core: Core, source, *, job: Job | None = None, **arguments) -> OutputRecord:
    """The record of `source` reprojected as `arguments` say."""
    return ReprojectAsset.of(source, **arguments).run(core, job)


def warp(core: Core, request: ReprojectAsset, job: Job | None = None) -> OutputRecord:
    """Warp the request's input (or its part inside `bbox`) to its CRS; return the output's
    record."""
    job = timed(job, core)
    source, fmt, resampling = request.input, request.fmt, request.resampling
    grid, level, src = _plan(core, request)
    job.progress(0, 1, "planned")
    store = core.outputs
    with store.writing(fmt.suffix, request.output_name, stem=f"reproject-{source.stem}") as out:
        working = out.scratch(".tif")
        strips = _warp_strips(core, request, grid, level, src, working, job)
        total = strips + 1
        job.check()
        options = formats.with_predictor(fmt, creation_options(fmt), src.dtypes[0])
        with gdal_errors(source, f"writing {fmt.name} from"):
            finish(
                fmt,
                working,
                out.path,
                options,
                overview_resampling=overview_resampling(resampling),
                job=job,
                step=strips,
                total=total,
            )
            facts = describe_raster(out.path)
        job.progress(total, total, "written")
        return commit_raster(
            store,
            out,
            request,
            "reproject_asset",
            _parameters(request, grid, level),
            facts,
            _lineage(request, grid, level),
        )


def _warp_strips(core: Core, request: ReprojectAsset, grid, level, src, working, job: Job) -> int:
    """Warp the source, strip by strip of the output grid, into the working GeoTIFF `working`;
    the number of strips (a progress step each)."""
    from rasterio.windows import Window

    source, nodata = request.input, src.nodata
    parts = row_strips(grid.width, grid.height, src.count, src.dtypes[0])
    strips, total = len(parts), len(parts) + 1
    on_grid = {"crs": request.crs, "transform": grid.transform, "width": grid.width, "height": grid.height}

    def warp_strip(reader_src, row0: int, height: int):
        from rasterio.vrt import WarpedVRT

        # A WarpedVRT read fails when a source read fails (rasterio's reproject() ignores
        # GDAL's warp status and would leave the strip as no-data).
        extras = {"NUM_THREADS": WARP_THREADS}
        with WarpedVRT(
            reader_src,
            resampling=request.resampling_method,
            src_nodata=nodata,
            nodata=nodata,
            warp_extras=extras,
            **on_grid,
        ) as vrt:
            return vrt.read(window=Window(0, row0, grid.width, height))

    with open_reader(source, core.settings, overview_level=level, job=job) as reader:

        def warped_strips():
            for row0, height in parts:
                array = reader.run(lambda s, r=row0, h=height: warp_strip(s, r, h), "warping")
                yield Window(0, row0, grid.width, height), array

        with gdal_errors(source, "warping"):
            write_chunks(
                working,
                count=src.count,
                dtype=src.dtypes[0],
                nodata=nodata,
                chunks=warped_strips(),
                descriptions=src.descriptions,
                scales=src.scales,
                offsets=src.offsets,
                on_chunk=lambda n: job.progress(n, total, f"warped strip {n}/{strips}"),
                **on_grid,
            )
    return strips


def _parameters(request: ReprojectAsset, grid, level) -> dict:
    """The record's parameters of a reprojection."""
    bbox = request.bbox
    return {
        "dst_crs": crs_label(request.crs),
        "resolution": list(grid.resolution),
        "bbox": list(bbox) if bbox else None,
        "bbox_crs": request.bbox_crs if bbox else None,
        "resampling": request.resampling,
        "output_format": request.fmt.name,
        "source_overview_level": level,
    }


def _lineage(request: ReprojectAsset, grid, level) -> str:
    """The record's lineage sentence of a reprojection."""
    bbox, bbox_crs = request.bbox, request.bbox_crs
    return (
        f"{request.input.label} warped to {crs_label(request.crs)} at {_res_text(grid.resolution)} with "
        f"{request.resampling} resampling{' from source overview level ' + str(level) if level is not None else ''}"
        f"{' inside bbox ' + str(list(bbox)) + ' (' + bbox_crs + ')' if bbox else ''}; "
        f"written as {request.fmt.name}"
    )


def _plan(core: Core, request: ReprojectAsset):
    """(output grid, source overview level, the source's header facts) of a reprojection, after
    checking its output size and read budget (from the header alone)."""
    from types import SimpleNamespace

    source, crs, settings = request.input, request.crs, core.settings
    with open_raster(source, settings) as src, gdal_errors(source, "reading the header of"):
        grid = warp_grid(src, crs, request.resolution, request.bbox, request.bbox_crs)
        check_output_size(
            grid.width,
            grid.height,
            src.count,
            src.dtypes[0],
            settings.limits,
            resolution=max(grid.resolution),
        )
        factors = src.overviews(1)
        native = native_resolution_in(src, crs)
        level = choose_overview(factors, native, grid.resolution)
        factor = factors[level] if level is not None else 1
        read = source_pixels_read(grid, native, factor, src.width * src.height)
        check_read_size(
            read * src.count,
            settings,
            what=f"reprojecting {source.label} at {_res_text(grid.resolution)}",
            hint=(
                "pass a smaller bbox"
                + (
                    f" (the source has no overview coarse enough; its overviews: {list(factors) or 'none'})"
                    if read > grid.width * grid.height
                    else ""
                )
            ),
        )
        names = ("count", "nodata", "descriptions", "scales", "offsets", "dtypes")
        return grid, level, SimpleNamespace(**{name: getattr(src, name) for name in names})


def _res_text(res: tuple[float, float]) -> str:
    x, y = res
    return f"{x:.6g}" if x == y else f"{x:.6g} x {y:.6g}"
