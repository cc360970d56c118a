"""A page of a stac-geoparquet search sorted on a property (parquet_search.py), read within a
bound on the first sort key: the page's own query run on only the candidates within it, over
only the parts whose footers say they can hold one.

The search's candidates `offset`..`offset + n` in its order (the sort keys, ties broken by
collection and id) all lie at or before any value B of the first key that at least offset + n
candidates lie at or before (`key <= B` ascending, NULLS LAST; `key IS NULL OR key >= B`
descending, NULLS FIRST, as PostgreSQL puts them). Every candidate ranked before them does too,
so the page's query on the candidates within B answers the same rows in the same order, whatever
the ties. That query reads the other order columns (collection, id) of the rows within B only -
not of every row, as a top-N over every candidate does - and opens only the parts whose
statistics say they can hold a value within B (part_stats.can_hold: each part's [min, max] of
its number columns, NaN never among the values, as the parts left out by a search's filter
assume too).

B comes from the parts' footers when they tell it (`_bound`): in a part whose every row is a
candidate (part_counts.whole: the search has no condition, or one its footers decide), the least
value in the search's order is one of its rows, and every row lies within its greatest when it
holds no NULL - so the first value within which offset + n such rows surely lie bounds the page
without reading a row. Where the order goes on with the collection (a sort on one property) and
the parts' names give their collections (hive `collection=` folders, the Planetary Computer's
`<collection>.parquet`; snapshot_layout.py, whose names a collection search trusts too), the
bound goes on likewise: at B, the collection C whose parts reach offset + n, so that of the
parts whose nearest value is B only those of the collections up to C are read (over the 780 hive
parts of 10,000,000 items, cloud cover 0 in 360 parts: 113 read). It is taken when the parts'
values, spread evenly over their [min, max], put at most EXCESS_MAX rows past the page within it
(a deep page, whose bound would be a part's far end, holds them all). Should the footers be
wrong, the page's query finds fewer than n rows within B, and the page is read in the whole
order. Else B is the threshold T, the (offset + n)-th candidate's value found on that column
alone (`ORDER BY key LIMIT 1 OFFSET offset + n - 1`: the filter and key columns read, none of
the others), none when there are fewer candidates or T is NULL ascending (every row lies within
it). Over 780 hive parts of 10,000,000 items over HTTP a first page of 100 sorted on cloud cover
was three queries, T's over every part (285-342 ms warm), a count of the candidates within it
(176-185 ms) and the page's (295-370 ms); with the footers' bound it is the page's query alone,
212-240 ms over those 360 parts, about 120 ms over the 113: the search 914-944 -> 192-264 ms
warm (`benchmarks/bench_geoparquet.py --matrix 10000000 --layouts hive,pc`, load 8-13: 1,092 ->
242 ms, over 260 PC parts 807 -> 328 ms).

However many candidates tie within B, the page's query carries no column but each row's file
and number (parquet_search.keys, the only page read so: one part is never read within a bound),
so it costs no more than the page's query over every candidate: there, over the 780 parts of
10,000,000 items, all of them within B (`key <= 100`) 529-648 ms, the whole order 536-581 ms
without late materialization and 777-1,101 with it.

The threshold's query over HTTP only, where the bytes and parts a query reads are its cost: on
disk DuckDB's top-N over every candidate is the faster (one file of 1,000,000 items: 55 ms, 152
ms within the threshold; 260 parts of 10,000,000: 185 ms, 348 ms). The footers' bound, which
costs no query, on disk too: the page's query within it over the PC parts of 10,000,000 items
137-225 ms against the whole order's 212-242 ms, over the hive parts 99-155 against 179-300 ms,
and at 1,000,000 items 40-53 ms against 89-238 ms. And not for a search naming ids, a bbox, a
polygon or a time interval: their candidates are few (row groups left out by their statistics),
the page's query over them cheap, and a query before it only adds (a bbox, a quarter and
`eo:cloud_cover < 5` sorted on cloud cover, one file of 1,000,000 items over HTTP: 66 ms, 197 ms
within the threshold). Nor over one part: none to leave out, and the pages came out 0.6-1.7x of
the page's one query over every candidate in three runs at load 8-16
(`benchmarks/bench_geoparquet.py --matrix 1000000 --layouts file --no-disk`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..catalogs.part_stats import can_hold
from ..catalogs.snapshot_files import relative
from ..catalogs.snapshot_layout import part
from . import part_counts

if TYPE_CHECKING:
    import pyarrow as pa

    from ..catalogs.geoparquet import GeoparquetCatalog

Plan = Any  # parquet_search.Plan (which imports this module)

EXCESS_MAX = 10_000  # candidates a bound from the statistics may hold past the page, about (else: T)


def applies(cat: GeoparquetCatalog, plan: Plan, offset: int | None) -> bool:
    """Whether the candidates `offset`.. (None: every candidate, unordered) of `plan` are read
    within a bound on the first sort key (the module docstring): sorted on a property (not
    datetime: parquet_search._first_parts goes by the parts' time spans), over more than one
    part, the search naming no ids, bbox, polygon or time interval."""
    if offset is None or plan.first_key == '"datetime"':
        return False
    if plan.by_id or plan.narrowed:
        return False
    return len(cat.files.paths if plan.files is None else plan.files) > 1


def within_threshold(
    cat: GeoparquetCatalog, plan: Plan, offset: int, n: int, query: Callable
) -> pa.Table | None:
    """`query(parts, where, extra params, late)` (ORDER BY the search's order, LIMIT n OFFSET
    offset) run on the candidates within a bound on the first key - from the parts' statistics,
    else over HTTP the threshold T - over the parts that can hold them, no column read late (a second scan
    of the parts for a few rows: 2-4x the bytes); None when the bound does not narrow the
    candidates (the module docstring)."""
    key = plan.first_key
    descending = plan.order.startswith(f"{key} DESC")
    bound = _bound(cat, plan, offset + n, descending)
    if bound is None and cat.urls is None:  # on disk the threshold's query costs more than it saves
        return None
    if bound is None:
        direction = "DESC NULLS FIRST" if descending else "ASC NULLS LAST"
        found = cat.run(
            f"SELECT {key} AS k FROM {cat.source(plan.files)} WHERE {plan.where} "
            f"ORDER BY {key} {direction} LIMIT 1 OFFSET {offset + n - 1}",
            plan.params,
        )
        if not found.num_rows or (found["k"][0].as_py() is None and not descending):
            return None
        bound = (found["k"][0].as_py(), None)
    parts = _parts(cat, plan, *bound, descending)
    where, extra = _within(cat, plan, parts, *bound, descending)
    found = query(parts, where, extra, None)
    return found if found.num_rows == n else None


def _bound(cat: GeoparquetCatalog, plan: Plan, need: int, descending: bool) -> tuple | None:
    """(B, C): the first value of the first key's column (in the search's order, None: NULL)
    within which `need` candidates surely lie by the footers of the parts whose every row is
    one (part_counts.whole): each such part's least value in that order is a row of it, and all
    its rows lie within its greatest when it holds no NULL (or, descending, a NULL ranks first);
    and where the order goes on with the collection and each such part's name gives its
    collection (snapshot_layout.part), the first collection C of the ties at B within which
    they lie (else None). None when the column has no statistics, the parts do not hold `need`
    rows, or more than EXCESS_MAX others would lie within B, the values of each part taken as
    spread evenly (`_spread`)."""
    name = _column(plan.first_key)
    if name is None:
        return None
    files = cat.files
    named = dict(zip(files.sources, files.paths, strict=True))
    steps = []  # (value, the part's collection by its name, rows of it surely within them)
    collections = _collections(cat)
    for source in part_counts.whole(cat, plan.files, plan.within):
        path = named[source]
        rows, found = files.rows.get(path, 0), files.ranges.get(path, {}).get(name, False)
        if found is False or not rows:
            continue
        collection = collections[path]
        if found is None:  # every value NULL: first descending, never within a value ascending
            steps += [(None, collection, rows)] if descending else []
            continue
        near, far = (found[1], found[0]) if descending else found
        steps.append((near, collection, 1))
        if descending or name in files.filled.get(path, ()):
            steps.append((far, collection, rows - 1))
    ordered = _then_collection(plan, descending) and all(step[1] is not None for step in steps)
    steps.sort(key=lambda step: _rank(step[0], step[1] if ordered else "", descending), reverse=descending)
    taken = 0
    for value, collection, rows in steps:
        taken += rows
        if taken >= need:
            if _spread(cat, plan, name, value, descending) > need + EXCESS_MAX:
                return None
            return value, collection if ordered and value is not None else None
    return None


def _within(
    cat: GeoparquetCatalog, plan: Plan, parts, threshold, collection, descending: bool
) -> tuple[str, list]:
    """The search's condition and the first key within `threshold` (its ties within
    `collection`, None: all), and its parameters past the search's: NULL ranked first
    descending (left out where no part read holds one), and so is a NULL collection."""
    key, named = plan.first_key, cat.column("collection")
    if threshold is None:
        return f"{plan.where} AND {key} IS NULL", []
    if collection is not None and not descending:
        return f"{plan.where} AND {key} <= ? AND ({key} < ? OR {named} <= ?)", [
            threshold,
            threshold,
            collection,
        ]
    ties = f" AND ({key} IS NULL OR {key} > ? OR {named} >= ? OR {named} IS NULL)"
    ties, extra = (ties, [threshold, collection]) if collection is not None else ("", [])
    if not descending:
        return f"{plan.where} AND {key} <= ?", [threshold]
    if _filled(cat, parts, _column(key)):
        return f"{plan.where} AND {key} >= ?{ties}", [threshold, *extra]
    return f"{plan.where} AND ({key} IS NULL OR {key} >= ?){ties}", [threshold, *extra]


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


def _rank(value, collection: str, descending: bool) -> tuple:
    """A value's and a collection's place in the search's order, reversed descending (None:
    NULL, first descending)."""
    return (value is None, 0 if value is None else value, collection) if descending else (value, collection)


def _then_collection(plan: Plan, descending: bool) -> bool:
    """Whether the search's order goes on with the collection after the first key."""
    direction = "DESC NULLS FIRST" if descending else "ASC NULLS LAST"
    return plan.order.startswith(f'{plan.first_key} {direction}, "collection" {direction}')


