"""The checked files of a stac-geoparquet catalog (geoparquet.py): each file's footer read once per
version, its size measured first (a footer larger than limits.query_memory_mb / 8 is refused from
the file's last 8 bytes), its stac-geoparquet columns checked for presence and type (one line
naming the file and the column), the time span of its items taken from its row-group statistics
(to prune parts, snapshot_layout.py), the extent of its bbox and the ranges of its number
columns (part_stats.py), and the collections described in its metadata or a sidecar
`collections.json`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import GeoparquetError, LimitExceeded, StacGdalMcpError
from . import part_cache
from .part_stats import all_inside, can_hold, extent, holds_any, id_range
from .part_stats import ranges as column_ranges
from .redact import masked_url
from .snapshot_layout import aware, can_match, part

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

REQUIRED = ("id", "geometry")  # columns without which a file is not stac-geoparquet
READERS = 8  # footers (and URL versions) read at once: 8 footers of at most query_memory_mb / 8


@dataclass
class Files:
    """The checked files of one version: paths (or URLs), merged schema, collections described in
    them, and for URLs the filesystem DuckDB reads them through (httpfs.RangeFileSystem)."""

    stamp: tuple
    paths: list[str]
    schema: dict[str, pa.DataType]
    described: dict[str, dict]
    spans: dict[str, tuple | None]  # file -> (earliest start, latest end) of its items, None: unknown
    filesystem: Any = None
    rows: dict[str, int] = field(default_factory=dict)  # file -> its number of rows (footer)
    uniform: bool = False  # every file has the same columns in the same order, of the same types
    undated: set[str] = field(default_factory=set)  # files whose `datetime` may be null (or absent)
    boxes: dict[str, tuple | None] = field(default_factory=dict)  # file -> its rows' bbox extent
    ranges: dict[str, dict] = field(default_factory=dict)  # file -> number column -> (min, max)
    filled: dict[str, frozenset] = field(default_factory=dict)  # file -> its ranged columns without null
    ranged: set[str] = field(default_factory=set)  # files whose rows may have a start..end range
    ids: dict[str, tuple | None] = field(default_factory=dict)  # file -> (least, greatest) item id

    def named(self, root: str) -> set[str]:
        """The collections a part's name says it holds items of (a part with rows in a
        `<collection>.parquet/` or `collection=<c>/` folder): known without reading an item."""
        return {
            found.collection
            for path in self.paths
            if self.rows.get(path) and (found := part(relative(path, root))).collection is not None
        }

    def parts(self, root: str, collections, start, end, area=None, wanted=None, ids=None) -> list[str] | None:
        """The files as read_parquet reads them, less the parts whose names or statistics prove
        they hold no item of `collections` in [start, end] (snapshot_layout.py), none whose bbox
        meets `area` (west, south, east, north), none whose values meet the `wanted` bounds or
        none of the item `ids` (part_stats.py); None when none is left out."""
        kept = [
            source
            for path, source in zip(self.paths, self.sources, strict=True)
            if can_match(part(relative(path, root)), collections, start, end, self.spans[path])
            and can_hold(self.boxes.get(path), self.ranges.get(path, {}), area, wanted or {})
            and holds_any(self.ids.get(path), ids)
        ]
        return None if len(kept) == len(self.paths) else kept

    def inside(self, root: str, chosen: list[str] | None, within) -> list[str]:
        """The parts of `chosen` (as read_parquet reads them; None: every part) whose every row
        meets a search, by their names and footers alone (`within`: part_counts.Within, its
        collections, time interval, bbox and plain bounds): its count takes their footers' row
        counts. A time interval decides only parts whose rows all have a datetime and none both
        a start_datetime and an end_datetime (the search then reads their `datetime` alone)."""
        named = dict(zip(self.sources, self.paths, strict=True))
        found = []
        for source in self.sources if chosen is None else chosen:
            path = named[source]
            if within.collections and part(relative(path, root)).collection not in within.collections:
                continue
            if within.start is not None or within.end is not None:
                span = self.spans[path]
                if span is None or path in self.undated or path in self.ranged:
                    continue
                if (within.start is not None and aware(span[0]) < within.start) or (
                    within.end is not None and aware(span[1]) > within.end
                ):
                    continue
            if all_inside(self.ranges.get(path, {}), self.filled.get(path, ()), within.area, within.bounds):
                found.append(source)
        return found

    def leading(self, needed: int, descending: bool) -> list[str] | None:
        """The parts that hold the `needed` first rows of every item in `datetime` order (as
        read_parquet reads them): parts taken by their time span, latest end first (descending;
        else earliest start first), until `needed` rows of those taken lie strictly beyond every
        part left (its span's bound), so no row left out can rank before them. None when no
        part is left out, or a span is unknown, or a part may hold an item without datetime
        (ranked first descending, last ascending)."""
        import heapq

        spans = self.spans
        if self.undated or any(spans[p] is None for p in self.paths):
            return None
        sign, side = (-1, 1) if descending else (1, 0)  # latest end first, or earliest start first
        ranked = sorted(self.paths, key=lambda p: sign * spans[p][side].timestamp())
        pending: list[tuple[float, int, str]] = []  # parts taken, by their far side (heap)
        sure = 0  # rows of the parts taken that lie beyond the bound
        for at, path in enumerate(ranked[:-1]):
            heapq.heappush(pending, (sign * spans[path][1 - side].timestamp(), at, path))
            bound = sign * spans[ranked[at + 1]][side].timestamp()
            while pending and pending[0][0] < bound:
                sure += self.rows.get(heapq.heappop(pending)[2], 0)
            if sure >= needed:
                taken = set(ranked[: at + 1])
                return [s for p, s in zip(self.paths, self.sources, strict=True) if p in taken]
        return None

    def first_by_time(
        self, chosen: list[str] | None, rows: int, descending: bool
    ) -> tuple[list[str], Any] | None:
        """The parts of `chosen` (as read_parquet reads them; None: every part) whose items come
        first by `datetime` (latest end first descending, else earliest start first) until about
        `rows` of their rows lie beyond every part left (their spans taken as evenly filled),
        and that bound: every row of the parts left lies at or behind it, so the rows of the
        parts taken strictly beyond it rank before all of them, whatever a search's condition.
        None when nothing would be left out, a span is unknown, or a part may hold an item
        without datetime (ranked first descending)."""
        named = dict(zip(self.sources, self.paths, strict=True))
        paths = self.paths if chosen is None else [named[s] for s in chosen]
        spans = self.spans
        if len(paths) < 2 or any(spans[p] is None or p in self.undated for p in paths):
            return None
        side = 1 if descending else 0
        ranked = sorted(paths, key=lambda p: aware(spans[p][side]), reverse=descending)
        low, high = 1, len(ranked)  # the estimate grows with the parts taken: the fewest enough
        while low < high:
            at = (low + high) // 2
            if _beyond(self, ranked[:at], aware(spans[ranked[at]][side]), descending) >= rows:
                high = at
            else:
                low = at + 1
        if low == len(ranked):
            return None
        taken = set(ranked[:low])
        bound = aware(spans[ranked[low]][side])
        return [s for p, s in zip(self.paths, self.sources, strict=True) if p in taken], bound

    def rows_of(self, chosen: list[str] | None) -> int:
        """The rows of the parts `chosen` (as read_parquet reads them; None: every part), as their
        footers say: a search without a condition counted without opening a part (over HTTP a
        count(*) opened all 780 parts, and each search after REVALIDATE_S asked their versions)."""
        if chosen is None:
            return sum(self.rows.get(p, 0) for p in self.paths)
        named = dict(zip(self.sources, self.paths, strict=True))
        return sum(self.rows.get(named[s], 0) for s in chosen)

    @property
    def sources(self) -> list[str]:
        """The files as read_parquet reads them."""
        if self.filesystem is None:
            return self.paths
        return [self.filesystem.sources[p] for p in self.paths]


def _beyond(files: Files, taken: list[str], bound, descending: bool) -> float:
    """About how many rows of the parts `taken` lie strictly beyond `bound` (after it
    descending, before it ascending), each part's rows taken as spread evenly over its span."""
    total = 0.0
    for path in taken:
        low, high = map(aware, files.spans[path])
        width = (high - low).total_seconds()
        far = (high - bound if descending else bound - low).total_seconds()
        share = 1.0 if width <= 0 and far > 0 else 0.0 if width <= 0 else min(1.0, max(0.0, far / width))
        total += files.rows.get(path, 0) * share
    return total


def check_files(
    catalog_id: str,
    paths: list[str],
    stamp: tuple,
    max_footer: int,
    filesystem=None,
    cache: Path | None = None,
) -> Files:
    """Read each file's footer (a URL's through `filesystem`), or what the `cache` file kept of
    it for the same version (part_cache.py; `stamp`: the files' versions, in their order):
    readable Parquet, stac-geoparquet columns; the merged schema and the collections described in
    the files' metadata or (local files) a sidecar collections JSON."""
    schema: dict = {}
    described: dict[str, dict] = {}
    spans, rows, first, undated, boxes, ranges, filled, ranged, ids = (
        {},
        {},
        None,
        set(),
        {},
        {},
        {},
        set(),
        {},
    )
    uniform = True
    known = part_cache.load(cache)
    keys = [part_cache.key(version) for version in stamp]

    def facts(at: int) -> part_cache.Facts:
        found = known.get(keys[at]) if keys[at] is not None else None
        return found or _facts(
            catalog_id, paths[at], _read_footer(catalog_id, paths[at], filesystem, max_footer)
        )

    found = list(in_parallel(facts, list(range(len(paths)))))
    for path, fact in zip(paths, found, strict=True):
        file_schema = fact.schema
        _check_types(catalog_id, path, file_schema)
        spans[path], rows[path], boxes[path], ranges[path] = fact.span, fact.rows, fact.box, fact.ranges
        filled[path], ids[path] = fact.filled, fact.ids
        if not fact.dated:
            undated.add(path)
        if fact.ranged:
            ranged.add(path)
        first = first or file_schema
        uniform = uniform and file_schema.equals(first, check_metadata=False)
        missing = [c for c in REQUIRED if c not in file_schema.names]
        if missing:
            raise GeoparquetError(
                f"catalog '{catalog_id}': {_named(path)} is not stac-geoparquet: it has no "
                f"{' or '.join(repr(c) for c in missing)} column (columns: {', '.join(file_schema.names[:12])})"
            )
        for column in file_schema:
            schema.setdefault(column.name, column.type)
        described.update(_described(file_schema.metadata or {}))
    if any(k is not None and k not in known for k in keys):
        part_cache.save(cache, list(zip(keys, found, strict=True)))
    for folder in dict.fromkeys(str(Path(p).parent) for p in paths if filesystem is None):
        described = {**_sidecar(catalog_id, Path(folder) / "collections.json"), **described}
    return Files(
        stamp,
        paths,
        schema,
        described,
        spans,
        filesystem,
        rows,
        uniform,
        undated,
        boxes,
        ranges,
        filled,
        ranged,
        ids,
    )


def _facts(catalog_id: str, path: str, footer: pq.FileMetaData) -> part_cache.Facts:
    """What a search uses of a footer, its column types checked first (in the reading thread:
    the statistics of 780 footers took 2.5 s of Python after their reads)."""
    schema = footer.schema.to_arrow_schema()
    _check_types(catalog_id, path, schema)
    ranges, filled = column_ranges(footer)
    return part_cache.Facts(
        schema,
        footer.num_rows,
        time_span(footer),
        extent(footer),
        ranges,
        _dated(footer),
        frozenset(filled),
        _ranged(footer),
        id_range(footer),
    )


def in_parallel(fn, values: list, workers: int = READERS) -> Iterator:
    """fn(value) for each of `values`, in their order, `workers` at a time (a snapshot's parts
    over HTTP: 780 footers in 1,560 requests, each a round trip): the next value starts as soon
    as one ends (not a batch of `workers` waiting for its slowest), and at most `workers` results
    are held ahead of the caller, so memory is that of `workers` footers; the first error raised."""
    if len(values) <= 1:
        yield from map(fn, values)
        return
    with ThreadPoolExecutor(min(workers, len(values))) as pool:
        running: deque = deque()
        for value in values:
            if len(running) == workers:
                yield running.popleft().result()
            running.append(pool.submit(fn, value))
        while running:
            yield running.popleft().result()


def _read_footer(catalog_id: str, path: str, filesystem, max_footer: int) -> pq.FileMetaData:
    """A file's footer, its size checked first (`_check_footer_size`); an unreadable footer in one
    line naming the file. A failed HTTP read is raised as it is (it says what went wrong). Over
    HTTP only the footer is read (httpfs.RangeFileSystem.footer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def checked(size: int, length: int) -> None:
        _check_footer_size(catalog_id, path, size, length, max_footer)

    try:
        if filesystem is not None:
            source = filesystem.sources[path]
            size = filesystem.info(source)["size"]
            return pq.read_metadata(pa.BufferReader(filesystem.footer(source, lambda n: checked(size, n))))
        with open(path, "rb") as opened:
            size = opened.seek(0, 2)
            opened.seek(max(0, size - 8))
            tail = opened.read(8)
            checked(size, footer_length(tail))
            opened.seek(0)
            return pq.read_metadata(opened)
    except StacGdalMcpError:
        raise
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad footer
        raise GeoparquetError(
            f"catalog '{catalog_id}': {_named(path)} is not a readable Parquet file ({first_line(exc)}); "
            "truncated or corrupt? download it again"
        ) from None


_TYPES = {  # the stac-geoparquet columns whose type a search relies on: what they must be
    "id": ("a string", lambda t, pa: pa.types.is_string(t) or pa.types.is_large_string(t)),
    "collection": ("a string", lambda t, pa: pa.types.is_string(t) or pa.types.is_large_string(t)),
    "geometry": ("WKB (binary)", lambda t, pa: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
    "bbox": ("a struct of xmin, ymin, xmax, ymax", lambda t, pa: pa.types.is_struct(t)),
    "assets": ("a struct", lambda t, pa: pa.types.is_struct(t)),
    **{
        name: ("a timestamp", lambda t, pa: pa.types.is_timestamp(t) or pa.types.is_null(t))
        for name in ("datetime", "start_datetime", "end_datetime")
    },
}


def _check_types(catalog_id: str, path: str, schema: pa.Schema) -> None:
    """Refuse, in one line naming the file and the column, a stac-geoparquet column of another type."""
    import pyarrow as pa

    for name, (what, fits) in _TYPES.items():
        if name in schema.names and not fits(schema.field(name).type, pa):
            raise GeoparquetError(
                f"catalog '{catalog_id}': {_named(path)} is not stac-geoparquet: its column '{name}' is "
                f"{schema.field(name).type}, not {what}"
            )


def footer_length(tail: bytes) -> int:
    """The footer length that a Parquet file's last bytes `tail` give (4 bytes, little-endian,
    before PAR1); 0 when they do not end in PAR1."""
    return int.from_bytes(tail[-8:-4], "little") if len(tail) >= 8 and tail[-4:] == b"PAR1" else 0


def _check_footer_size(catalog_id: str, path: str, size: int, length: int, max_footer: int) -> None:
    """Refuse a file too short for Parquet, or a footer `length` (from the 8 bytes that end the
    file, its length and PAR1) larger than `max_footer` bytes, before the footer is read or parsed:
    a hostile file or server cannot make the footer's allocation."""
    if size < 12:
        raise GeoparquetError(
            f"catalog '{catalog_id}': {_named(path)} is not a readable Parquet file (too short)"
        )
    if length > max_footer:
        raise LimitExceeded(
            f"catalog '{catalog_id}': {_named(path)} has a Parquet footer of {length / 1024**2:.0f} MB, more "
            f"than {max_footer // 1024**2} MB (limits.query_memory_mb / 8); not read"
        )


