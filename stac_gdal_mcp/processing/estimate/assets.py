"""Estimates of the operations on an asset: convert_asset, reproject_asset and preview.

Each plans its operation as the operation does (the same output grid, overview level, windows
and strips) and counts the reads in its `Planner`. A reprojection's reads are GDAL's warper's:
the source window of each warp chunk of each output strip (`warp_chunks`, `source_window`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .reads import Level, Planner, decimated_read
from .result import Estimate, _items_of, _output, output_checks, read_check, refusals

if TYPE_CHECKING:
    from ...core import Core

VRT_BLOCK = (512, 128)  # GDAL's WarpedVRT block size: chunks are cut on whole blocks
WARP_MEMORY = 64 * 1024**2  # GDAL's default warp memory limit (source + output buffers of a chunk)

# Resampling kernels' radius in source pixels (GDAL's warper widens its source window by it).
_KERNEL_RADIUS = {"nearest": 0, "bilinear": 1, "cubic": 2, "cubic_spline": 2, "lanczos": 3}


# --- convert_asset ---------------------------------------------------------------------------------


def estimate_convert(core: Core, request) -> Estimate:
    """What `convert.ConvertAsset.run` of `request` (a `ConvertAsset`) would read and write."""
    from rasterio.windows import Window

    from .. import formats
    from ..access import check_read_size
    from ..grids import bbox_window, check_output_size, crs_label

    source, fmt, bbox = request.input, request.fmt, request.bbox
    settings = core.settings
    planner = Planner(core)
    estimate = Estimate(operation="convert_asset", item_ids=_items_of([source]), inputs=[source.label])
    with planner.open(source) as (plan, src, open_level):
        window = (
            bbox_window(src, bbox, request.bbox_crs)
            if bbox is not None
            else Window(0, 0, src.width, src.height)
        )
        indexes = request.band_indexes(src.count)
        dtype = src.dtypes[indexes[0] - 1]
        width, height = int(window.width), int(window.height)
        out_dtype = "uint8" if fmt.eight_bit else dtype
        bands_out = len(indexes) + (1 if fmt.driver == "PNG" else 0)
        estimate.output = _output(
            width,
            height,
            bands_out,
            out_dtype,
            format=fmt.name,
            crs=crs_label(src.crs),
            resolution=[abs(src.transform.a), abs(src.transform.e)],
        )
        estimate.read_pixels = width * height * len(indexes)
        estimate.limits = [
            *output_checks(width, height, len(indexes), out_dtype, settings.limits),
            read_check(estimate.read_pixels, settings.limits),
        ]
        with refusals(estimate):
            check_output_size(width, height, len(indexes), out_dtype, settings.limits)
            check_read_size(
                estimate.read_pixels,
                settings,
                what=f"converting {source.label}",
                hint="pass a smaller bbox or fewer bands",
            )
        if estimate.would_refuse or not plan.indexed:
            return planner.fill(estimate)
        level = plan.level(None, open_level)
        if fmt.eight_bit:
            strips = [(0, height)]
        else:
            strips = formats.row_strips(width, height, len(indexes), dtype)
        for row0, rows in strips:
            plan.read(level, level.tiles(window.col_off, window.row_off + row0, width, rows), indexes)
    return planner.fill(estimate)


# --- reproject_asset -------------------------------------------------------------------------------


def estimate_reproject(core: Core, request) -> Estimate:
    """What `warp.ReprojectAsset.run` of `request` (a `ReprojectAsset`) would read and write."""
    from .. import formats
    from ..access import check_read_size
    from ..grids import (
        check_output_size,
        choose_overview,
        crs_label,
        native_resolution_in,
        source_pixels_read,
        warp_grid,
    )

    source, fmt, crs, resampling = request.input, request.fmt, request.crs, request.resampling
    settings = core.settings
    planner = Planner(core)
    estimate = Estimate(operation="reproject_asset", item_ids=_items_of([source]), inputs=[source.label])
    with planner.open(source) as (plan, src, open_level):
        grid = warp_grid(src, crs, request.resolution, request.bbox, request.bbox_crs)
        count, dtype = src.count, src.dtypes[0]
        estimate.output = _output(
            grid.width,
            grid.height,
            count,
            dtype,
            format=fmt.name,
            crs=crs_label(crs),
            resolution=[float(v) for v in grid.resolution],
        )
        factors = src.overviews(1)
        native = native_resolution_in(src, crs)
        index = choose_overview(factors, native, grid.resolution)
        factor = factors[index] if index is not None else 1
        read = source_pixels_read(grid, native, factor, src.width * src.height)
        estimate.read_pixels = int(read * count)
        estimate.limits = [
            *output_checks(grid.width, grid.height, count, dtype, settings.limits),
            read_check(estimate.read_pixels, settings.limits),
        ]
        with refusals(estimate):
            check_output_size(
                grid.width, grid.height, count, dtype, settings.limits, resolution=max(grid.resolution)
            )
            check_read_size(
                read * count,
                settings,
                what=f"reprojecting {source.label}",
                hint="pass a smaller bbox or a coarser resolution",
            )
        if estimate.would_refuse or not plan.indexed:
            return planner.fill(estimate)
        level = plan.level(index, open_level)
        scale = max(grid.resolution[0] / (native[0] * factor), grid.resolution[1] / (native[1] * factor))
        radius = _KERNEL_RADIUS.get(resampling, math.ceil(scale)) * max(1.0, scale) + 1
        bands = list(range(1, count + 1))
        bits = count * (8 * _itemsize(dtype) + (1 if src.nodata is not None else 0))
        to_source = _to_source(grid, src.crs, level)
        for row0, rows in formats.row_strips(grid.width, grid.height, count, dtype):
            for window in warp_chunks(to_source, (0, row0, grid.width, rows), radius, bits, level):
                plan.read(level, level.tiles(*window), bands)
    return planner.fill(estimate)


def _itemsize(dtype: str) -> int:
    import numpy as np

    return np.dtype(dtype).itemsize


def _to_source(grid, src_crs, level: Level):
    """A function mapping output pixel coordinates (arrays) to pixel coordinates of `level`."""
    import numpy as np
    from rasterio.warp import transform

    inverse = ~level.transform

    def to_source(px, py):
        xs, ys = grid.transform @ (px, py)
        if grid.crs != src_crs:
            xs, ys = transform(grid.crs, src_crs, list(xs), list(ys))
        return inverse @ (np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))

    return to_source


def source_window(to_source, dst: tuple[int, int, int, int], radius: float, level: Level):
    """The source window (col_off, row_off, width, height) of `level` GDAL's warper reads for the
    output window `dst`: its edges (21 points a side) in the source, widened by `radius` pixels,
    clipped to the level; None when it misses the source."""
    import numpy as np

    x0, y0, w, h = dst
    t = np.linspace(0.0, 1.0, 21)
    px = np.concatenate([x0 + w * t, np.full(21, x0 + w), x0 + w * t, np.full(21, x0)])
    py = np.concatenate([np.full(21, y0), y0 + h * t, np.full(21, y0 + h), y0 + h * t])
    cols, rows = to_source(px, py)
    ok = np.isfinite(cols) & np.isfinite(rows)
    if not ok.any():
        return None
    c0 = max(0, math.floor(cols[ok].min() - radius))
    r0 = max(0, math.floor(rows[ok].min() - radius))
    c1 = min(level.width, math.ceil(cols[ok].max() + radius))
    r1 = min(level.height, math.ceil(rows[ok].max() + radius))
    if c1 <= c0 or r1 <= r0:
        return None
    return (c0, r0, c1 - c0, r1 - r0)


def warp_chunks(to_source, dst, radius: float, bits: int, level: Level, limit: float = WARP_MEMORY):
    """The source windows GDAL's warper reads for the output window `dst`, in its order: one per
    chunk; a chunk whose source and output buffers exceed `limit` bytes is cut in two along its
    longer side (GDALWarpOperation::CollectChunkList), on whole VRT blocks where it can."""
    window = source_window(to_source, dst, radius, level)
    if window is None:
        return []
    x0, y0, w, h = dst
    memory = (bits * window[2] * window[3] + bits * w * h) / 8
    if memory <= limit or (w <= 2 and h <= 2):
        return [window]
    if w > h:
        half = _half(w, VRT_BLOCK[0])
        parts = [(x0, y0, half, h), (x0 + half, y0, w - half, h)]
    else:
        half = _half(h, VRT_BLOCK[1])
        parts = [(x0, y0, w, half), (x0, y0 + half, w, h - half)]
    return [win for part in parts for win in warp_chunks(to_source, part, radius, bits, level, limit)]


def _half(size: int, block: int) -> int:
    half = size // 2
    aligned = (half // block) * block
    return aligned if 0 < aligned < size else max(1, half)


# --- preview ---------------------------------------------------------------------------------------


def estimate_preview(core: Core, request) -> Estimate:
    """What `preview.run` of `request` (a `preview.PreviewRequest`) would read and write."""
    from rasterio.windows import Window, from_bounds
    from rasterio.windows import bounds as window_bounds

    from ..access import check_read_size
    from ..grids import bbox_window, crs_label

    sources, bbox, max_size = request.sources, request.bbox, request.max_size
    settings = core.settings
    planner = Planner(core)
    estimate = Estimate(operation="preview", item_ids=_items_of(sources), inputs=[s.label for s in sources])
    first = sources[0]
    read_pixels = 0
    with planner.open(first) as (plan, src, open_level):
        window = (
            bbox_window(src, bbox, "EPSG:4326") if bbox is not None else Window(0, 0, src.width, src.height)
        )
        scale = max(1.0, max(window.width, window.height) / max_size)
        out_w, out_h = max(1, round(window.width / scale)), max(1, round(window.height / scale))
        crs, area = src.crs, window_bounds(window, src.transform)
        rgb_in_one = len(sources) == 1 and src.count >= 3 and src.dtypes[0] == "uint8"
        indexes = [1, 2, 3] if rgb_in_one else [1]
        nearest = not (rgb_in_one or len(sources) == 3)
        estimate.output = _output(out_w, out_h, 4, "uint8", format="PNG", crs=crs_label(crs))
        spec = (window.col_off, window.row_off, window.width, window.height)
        read_pixels += decimated_read(
            plan, src, open_level, spec, out_w, out_h, indexes, nearest=nearest
        ) * len(indexes)
    for other in sources[1:]:
        with planner.open(other) as (plan, src, open_level):
            if src.crs == crs:
                part = from_bounds(*area, transform=src.transform)
                spec = (part.col_off, part.row_off, part.width, part.height)
                read_pixels += decimated_read(plan, src, open_level, spec, out_w, out_h, [1], nearest=nearest)
            else:  # warped through a WarpedVRT at full resolution: its footprint's tiles
                from rasterio.warp import transform_bounds

                box = transform_bounds(crs, src.crs, *area, densify_pts=21)
                part = from_bounds(*box, transform=src.transform)
                if plan.indexed:
                    level = plan.level(None, open_level)
                    plan.read(level, level.tiles(part.col_off, part.row_off, part.width, part.height), [1])
                read_pixels += int(part.width * part.height)
    estimate.read_pixels = int(read_pixels)
    estimate.limits = [read_check(read_pixels, settings.limits)]
    with refusals(estimate):
        check_read_size(read_pixels, settings, what="this preview", hint="pass a smaller bbox")
    return planner.fill(estimate)
