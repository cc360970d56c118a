"""How an asset's stored pixels become measurements, in one place for every operation that reads
bands (cloud cover, zonal statistics, the odc-stac loads of time series and composites):
- a band's `raster:bands` scale/offset and nodata, read once per asset (`Band.of`, `scale_offset`);
- which stored values are data (`valid`: not NaN, not the nodata value) and the values they stand
  for (`Band.values`); a mask's nodata (`mask_nodata`) before its classes are decoded
  (`masks.MaskScheme.decode`);
- the pixel window of an area on a raster's grid, at native or decimated resolution
  (`window_of`): what cloud cover reads and what its estimate looks up.
Every function works on numpy and (lazy) xarray arrays alike."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..stac import raster_band


def scale_offset(asset: dict) -> tuple[float, float]:
    """The asset's `raster:bands` scale and offset (1 and 0 when not given)."""
    band = raster_band(asset)
    return float(band.get("scale", 1.0)), float(band.get("offset", 0.0))


def valid(data, nodata=None):
    """Where the stored values are data: not NaN and not `nodata` (None or NaN: no such value)."""
    usable = data == data  # NaN is never data
    if nodata is None or nodata != nodata:
        return usable
    return usable & (data != nodata)


def mask_nodata(declared, in_file):
    """A mask's nodata value: the one its metadata declares, else the file's own."""
    return declared if declared is not None else in_file


@dataclass
class Band:
    """One asset read for an item: its source, and how its values become numbers."""

    source: Any  # access.AssetSource
    scale: float = 1.0
    offset: float = 0.0
    nodata: float | None = None

    @classmethod
    def of(cls, source, asset: dict) -> Band:
        """The band of `asset` (the item's asset dict) read from `source`."""
        from .masks import asset_nodata

        return cls(source, *scale_offset(asset), asset_nodata(asset))

    @property
    def plain(self) -> bool:
        """Whether the stored values are the values (no scale or offset)."""
        return (self.scale, self.offset) == (1, 0)

    def values(self, data, dtype: str = "float64"):
        """The values the stored pixels stand for (scale and offset applied), as `dtype`."""
        return data.astype(dtype) * self.scale + self.offset


@dataclass(frozen=True)
class GridWindow:
    """The pixel window of an area on a raster's grid decimated by `k`: its rows and columns
    (end excluded; they may reach outside the raster) and the raster's native size."""

    k: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    src_height: int
    src_width: int

    @property
    def shape(self) -> tuple[int, int]:
        """The whole window's shape (at least one pixel a side)."""
        return max(self.rows[1] - self.rows[0], 1), max(self.cols[1] - self.cols[0], 1)

    @property
    def inside(self) -> tuple[int, int, int, int] | None:
        """(row0, row1, col0, col1) of the part inside the raster (decimated), or None."""
        r0, r1 = max(self.rows[0], 0), min(self.rows[1], math.ceil(self.src_height / self.k))
        c0, c1 = max(self.cols[0], 0), min(self.cols[1], math.ceil(self.src_width / self.k))
        return (r0, r1, c0, c1) if r0 < r1 and c0 < c1 else None

    @property
    def placed(self) -> tuple[slice, slice]:
        """Where the part inside the raster sits in the whole window (rows, cols)."""
        r0, r1, c0, c1 = self.inside or (self.rows[0], self.rows[0], self.cols[0], self.cols[0])
        return slice(r0 - self.rows[0], r1 - self.rows[0]), slice(c0 - self.cols[0], c1 - self.cols[0])

    @property
    def inside_shape(self) -> tuple[int, int]:
        """The shape of the part inside the raster, (0, 0) when none is."""
        r0, r1, c0, c1 = self.inside or (0, 0, 0, 0)
        return r1 - r0, c1 - c0

    @property
    def native(self) -> tuple[int, int, int, int] | None:
        """(col_off, row_off, width, height) in native pixels of the part inside, or None."""
        if self.inside is None:
            return None
        r0, r1, c0, c1 = self.inside
        k = self.k
        return c0 * k, r0 * k, min(c1 * k, self.src_width) - c0 * k, min(r1 * k, self.src_height) - r0 * k


def window_of(xs, ys, transform, width: int, height: int, k: int = 1) -> GridWindow:
    """The window of the points (`xs`, `ys`: an area's vertices in the raster's CRS) on the grid
    of `transform` (`width` x `height` native pixels) decimated by `k`: whole pixels, outward."""
    import numpy as np
    from rasterio.transform import Affine

    grid = transform @ Affine.scale(k)
    cols, rows = ~grid @ (np.asarray(xs), np.asarray(ys))
    return GridWindow(
        k,
        (math.floor(rows.min()), math.ceil(rows.max())),
        (math.floor(cols.min()), math.ceil(cols.max())),
        height,
        width,
    )
