"""Pure geometry for processing: bbox -> source window, output grids for warping, overview choice,
and the size limits, all decided from a dataset's header before any pixel is read."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument, InvalidBBox, LimitExceeded

RESAMPLING = (
    "nearest",
    "bilinear",
    "cubic",
    "cubic_spline",
    "lanczos",
    "average",
    "mode",
    "min",
    "max",
    "med",
    "q1",
    "q3",
    "sum",
    "rms",
)


@dataclass(frozen=True)
class Grid:
    """An output grid: CRS, affine transform, width and height in pixels."""

    crs: Any
    transform: Any
    width: int
    height: int

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        t = self.transform
        return (t.c, t.f + t.e * self.height, t.c + t.a * self.width, t.f)

    @property
    def resolution(self) -> tuple[float, float]:
        return (abs(self.transform.a), abs(self.transform.e))


def parse_crs(value: str | int, what: str = "dst_crs"):
    """A rasterio CRS from 'EPSG:32633', 32633, a WKT or PROJ string."""
    from rasterio.crs import CRS
    from rasterio.errors import CRSError

    try:
        crs = CRS.from_user_input(f"EPSG:{value}" if isinstance(value, int) else value)
    except (CRSError, ValueError, TypeError):
        raise InvalidArgument(
            f"{what} '{value}' is not a CRS GDAL knows; use e.g. 'EPSG:4326' or 'EPSG:32633'"
        ) from None
    return crs


def parse_resampling(name: str):
    from rasterio.enums import Resampling

    if name not in RESAMPLING:
        raise InvalidArgument(f"resampling '{name}' is not one of: {', '.join(RESAMPLING)}")
    return Resampling[name]


def check_bbox(bbox: Sequence[float]) -> tuple[float, float, float, float]:
    if (
        bbox is None
        or len(bbox) != 4
        or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in bbox)
    ):
        raise InvalidBBox(f"bbox must be 4 numbers [west, south, east, north], got {bbox!r}")
    west, south, east, north = (float(v) for v in bbox)
    if west >= east or south >= north:
        raise InvalidBBox(f"bbox {list(bbox)} must have west < east and south < north")
    return west, south, east, north


def bbox_in(bbox: Sequence[float], bbox_crs, crs) -> tuple[float, float, float, float]:
    """`bbox` (in `bbox_crs`) as bounds in `crs`, edges densified."""
    from rasterio.warp import transform_bounds

    box = check_bbox(bbox)
    src = parse_crs(bbox_crs, "bbox_crs")
    if src == crs:
        return box
    return transform_bounds(src, crs, *box, densify_pts=21)


def bbox_window(dataset, bbox: Sequence[float], bbox_crs="EPSG:4326"):
    """The pixel window of `dataset` covering `bbox`: rounded outwards, clipped to the dataset."""
    from rasterio.windows import Window, from_bounds

    left, bottom, right, top = bbox_in(bbox, bbox_crs, dataset.crs)
    w = from_bounds(left, bottom, right, top, transform=dataset.transform)
    eps = 1e-6
    col0, row0 = math.floor(w.col_off + eps), math.floor(w.row_off + eps)
    col1, row1 = math.ceil(w.col_off + w.width - eps), math.ceil(w.row_off + w.height - eps)
    col0, row0 = max(col0, 0), max(row0, 0)
    col1, row1 = min(col1, dataset.width), min(row1, dataset.height)
    if col1 <= col0 or row1 <= row0:
        raise InvalidBBox(
            f"bbox {list(bbox)} ({bbox_crs}) does not overlap the asset; its bounds are "
            f"{_round(dataset.bounds)} in {crs_label(dataset.crs)}"
        )
    return Window(col0, row0, col1 - col0, row1 - row0)


def crs_label(crs) -> str:
    epsg = crs.to_epsg() if crs else None
    return f"EPSG:{epsg}" if epsg else (crs.to_string() if crs else "(no CRS)")


def _round(values) -> list[float]:
    return [round(float(v), 6) for v in values]


def warp_grid(
    dataset,
    dst_crs,
    resolution: float | Sequence[float] | None = None,
    bbox: Sequence[float] | None = None,
    bbox_crs="EPSG:4326",
) -> Grid:
    """The output grid for warping `dataset` to `dst_crs`: its whole footprint, or the part
    inside `bbox`, at `resolution` (dst CRS units) or the resolution GDAL would pick."""
    from rasterio.transform import from_origin
    from rasterio.warp import calculate_default_transform, transform_bounds

    if dataset.crs is None:
        raise InvalidArgument("the asset has no CRS, so it cannot be reprojected")
    default, width, height = calculate_default_transform(
        dataset.crs, dst_crs, dataset.width, dataset.height, *dataset.bounds
    )
    if resolution is None:
        res_x, res_y = abs(default.a), abs(default.e)
        if bbox is None:
            return Grid(dst_crs, default, width, height)
    else:
        res_x, res_y = _resolution(resolution)
    full = transform_bounds(dataset.crs, dst_crs, *dataset.bounds, densify_pts=21)
    left, bottom, right, top = full
    if bbox is not None:
        b_left, b_bottom, b_right, b_top = bbox_in(bbox, bbox_crs, dst_crs)
        left, bottom = max(left, b_left), max(bottom, b_bottom)
        right, top = min(right, b_right), min(top, b_top)
        if left >= right or bottom >= top:
            raise InvalidBBox(
                f"bbox {list(bbox)} ({bbox_crs}) does not overlap the asset, whose bounds in "
                f"{crs_label(dst_crs)} are {_round(full)}"
            )
    cols = max(1, math.ceil((right - left) / res_x - 1e-6))
    rows = max(1, math.ceil((top - bottom) / res_y - 1e-6))
    return Grid(dst_crs, from_origin(left, top, res_x, res_y), cols, rows)


def _resolution(resolution) -> tuple[float, float]:
    values = [resolution, resolution] if isinstance(resolution, (int, float)) else list(resolution)
    if len(values) != 2 or not all(
        isinstance(v, (int, float)) and v > 0 and math.isfinite(v) for v in values
    ):
        raise InvalidArgument(
            f"resolution must be a positive number or [x, y] in dst_crs units, got {resolution!r}"
        )
    return float(values[0]), float(values[1])


def native_resolution_in(dataset, dst_crs) -> tuple[float, float]:
    """The resolution (dst_crs units) GDAL would give the whole dataset reprojected to dst_crs."""
    from rasterio.warp import calculate_default_transform

    default, _, _ = calculate_default_transform(
        dataset.crs, dst_crs, dataset.width, dataset.height, *dataset.bounds
    )
    return abs(default.a), abs(default.e)


def choose_overview(
    factors: Sequence[int], native: tuple[float, float], target: tuple[float, float]
) -> int | None:
    """Index of the coarsest overview that is still at least as fine as `target`
    (None: read full resolution). `factors` are the dataset's decimation factors (2, 4, ...)."""
    ratio = min(target[0] / native[0], target[1] / native[1])
    best = None
    for index, factor in enumerate(factors):
        if factor <= ratio * (1 + 1e-6):
            best = index
    return best


def check_output_size(
    width: int, height: int, count: int, dtype: str, limits, *, resolution: float | None = None
) -> None:
    """Refuse an output larger than limits.max_output_pixels or max_output_bytes, saying how to shrink it."""
    import numpy as np

    pixels = width * height
    nbytes = pixels * count * np.dtype(dtype).itemsize
    over = []
    if pixels > limits.max_output_pixels:
        over.append(f"{pixels:,} pixels > limits.max_output_pixels={limits.max_output_pixels:,}")
    if nbytes > limits.max_output_bytes:
        over.append(f"{nbytes:,} bytes > limits.max_output_bytes={limits.max_output_bytes:,}")
    if not over:
        return
    factor = math.sqrt(max(pixels / limits.max_output_pixels, nbytes / limits.max_output_bytes))
    hint = "pass a smaller bbox"
    if resolution:
        hint += (
            f", a coarser resolution (at least {resolution * factor:.4g}; coarse outputs read an overview)"
        )
    hint += " or fewer bands" if count > 1 else ""
    raise LimitExceeded(
        f"the output would be {width} x {height} pixels x {count} band(s) of {dtype}: {'; '.join(over)}. "
        f"To shrink it, {hint}."
    )
