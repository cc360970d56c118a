"""Which rows of a stac-geoparquet file have a footprint their bbox describes, so that the count
of a bbox search (parquet_count.count) settles them without reading their geometry.

A row is BOX when its footprint is the rectangle of its bbox (a polygon of one ring, its five
points the bbox's corners in turn, little-endian WKB): it meets a search bbox exactly when its
bbox does. A row is TIGHT when its footprint's bounds are its bbox: a point of the footprint lies
on each side of the bbox, so the footprint meets a search bbox that holds a whole side of the
row's bbox (parquet_search.Plan.edge). The footprints of the other rows, and of files not yet
marked, are read and tested with shapely. The marks are exact: a bbox written in float32 or rounded
outward marks nothing.

A file is marked once per version of the files, in the background, after a count first had to
read its footprints (one pass over its bbox and geometry columns: 0.2-0.5 s a million rows); every
later count of a bbox lists the doubtful rows in one scan of the bbox columns (as DuckDB's count of
the bbox overlap reads them) and reads the footprints of the rows their marks do not settle. A
count over files none of which is marked yet reads the doubtful footprints in its own scan and asks
for each file to be marked. One byte a row is kept, for files of at most MAX_ROWS rows and
MAX_MARKED rows a version in all. Files read over HTTP are marked when the catalog keeps the blocks
it reads on disk (httpfs.py), as many as that disk tier holds whole: the pass fetches their
footprints once, and the counts after read the bbox columns from it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

    from ..catalogs.geoparquet import GeoparquetCatalog

OTHER, TIGHT, BOX = 0, 1, 2
MAX_ROWS = 2_000_000  # rows of a file marked, at most (the count lists its doubtful rows)
MAX_MARKED = 20_000_000  # rows marked a version of the files, in all (one byte each)
CHUNK = 100_000  # rows read at a time while marking
# the 93 bytes of a polygon of one ring of five points, as WKB writes it (little-endian: order 1)
_RECORD = np.dtype(
    [("order", "u1"), ("kind", "<u4"), ("rings", "<u4"), ("points", "<u4"), ("xy", "<f8", (5, 2))]
)
_MARKING = ThreadPoolExecutor(1, thread_name_prefix="parquet-marks")
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # catalog -> its Marks
_KEPT_LOCK = threading.Lock()


def markable(cat: GeoparquetCatalog) -> bool:
    """Whether the catalog's files are marked: files on disk, and files read over HTTP where the
    catalog keeps the blocks it reads on disk too (httpfs.py: the marking pass fetches each
    footprint once, and the counts after read the bbox columns from that disk)."""
    return cat.urls is None or cat.reader.disk.usable


def any_marked(cat: GeoparquetCatalog, files: list[str] | None) -> bool:
    """Whether one of `files` (as DuckDB names them; None: every file) is marked. When none is,
    the count reads the doubtful footprints in its own scan (listing the doubtful rows first, then
    reading their footprints, took a second scan) and then asks for them to be marked (ask_marks)."""
    marks = marks_of(cat)
    return any(marks.get(name) is not None for name in (cat.files.sources if files is None else files))


def ask_marks(cat: GeoparquetCatalog, files: list[str] | None) -> None:
    """Marking asked for each of `files` (None: every file), within the bounds."""
    _ask(cat, marks_of(cat), cat.files.sources if files is None else files)


def _ask(cat: GeoparquetCatalog, marks: Marks, names: list[str]) -> None:
    """Marking asked for files `names`; over HTTP for as many as the disk tier holds whole (the
    pass and the counts after read their bbox columns from it: a file's size counted whole)."""
    files = cat.files
    rows = {s: files.rows.get(p, 0) for p, s in zip(files.paths, files.sources, strict=True)}
    sizes = {s: v.size for v, s in zip(files.stamp, files.sources, strict=True)} if cat.urls else {}
    room = cat.reader.disk.slots * cat.reader.disk.block if cat.urls else None
    for name in names:
        marks.ask(cat, name, rows.get(name, 0), sizes.get(name, 0), room)


def marks_of(cat: GeoparquetCatalog) -> Marks:
    """The marks of the catalog's files as they are now (new ones when the files changed)."""
    stamp = cat.files.stamp
    with _KEPT_LOCK:
        marks = _KEPT.get(cat)
        if marks is None or marks.stamp != stamp:
            marks = _KEPT[cat] = Marks(stamp)
        return marks


class Marks:
    """The marks of one version (`stamp`) of a catalog's files: file (as DuckDB names it) -> a
    code a row."""

    def __init__(self, stamp: tuple) -> None:
        self.stamp = stamp
        self._lock = threading.Lock()
        self._made: dict[str, np.ndarray] = {}
        self._asked: set[str] = set()
        self._done: set[str] = set()  # asked and marked, or left unmarked (unreadable, changed)
        self._rows = 0
        self._bytes = 0

    def get(self, name: str) -> np.ndarray | None:
        return self._made.get(name)

    @property
    def idle(self) -> bool:
        """Whether every file asked for is marked (or left unmarked)."""
        with self._lock:
            return self._asked <= self._done

    def ask(
        self, cat: GeoparquetCatalog, name: str, rows: int, size: int = 0, room: int | None = None
    ) -> None:
        """Mark file `name` (of `rows` rows, `size` bytes) in the background, once, within the
        bounds (and the files asked at most `room` bytes in all, when given)."""
        with self._lock:
            if name in self._asked or rows > MAX_ROWS or self._rows + rows > MAX_MARKED:
                return
            if room is not None and self._bytes + size > room:
                return
            self._asked.add(name)
            self._rows += rows
            self._bytes += size
        _MARKING.submit(self._mark, cat, cat.files, name, rows)

    def _mark(self, cat: GeoparquetCatalog, files, name: str, rows: int) -> None:
        from ..errors import StacGdalMcpError

        try:
            self._made[name] = self._codes(cat, files, name, rows)
        except StacGdalMcpError:  # a file changed or unreadable: left unmarked, its footprints read
            pass
        except Exception as exc:  # unexpected (no caller waits for this pass): said once, on stderr
            logging.getLogger(__name__).warning("footprints of %s left unmarked: %r", name, exc)
        finally:
            with self._lock:
                self._done.add(name)

    @staticmethod
    def _codes(cat: GeoparquetCatalog, files, name: str, rows: int) -> np.ndarray:
        """The code of each row of file `name`, read CHUNK rows at a time (row groups skipped by
        their row numbers)."""
        codes = np.zeros(rows, np.uint8)
        with cat.pinned(files):
            for start in range(0, rows, CHUNK):
                table = cat.run(
                    "SELECT file_row_number AS n, bbox.xmin AS xmin, bbox.ymin AS ymin, bbox.xmax AS xmax, "
                    f"bbox.ymax AS ymax, geometry FROM {cat.source([name], numbered=True)} "
                    f"WHERE file_row_number >= {start} AND file_row_number < {start + CHUNK}"
                )
                codes[table.column("n").to_numpy()] = marked(table)
        return codes


@dataclass
class Settled:
    """A count's doubtful rows after the marks: `found` known to match, `rest` (filename,
    file_row_number) to test in marked files, every doubtful row of the `unmarked` files
    (`doubtful` of them) to test."""

    found: int = 0
    rest: dict[str, list[int]] = field(default_factory=dict)
    unmarked: list[str] = field(default_factory=list)
    doubtful: int = 0

    @property
    def left(self) -> int:
        return self.doubtful + sum(map(len, self.rest.values()))


def settle(cat: GeoparquetCatalog, listed: pa.Table) -> Settled:
    """What the marks settle of a count's listing: a row a file (filename; sure, its rows surely
    inside the search bbox; rows, the numbers of the doubtful ones; edge, whether each one's bbox
    holds a whole side in the search bbox). Marking is asked for the files not marked yet."""
    marks, out = marks_of(cat), Settled()
    numbers, edges = _lists(listed.column("rows"), np.int64), _lists(listed.column("edge"), bool)
    columns = [listed.column(c).to_pylist() for c in ("filename", "sure")]
    for name, sure, rows, edge in zip(*columns, numbers, edges, strict=True):
        out.found += sure
        codes = marks.get(name)
        if codes is None or (len(rows) and rows.max() >= len(codes)):
            if len(rows):
                out.unmarked.append(name)
                out.doubtful += len(rows)
            continue
        code = codes[rows]
        settled = (code == BOX) | ((code == TIGHT) & edge)
        out.found += int(settled.sum())
        if not settled.all():
            out.rest[name] = rows[~settled].tolist()
    _ask(cat, marks, out.unmarked)
    return out


def _lists(column, dtype) -> list[np.ndarray]:
    """A list column (a null: empty) as one numpy array a row, views of its values: a listing's
    doubtful rows held as 8 bytes each, not as Python numbers."""
    import pyarrow.compute as pc

    array = column.combine_chunks()
    values = array.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    ends = np.cumsum(pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False))
    return [values[end - length : end] for end, length in zip(ends, np.diff(ends, prepend=0), strict=True)]


