"""Item search of a stac-geoparquet catalog (`catalogs/geoparquet.py`) as one SQL query.

The checked `Search` becomes a `Plan`: a condition (collections, ids, the datetime interval as
pgstac reads it, the bbox overlap of bbox/intersects, the CQL2 of query/filter/max_cloud_cover
through `cql2_sql`), its parameters and pgstac's order. When a footprint test or a relaxed
`s_intersects` makes the SQL a superset, the rows it finds are tested exactly here (shapely on
the WKB footprints, `cql2.Expr.matches` on the items) before they count.

A page is `LIMIT n OFFSET k` over the SQL candidates in a total order (ties broken by collection
and id), and the cursor holds `k` of the next page: no gaps, no repeats, whatever the page size.
`matched` is counted on the first page and carried in the cursor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..catalogs import cursors
from ..errors import LimitExceeded
from . import params as p
from .cql2_sql import to_sql
from .query import Search, and_all

if TYPE_CHECKING:
    import pyarrow as pa

    from ..catalogs import ResultBudget
    from ..catalogs.geoparquet import GeoparquetCatalog

EXACT_COUNT_MAX = 100_000  # rows whose footprint is tested one by one to count `matched`
SCAN_CHUNK = 500  # rows read at a time when exact tests drop some of them


@dataclass
class Plan:
    """One search as SQL: the condition, its parameters, the order, and what is tested after."""

    where: str
    params: list
    order: str
    area: Any = None  # a shapely geometry the footprints must intersect (bbox / intersects)
    sure: str | None = None  # SQL true for rows certain to intersect `area` (bbox inside it)
    sure_params: list | None = None
    residual: Any = None  # a cql2.Expr the items are tested with (a filter with s_intersects)

    @property
    def exact(self) -> bool:
        return self.area is None and self.residual is None


def parquet_page(
    cat: GeoparquetCatalog, search: Search, state: dict | None, limit: int, budget: ResultBudget | None
) -> tuple[list[dict], int | None, dict | None]:
    """One page of `search` from where the cursor `state` stands (None: the first page):
    (items, matched, the next cursor's state or None)."""
    for cid in search.collections or []:
        cat.collection(cid)  # an unknown collection is an error, not an empty answer
    plan = make_plan(cat, search)
    offset = cursors.offset(state) if state is not None else 0
    items, following = page(cat, plan, offset, limit, budget)
    matched = cursors.checked(state, "matched", int) if state is not None else count(cat, plan)
    if following is None:
        return items, matched, None
    return items, matched, {"search": search.__dict__, "offset": following, "matched": matched}


def make_plan(cat: GeoparquetCatalog, search: Search) -> Plan:
    """The search as SQL (see `Plan`)."""
    where: list[str] = []
    params: list = []
    for name, values in (("collection", search.collections), ("id", search.ids)):
        if values:
            where.append(f"{cat.column(name)} IN ({', '.join('?' for _ in values)})")
            params += values
    if search.datetime:  # the item's [datetime, end_datetime] meets the interval (pgstac)
        start, end = p.datetime_interval(search.datetime)
        if end is not None:
            where.append(f"{cat.column('datetime')} <= ?")
            params.append(end)
        if start is not None:
            where.append(f"{cat.column('end_datetime')} >= ?")
            params.append(start)
    plan = Plan(where="", params=[], order=order(cat, search.sortby))
    _spatial(cat, plan, search, where, params)
    condition = and_all(search.cql2_conditions())
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
    """bbox / intersects: the bbox overlap in SQL, the exact test kept in `plan.area`."""
    from shapely.geometry import box, shape

    if search.bbox is not None:
        b = search.bbox
        plan.area = box(b[0], b[1], b[3], b[4]) if len(b) == 6 else box(*b)
    elif search.intersects is not None:
        plan.area = shape(search.intersects)
    if plan.area is None or "bbox" not in cat.files.schema:
        return
    west, south, east, north = plan.area.bounds
    where.append("bbox.xmin <= ? AND bbox.xmax >= ? AND bbox.ymin <= ? AND bbox.ymax >= ?")
    params += [east, west, north, south]
    if search.bbox is not None:  # a footprint whose bbox lies inside the box surely meets it
        plan.sure = "bbox.xmin >= ? AND bbox.xmax <= ? AND bbox.ymin >= ? AND bbox.ymax <= ?"
        plan.sure_params = [west, east, south, north]


def order(cat: GeoparquetCatalog, sortby: list[dict] | None) -> str:
    """ORDER BY as pgstac: sortby (default datetime desc), then collection and id in the
    direction of the first key; NULLS LAST ascending and FIRST descending (PostgreSQL's)."""
    keys = list(sortby or [{"field": "datetime", "direction": "desc"}])
    named = {k["field"] for k in keys}
    keys += [{"field": f, "direction": keys[0]["direction"]} for f in ("collection", "id") if f not in named]
    return ", ".join(
        f"{cat.column(k['field'])} {'DESC NULLS FIRST' if k['direction'] == 'desc' else 'ASC NULLS LAST'}"
        for k in keys
        if k["field"] != "collection" or "collection" in cat.files.schema
    )


def page(
    cat: GeoparquetCatalog, plan: Plan, offset: int, limit: int, budget: ResultBudget | None
) -> tuple[list[dict], int | None]:
    """Up to `limit` matching items from candidate row `offset`, and the row where the next
    page starts (None: no match is left). Rows the exact tests drop are skipped here."""
    chunk = limit + 1 if plan.exact else max(2 * limit + 1, SCAN_CHUNK)
    deadline = time.monotonic() + cat.settings.limits.query_timeout_s
    taken: list[dict] = []
    position = offset
    while True:
        table = cat.run(
            f"SELECT * FROM {cat.source()} WHERE {plan.where} ORDER BY {plan.order} "
            f"LIMIT {chunk} OFFSET {position}",
            plan.params,
        )
        for index, item in _matching(cat, plan, table, limit + 1 - len(taken)):
            if len(taken) == limit or (budget is not None and not budget.take(item)):
                return taken, position + index
            taken.append(item)
        if table.num_rows < chunk:
            return taken, None
        position += chunk
        if time.monotonic() > deadline:
            raise LimitExceeded(
                f"catalog '{cat.id}': scanning for exact footprint matches took longer than "
                f"limits.query_timeout_s={cat.settings.limits.query_timeout_s:g} s; narrow the search"
            )


def _matching(cat: GeoparquetCatalog, plan: Plan, table: pa.Table, wanted: int) -> list[tuple[int, dict]]:
    """(row index, item) of the rows of `table` that pass the exact tests: at most `wanted`,
    and only those converted to items unless a CQL2 residual must see every row."""
    import numpy as np

    keep = np.arange(table.num_rows)
    if plan.area is not None and table.num_rows:
        keep = keep[_intersects(table.column("geometry"), plan.area)]
    if plan.residual is None:
        keep = keep[:wanted]
    pairs = list(zip(keep.tolist(), cat.items(table.take(keep)) if len(keep) else [], strict=True))
    if plan.residual is not None:
        pairs = [(i, item) for i, item in pairs if plan.residual.matches(item)][:wanted]
    return pairs


def count(cat: GeoparquetCatalog, plan: Plan) -> int | None:
    """How many items match: a count in SQL, the footprints of rows not surely inside the area
    tested one by one (at most EXACT_COUNT_MAX; beyond that, or with a CQL2 residual, None)."""
    source = cat.source()
    if plan.exact:
        return cat.run(f"SELECT count(*) AS n FROM {source} WHERE {plan.where}", plan.params)["n"][0].as_py()
    if plan.residual is not None:
        return None
    sure, sure_params = (plan.sure, plan.sure_params or []) if plan.sure else ("FALSE", [])
    counts = cat.run(
        f"SELECT count(*) FILTER (WHERE {sure}) AS sure, count(*) AS candidates FROM {source} "
        f"WHERE {plan.where}",
        sure_params + plan.params,
    ).to_pylist()[0]
    doubtful = counts["candidates"] - counts["sure"]
    if doubtful > EXACT_COUNT_MAX:
        return None
    if not doubtful:
        return counts["sure"]
    geometry = cat.run(
        f"SELECT geometry FROM {source} WHERE {plan.where} AND NOT ({sure})", plan.params + sure_params
    ).column("geometry")
    return counts["sure"] + int(_intersects(geometry, plan.area).sum())


def _intersects(geometry: pa.ChunkedArray, area) -> Any:
    """A boolean array: which WKB footprints intersect `area` (vectorised shapely)."""
    import numpy as np
    import shapely

    shapes = shapely.from_wkb(np.asarray(geometry.to_pylist(), dtype=object))
    return shapely.intersects(shapes, area)
