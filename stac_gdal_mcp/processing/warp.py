"""reproject_asset: warp the part of an asset inside an AOI to another CRS, as a valid COG.

Steps (each decided from the header, before any pixel is read):
1. the output grid (`grids.warp_grid`): the footprint, or its part inside `bbox`, at `resolution`;
2. the size limits (`grids.check_output_size`);
3. the source overview: the coarsest one still at least as fine as the target resolution;
4. warp strip by strip into a working GeoTIFF (GDAL reads only the source blocks each strip
   needs; progress and cancellation between strips), then copy into the output format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..outputs import OutputRecord
from . import formats
from .access import AssetSource, gdal_errors, open_raster
from .formats import creation_options, finish, overview_resampling, row_strips, write_chunks
from .grids import (
    check_output_size,
    choose_overview,
    crs_label,
    native_resolution_in,
    parse_crs,
    parse_resampling,
    warp_grid,
)
from .jobs import Job
from .records import describe_raster

if TYPE_CHECKING:
    from ..core import Core

WARP_FORMATS = ("COG", "GTiff", "netCDF")
WARP_THREADS = 2  # GDAL warper threads per strip


def reproject_asset(
    core: Core,
    source: AssetSource,
    *,
    dst_crs: str | int,
    resolution: float | Sequence[float] | None = None,
    bbox: Sequence[float] | None = None,
    bbox_crs: str = "EPSG:4326",
    resampling: str = "nearest",
    output_format: str = "COG",
    output_name: str | None = None,
    job: Job | None = None,
) -> OutputRecord:
    """Warp `source` (or its part inside `bbox`) to `dst_crs`; return the output's record."""
    from rasterio.transform import Affine

    job = job or Job()
    fmt = formats.output_format(output_format, allowed=WARP_FORMATS)
    crs = parse_crs(dst_crs)
    method = parse_resampling(resampling)
    settings = core.settings

    with open_raster(source, settings) as src, gdal_errors(source, "reading the header of"):
        grid = warp_grid(src, crs, resolution, bbox, bbox_crs)
        check_output_size(
            grid.width,
            grid.height,
            src.count,
            src.dtypes[0],
            settings.limits,
            resolution=max(grid.resolution),
        )
        level = choose_overview(src.overviews(1), native_resolution_in(src, crs), grid.resolution)
        count, dtype, nodata, descriptions = src.count, src.dtypes[0], src.nodata, src.descriptions
        scales, offsets = src.scales, src.offsets
    job.progress(0, 1, "planned")

    parts = row_strips(grid.width, grid.height, count, dtype)
    strips = len(parts)
    total = strips + 1
    parameters = {
        "dst_crs": crs_label(crs),
        "resolution": list(grid.resolution),
        "bbox": list(bbox) if bbox else None,
        "bbox_crs": bbox_crs if bbox else None,
        "resampling": resampling,
        "output_format": fmt.name,
        "source_overview_level": level,
    }
    store = core.outputs
    with store.writing(fmt.suffix, output_name, stem=f"reproject-{source.stem}") as out:
        working = out.scratch(".tif")
        with open_raster(source, settings, overview_level=level) as src, gdal_errors(source, "warping"):

            def warped_strips():
                import numpy as np
                import rasterio
                from rasterio.warp import reproject
                from rasterio.windows import Window

                for row0, height in parts:
                    fill = nodata if nodata is not None else 0
                    array = np.full((count, height, grid.width), fill, dtype=dtype)
                    strip = grid.transform @ Affine.translation(0, row0)
                    reproject(
                        source=rasterio.band(src, list(range(1, count + 1))),
                        destination=array,
                        dst_transform=strip,
                        dst_crs=crs,
                        src_nodata=nodata,
                        dst_nodata=nodata,
                        resampling=method,
                        num_threads=WARP_THREADS,
                    )
                    yield Window(0, row0, grid.width, height), array

            write_chunks(
                working,
                crs=crs,
                transform=grid.transform,
                width=grid.width,
                height=grid.height,
                count=count,
                dtype=dtype,
                nodata=nodata,
                chunks=warped_strips(),
                descriptions=descriptions,
                scales=scales,
                offsets=offsets,
                on_chunk=lambda n: job.progress(n, total, f"warped strip {n}/{strips}"),
            )
        job.check()
        options = formats.with_predictor(fmt, creation_options(fmt), dtype)
        with gdal_errors(source, f"writing {fmt.name} from"):
            finish(fmt, working, out.path, options, overview_resampling=overview_resampling(resampling))
            facts = describe_raster(out.path)
        job.progress(total, total, "written")
        return store.commit(
            out,
            operation="reproject_asset",
            parameters=parameters,
            sources=[source.source_ref()],
            media_type=fmt.media_type,
            raster=facts,
            lineage=(
                f"{source.label} warped to {crs_label(crs)} at {_res_text(grid.resolution)} with {resampling} "
                f"resampling{' from source overview level ' + str(level) if level is not None else ''}"
                f"{' inside bbox ' + str(list(bbox)) + ' (' + bbox_crs + ')' if bbox else ''}; "
                f"written as {fmt.name}"
            ),
        )


def _res_text(res: tuple[float, float]) -> str:
    x, y = res
    return f"{x:.6g}" if x == y else f"{x:.6g} x {y:.6g}"
