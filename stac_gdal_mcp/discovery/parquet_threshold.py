"""A page of a stac-geoparquet search sorted on a property (parquet_search.py), found through
the value its last row has in the first sort key: the threshold.

The search's candidates `offset`..`offset + n` in its order (the sort keys, ties broken by
collection and id) all lie at or before the (offset + n)-th candidate's value of the first key,
T, found on that column alone (`ORDER BY key LIMIT 1 OFFSET offset + n - 1`: the filter and key
columns read, none of the others). Every candidate ranked before them does too, so the page's
own query run on only the candidates within T (`key <= T` ascending, NULLS LAST; `key IS NULL
OR key >= T` descending, NULLS FIRST, as PostgreSQL puts them) answers the same rows in the same
order, whatever the ties. That query reads the other order columns (collection, id) of the few
rows within T only - not of every row, as a top-N over every candidate does (over HTTP, 260
parts of 10,000,000 items: a first page sorted on cloud cover 234 MiB, 102 within T) - and
opens only the parts whose footer statistics say they can hold a value within T (part_stats.py:
each part's [min, max] of its number columns, NaN never among the values, as the parts left out
by a search's filter assume too).

Falls back to the page's query on every candidate (None) when the threshold cannot narrow it:
fewer than offset + n candidates, a NULL threshold ascending (every row lies within it), or more
than EXCESS_MAX candidates tied with T beyond the page (a key of few values), told by counting
them (up to that bound) before the page's query is run.

Over HTTP only, where the bytes a query reads are its cost: on disk DuckDB's top-N over every
candidate is the faster (one file of 1,000,000 items: 55 ms, 152 ms within the threshold; 260
parts of 10,000,000: 185 ms, 348 ms). And not for a search naming ids, a bbox, a polygon or a
time interval: their candidates are few (row groups left out by their statistics), the page's
query over them cheap, and the two queries before it only add (a bbox, a quarter and
`eo:cloud_cover < 5` sorted on cloud cover, one file of 1,000,000 items over HTTP: 66 ms, 197 ms
within the threshold). Nor over one file: no part to leave out, and the pages came out
0.6-1.7x of the page's one query over every candidate in three runs at load 8-16
(`benchmarks/bench_geoparquet.py --matrix 1000000 --layouts file --no-disk`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from ..catalogs.geoparquet import GeoparquetCatalog

Plan = Any  # parquet_search.Plan (which imports this module)

EXCESS_MAX = 10_000  # candidates tied with the threshold past the page, at most (else: fall back)


def within_threshold(
    cat: GeoparquetCatalog, plan: Plan, offset: int, n: int, query: Callable
) -> pa.Table | None:
    """`query(parts, where, extra params, late)` (ORDER BY the search's order, LIMIT n OFFSET
    offset) run on the candidates within the threshold, over the parts that can hold them, no
    column read late (a second scan of the parts for a few rows: 2-4x the bytes); None when the
    threshold does not narrow the candidates (the module docstring). The candidates are counted
    first, up to the bound, on the first key's column the threshold's query has just read (the
    count carried beside the page's top-N, `count(*) OVER ()` of a LIMITed subquery, cost 3x)."""
    if plan.by_id or plan.narrowed or len(cat.files.paths) == 1:
        return None
    key = plan.first_key
    descending = plan.order.startswith(f"{key} DESC")
    direction = "DESC NULLS FIRST" if descending else "ASC NULLS LAST"
    found = cat.run(
        f"SELECT {key} AS k FROM {cat.source(plan.files)} WHERE {plan.where} "
        f"ORDER BY {key} {direction} LIMIT 1 OFFSET {offset + n - 1}",
        plan.params,
    )
    if not found.num_rows or (found["k"][0].as_py() is None and not descending):
        return None
    threshold = found["k"][0].as_py()
    parts = _parts(cat, plan, threshold, descending)
    where, extra = _within(cat, plan, parts, threshold, descending)
    most = offset + n + EXCESS_MAX
    counted = cat.run(
        f"SELECT count(*) AS n FROM (SELECT 1 FROM {cat.source(parts)} WHERE {where} LIMIT {most + 1})",
        [*plan.params, *extra],
    )
    if counted["n"][0].as_py() > most:
        return None
    found = query(parts, where, extra, None)
    return found if found.num_rows == n else None


def _within(cat: GeoparquetCatalog, plan: Plan, parts, threshold, descending: bool) -> tuple[str, list]:
    """The search's condition and the first key within `threshold`, and its parameters past the
    search's: NULL ranked first descending (left out where no part read holds one)."""
    key = plan.first_key
    if threshold is None:
        return f"{plan.where} AND {key} IS NULL", []
    if not descending:
        return f"{plan.where} AND {key} <= ?", [threshold]
    if _filled(cat, parts, _column(key)):
        return f"{plan.where} AND {key} >= ?", [threshold]
    return f"{plan.where} AND ({key} IS NULL OR {key} >= ?)", [threshold]


def _filled(cat: GeoparquetCatalog, parts: list[str] | None, name: str | None) -> bool:
    """Whether no part of `parts` (as read_parquet reads them; None: every file) holds a NULL in
    column `name`, by their statistics."""
    files = cat.files
    chosen = None if parts is None else set(parts)
    return name is not None and all(
        name in files.filled.get(path, ())
        for path, source in zip(files.paths, files.sources, strict=True)
        if chosen is None or source in chosen
    )


def _parts(cat: GeoparquetCatalog, plan: Plan, threshold, descending: bool) -> list[str] | None:
    """The parts of the search (`plan.files`, None: every file) that can hold a row within
    `threshold` by their statistics of the first key's column (a part without them is kept);
    None when none is left out."""
    name = _column(plan.first_key)
    files = cat.files
    chosen = None if plan.files is None else set(plan.files)
    kept = []
    for path, source in zip(files.paths, files.sources, strict=True):
        if chosen is not None and source not in chosen:
            continue
        ranges = files.ranges.get(path, {})
        if name in ranges and not _can_hold(
            ranges[name], name in files.filled.get(path, ()), threshold, descending
        ):
            continue
        kept.append(source)
    return None if plan.files is None and len(kept) == len(files.paths) else kept


def _can_hold(found: tuple | None, filled: bool, threshold, descending: bool) -> bool:
    """Whether a part whose values lie in `found` ([min, max], None: all NULL; `filled`: no NULL)
    can hold a row within `threshold` (None: NULL, descending only)."""
    if descending and not filled:  # a NULL ranks first descending
        return True
    if found is None or threshold is None:
        return False
    return found[1] >= threshold if descending else found[0] <= threshold


def _column(sql: str) -> str | None:
    """The column a sort key's SQL names when it is a plain quoted column (else None)."""
    if len(sql) > 1 and sql[0] == sql[-1] == '"' and '"' not in sql[1:-1].replace('""', ""):
        return sql[1:-1].replace('""', '"')
    return None
