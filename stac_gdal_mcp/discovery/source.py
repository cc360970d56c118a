"""One interface for every kind of catalog (`Source`), as rio-tiler's `BaseReader` is one for
every raster: search, count, collections, queryables and items read a catalog only through it,
so no code above asks which kind a catalog is. The kinds (a STAC API: `api_search.ApiSource`; a
static catalog, an ItemCollection or the workspace: `local.LocalSource`; stac-geoparquet files:
`parquet_source.ParquetSource`) are told apart once, by `sources.open_source`.

What every kind shares is here: a page of items is the catalog's own (`page`); a count is a
page's `matched` unless the kind counts otherwise; collections are listed from memory unless the
kind pages them. The check of a search's collections names the close ones on a typo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..catalogs import ResultBudget, cursors
from ..catalogs.bounds import ID_CHARS
from ..catalogs.item_shape import shape_problem
from ..catalogs.security import shown
from ..errors import CollectionNotFound, InvalidCursor, StacGdalMcpError
from ..models import CollectionList, Queryables, SearchResult
from . import params as p
from .absent import absent_note
from .fields import Fields
from .query import ItemSearch, Search
from .summaries import collection_summary

if TYPE_CHECKING:
    from ..core import Core

EXACT, CATALOG_COUNT, AT_LEAST = "exact", "the catalog's count", "at least"


class Source:
    """A catalog as the discovery functions read it. A kind implements `page` and `queryables`;
    the rest has a default a kind may replace (`count`, `all_collections`, `collections_page`).
    `search` is the one entry of an item search (a page, or a count), for several catalogs too
    (`sources.FederatedSource`)."""

    matched_is = EXACT  # how a page's `matched` was counted

    def __init__(self, core: Core, catalog: Any):
        self.core = core
        self.catalog = catalog

    @property
    def id(self) -> str:
        return self.catalog.id

    @property
    def features(self):
        return self.catalog.features

    def collection(self, collection_id: str) -> dict:
        return self.catalog.collection(collection_id)

    def item(self, collection_id: str, item_id: str) -> dict:
        """The full item, asset hrefs signed where the catalog needs it; one of the wrong shape
        (item_shape.py) is an error naming what is wrong."""
        item = self.catalog.item(collection_id, item_id)
        problem = shape_problem(item)
        if problem is not None:
            raise StacGdalMcpError(
                f"item {shown(item_id, ID_CHARS)} of catalog '{self.id}' cannot be read: {problem}"
            )
        return item

    def sign(self, item: dict) -> dict:
        return self.catalog.sign(item)

    # --- items ----------------------------------------------------------------------------------

    @property
    def ids(self) -> list[str]:
        """The catalogs this source searches: its own."""
        return [self.id]

    def search(self, request: ItemSearch, *, bounded: bool = True) -> SearchResult:
        """One page of the items `request` finds (`query.ItemSearch`; `search.search_items`:
        summaries, or full items with detail="full"), or with detail="count" how many they are
        (`count.count_items`). `bounded=False`: not held to the answer's byte budget."""
        from .count import count_items
        from .search import search_items

        if request.detail == "count":
            return count_items(self, request)
        return search_items(self, request, bounded)

    def page(
        self,
        search: Search | None,
        state: dict | None,
        limit: int,
        budget: ResultBudget,
        notes: list[str],
        fields: Fields | None = None,
    ) -> tuple[list[dict], int | None, dict | None]:
        """Up to `limit` items of `search` (None: continuing the cursor `state`) within `budget`:
        (items, matched, the next cursor's state or None); what was done goes to `notes`."""
        raise NotImplementedError

    def count(self, search: Search, notes: list[str]) -> tuple[int | None, str | None]:
        """How many items match `search`, and how that was counted (EXACT, CATALOG_COUNT,
        AT_LEAST): by default the `matched` of a page of one item."""
        ids = Fields(include=("id",))  # the page's one item read by its id only
        features, matched, _ = self.page(search, None, 1, ResultBudget(None), notes, ids)
        if not features:
            notes += self.empty_notes(search)
        return matched, EXACT if matched is not None else None

    def empty_notes(self, search: Search | None) -> list[str]:
        """The notes of a page without items: what to widen, and a condition on a property the
        collections' items lack (absent.py, from one item of each)."""
        absent = absent_note(search, self.sample) if search is not None else None
        return [no_items(search), *([absent] if absent else [])]

    def sample(self, collection_id: str) -> dict | None:
        """One item of collection `collection_id` (None: it has none)."""
        budget = ResultBudget(self.core.settings.limits.max_result_bytes)
        features = self.page(Search(collections=[collection_id]), None, 1, budget, [])[0]
        return features[0] if features else None

    # --- collections ----------------------------------------------------------------------------

    def all_collections(self, notes: list[str] | None = None) -> list[dict]:
        """Every collection; a list read only in part says so in `notes`."""
        return list(self.catalog.collections.values())

    def collection_ids(self) -> list[str]:
        return list(self.catalog.collections)

    def collections_page(
        self, q: str | None, limit: int, state: dict | None, notes: list[str]
    ) -> CollectionList:
        """One page of the collections matching the free text `q`, from the cursor `state`: the
        whole list filtered and paged here."""
        chosen = [c for c in self.all_collections(notes) if not q or matches_text(c, q)]
        offset = cursors.offset(state, total=len(chosen)) if state else 0
        page = chosen[offset : offset + limit]
        end = offset + len(page)
        return CollectionList(
            collections=[collection_summary(c) for c in page],
            returned=len(page),
            matched=len(chosen),
            next_cursor=self.core.cursors.encode("collections", self.id, {"offset": end})
            if end < len(chosen)
            else None,
            notes=notes,
        )

    def queryables(self, collection_id: str | None) -> Queryables:
        """Properties usable in `filter` / `query`, with their types."""
        raise NotImplementedError

    def check_collections(self, collection_ids: list[str] | None) -> None:
        """An unknown collection is an error naming the close ones, not an empty answer."""
        known = None
        for cid in collection_ids or []:
            known = self.collection_ids() if known is None else known
            if cid not in known:
                raise CollectionNotFound(
                    f"collection {shown(cid, ID_CHARS)} not found in catalog '{self.id}'"
                    + did_you_mean(cid, known)
                )


def matches_text(collection: dict, q: str) -> bool:
    words = [w.lower() for w in q.replace(",", " ").split() if w]
    haystack = " ".join(
        [collection.get("id", ""), collection.get("title") or "", collection.get("description") or ""]
        + list(collection.get("keywords") or [])
    ).lower()
    return any(w in haystack for w in words)


def no_items(search: Search | None) -> str:
    """The note of a search that found nothing."""
    return "no items matched; widen bbox/datetime, raise max_cloud_cover, or check the collection ids" + (
        p.latitude_first_hint(search.bbox if search is not None else None)
    )


def did_you_mean(name: str, choices: list[str]) -> str:
    import difflib

    if len(name) > ID_CHARS:
        return ""
    close = difflib.get_close_matches(name, choices, n=3)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def search_from_cursor(state: dict) -> Search:
    search = cursors.checked(state, "search", dict, optional=False)
    try:
        return Search(**search)
    except TypeError:
        raise InvalidCursor("cursor is malformed: search") from None
