"""How many items a search matches, exactly, without pulling their summaries (detail="count").

- A local catalog or a stac-geoparquet snapshot counts its matches itself: exact.
- A STAC API that says `numberMatched` (or `context.matched`) on the first page, with every
  condition sent to it: its count ("the catalog's count").
- Otherwise (stac-fastapi-pgstac's default gives no count; one item is asked first to see): the
  matches are paged here, in pages of COUNT_PAGE, asking only their ids where the API conforms
  to the fields extension, and counted: exact, up to COUNT_MAX ("at least" beyond, with a note).

`matched_is` says which it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..catalogs import LocalCatalog, PageTrail, ResultBudget
from ..catalogs.geoparquet import GeoparquetCatalog
from ..models import SearchResult
from .fields import Fields

if TYPE_CHECKING:
    from ..core import Core

COUNT_PAGE = 1000  # items asked per page while counting (an API may send fewer)
COUNT_MAX = 100_000  # matches counted one by one at most
EXACT, CATALOG_COUNT, AT_LEAST = "exact", "the catalog's count", "at least"
ID_ONLY = Fields(include=("id",), exclude=("links",))  # an API adds each item's links unless told


def count_items(
    core: Core,
    catalog: str | None = None,
    *,
    cursor: str | None = None,
    limit=None,
    detail="count",
    fields=None,
    **args,
) -> SearchResult:
    """The number of items of catalog `catalog` matching the search arguments `args`, and how
    it was counted (module docstring); `limit`, `detail` and `fields` are not a count's."""
    cat = core.catalogs.get(catalog)
    notes: list[str] = []
    if cursor:
        from ..errors import InvalidArgument

        raise InvalidArgument("detail='count' counts a whole search: call it without a cursor")
    from .fields import Fields
    from .search import search_page

    if isinstance(cat, GeoparquetCatalog | LocalCatalog):  # the page's one item read by its id only
        ids = Fields(include=("id",))
        _, matched, _ = search_page(core, cat, 1, None, ResultBudget(None), args, notes, ids)
        how = EXACT if matched is not None else None
    else:
        matched, how = _count_api(core, cat, args, notes)
    notes[:] = [n for n in notes if not n.startswith("no items matched")] or notes
    return SearchResult(items=[], returned=0, matched=matched, matched_is=how, notes=notes)


def _count_api(core: Core, cat, args: dict, notes: list[str]) -> tuple[int, str]:
    from .search import (
        MAX_SCAN_PAGES,
        _check_api_collections,
        api_pages,
        checked_search,
        first_page,
        plan_api_search,
    )

    search = checked_search(core.settings, cat.id, args, notes)
    plan = plan_api_search(cat, search, page_size=COUNT_PAGE, fields=ID_ONLY)
    notes += plan.notes
    if plan.client_filter is None:  # one item asked first: the API's count, when it gives one
        probe = first_page(cat, {**plan.body, "limit": 1})
        matched = api_pages(cat, probe, 1, None, PageTrail())[1]
        if matched is not None:
            return matched, CATALOG_COUNT
    trail = PageTrail()
    page = first_page(cat, plan.body)
    found, _, following, stopped = api_pages(cat, page, COUNT_MAX, plan.client_filter, trail)
    total, how = len(found), EXACT
    if following is not None or stopped:
        how = AT_LEAST
        limit = f"{MAX_SCAN_PAGES} pages" if stopped else f"{COUNT_MAX:,} matches"
        notes.append(f"counting stopped after {limit}: at least {total:,} items match")
    if trail.looped:
        notes.append(trail.note)
    if not total and search.collections:
        _check_api_collections(cat, search.collections)
    return total, how
