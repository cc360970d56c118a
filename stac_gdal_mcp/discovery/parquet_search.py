"""Item search of a stac-geoparquet catalog (`catalogs/geoparquet.py`) as one SQL query.

The checked `Search` becomes a `Plan`: a condition (collections, ids, the datetime interval as
pgstac reads it, the bbox overlap of bbox/intersects, the CQL2 of query/filter/max_cloud_cover
through `cql2_sql`), its parameters and pgstac's order. When a footprint test or a relaxed
`s_intersects` makes the SQL a superset, the rows it finds are tested exactly here (shapely on
the WKB footprints, `cql2.Expr.matches` on the items) before they count.

A page is `LIMIT n OFFSET k` over the SQL candidates in a total order (ties broken by collection
and id), and the cursor holds `k` of the next page: no gaps, no repeats, whatever the page size
(parquet_source.py pages and counts; parquet_count.py counts).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..catalogs.geoparquet import BARE, quote
from ..catalogs.part_stats import bounds
from ..errors import GeoparquetError, LimitExceeded
from . import footprints, part_counts
from . import params as p
from .cql2_sql import to_sql
from .parquet_threshold import applies as threshold_applies
from .parquet_threshold import within_threshold
from .query import Search, and_all

if TYPE_CHECKING:
    import pyarrow as pa

    from ..catalogs import ResultBudget
    from ..catalogs.geoparquet import GeoparquetCatalog
    from .fields import Fields

FIRST_PARTS_ROWS = 64  # rows of the parts read first a candidate wanted (_first_parts): a bbox
# of a thirtieth of the world's footprints, or eo:cloud_cover < 5, keeps 1 row in 20-30
MIN_SHARE = 0.05  # the least share of its bbox's candidates a polygon is taken to keep (_chunk)
SCAN_CHUNK = 500  # candidates found at a time when a CQL2 residual drops some of them
# whole rows read first (a page of up to 100: one query; each query decodes every column of the
# row groups its rows are in, 0.3-0.45 s a row group of 10,000 rows at 750 columns, whatever the
# number of rows); then as many as FETCH_BYTES holds at the size they had
FETCH_FIRST = 100
FETCH_BYTES = 16 * 1024**2  # (the count of a CQL2 residual starts with one row: it reads them all)
FOOTPRINT = "__footprint"  # the geometry as `narrow_rows` reads it for a polygon
# the item's own members (the other columns are properties)
TOP_LEVEL = {"type", "stac_version", "stac_extensions", "id", "collection", "geometry", "bbox"}
TOP_LEVEL |= {"links", "assets"}


@dataclass
class Plan:
    """One search as SQL: the condition, its parameters, the order, and what is tested after."""

    where: str
    params: list
    order: str
    first_key: str  # the SQL of the first sort key
    area: Any = None  # a shapely geometry the footprints must intersect (bbox / intersects)
    sure: str | None = None  # SQL true for rows certain to intersect `area` (bbox inside it)
    sure_params: list | None = None
    edge: str | None = None  # SQL true for rows whose bbox holds a whole side in the search bbox
    edge_params: list | None = None
    residual: Any = None  # a cql2.Expr the items are tested with (a filter with s_intersects)
    bounds: Any = None  # (west, south, east, north) of the bbox / intersects, None without one
    files: list[str] | None = None  # the parts that can hold matches (None: every file)
    columns: list[str] | None = None  # the columns a page's items are read with (None: all)
    by_id: bool = False  # the search names ids: few rows, anywhere in time (_first_parts)
    narrowed: bool = False  # a bbox or a time interval: row groups' statistics leave few candidates
    within: Any = None  # what a part's every row must meet to count whole (part_counts.Within)

    @property
    def settling(self) -> tuple[list[str], list]:
        """The columns (and their parameters) that settle a row's footprint: `sure`, `edge`."""
        columns = [f"({self.sure}) AS sure"] + ([f"({self.edge}) AS edge"] if self.edge else [])
        return columns, [*(self.sure_params or []), *(self.edge_params or [])]

    @property
    def exact(self) -> bool:
        return self.area is None and self.residual is None