def _collections(cat: GeoparquetCatalog) -> dict[str, str | None]:
    """file -> the collection its name says it holds (None: it says none)."""
    root = cat.root
    return {path: part(relative(path, root)).collection for path in cat.files.paths}


def _spread(cat: GeoparquetCatalog, plan: Plan, name: str, bound, descending: bool) -> float:
    """About how many rows of the search's parts lie within `bound` (None: NULL), each part's
    values taken as spread evenly over its [min, max] (its NULLs not counted unless all are;
    a part without statistics counted whole)."""
    files = cat.files
    chosen = None if plan.files is None else set(plan.files)
    total = 0.0
    for path, source in zip(files.paths, files.sources, strict=True):
        if chosen is not None and source not in chosen:
            continue
        rows, found = files.rows.get(path, 0), files.ranges.get(path, {}).get(name, False)
        if found is False or (found is None and descending):
            total += rows
        elif found is not None and bound is not None:
            low, high = found
            far = (high - bound) if descending else (bound - low)
            share = (far >= 0) if high == low else min(1.0, max(0.0, far / (high - low)))
            total += rows * share
    return total


def _parts(cat: GeoparquetCatalog, plan: Plan, bound, collection, descending: bool) -> list[str] | None:
    """The parts of the search (`plan.files`, None: every file) that can hold a row within
    `bound` (None: NULL, descending only) by their statistics of the first key's column
    (part_stats.can_hold, a NULL ranked first descending; a part without them is kept), and
    its ties within `collection` (None: all) by the collection their name says; None when none
    is left out."""
    name = _column(plan.first_key)
    files = cat.files
    chosen = None if plan.files is None else set(plan.files)
    value = math.inf if bound is None else bound  # NULL: the parts that may hold one (and any +inf)
    wanted = {} if name is None else {name: (value, None) if descending else (None, value)}
    collections = _collections(cat) if collection is not None else {}
    kept = [
        source
        for path, source in zip(files.paths, files.sources, strict=True)
        if (chosen is None or source in chosen)
        and can_hold(None, files.ranges.get(path, {}), None, wanted, files.filled.get(path, ()), descending)
        and not (
            collection is not None
            and _past(cat, path, name, (bound, collection), collections[path], descending)
        )
    ]
    return None if plan.files is None and len(kept) == len(files.paths) else kept


def _past(cat: GeoparquetCatalog, path: str, name: str, bound: tuple, mine, descending: bool) -> bool:
    """Whether every row of a part lies past `bound` (value, collection) in the search's order:
    its nearest value is the bound's, the collection its name says (`mine`) lies past the
    bound's, and (descending) it holds no NULL."""
    found = cat.files.ranges.get(path, {}).get(name)
    if not found or mine is None:
        return False
    if descending:
        return name in cat.files.filled.get(path, ()) and found[1] == bound[0] and mine < bound[1]
    return found[0] == bound[0] and mine > bound[1]


def _column(sql: str) -> str | None:
    """The column a sort key's SQL names when it is a plain quoted column (else None)."""
    if len(sql) > 1 and sql[0] == sql[-1] == '"' and '"' not in sql[1:-1].replace('""', ""):
        return sql[1:-1].replace('""', '"')
    return None