def _described(metadata: dict) -> dict[str, dict]:
    """Collections in a file's `stac-geoparquet` metadata (spec 1.1 `collections`, or the older
    single `collection`)."""
    try:
        meta = json.loads(metadata.get(b"stac-geoparquet", b"{}"))
    except ValueError:
        return {}
    found = dict(meta.get("collections") or {})
    single = meta.get("collection")
    if isinstance(single, dict) and single.get("id"):
        found.setdefault(single["id"], single)
    return {k: v for k, v in found.items() if isinstance(v, dict)}


def _sidecar(catalog_id: str, path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise GeoparquetError(f"catalog '{catalog_id}': {path} is not JSON ({first_line(exc)})") from None
    listed = doc.get("collections", [doc]) if isinstance(doc, dict) else doc
    return {c["id"]: c for c in listed if isinstance(c, dict) and c.get("id")}


def time_span(footer: pq.FileMetaData) -> tuple | None:
    """(earliest start, latest end) of the items of a file as pgstac reads them (datetime, or
    start_datetime and end_datetime), from its row groups' statistics; None where one is missing."""
    names = footer.schema.names
    columns = {n: names.index(n) for n in ("datetime", "start_datetime", "end_datetime") if n in names}
    if not columns:
        return None
    lows, highs = [], []
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for name, index in columns.items():
            chunk = group.column(index)
            if chunk.path_in_schema != name:
                return None
            stats = chunk.statistics
            if stats is None or (not stats.has_min_max and stats.null_count != group.num_rows):
                return None
            if stats.has_min_max:
                (highs if name == "end_datetime" else lows).append(stats.min)
                (lows if name == "start_datetime" else highs).append(stats.max)
    return (min(lows), max(highs)) if lows and highs else None


def _ranged(footer: pq.FileMetaData) -> bool:
    """Whether a row of a file may have both a start_datetime and an end_datetime (pgstac then
    reads its time as that range), by its row groups' statistics: not when either column is
    absent or every value of it null."""
    names = footer.schema.names
    for name in ("start_datetime", "end_datetime"):
        if name not in names:
            return False
        index = names.index(name)
        groups = [footer.row_group(g) for g in range(footer.num_row_groups)]
        if all(
            (c := g.column(index)).path_in_schema == name
            and c.statistics is not None
            and c.statistics.has_null_count
            and c.statistics.null_count == g.num_rows
            for g in groups
        ):
            return False
    return True


def _dated(footer: pq.FileMetaData) -> bool:
    """Whether every row of a file has a `datetime`, by its row groups' statistics (null counts)."""
    names = footer.schema.names
    if "datetime" not in names:
        return False
    index = names.index("datetime")
    for g in range(footer.num_row_groups):
        chunk = footer.row_group(g).column(index)
        stats = chunk.statistics
        if chunk.path_in_schema != "datetime" or stats is None or stats.null_count != 0:
            return False
    return True


def relative(path: str, root: str) -> str:
    """`path` below `root` (a folder, or a URL's folder), else as it is."""
    return path[len(root) :] if root and path.startswith(root) else path


def _named(path: str) -> str:
    """A file's path, or its URL masked (no secret query parameters, no user:password)."""
    return masked_url(path) if "://" in path else path


def files_named(paths: list[str]) -> str:
    first = _named(paths[0])
    return first if len(paths) == 1 else f"{first} and {len(paths) - 1} more files"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