def make_plan(cat: GeoparquetCatalog, search: Search) -> Plan:
    """The search as SQL (see `Plan`)."""
    where: list[str] = []
    params: list = []
    for name, values in (("collection", search.collections), ("id", search.ids)):
        if values:
            where.append(f"{cat.column(name)} IN ({', '.join('?' for _ in values)})")
            params += values
    start = end = None
    if search.datetime:  # the item's [datetime, end_datetime] meets the interval (pgstac)
        start, end = p.datetime_interval(search.datetime)
        if end is not None:
            where.append(f"{cat.column('datetime')} <= ?")
            params.append(end)
        if start is not None:
            where.append(f"{cat.column('end_datetime')} >= ?")
            params.append(start)
    plan = Plan("", [], *order(cat, search.sortby))
    _spatial(cat, plan, search, where, params)
    area = tuple(plan.bounds) if plan.bounds is not None else None
    condition = and_all(search.cql2_conditions())
    plan.files = cat.parts(search.collections, start, end, area, bounds(condition), search.ids)
    plan.by_id = bool(search.ids)
    plan.narrowed = plan.bounds is not None or bool(search.datetime)
    plan.within = part_counts.within(search, start, end, plan.sure is not None, area, condition)
    if condition is not None:
        translated = to_sql(condition, cat.column)
        where.append(translated.sql)
        params += translated.params
        if not translated.exact:
            import cql2

            plan.residual = cql2.Expr(condition)
    plan.where, plan.params = " AND ".join(where) or "TRUE", params
    return plan


def _spatial(cat: GeoparquetCatalog, plan: Plan, search: Search, where: list, params: list) -> None:
    """bbox / intersects: the bbox overlap in SQL (it prunes row groups), the exact test in SQL
    where DuckDB's spatial extension is installed (`cat.spatial`), else kept in `plan.area`."""
    from shapely.geometry import box, shape

    if search.bbox is not None:
        b = search.bbox
        plan.area = box(b[0], b[1], b[3], b[4]) if len(b) == 6 else box(*b)
    elif search.intersects is not None:
        plan.area = shape(search.intersects)
    if plan.area is None:
        return
    plan.bounds = plan.area.bounds
    if "bbox" not in cat.files.schema:
        return
    west, south, east, north = plan.area.bounds
    where.append("bbox.xmin <= ? AND bbox.xmax >= ? AND bbox.ymin <= ? AND bbox.ymax >= ?")
    params += [east, west, north, south]
    if cat.spatial:  # DuckDB's spatial extension, installed here: the exact test in SQL
        import shapely

        where.append("ST_Intersects(ST_GeomFromWKB(geometry), ST_GeomFromWKB(?))")
        params.append(shapely.to_wkb(plan.area))
        plan.area = None
        return
    if search.bbox is not None:  # a footprint whose bbox lies inside the box surely meets it
        plan.sure = "bbox.xmin >= ? AND bbox.xmax <= ? AND bbox.ymin >= ? AND bbox.ymax <= ?"
        plan.sure_params = [west, east, south, north]
        plan.edge = (  # a footprint whose bounds are its bbox then meets the box (footprints.py)
            "((bbox.ymax BETWEEN ? AND ? OR bbox.ymin BETWEEN ? AND ?) AND bbox.xmin >= ? AND bbox.xmax <= ?)"
            " OR ((bbox.xmin BETWEEN ? AND ? OR bbox.xmax BETWEEN ? AND ?) AND bbox.ymin >= ? AND bbox.ymax <= ?)"
        )
        plan.edge_params = [south, north, south, north, west, east, west, east, west, east, south, north]


def order(cat: GeoparquetCatalog, sortby: list[dict] | None) -> tuple[str, str]:
    """ORDER BY as pgstac: sortby (default datetime desc), then collection and id in the
    direction of the first key; NULLS LAST ascending and FIRST descending (PostgreSQL's).
    Also the SQL of the first key."""
    keys = list(sortby or [{"field": "datetime", "direction": "desc"}])
    named = {k["field"] for k in keys}
    keys += [{"field": f, "direction": keys[0]["direction"]} for f in ("collection", "id") if f not in named]
    keys = [k for k in keys if k["field"] != "collection" or "collection" in cat.files.schema]
    columns = [cat.column(k["field"]) for k in keys]
    directions = ["DESC NULLS FIRST" if k["direction"] == "desc" else "ASC NULLS LAST" for k in keys]
    return ", ".join(f"{c} {d}" for c, d in zip(columns, directions, strict=True)), columns[0]


