"""The Source of a stac-geoparquet catalog (catalogs/geoparquet.py): a page of a search
(parquet_search.py) and, on the first page, the count of its matches (parquet_count.py), carried
in the cursor.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from ..catalogs import cursors
from ..models import Queryables
from .parquet_count import EXACT_COUNT_MAX, PAGE_COUNT_MAX, count
from .parquet_search import Plan, make_plan, page, projection
from .part_counts import rows_read
from .query import Search
from .source import EXACT, Source, search_from_cursor

if TYPE_CHECKING:
    from ..catalogs import ResultBudget
    from ..catalogs.geoparquet import GeoparquetCatalog
    from .fields import Fields

# the threads counting beside first pages, started once (a thread of its own per page cost
# milliseconds on a loaded machine, as much as DuckDB's answer to a small search)
_COUNTING = ThreadPoolExecutor(4, thread_name_prefix="parquet-count")
# rows a count beside a first page reads over HTTP, at most (the parts counted whole aside): the
# condition's columns of 10,000,000 rows in 260 parts took 5-6 s on a local server (2,600 range
# requests, one a row group), the page itself 0.2-0.7 s; past it `matched` is left unknown
HTTP_COUNT_ROWS = 2_000_000
UNCOUNTED = (
    f"matched: not counted beside this first page (over HTTP past {HTTP_COUNT_ROWS:,} rows to read, or past "
    f"{PAGE_COUNT_MAX:,} footprints to test); search with detail='count' to count every match"
)


def parquet_page(
    cat: GeoparquetCatalog,
    search: Search,
    state: dict | None,
    limit: int,
    budget: ResultBudget | None,
    fields: Fields | None = None,
) -> tuple[list[dict], int | None, dict | None]:
    """One page of `search` from where the cursor `state` stands (None: the first page):
    (items, matched, the next cursor's state or None), from one version of the files. `fields`:
    the parts of the items the answer needs (the rest may be left unread, `projection`)."""
    with cat.pinned():
        return _page_of(cat, search, state, limit, budget, fields)


class ParquetSource(Source):
    """stac-geoparquet files (catalogs.GeoparquetCatalog), searched with one SQL query a page."""

    def page(self, search, state, limit, budget, notes, fields=None):
        search = search_from_cursor(state) if state is not None else search
        items, matched, following = parquet_page(self.catalog, search, state, limit, budget, fields)
        if state is None and matched is None:
            notes.append(UNCOUNTED)
        return items, matched, following

    def count(self, search, notes):
        """How many items match: the SQL count alone (`count`), no page found and read for it
        (the top-N of a page of one cost 10x DuckDB's count of a bbox on 1,000,000 items)."""
        cat = self.catalog
        with cat.pinned():
            for cid in search.collections or []:
                cat.check_collection(cid)
            plan = make_plan(cat, search)
            matched = 0 if plan.files == [] else count(cat, plan, EXACT_COUNT_MAX)
        if matched == 0:
            notes += self.empty_notes(search)
        return matched, EXACT if matched is not None else None

    def queryables(self, collection_id: str | None) -> Queryables:
        """The properties as the files' Parquet schema types them."""
        return Queryables(collection_id=collection_id, queryables=self.catalog.queryables(collection_id))


def _page_of(
    cat: GeoparquetCatalog,
    search: Search,
    state: dict | None,
    limit: int,
    budget: ResultBudget | None,
    fields: Fields | None,
) -> tuple[list[dict], int | None, dict | None]:
    for cid in search.collections or []:
        cat.check_collection(cid)  # an unknown collection is an error, not an empty answer
    plan = make_plan(cat, search)
    if plan.residual is None:  # a CQL2 residual tests whole items
        plan.columns = projection(cat.files.schema, fields)
    offset = cursors.offset(state) if state is not None else 0
    if plan.files == []:  # no part can hold a match (snapshot_layout.py)
        return [], 0, None
    if state is not None:
        items, following = page(cat, plan, offset, limit, budget)
        matched = cursors.checked(state, "matched", int)
    else:
        items, following, matched = _first_page(cat, search, plan, limit, budget)
    if following is None:
        return items, matched, None
    return items, matched, {"search": search.__dict__, "offset": following, "matched": matched}


def _first_page(
    cat: GeoparquetCatalog, search: Search, plan: Plan, limit: int, budget: ResultBudget | None
) -> tuple[list[dict], int | None, int | None]:
    """The first page and the count of its matches, counted beside it (DuckDB works outside the
    GIL); over HTTP not counted when that reads more than HTTP_COUNT_ROWS rows (`matched` None:
    the answer says so, UNCOUNTED); on disk, where the count tests footprints, the page is read first and the count
    after, only when the page does not hold every match (else its length is the count): both scan
    the bbox columns with every core, so the count beside the page only slowed it (a bbox's page
    0.12 s beside its count, 0.04 s alone on 1,000,000 items), and a small page's count is wasted."""
    footprints = cat.urls is None and plan.area is not None
    if cat.urls is not None and rows_read(cat, plan) > HTTP_COUNT_ROWS:  # matched left unknown
        items, following = page(cat, plan, 0, limit, budget)
        return items, following, len(items) if following is None else None
    if footprints or (search.ids and len(search.ids) <= limit):  # a few ids: rarely more
        items, following = page(cat, plan, 0, limit, budget)
        return items, following, len(items) if following is None else count(cat, plan, PAGE_COUNT_MAX)
    counting = _COUNTING.submit(_pinned_count, cat, plan, cat.files)
    try:
        items, following = page(cat, plan, 0, limit, budget)
    except BaseException:
        wait([counting])  # the page's error, once the count has let go of the files
        raise
    return items, following, counting.result()


def _pinned_count(cat: GeoparquetCatalog, plan: Plan, files) -> int | None:
    with cat.pinned(files):  # the page's version of the files, in the pool's thread
        return count(cat, plan, PAGE_COUNT_MAX)
