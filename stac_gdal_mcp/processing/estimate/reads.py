"""The read model of one file: its tile index, and the HTTP requests GDAL 3.10 makes for a read.

An operation's reads are looked up in each GeoTIFF's own tile index (`TileOffsets` /
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
note.

`Level` is one resolution level and its tile index, `FilePlan` one file and the reads made of
it, `Planner` the files of one operation (totals for the `Estimate`); `decimated_read` counts a
read into a smaller buffer at the overview GDAL picks (`gdal_overview`).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .result import MAX_FILES_LISTED, Estimate, FileRead

if TYPE_CHECKING:
    from ...core import Core
    from ..access import AssetSource

CHUNK = 16 * 1024  # CPL_VSIL_CURL_CHUNK_SIZE, GDAL's default
OPEN_BYTES = CHUNK  # what GDAL reads of a remote GeoTIFF when opening it (VSI_CACHE off)
PIECE = 10 * 1024**2  # a single contiguous read goes out in pieces of at most this
TILE_SLACK = 8  # a COG tile's 4-byte leader and trailer: tiles this close are back to back


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

    from ..gdal_calls import _lib

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
        from ..access import gdal_errors, open_raster

        settings = self.core.settings
        plan = self.file(source)
        with contextlib.ExitStack() as stack:
            try:
                src = stack.enter_context(open_raster(source, settings))
            except Exception:
                with self._lock:  # never opened: an error of its item, not a file of unknown size
                    if plan.dataset is None:
                        self.files.pop(source.gdal_path, None)
                raise
            stack.enter_context(gdal_errors(source, "reading the header of"))
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
        # (files without a tile index first: listed whatever their number, their bytes None)
        plans = sorted(self.files.values(), key=lambda p: p.indexed)
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


# --- decimated reads: the overview GDAL picks ------------------------------------------------------


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
