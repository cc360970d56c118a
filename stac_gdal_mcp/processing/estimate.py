"""Estimates before work (dry runs): what an operation would read and write, from headers only.

Each `estimate_*` function plans its operation exactly as the operation does (the same output
grid, overview level, windows, strips and limits) and then, instead of reading pixels, looks up
the byte ranges of the tiles those reads touch in each GeoTIFF's own index (`TileOffsets` /
`TileByteCounts`, through GDAL's TIFF metadata domain: `BLOCK_OFFSET_<col>_<row>`,
`BLOCK_SIZE_<col>_<row>`). Nothing but headers is read.

How tile ranges become HTTP requests follows GDAL 3.10's `/vsicurl/` as measured against the test
suite's Range server (see docs/processing.md, "Dry runs"):

- opening a remote file: a HEAD request and one GET of the first 16 KB (one chunk,
  `CPL_VSIL_CURL_CHUNK_SIZE`); a larger header costs further 16 KB chunks;
- one read (one RasterIO call of GDAL: a strip, a warped block, a window) fetches the tiles it
  needs that are not cached yet. Tiles lying back to back in the file coalesce into one run.
  Several runs go out as parallel range requests of exactly those bytes (multi-range, not kept
  in the `/vsicurl/` cache); a single run is an ordinary read, widened to 16 KB chunk
  boundaries, in pieces of at most 10 MB (the last piece is not shortened: GDAL reads ahead),
  kept in the `/vsicurl/` cache;
- a tile is fetched once per open dataset (GDAL's block cache); odc-stac loads open the file
  again for each dask chunk, so a tile under two chunks is fetched twice unless an ordinary
  read brought it into the `/vsicurl/` cache.

Local files are counted in bytes read, with no requests. Formats without a tile index (JPEG
2000, PNG, JPEG) cannot be estimated from their header: their read bytes are left out, with a
note. Limits are checked with the very functions the operation calls, so a dry run refuses
what the operation would refuse, with the same words (how to shrink the request).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ..errors import LimitExceeded, StacGdalMcpError
from ..models import Model

if TYPE_CHECKING:
    from ..core import Core
    from .access import AssetSource

CHUNK = 16 * 1024  # CPL_VSIL_CURL_CHUNK_SIZE, GDAL's default
OPEN_BYTES = CHUNK  # what GDAL reads of a remote GeoTIFF when opening it (VSI_CACHE off)
PIECE = 10 * 1024**2  # a single contiguous read goes out in pieces of at most this
TILE_SLACK = 8  # a COG tile's 4-byte leader and trailer: tiles this close are back to back
VRT_BLOCK = (512, 128)  # GDAL's WarpedVRT block size: chunks are cut on whole blocks
WARP_MEMORY = 64 * 1024**2  # GDAL's default warp memory limit (source + output buffers of a chunk)
MAX_FILES_LISTED = 20  # per-file detail in a result, at most (the totals cover every file)

# Resampling kernels' radius in source pixels (GDAL's warper widens its source window by it).
_KERNEL_RADIUS = {"nearest": 0, "bilinear": 1, "cubic": 2, "cubic_spline": 2, "lanczos": 3}


# --- results ---------------------------------------------------------------------------------------


class OutputSize(Model):
    """What the operation would write (pixels before compression)."""

    width: int | None = None
    height: int | None = None
    bands: int | None = None
    dtype: str | None = None
    pixels: int | None = Field(None, description="width x height")
    bytes: int | None = Field(None, description="pixels x bands x bytes per value, before compression")
    format: str | None = None
    crs: str | None = None
    resolution: list[float] | None = None
    rows: int | None = Field(None, description="table rows (time series: one per solar day)")


class FileRead(Model):
    """What would be read from one file."""

    asset: str = Field(description="item/asset, or the file name")
    href: str = Field(description="without any signature")
    overview_level: int | None = Field(None, description="None: full resolution; 0: the first overview")
    reads: int = Field(description="reads (strips, warped blocks, windows) that fetch tiles")
    tiles: int
    bytes: int | None = Field(
        description="bytes it would fetch, header included; None: unknown (no tile index)"
    )
    requests: int = Field(description="HTTP requests (0 for a local file)")


class LimitCheck(Model):
    limit: str = Field(description="the setting, e.g. limits.max_output_pixels")
    needed: float
    allowed: float
    ok: bool


class Estimate(Model):
    """A dry run's answer: nothing was read but headers, nothing was written."""

    dry_run: Literal[True] = True
    operation: str
    # (names unlike the results' own fields: `items`, `assets`, so that one loose schema fits both)
    item_ids: list[str] = Field(default_factory=list, description="items involved")
    inputs: list[str] = Field(default_factory=list, description="assets read: item/asset, or the file name")
    output: OutputSize | None = None
    read_bytes: int | None = Field(None, description="bytes it expects to fetch (tiles + headers)")
    read_requests: int | None = Field(None, description="HTTP range requests it expects")
    read_tiles: int | None = None
    read_pixels: int | None = Field(
        None, description="source pixels read (checked against limits.max_read_pixels)"
    )
    files: list[FileRead] = Field(default_factory=list, description=f"per file (at most {MAX_FILES_LISTED})")
    limits: list[LimitCheck] = Field(default_factory=list)
    would_refuse: bool = False
    refusal: str | None = Field(
        None, description="the error the operation would give, saying how to shrink it"
    )
    notes: list[str] = Field(default_factory=list)


