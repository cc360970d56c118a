"""The count of a stac-geoparquet search's matches (`matched`, parquet_search.py): a SQL count,
and where footprints are tested exactly, the rows the bbox columns settle counted in SQL and the
footprints of the others read in the same scan and tested (their marks, footprints.py, settling what they can).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import LimitExceeded
from . import footprints, part_counts
from .parquet_search import Plan, _intersects, _matching, keys, whole_rows

if TYPE_CHECKING:
    from ..catalogs.geoparquet import GeoparquetCatalog

EXACT_COUNT_MAX = 100_000  # rows whose footprint is tested one by one to count `matched` ...
PAGE_COUNT_MAX = 10_000  # ... beside a first page, which waits for its count
# (PAGE_COUNT_MAX beside a first page: 50,000 doubtful footprints over 260 parts of 10,000,000
# items took 12 s, every row group's footprints decoded, the page itself 0.6 s)
PROBE_ROWS = 100  # rows per footprint allowed past which the doubtful ones are probed for first
RESIDUAL_COUNT_MAX = 10_000  # rows converted to items and tested with cql2 to count `matched`


def count(cat: GeoparquetCatalog, plan: Plan, most: int = EXACT_COUNT_MAX) -> int | None:
    """How many items match: a SQL count; with a footprint test, the rows surely inside the
    bbox counted (one scan of the bbox columns) and the footprints of the others read and tested
    here (None when that is more than `most` rows or beyond the query's bounds); with a CQL2
    residual, the candidates read (a few at a time, see `whole_rows`) and tested as items (None
    when they are more than RESIDUAL_COUNT_MAX or take longer than limits.query_timeout_s).
    The parts whose every row matches are counted from their footers (part_counts.py), unread."""
    if plan.where == "TRUE" and plan.exact:  # every row of the parts read: their footers say how many
        return cat.files.rows_of(plan.files)
    whole = part_counts.whole(cat, plan.files, plan.within)
    if whole:
        rows = cat.files.rows_of(whole)
        taken = set(whole)
        rest = [f for f in (cat.files.sources if plan.files is None else plan.files) if f not in taken]
        found = count(cat, replace(plan, files=rest, within=None), most) if rest else 0
        return None if found is None else rows + found
    source = cat.source(plan.files)
    if plan.exact:
        return cat.run(f"SELECT count(*) AS n FROM {source} WHERE {plan.where}", plan.params)["n"][0].as_py()
    if plan.residual is not None:
        candidates = keys(cat, plan, None, RESIDUAL_COUNT_MAX + 1)
        if candidates.num_rows > RESIDUAL_COUNT_MAX:
            return None
        try:
            deadline = time.monotonic() + cat.settings.limits.query_timeout_s
            return sum(1 for _ in _matching(cat, plan, candidates, deadline, RESIDUAL_COUNT_MAX, first=1))
        except LimitExceeded:
            return None
    sure, sure_params = (plan.sure, plan.sure_params or []) if plan.sure else ("FALSE", [])
    try:  # counted first on the bbox columns; footprints read only for the doubtful rows
        if _too_doubtful(cat, plan, source, sure, sure_params, most):
            return None
        marking = plan.edge is not None and footprints.markable(cat)
        if marking and footprints.any_marked(cat, plan.files):
            return _marked_count(cat, plan, sure, sure_params, most)
        counts = _counted(cat, plan, source, sure, sure_params, most)
        if marking:  # once this scan has read the footprints (into the HTTP disk tier too)
            footprints.ask_marks(cat, plan.files)
        doubtful = counts["doubtful"][0].as_py()
        if doubtful > most:
            return None
        found = int(_intersects(cat, counts["footprints"][0].values, plan.area).sum()) if doubtful else 0
    except LimitExceeded:
        return None
    return counts["sure"][0].as_py() + found


def _counted(cat: GeoparquetCatalog, plan: Plan, source: str, sure: str, sure_params: list, most: int):
    """One scan: the candidates surely inside (`sure`), the doubtful ones, and the footprints of
    at most `most` + 1 of those (DuckDB's arg_min keeps a bounded heap of them): a second scan
    reading the doubtful footprints took as long as the count (780 hive parts over HTTP: 0.43 +
    0.52 s, 0.53 s in one)."""
    return cat.run(
        f"SELECT count(*) FILTER (WHERE {sure}) AS sure, count(*) FILTER (WHERE NOT ({sure})) AS doubtful, "
        f"arg_min(geometry, 0, {most + 1}) FILTER (WHERE NOT ({sure})) AS footprints "
        f"FROM {source} WHERE {plan.where}",
        sure_params * 3 + plan.params,
    )


def _marked_count(cat: GeoparquetCatalog, plan: Plan, sure: str, sure_params: list, most: int) -> int | None:
    """The count of a bbox: one scan of the bbox columns lists each file's doubtful rows, the
    footprints' marks (footprints.py) settle what they can, and only the footprints of the rest
    are read (DuckDB decodes a file's whole geometry column to read a few: 55 ms of a count's
    75 ms on a million items, where DuckDB's count of the bbox overlap takes 20)."""
    settled = footprints.settle(cat, listing(cat, plan))
    if settled.left > most:
        return None
    found = settled.found
    if settled.unmarked:
        found += _doubtful_meeting(cat, plan, settled.unmarked, sure, sure_params)
    if settled.rest:
        import pyarrow as pa

        rest = pa.table(
            {
                "filename": [name for name, rows in settled.rest.items() for _ in rows],
                "file_row_number": [n for rows in settled.rest.values() for n in rows],
            }
        )
        for _, table in whole_rows(cat, rest, list(range(rest.num_rows)), rest.num_rows, ["geometry"]):
            found += int(_intersects(cat, table.column("geometry"), plan.area).sum())
    return found


def listing(cat: GeoparquetCatalog, plan: Plan):
    """A row a file read by a bbox search: how many of its candidates are surely inside (`sure`),
    the row numbers of the others (`rows`) and whether each one's bbox holds a side in the search
    bbox (`edge`), in one scan of the bbox columns."""
    return cat.run(
        "SELECT filename, count(*) FILTER (WHERE s) AS sure, list(file_row_number) FILTER (WHERE NOT s) AS rows, "
        f"list(e) FILTER (WHERE NOT s) AS edge FROM (SELECT filename, file_row_number, ({plan.sure}) AS s, "
        f"({plan.edge}) AS e FROM {cat.source(plan.files, numbered=True)} WHERE {plan.where}) GROUP BY filename",
        plan.sure_params + plan.edge_params + plan.params,
    )


def _doubtful_meeting(cat: GeoparquetCatalog, plan: Plan, files, sure: str, sure_params: list) -> int:
    """How many candidates in `files` that `sure` leaves doubtful have a footprint meeting the area."""
    footprints_read = cat.run(
        f"SELECT geometry FROM {cat.source(files)} WHERE {plan.where} AND NOT ({sure})",
        plan.params + sure_params,
    ).column("geometry")
    return int(_intersects(cat, footprints_read, plan.area).sum())


def _too_doubtful(
    cat: GeoparquetCatalog, plan: Plan, source: str, sure: str, params: list, most: int
) -> bool:
    """Whether more than `most` candidates have a footprint their bbox does not settle, by a scan
    of the bbox columns that stops at the (most + 1)th: 0.2 s where the count's whole scan took
    0.5-0.8 s to leave `matched` unknown (260 parts of 10,000,000 items; over HTTP the count read
    every part's bbox columns beside the page's own reads). Asked of a polygon's count always
    (its scan reads the footprint of every candidate: on a million items 50 ms, where the probe
    reads bbox columns only), of a bbox's over files of more than PROBE_ROWS rows per footprint
    allowed: in fewer the count's own scan is the cheaper answer."""
    if plan.sure is not None and cat.files.rows_of(plan.files) <= PROBE_ROWS * most:
        return False
    found = cat.run(
        f"SELECT 1 AS doubtful FROM {source} WHERE {plan.where} AND NOT ({sure}) LIMIT {most + 1}",
        plan.params + params,
    )
    return found.num_rows > most