def known(cat: GeoparquetCatalog, found: pa.Table) -> np.ndarray:
    """Which rows of `found` (filename, file_row_number, edge) their marks say meet the search
    bbox their bbox overlaps (a file not marked: none)."""
    marks = marks_of(cat)
    out = np.zeros(found.num_rows, bool)
    names = found.column("filename").to_numpy(zero_copy_only=False)
    numbers = found.column("file_row_number").to_numpy(zero_copy_only=False)
    edge = found.column("edge").to_numpy(zero_copy_only=False).astype(bool)
    for name in set(names.tolist()):
        codes, here = marks.get(name), np.flatnonzero(names == name)
        if codes is not None and numbers[here].max() < len(codes):
            code = codes[numbers[here]]
            out[here] = (code == BOX) | ((code == TIGHT) & edge[here])
    return out


def marked(table: pa.Table) -> np.ndarray:
    """The code (BOX, TIGHT, OTHER) of each row of `table` (columns xmin, ymin, xmax, ymax,
    geometry as WKB): the bounds of a polygon of five points read from its bytes, of any
    other footprint by shapely (a value that is not WKB has none). Arrays are laid out a row
    per column (numpy reduces a short axis 10x slower)."""
    import shapely

    box = np.stack([table.column(k).to_numpy(zero_copy_only=False) for k in ("xmin", "ymin", "xmax", "ymax")])
    geometry = _binary(table.column("geometry"))
    five, records = _five_points(geometry)
    simple = (
        (records["order"] == 1) & (records["kind"] == 3) & (records["rings"] == 1) & (records["points"] == 5)
    )
    five = five[simple]
    x, y = np.ascontiguousarray(records["xy"][simple].transpose(2, 1, 0))  # each (5 points, rows)
    bounds = np.full((4, len(geometry)), np.nan)
    bounds[:, five] = [x.min(0), y.min(0), x.max(0), y.max(0)]
    rest = np.ones(len(geometry), bool)
    rest[five] = False
    others = np.flatnonzero(rest)
    if len(others):
        values = np.empty(len(others), dtype=object)
        values[:] = geometry.take(others).to_pylist()
        bounds[:, others] = shapely.bounds(shapely.from_wkb(values, on_invalid="ignore")).T
    codes = np.where((bounds == box).all(axis=0), TIGHT, OTHER).astype(np.uint8)
    codes[five[_corners_in_turn(x, y, box[:, five])]] = BOX
    return codes