def projection(schema: dict, fields: Fields | None) -> list[str] | None:
    """The columns the items of an answer with `fields` are read with (None: all): those its
    paths include (every column without includes), less those it excludes whole; always id,
    collection, and unless those are all it keeps, bbox and datetime (stac-geoparquet's conversion
    back to items needs a property column and the bbox; ids alone are turned into items without
    it, `rows_as_items`: a page of ids sorted on a property read 4x DuckDB's columns with them).
    A property path `properties.<name>...` is column <name>."""
    if fields is None:
        return None
    names = list(schema)
    properties = [n for n in names if n not in TOP_LEVEL]

    def named(path: str) -> list[str]:
        head, _, rest = path.partition(".")
        if head == "properties":
            return (
                properties if not rest else [c for c in properties if rest == c or rest.startswith(c + ".")]
            )
        return [head] if head in schema else []

    kept = {c for path in fields.include for c in named(path)} if fields.include else set(names)
    for path in fields.exclude:
        if path == "properties" or path.count(".") <= (1 if path.startswith("properties.") else 0):
            kept -= set(named(path))
    when = next((c for c in ("datetime", "start_datetime") if c in schema), None)
    needed = ("id", "collection") if kept <= BARE else ("id", "collection", "bbox", when)
    kept |= {c for c in needed if c in schema}
    return None if len(kept) == len(names) else [n for n in names if n in kept]


def page(
    cat: GeoparquetCatalog, plan: Plan, offset: int, limit: int, budget: ResultBudget | None
) -> tuple[list[dict], int | None]:
    """Up to `limit` matching items from candidate row `offset`, and the row where the next
    page starts (None: no match is left). The candidates are found on narrow columns (`keys`)
    and only the rows kept are read whole (`whole_rows`); rows the exact tests drop are skipped."""
    deadline = time.monotonic() + cat.settings.limits.query_timeout_s
    taken: list[dict] = []
    position = offset
    # one query for a page of few columns from one file; over parts the rows kept are read from
    # the parts that hold them only (one query over every part rescanned them all for the rows
    # kept: 2x the keys and rows by number on 260 parts of 1,000,000 items)
    read = plan.files if plan.files is not None else cat.files.paths
    narrow = plan.columns is not None and plan.residual is None and len(read) == 1
    chunk = _chunk(cat, plan, limit, narrow)
    while True:
        found = (narrow_rows if narrow else keys)(cat, plan, position, chunk)
        need = limit - len(taken)
        matching = (
            _narrow_matching(cat, plan, found, need)
            if narrow
            else _matching(cat, plan, found, deadline, need)
        )
        for index, item in matching:
            if item is None or len(taken) == limit or (budget is not None and not budget.take(item)):
                return taken, position + index
            taken.append(item)
        if found.num_rows < chunk:
            return taken, None
        position += chunk
        _check_deadline(cat, deadline)


def _chunk(cat: GeoparquetCatalog, plan: Plan, limit: int, narrow: bool) -> int:
    """Candidates read at a time for a page of `limit`: one past the page when SQL decides every
    row; with a CQL2 residual SCAN_CHUNK; with a footprint test twice the page, and in one query
    of a few columns (`narrow_rows`, the footprints read with them) about twice what a polygon
    keeps as its share of its bounding box (a triangle half: 201 candidates a time were two
    queries of 45 ms on a million items, 404 one of 70 ms), at most `cat.late_rows` (the top-N
    whose footprints DuckDB reads after it). Elsewhere each candidate's footprint is read by
    row number: no more than twice the page."""
    if plan.exact:
        return limit + 1
    if plan.residual is not None:
        return max(limit, SCAN_CHUNK)
    if plan.sure is not None or plan.area is None or not narrow:
        return 2 * limit + 1
    envelope = plan.area.envelope.area
    share = max(plan.area.area / envelope if envelope > 0 else 1.0, MIN_SHARE)
    return min(max(2 * limit + 1, int(2 * (limit + 1) / share)), cat.late_rows)


def narrow_rows(cat: GeoparquetCatalog, plan: Plan, offset: int, n: int) -> pa.Table:
    """Candidates `offset`..`offset + n` in the search's order read whole in one query when the
    page needs few columns (`plan.columns`), as DuckDB's own `SELECT id ... LIMIT` does (two
    queries, the keys then the rows by number, cost 2-5x that on one file of 1,000,000 items);
    for a footprint test also `sure` and the file and row number, the footprints of the rows
    their bbox does not settle read after (`_footprints_meet`: carried through the top-N, the
    footprints of every row kept cost 3-5x DuckDB's query when the order scatters them); for a
    polygon, which every footprint is tested against, the footprints (FOOTPRINT). The columns
    not sorted on are read after the top-N (`run`'s late) for the footprints and in time order
    (the rows kept lie together); in another order they are carried through it (read after,
    the rows kept scattered over every row group: a sortby page 4.3x DuckDB's, else 3.1x)."""
    chosen, params = [quote(c) for c in plan.columns], plan.params
    numbered = plan.area is not None and plan.sure is not None
    if numbered:
        chosen += ["filename", "file_row_number", *plan.settling[0]]
        params = [*plan.settling[1], *params]
    elif plan.area is not None:  # a polygon: every footprint is tested
        chosen.append(f"geometry AS {FOOTPRINT}")
    late = (plan.area is not None and not numbered) or plan.first_key == '"datetime"'
    return _first_parts(
        cat,
        plan,
        offset,
        n,
        lambda files, where, extra, late=late: cat.run(
            f"SELECT {', '.join(chosen)} FROM {cat.source(files, numbered=numbered)} "
            f"WHERE {where} ORDER BY {plan.order} LIMIT {n} OFFSET {offset}",
            [*params, *extra],
            late=late,
        ),
    )


