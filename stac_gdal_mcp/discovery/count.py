"""How many items a search matches, exactly, without pulling their summaries (detail="count").

Each kind of catalog counts through its `Source` (source.py):

- A local catalog or a stac-geoparquet snapshot counts its matches itself: exact.
- A STAC API that says `numberMatched` (or `context.matched`) on the first page, with every
  condition sent to it: its count ("the catalog's count").
- Otherwise (stac-fastapi-pgstac's default gives no count; one item is asked first to see): the
  matches are paged here, asking only their ids where the API conforms to the fields extension,
  and counted: exact, up to a bound ("at least" beyond, with a note; api_search.ApiSource.count).

`matched_is` says which it was.
"""

from __future__ import annotations

from ..errors import InvalidArgument
from ..models import SearchResult
from .query import ItemSearch
from .search import checked_search


def count_items(source, request: ItemSearch) -> SearchResult:
    """The number of items of the catalog `source` (its `source.Source`) matching the search
    `request` (`query.ItemSearch`; its page size and fields are not a count's), and how it was
    counted (module docstring)."""
    notes: list[str] = []
    if request.cursor:
        raise InvalidArgument("detail='count' counts a whole search: call it without a cursor")
    search = checked_search(source.core.settings, source.id, request.keywords(), notes)
    matched, how = source.count(search, notes)
    notes[:] = [n for n in notes if not n.startswith("no items matched")] or notes
    return SearchResult(items=[], returned=0, matched=matched, matched_is=how, notes=notes)