def _binary(column) -> pa.Array:
    """The WKB column as one plain binary array (64-bit offsets)."""
    import pyarrow as pa

    array = column.combine_chunks()
    if isinstance(array.type, pa.ExtensionType):
        array = array.storage
    return array.cast(pa.large_binary())


def _five_points(geometry: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose WKB has the length of a polygon of five points, and their bytes as
    _RECORD (read in place from the array's buffer, a window at each row's offset)."""
    offsets = np.frombuffer(geometry.buffers()[1], np.int64, len(geometry) + 1, geometry.offset * 8)
    valid = geometry.is_valid().to_numpy(zero_copy_only=False)
    five = np.flatnonzero((np.diff(offsets) == _RECORD.itemsize) & valid)
    if not len(five):
        return five, np.zeros(0, _RECORD)
    data = np.frombuffer(geometry.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
    windows = np.lib.stride_tricks.sliding_window_view(data, _RECORD.itemsize)
    return five, np.ascontiguousarray(windows[offsets[five] - offsets[0]]).view(_RECORD).reshape(-1)


def _corners_in_turn(x: np.ndarray, y: np.ndarray, box: np.ndarray) -> np.ndarray:
    """Whether each ring of five points (x, y: 5 points by rows) goes round the corners of its
    bbox (box: xmin, ymin, xmax, ymax by rows): every point a corner, closed, each step along one
    axis, the axes taken in turn (so the four corners are all visited, and the bbox has an area)."""
    xmin, ymin, xmax, ymax = box
    on_corners = ((x == xmin) | (x == xmax)).all(axis=0) & ((y == ymin) | (y == ymax)).all(axis=0)
    dx, dy = x[1:] != x[:-1], y[1:] != y[:-1]
    in_turn = (dx ^ dy).all(axis=0) & (dx[0] == dx[2]) & (dx[1] == dx[3]) & (dx[0] != dx[1])
    closed = (x[0] == x[4]) & (y[0] == y[4])
    return on_corners & in_turn & closed