def _narrow_matching(
    cat: GeoparquetCatalog, plan: Plan, found: pa.Table, need: int
) -> Iterator[tuple[int, dict | None]]:
    """`_matching` of rows read by `narrow_rows`: the footprints tested, the first `need` matches
    converted to items, the others known to match without it (index, None)."""
    import pyarrow as pa

    keep = _in_area(cat, plan, found)
    table = found.select(plan.columns).take(pa.array(keep[:need], pa.int64()))  # none: typed all the same
    yield from zip(keep[:need], cat.items(table), strict=True)
    yield from ((index, None) for index in keep[need:])


def _leading(cat: GeoparquetCatalog, plan: Plan, offset: int | None, n: int) -> list[str] | None:
    """The parts to read: every item by time needs only those holding the first offset + n rows."""
    if offset is not None and plan.files is None and plan.where == "TRUE" and plan.first_key == '"datetime"':
        return cat.files.leading(offset + n, plan.order.startswith('"datetime" DESC'))
    return plan.files


def keys(cat: GeoparquetCatalog, plan: Plan, offset: int | None, n: int) -> pa.Table:
    """The file and row number (and, for an exact footprint test, whether the bbox makes it
    sure) of candidates `offset`..`offset + n` in the search's order (offset None: every
    candidate, unordered, up to n): DuckDB reads only the filter and sort columns, whatever the
    width of the files (a footprint carried through the top-N made it 4x slower: it is read
    afterwards for the rows it decides, `_footprints_meet`)."""
    shape, params = "", plan.params
    if plan.area is not None and plan.sure:
        shape, params = ", " + ", ".join(plan.settling[0]), [*plan.settling[1], *plan.params]
    ordered = f"ORDER BY {plan.order} LIMIT {n} OFFSET {offset}" if offset is not None else f"LIMIT {n}"
    return _first_parts(
        cat,
        plan,
        offset,
        n,
        lambda files, where, extra, late=False: cat.run(
            f"SELECT filename, file_row_number{shape} FROM {cat.source(files, numbered=True)} "
            f"WHERE {where} {ordered}",
            [*params, *extra],
            late=late,
        ),
    )


def _first_parts(cat: GeoparquetCatalog, plan: Plan, offset: int | None, n: int, query) -> pa.Table:
    """`query(parts, where, extra params)` for candidates `offset`..`offset + n` in `datetime`
    order over many parts: first on the parts whose time spans rank first (Files.first_by_time,
    about FIRST_PARTS_ROWS rows a candidate wanted) with the rows beyond the bound every other
    part lies behind; when those hold the n candidates they are the whole search's (a bbox's
    first page over 260 parts of 10,000,000 items read every part's bbox columns over HTTP),
    else the search runs on every part that can hold a match (`_leading`)."""
    if threshold_applies(cat, plan, offset):
        found = within_threshold(cat, plan, offset, n, query)  # sorted on a property
        if found is not None:
            return found
    first = None
    if offset is not None and plan.where != "TRUE" and plan.first_key == '"datetime"' and not plan.by_id:
        descending = plan.order.startswith('"datetime" DESC')
        first = cat.files.first_by_time(plan.files, (offset + n) * FIRST_PARTS_ROWS, descending)
    if first is not None:
        parts, bound = first
        found = query(parts, f'{plan.where} AND "datetime" {">" if descending else "<"} ?', [bound])
        if found.num_rows == n:
            return found
    return query(_leading(cat, plan, offset, n), plan.where, [])


