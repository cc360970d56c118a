"""The parts of a stac-geoparquet search whose every row matches, told by their names and footer
statistics alone (catalogs/snapshot_files.Files.inside), so that its count (parquet_count.count)
takes their rows from their footers and reads only the parts that straddle the search: a part
named after a collection searched, its time span inside the search's interval, each row's bbox
inside the search bbox by the ranges of the bbox sides (a footprint lies inside its bbox: the
test that makes a row surely inside, parquet_search.Plan.sure), and each value a plain CQL2
comparison reads inside its bounds by the column's [min, max] and no null (part_stats.plain).
Values are JSON numbers, never NaN (Parquet's statistics leave NaN out), as the parts left out by
their statistics assume too. A search naming ids, or with any other condition (a polygon, a CQL2
`or`, `like`, ...), counts every part it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..catalogs.part_stats import plain

if TYPE_CHECKING:
    from ..catalogs.geoparquet import GeoparquetCatalog
    from .query import Search


@dataclass(frozen=True)
class Within:
    """What every row of a part must meet for the part to count whole."""

    collections: list[str] | None
    start: Any  # the search's interval (None: open), as pgstac reads it
    end: Any
    area: tuple | None  # (west, south, east, north) of the search bbox, None: anywhere
    bounds: dict  # property -> (low, low excluded, high, high excluded) (part_stats.plain)


def within(
    search: Search, start, end, sure: bool, box: tuple | None, condition: dict | None
) -> Within | None:
    """The `Within` of a search (None: no part can be told to hold only matches): `sure`, whether
    its bbox (`box`) is tested as parquet_search.Plan.sure reads it; `condition` its CQL2."""
    bounds = plain(condition)
    if search.ids or bounds is None or (box is not None and not sure):
        return None
    return Within(search.collections or None, start, end, box if sure else None, bounds)


def whole(cat: GeoparquetCatalog, files: list[str] | None, found: Within | None) -> list[str]:
    """The parts of `files` (as read_parquet reads them; None: every file) whose every row
    matches `found`."""
    if found is None:
        return []
    return cat.files.inside(cat.root, files, found)


def rows_read(cat: GeoparquetCatalog, plan) -> int:
    """The rows of the parts a count of `plan` reads (the parts counted whole, and every part of
    a search without a condition, are counted from their footers)."""
    if plan.where == "TRUE" and plan.exact:
        return 0
    files = cat.files.sources if plan.files is None else plan.files
    taken = set(whole(cat, plan.files, plan.within))
    return cat.files.rows_of([f for f in files if f not in taken])