# --- one file: its tile index, and what reads fetch -------------------------------------------------


@dataclass
class Level:
    """One resolution level of an open GeoTIFF: size, block size and the tile index."""

    dataset: Any  # the full-resolution rasterio dataset (metadata is read through it)
    index: int | None  # overview index, None for full resolution
    width: int
    height: int
    block: tuple[int, int]  # (width, height)
    transform: Any  # affine of this level
    separate: bool  # one tile per band (PLANARCONFIG=SEPARATE)
    _ranges: dict = field(default_factory=dict)

    @property
    def tiles_across(self) -> int:
        return math.ceil(self.width / self.block[0])

    @property
    def tiles_down(self) -> int:
        return math.ceil(self.height / self.block[1])

    def tiles(self, col_off: float, row_off: float, width: float, height: float) -> list[tuple[int, int]]:
        """(col, row) of the tiles a pixel window of this level touches (clipped to the level)."""
        c0, r0 = max(0, math.floor(col_off)), max(0, math.floor(row_off))
        c1 = min(self.width, math.ceil(col_off + width))
        r1 = min(self.height, math.ceil(row_off + height))
        if c1 <= c0 or r1 <= r0:
            return []
        bw, bh = self.block
        return [
            (c, r) for r in range(r0 // bh, (r1 - 1) // bh + 1) for c in range(c0 // bw, (c1 - 1) // bw + 1)
        ]

    def byte_range(self, col: int, row: int, band: int) -> tuple[int, int] | None:
        """(offset, size) of one tile in the file; None for a sparse tile (nothing stored)."""
        key = (col, row, band if self.separate else 1)
        if key not in self._ranges:
            extra = {} if self.index is None else {"ovr": self.index}
            offset = self.dataset.get_tag_item(f"BLOCK_OFFSET_{col}_{row}", "TIFF", bidx=key[2], **extra)
            size = self.dataset.get_tag_item(f"BLOCK_SIZE_{col}_{row}", "TIFF", bidx=key[2], **extra)
            self._ranges[key] = (int(offset), int(size)) if offset and size and int(size) > 0 else None
        return self._ranges[key]


class FilePlan:
    """One input file: opened once for its header, then the reads an operation would make."""

    def __init__(self, source: AssetSource, remote: bool):
        self.source = source
        self.remote = remote
        self.indexed = False  # a GeoTIFF with a tile index
        self.size: int | None = None
        self.header = 0
        self.reads = 0
        self.tiles: set = set()
        self.tile_bytes = 0
        self.fetched_bytes = 0
        self.requests = 0
        self.level_used: int | None = None
        self._covered: list[tuple[int, int]] = []  # byte intervals already fetched
        self._levels: dict[int | None, Level] = {}
        self.dataset = None

    # header -------------------------------------------------------------------------------

    def attach(self, dataset, size: int | None = None) -> None:
        """Learn the layout from the open full-resolution dataset (`size`: the file's, if known);
        count the header fetch."""
        self.dataset = dataset
        self.indexed = dataset.driver == "GTiff"
        if not self.indexed:
            return
        self.size = size
        starts = []
        for index in [None, *range(len(dataset.overviews(1)) if dataset.count else 0)]:
            extra = {} if index is None else {"ovr": index}
            with contextlib.suppress(Exception):
                value = dataset.get_tag_item("BLOCK_OFFSET_0_0", "TIFF", bidx=1, **extra)
                if value and int(value) > 0:
                    starts.append(int(value))
        data_start = min(starts, default=OPEN_BYTES)
        self.header = max(OPEN_BYTES, _round_up(data_start, CHUNK))
        if size is not None:
            self.header = min(self.header, size)
        self._covered.append((0, self.header))
        self.fetched_bytes += self.header
        if self.remote:
            self.requests += 2 + max(0, math.ceil((self.header - OPEN_BYTES) / CHUNK))  # HEAD + GET(s)

    def level(self, index: int | None, open_level) -> Level:
        """The level `index` (None: full resolution); `open_level(index)` opens it for its size."""
        if index not in self._levels:
            ds = self.dataset
            if index is None:
                width, height, transform = ds.width, ds.height, ds.transform
                block = tuple(reversed(ds.block_shapes[0]))
            else:
                with open_level(index) as ovr:
                    width, height, transform = ovr.width, ovr.height, ovr.transform
                    block = tuple(reversed(ovr.block_shapes[0]))
            interleave = (ds.tags(ns="IMAGE_STRUCTURE").get("INTERLEAVE") or "PIXEL").upper()
            self._levels[index] = Level(
                ds, index, width, height, (int(block[0]), int(block[1])), transform, interleave == "BAND"
            )
        return self._levels[index]

    # reads ------------------------------------------------------------------------------------

    def read(
        self, level: Level, tiles: Iterable[tuple[int, int]], bands: Sequence[int], *, fresh: bool = False
    ) -> None:
        """One GDAL read of `tiles` (of `bands`) from `level`: count what it would fetch.
        `fresh`: the read is made on a newly opened dataset (odc-stac opens the file for each
        chunk), so GDAL's block cache holds none of the tiles read before; only bytes in the
        `/vsicurl/` cache (the header, ordinary reads) are not fetched again."""
        self.level_used = level.index
        wanted = []
        for col, row in tiles:
            for band in bands if level.separate else bands[:1]:
                key = (level.index, col, row, band if level.separate else 1)
                seen = key in self.tiles
                if seen and not fresh:
                    continue
                self.tiles.add(key)
                found = level.byte_range(col, row, band)
                if found is not None:
                    self.tile_bytes += 0 if seen else found[1]
                    if not self._is_covered(found):
                        wanted.append(found)
        if not wanted:
            return
        self.reads += 1
        runs = _runs(sorted(wanted))
        if len(runs) == 1:  # an ordinary read: whole 16 KB chunks, 10 MB pieces
            start, end = _round_down(runs[0][0], CHUNK), _round_up(runs[0][1], CHUNK)
            pieces = max(1, math.ceil((end - start) / PIECE))
            end = max(end, start + pieces * PIECE) if pieces > 1 else end
            if self.size is not None:
                end = min(end, self.size)
            fetched = [(start, end)]
            self.requests += pieces if self.remote else 0
            for start, end in fetched:
                self.fetched_bytes += end - start - self._overlap(start, end)
                self._covered.append((start, end))
        else:  # parallel range requests of exactly the runs, which /vsicurl/ does not cache
            self.requests += len(runs) if self.remote else 0
            self.fetched_bytes += sum(end - start - self._overlap(start, end) for start, end in runs)

    def _is_covered(self, found: tuple[int, int]) -> bool:
        start, end = found[0], found[0] + found[1]
        return any(a <= start and end <= b for a, b in self._covered)

    def _overlap(self, start: int, end: int) -> int:
        return sum(max(0, min(end, b) - max(start, a)) for a, b in self._covered)

    def summary(self) -> FileRead:
        return FileRead(
            asset=self.source.label,
            href=self.source.href_unsigned,
            overview_level=self.level_used,
            reads=self.reads,
            tiles=len(self.tiles),
            bytes=self.fetched_bytes if self.indexed else None,
            requests=self.requests,
        )


def _runs(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of the back-to-back runs of sorted (offset, size) tile ranges."""
    runs: list[list[int]] = []
    for offset, size in ranges:
        if runs and offset - runs[-1][1] <= TILE_SLACK:
            runs[-1][1] = max(runs[-1][1], offset + size)
        else:
            runs.append([offset, offset + size])
    return [(a, b) for a, b in runs]


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def _round_down(value: int, step: int) -> int:
    return value // step * step


def is_remote(source: AssetSource) -> bool:
    return source.gdal_path.startswith("/vsi")


def file_size(gdal_path: str) -> int | None:
    """The size of a file as GDAL sees it (for /vsicurl/: from the HEAD request GDAL made when it
    opened the file, no new request); None when unknown. Call it under the GDAL environment."""
    import ctypes

    from .gdal_calls import _lib

    lib = _lib()
    lib.VSIFOpenL.restype = ctypes.c_void_p
    lib.VSIFOpenL.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.VSIFSeekL.restype = ctypes.c_int
    lib.VSIFSeekL.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int]
    lib.VSIFTellL.restype = ctypes.c_uint64
    lib.VSIFTellL.argtypes = [ctypes.c_void_p]
    lib.VSIFCloseL.restype = ctypes.c_int
    lib.VSIFCloseL.argtypes = [ctypes.c_void_p]
    handle = lib.VSIFOpenL(gdal_path.encode(), b"rb")
    if not handle:
        return None
    try:
        if lib.VSIFSeekL(handle, 0, 2) != 0:  # SEEK_END
            return None
        return int(lib.VSIFTellL(handle))
    finally:
        lib.VSIFCloseL(handle)


class Planner:
    """The files of one operation and their reads; totals and per-file detail for the result."""

    def __init__(self, core: Core):
        self.core = core
        self.files: dict[str, FilePlan] = {}
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def file(self, source: AssetSource) -> FilePlan:
        with self._lock:
            key = source.gdal_path
            if key not in self.files:
                self.files[key] = FilePlan(source, is_remote(source))
            return self.files[key]

    @contextlib.contextmanager
    def open(self, source: AssetSource):
        """Open `source` (its header only) and yield (plan, dataset, open_level)."""
        from .access import gdal_errors, open_raster

        settings = self.core.settings
        plan = self.file(source)
        with open_raster(source, settings) as src, gdal_errors(source, "reading the header of"):
            for level in plan._levels.values():  # reopened: look tiles up through this dataset
                level.dataset = src
            if plan.dataset is None:
                plan.attach(src, file_size(source.gdal_path) if src.driver == "GTiff" else None)
                if not plan.indexed:
                    self.notes.append(
                        f"{source.label} is not a GeoTIFF ({src.driver}): its bytes cannot be "
                        "estimated from its header and are not in read_bytes"
                    )
            else:
                plan.dataset = src

            def open_level(index):
                return open_raster(source, settings, overview_level=index)

            yield plan, src, open_level

    def fill(self, estimate: Estimate) -> Estimate:
        plans = list(self.files.values())
        indexed = [p for p in plans if p.indexed]
        estimate.read_bytes = sum(p.fetched_bytes for p in indexed)
        estimate.read_requests = sum(p.requests for p in plans)
        estimate.read_tiles = sum(len(p.tiles) for p in plans)
        estimate.files = [p.summary() for p in plans[:MAX_FILES_LISTED]]
        if len(plans) > MAX_FILES_LISTED:
            estimate.notes.append(f"{len(plans)} files are read; the first {MAX_FILES_LISTED} are listed")
        if not estimate.inputs:
            estimate.inputs = list(dict.fromkeys(p.source.label for p in plans))
        estimate.notes = [*estimate.notes, *(n for n in self.notes if n not in estimate.notes)]
        return estimate


# --- limits ----------------------------------------------------------------------------------------


def output_checks(width: int, height: int, bands: int, dtype: str, limits) -> list[LimitCheck]:
    import numpy as np

    pixels = width * height
    nbytes = pixels * bands * np.dtype(dtype).itemsize
    return [
        LimitCheck(
            limit="limits.max_output_pixels",
            needed=pixels,
            allowed=limits.max_output_pixels,
            ok=pixels <= limits.max_output_pixels,
        ),
        LimitCheck(
            limit="limits.max_output_bytes",
            needed=nbytes,
            allowed=limits.max_output_bytes,
            ok=nbytes <= limits.max_output_bytes,
        ),
    ]


def read_check(pixels: float, limits) -> LimitCheck:
    return LimitCheck(
        limit="limits.max_read_pixels",
        needed=pixels,
        allowed=limits.max_read_pixels,
        ok=pixels <= limits.max_read_pixels,
    )


@contextlib.contextmanager
def refusals(estimate: Estimate):
    """Inside the block, a LimitExceeded is the operation's refusal: recorded, not raised."""
    try:
        yield
    except LimitExceeded as exc:
        estimate.would_refuse = True
        estimate.refusal = str(exc)


def _output(width, height, bands, dtype, **extra) -> OutputSize:
    import numpy as np

    return OutputSize(
        width=int(width),
        height=int(height),
        bands=int(bands),
        dtype=str(dtype),
        pixels=int(width) * int(height),
        bytes=int(width) * int(height) * int(bands) * np.dtype(dtype).itemsize,
        **extra,
    )


def _items_of(sources: Iterable[AssetSource]) -> list[str]:
    return list(dict.fromkeys(s.item_id for s in sources if s.item_id))


# --- convert_asset ---------------------------------------------------------------------------------


def estimate_convert(
    core: Core,
    source: AssetSource,
    *,
    output_format: str,
    bbox: Sequence[float] | None = None,
    bbox_crs: str = "EPSG:4326",
    bands: Sequence[int] | None = None,
    creation_options: dict | None = None,
) -> Estimate:
    """What `convert_asset` with these arguments would read and write."""
    from rasterio.windows import Window

    from . import formats
    from .access import check_read_size
    from .convert import band_indexes
    from .grids import bbox_window, check_output_size, crs_label

    fmt = formats.output_format(output_format)
    formats.creation_options(fmt, creation_options)
    settings = core.settings
    planner = Planner(core)
    estimate = Estimate(operation="convert_asset", item_ids=_items_of([source]), inputs=[source.label])
    with planner.open(source) as (plan, src, open_level):
        window = bbox_window(src, bbox, bbox_crs) if bbox is not None else Window(0, 0, src.width, src.height)
        indexes = band_indexes(bands, src.count, fmt.eight_bit)
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


def estimate_reproject(
    core: Core,
    source: AssetSource,
    *,
    dst_crs: str | int,
    resolution: float | Sequence[float] | None = None,
    bbox: Sequence[float] | None = None,
    bbox_crs: str = "EPSG:4326",
    resampling: str = "nearest",
    output_format: str = "COG",
) -> Estimate:
    """What `reproject_asset` with these arguments would read and write."""
    from . import formats
    from .access import check_read_size
    from .grids import (
        check_output_size,
        choose_overview,
        crs_label,
        native_resolution_in,
        parse_crs,
        parse_resampling,
        warp_grid,
    )
    from .warp import WARP_FORMATS, source_pixels_read

    fmt = formats.output_format(output_format, allowed=WARP_FORMATS)
    crs = parse_crs(dst_crs)
    parse_resampling(resampling)
    settings = core.settings
    planner = Planner(core)
    estimate = Estimate(operation="reproject_asset", item_ids=_items_of([source]), inputs=[source.label])
    with planner.open(source) as (plan, src, open_level):
        grid = warp_grid(src, crs, resolution, bbox, bbox_crs)
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


def gdal_overview(
    level_sizes: list[tuple[int, int]], full: tuple[int, int], window, out_w, out_h, nearest=True
):
    """The overview GDAL's RasterIO uses for a decimated read of `window` into out_w x out_h
    (GDALBandGetBestOverviewLevel2), and the window on it; (None, window) for full resolution."""
    x_ratio, y_ratio = window[2] / out_w, window[3] / out_h
    desired = x_ratio if x_ratio < y_ratio or out_h == 1 else y_ratio
    threshold = 1.2 if nearest else 1.0
    best, best_res = None, 1.0
    for index, (w, h) in enumerate(level_sizes):
        res = min(full[0] / w, full[1] / h)
        if res >= desired * threshold + 0.1 or res <= best_res:
            continue
        best, best_res = index, res
        if abs(desired - res) < 0.1:
            break
    if best is None:
        return None, window
    w, h = level_sizes[best]
    fx, fy = full[0] / w, full[1] / h
    col = min(w - 1, int(window[0] / fx + 0.5))
    row = min(h - 1, int(window[1] / fy + 0.5))
    width = min(max(1, int(window[2] / fx + 0.5)), w - col)
    height = min(max(1, int(window[3] / fy + 0.5)), h - row)
    return best, (col, row, width, height)


def _level_sizes(src, open_level) -> list[tuple[int, int]]:
    sizes = []
    for index in range(len(src.overviews(1)) if src.count else 0):
        with open_level(index) as ovr:
            sizes.append((ovr.width, ovr.height))
    return sizes


def decimated_read(plan: FilePlan, src, open_level, window, out_w, out_h, bands, *, nearest=True) -> int:
    """Count a decimated read (GDAL picks the overview); return the source pixels it reads."""
    sizes = _level_sizes(src, open_level) if plan.indexed or src.count else []
    index, part = gdal_overview(sizes, (src.width, src.height), window, out_w, out_h, nearest)
    if plan.indexed:
        level = plan.level(index, open_level)
        plan.read(level, level.tiles(*part), bands)
    return int(part[2] * part[3])


def estimate_preview(
    core: Core, sources: list[AssetSource], *, bbox: Sequence[float] | None = None, max_size: int = 512
) -> Estimate:
    """What `preview` of `sources` would read and write."""
    from rasterio.windows import Window, from_bounds
    from rasterio.windows import bounds as window_bounds

    from ..errors import InvalidArgument
    from .access import check_read_size
    from .grids import bbox_window, crs_label
    from .preview import MAX_PREVIEW_SIZE

    if not isinstance(max_size, int) or not 16 <= max_size <= MAX_PREVIEW_SIZE:
        raise InvalidArgument(f"max_size must be between 16 and {MAX_PREVIEW_SIZE} pixels")
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


# --- cloud_cover_stats -----------------------------------------------------------------------------


def estimate_cloud_cover(
    core: Core,
    aoi,
    *,
    items: list | None = None,
    catalog: str | None = None,
    resolution: float | None = None,
    max_items: int | None = None,
    sort: str = "clear",
    asset: str | None = None,
    resampling: str = "nearest",
    **search,
) -> Estimate:
    """What `cloud_cover_stats` would read: per item, the AOI's window of its mask (at the
    overview GDAL picks for `resolution`). Items whose mask cannot be found are noted."""
    from ..errors import InvalidArgument
    from .access import asset_source
    from .aoi import aoi_geometry
    from .cloud import DEFAULT_MAX_ITEMS, check_mask_format, sort_rows
    from .selection import Collections, item_mask, select_items

    aoi_geom = aoi_geometry(aoi)
    sort_rows([], sort)
    if resolution is not None and resolution <= 0:
        raise InvalidArgument(f"resolution must be positive (got {resolution})")
    cat = core.catalogs.get(catalog)
    selected, notes = select_items(
        core,
        aoi_geom,
        catalog=catalog,
        items=items,
        search=search,
        max_items=max_items,
        default_max=DEFAULT_MAX_ITEMS,
    )
    collections = Collections(cat)
    planner = Planner(core)
    estimate = Estimate(operation="cloud_cover_stats", notes=list(notes))
    ids, largest = [], 0

    def one(ref_or_item) -> tuple[str, int]:
        item = (
            ref_or_item
            if "assets" in ref_or_item
            else cat.item(ref_or_item["collection_id"], ref_or_item["item_id"])
        )
        mask = item_mask(item, collections, asset)
        source = asset_source(core, item, mask.asset, catalog=cat.id)
        check_mask_format(source)
        with planner.open(source) as (plan, src, open_level):
            spec, out_shape = cloud_window(src, aoi_geom, resolution)
            if spec is None:
                return item["id"], 0
            decimated_read(
                plan, src, open_level, spec, out_shape[1], out_shape[0], [1], nearest=resampling != "mode"
            )
            return item["id"], out_shape[0] * out_shape[1]

    workers = max(1, min(core.settings.limits.max_concurrency, len(selected) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="estimate") as pool:
        futures = [pool.submit(one, it) for it in selected]
        for it, future in zip(selected, futures):
            try:
                item_id, pixels = future.result()
            except StacGdalMcpError as exc:
                name = it.get("item_id") or it.get("id")
                estimate.notes.append(f"item '{name}' would fail: {exc}")
                continue
            ids.append(item_id)
            largest = max(largest, pixels)
    estimate.item_ids = ids
    limit = core.settings.limits.max_output_pixels
    estimate.limits = [
        LimitCheck(
            limit="limits.max_output_pixels (AOI pixels per mask)",
            needed=largest,
            allowed=limit,
            ok=largest <= limit,
        )
    ]
    if largest > limit:
        estimate.notes.append(
            "the AOI covers more mask pixels than limits.max_output_pixels: those items would get an "
            "error in their row; pass a coarser resolution"
        )
    estimate.output = OutputSize(rows=len(ids))
    return planner.fill(estimate)


def cloud_window(src, aoi_geom, resolution):
    """The native window `aoi_window_counts` reads and its decimated shape (rows, cols);
    (None, ...) when the AOI misses the mask."""
    import numpy as np
    from rasterio.transform import Affine

    from .aoi import project_aoi
    from .cloud import _coords, decimation

    native = abs(src.transform.a)
    k = decimation(native, resolution)
    grid = src.transform @ Affine.scale(k)
    height, width = math.ceil(src.height / k), math.ceil(src.width / k)
    xs, ys = _coords(project_aoi(aoi_geom, src.crs))
    cols, rows = ~grid @ (np.array(xs), np.array(ys))
    col0, col1 = math.floor(cols.min()), math.ceil(cols.max())
    row0, row1 = math.floor(rows.min()), math.ceil(rows.max())
    r0, r1 = max(row0, 0), min(row1, height)
    c0, c1 = max(col0, 0), min(col1, width)
    if not (r0 < r1 and c0 < c1):
        return None, (0, 0)
    spec = (c0 * k, r0 * k, min(c1 * k, src.width) - c0 * k, min(r1 * k, src.height) - r0 * k)
    return spec, (r1 - r0, c1 - c0)


# --- time_series and composite (odc-stac loads) ----------------------------------------------------


def estimate_load(
    core: Core,
    aoi,
    names: list[str],
    *,
    operation: str,
    mask_clouds: bool = True,
    resolution: float | None = None,
    crs: str | None = None,
    catalog: str | None = None,
    max_items: int | None = None,
    search: dict | None = None,
) -> Estimate:
    """What an odc-stac load of `names` over `aoi` (time_series, composite) would read: for every
    item and asset, the source window of each dask chunk of the output grid (odc-stac reads a
    pasted window when the grids line up, else the chunk's footprint through GDAL's warper),
    at the overview odc-stac picks for a coarser grid. The output grid and its limits are the
    load's own (`load.prepare`, which reads no pixel)."""
    from . import load

    estimate = Estimate(operation=operation)
    try:
        prep = load.prepare(
            core,
            aoi,
            names,
            mask_clouds=mask_clouds,
            resolution=resolution,
            crs=crs,
            catalog=catalog,
            max_items=max_items,
            search=search,
        )
    except LimitExceeded as exc:
        estimate.would_refuse, estimate.refusal = True, str(exc)
        return estimate
    gbox = prep.gbox
    height, width = gbox.shape
    estimate.notes = list(prep.notes)
    estimate.item_ids = [i["id"] for stack in prep.stacks for i in stack.items]
    days = sum(len(loaded.days) for loaded in prep.loaded)
    grid_crs, grid_res = str(gbox.crs), [abs(gbox.resolution.x), abs(gbox.resolution.y)]
    if operation == "composite":
        estimate.output = _output(
            width, height, len(names), "float32", format="COG", crs=grid_crs, resolution=grid_res
        )
        estimate.limits = output_checks(width, height, len(names), "float32", core.settings.limits)
    else:
        estimate.output = OutputSize(
            width=width, height=height, crs=grid_crs, resolution=grid_res, rows=days, format="CSV + PNG chart"
        )
        estimate.limits = output_checks(width, height, len(names), "float32", core.settings.limits)
    # the load's dask chunks: a composite is computed by output tiles (composite.TILE a side)
    from .composite import TILE

    chunk = TILE if operation == "composite" else load.CHUNK
    estimate.notes.append(
        f"{days} solar days from {len(estimate.item_ids)} items; the load holds "
        f"{width} x {height} px x {len(names)} band(s) x {days} days of float32 "
        f"({width * height * len(names) * days * 4:,} bytes) in dask chunks of at most {chunk} px"
    )
    chunks = _chunks(height, width, chunk)
    planner = Planner(core)
    jobs = []
    for stack in prep.stacks:
        keys = list(dict.fromkeys([*stack.assets.values(), *([stack.mask.asset] if stack.mask else [])]))
        for item in stack.items:
            for key in keys:
                jobs.append((item, key))
    from .access import asset_source

    def one(item, key) -> int:
        source = asset_source(core, item, key, catalog=catalog)
        with planner.open(source) as (plan, src, open_level):
            return load_reads(plan, src, open_level, gbox, chunks)

    workers = max(1, min(core.settings.limits.max_concurrency, len(jobs) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="estimate") as pool:
        pixels = sum(pool.map(lambda job: one(*job), jobs))
    estimate.read_pixels = int(pixels)
    estimate.inputs = list(dict.fromkeys(f"{item['id']}/{key}" for item, key in jobs))[:MAX_FILES_LISTED]
    return planner.fill(estimate)


def _chunks(height: int, width: int, size: int) -> list[tuple[int, int, int, int]]:
    """(row0, row1, col0, col1) of each dask chunk of the output grid."""
    return [
        (r, min(r + size, height), c, min(c + size, width))
        for r in range(0, height, size)
        for c in range(0, width, size)
    ]


def load_reads(plan: FilePlan, src, open_level, gbox, chunks) -> int:
    """Count what odc-stac reads of one asset for every chunk; return the source pixels read."""
    from odc.geo.geobox import GeoBox
    from odc.geo.overlap import compute_reproject_roi
    from odc.loader._reader import pick_overview

    src_box = GeoBox((src.height, src.width), src.transform, src.crs.to_wkt())
    pixels = 0
    for r0, r1, c0, c1 in chunks:
        part = gbox[r0:r1, c0:c1]
        rr = compute_reproject_roi(src_box, part, ttol=0.9)
        ys, xs = rr.roi_src
        if ys.stop <= ys.start or xs.stop <= xs.start:
            continue
        index = pick_overview(rr.read_shrink, src.overviews(1)) if rr.read_shrink > 1 else None
        if index is not None:  # odc-stac recomputes the window on the overview's own grid
            with open_level(index) as ovr:
                ovr_box = GeoBox((ovr.height, ovr.width), ovr.transform, src.crs.to_wkt())
            rr = compute_reproject_roi(ovr_box, part, ttol=0.9)
            ys, xs = rr.roi_src
            if ys.stop <= ys.start or xs.stop <= xs.start:
                continue
        pixels += (ys.stop - ys.start) * (xs.stop - xs.start)
        if plan.indexed:
            level = plan.level(index, open_level)
            tiles = level.tiles(xs.start, ys.start, xs.stop - xs.start, ys.stop - ys.start)
            plan.read(level, tiles, [1], fresh=True)  # odc-stac opens the file for each chunk
    return pixels


def estimate_time_series(
    core: Core,
    aoi,
    *,
    expression: str = "ndvi",
    reducer: str = "mean",
    mask_clouds: bool = True,
    resolution: float | None = None,
    crs: str | None = None,
    catalog: str | None = None,
    max_items: int | None = None,
    **search,
) -> Estimate:
    """What `time_series` with these arguments would read (arguments checked as it checks them)."""
    from ..errors import InvalidArgument
    from .expressions import parse_expression
    from .series import REDUCERS

    _, _, names = parse_expression(expression)
    if reducer not in REDUCERS:
        raise InvalidArgument(f"reducer must be one of {', '.join(REDUCERS)}")
    return estimate_load(
        core,
        aoi,
        names,
        operation="time_series",
        mask_clouds=mask_clouds,
        resolution=resolution,
        crs=crs,
        catalog=catalog,
        max_items=max_items,
        search=search,
    )


def estimate_composite(
    core: Core,
    aoi,
    *,
    bands,
    method: str = "median",
    mask_clouds: bool = True,
    resolution: float | None = None,
    crs: str | None = None,
    catalog: str | None = None,
    max_items: int | None = None,
    **search,
) -> Estimate:
    """What `composite` with these arguments would read and write."""
    from ..errors import InvalidArgument
    from .composite import METHODS, band_names

    names = band_names(bands)
    if method not in METHODS:
        raise InvalidArgument(f"method must be one of {', '.join(METHODS)}")
    return estimate_load(
        core,
        aoi,
        names,
        operation="composite",
        mask_clouds=mask_clouds,
        resolution=resolution,
        crs=crs,
        catalog=catalog,
        max_items=max_items,
        search=search,
    )