def whole_rows(
    cat: GeoparquetCatalog,
    found: pa.Table,
    wanted: list[int],
    first: int = FETCH_FIRST,
    columns: list[str] | None = None,
) -> Iterator[tuple[list[int], pa.Table]]:
    """(indices in `found`, those rows whole - or their `columns` - in that order) for the rows
    `wanted` of `found`, read by file and row number a few at a time: `first` rows, then as many
    as fit in FETCH_BYTES at the size the rows read so far had (rows that share a huge value are
    read one by one, so memory does not grow with the page)."""
    files = found.column("filename").to_pylist()
    numbers = found.column("file_row_number").to_pylist()
    at, size = 0, max(1, first)
    chosen = "*" if columns is None else ", ".join(map(quote, [*columns, "filename", "file_row_number"]))
    while at < len(wanted):
        part = wanted[at : at + size]
        table = cat.run(
            f"SELECT {chosen} FROM {cat.source(sorted({files[i] for i in part}), numbered=True)} "
            f"WHERE file_row_number IN ({', '.join(str(numbers[i]) for i in part)})"
        )
        where = {
            key: n
            for n, key in enumerate(
                zip(table["filename"].to_pylist(), table["file_row_number"].to_pylist(), strict=True)
            )
        }
        missing = [i for i in part if (files[i], numbers[i]) not in where]
        if missing:  # the file changed between the two queries
            raise GeoparquetError(f"catalog '{cat.id}': a file changed while it was read; search again")
        order = [where[(files[i], numbers[i])] for i in part]
        yield part, table.take(order).drop_columns(["filename", "file_row_number"])
        at += len(part)
        per_row = max(1, table.nbytes // max(1, table.num_rows))
        size = max(1, min(len(wanted), FETCH_BYTES // per_row))


def _matching(
    cat: GeoparquetCatalog, plan: Plan, found: pa.Table, deadline: float, need: int, first: int = FETCH_FIRST
) -> Iterator[tuple[int, dict | None]]:
    """(row index, item) of the candidates `found` that pass the exact tests, read whole only as
    they are asked for (the caller stops when its page is full). Without a CQL2 residual the
    matches past the `need` first are known without reading them: they come as (index, None)."""
    keep = _in_area(cat, plan, found)
    wanted = keep if plan.residual is not None else keep[:need]
    for indices, table in whole_rows(cat, found, wanted, min(need, first), plan.columns):
        for index, item in zip(indices, cat.items(table), strict=True):
            if plan.residual is None or plan.residual.matches(item):
                yield index, item
        _check_deadline(cat, deadline)
    if plan.residual is None:
        yield from ((index, None) for index in keep[need:])


def _footprints_meet(cat: GeoparquetCatalog, plan: Plan, found: pa.Table) -> Any:
    """A boolean array: which candidates of `found` have a footprint meeting `plan.area`; those
    whose bbox lies inside a search bbox are sure, or settled by their marks (footprints.py), the
    others' footprints read and tested."""
    import numpy as np

    sure = found.column("sure").to_numpy(zero_copy_only=False) if "sure" in found.column_names else None
    meets = np.ones(found.num_rows, bool) if sure is None else sure.astype(bool).copy()
    if sure is not None and "edge" in found.column_names:
        meets |= footprints.known(cat, found)
    doubtful = np.flatnonzero(~meets).tolist() if sure is not None else list(range(found.num_rows))
    for indices, table in whole_rows(cat, found, doubtful, FETCH_FIRST, ["geometry"]):
        meets[indices] = _intersects(cat, table.column("geometry"), plan.area)
    return meets


def _check_deadline(cat: GeoparquetCatalog, deadline: float) -> None:
    if time.monotonic() > deadline:
        raise LimitExceeded(
            f"catalog '{cat.id}': reading the matching rows took longer than "
            f"limits.query_timeout_s={cat.settings.limits.query_timeout_s:g} s; narrow the search"
        )


def _intersects(cat: GeoparquetCatalog, geometry: pa.ChunkedArray, area) -> Any:
    """A boolean array: which WKB footprints intersect `area` (vectorised shapely); a value that
    is not WKB refused in one line."""
    import numpy as np
    import shapely

    try:
        shapes = shapely.from_wkb(np.asarray(geometry.to_pylist(), dtype=object))
    except shapely.errors.ShapelyError as exc:
        raise cat.not_wkb(exc) from None
    return shapely.intersects(shapes, area)


def _in_area(cat, plan, found) -> list[int]:
    """The indexes of the rows of `found` whose footprint meets the search's area (every row
    without one): carried through the query, or read for the rows their bbox does not settle."""
    import numpy as np

    keep = np.arange(found.num_rows)
    if plan.area is not None and found.num_rows:
        if FOOTPRINT in found.column_names:
            keep = keep[_intersects(cat, found.column(FOOTPRINT), plan.area)]
        else:
            keep = keep[_footprints_meet(cat, plan, found)]
    return keep.tolist()
