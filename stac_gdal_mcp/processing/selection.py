"""Which items an analysis reads: the caller's item references, or a search over the AOI
(paged, capped at `max_items`); and each item's cloud mask, with its collection's
`item_assets` when the item alone does not say (collection documents fetched once each)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import InvalidArgument, MaskNotFound, StacGdalMcpError
from .items import reference
from .masks import MaskSource, find_mask


def search_arguments(aoi_geom, search: dict) -> dict:
    """The search_items arguments for items over the AOI."""
    from shapely.geometry import mapping

    search = {k: v for k, v in search.items() if v is not None}
    for key in ("bbox", "intersects"):
        if key in search:
            raise InvalidArgument(f"give the area as `aoi`, not `{key}`")
    if aoi_geom.equals(aoi_geom.envelope):
        search["bbox"] = list(aoi_geom.bounds)
    else:
        search["intersects"] = mapping(aoi_geom)
    return search


class Selection(NamedTuple):
    """The items an operation measures, with what it needs to read them."""

    catalog: Any
    items: list  # item references or whole items, as `select_items` gives them
    notes: list[str]
    collections: Collections


def select(
    core,
    area,
    *,
    catalog: str | None,
    items: list | tuple | None,
    search: dict,
    max_items: int | None,
    default_max: int,
    notes: list[str] = (),
) -> Selection:
    """The caller's `items`, or a search over `area` (a WGS84 geometry) in `catalog` capped at
    `max_items` (`select_items`); `notes` come first in the selection's notes."""
    cat = core.catalogs.get(catalog)
    found, found_notes = select_items(
        core,
        area,
        catalog=catalog,
        items=None if items is None else list(items),
        search=dict(search),
        max_items=max_items,
        default_max=default_max,
    )
    return Selection(cat, found, [*notes, *found_notes], Collections(cat))


def select_items(
    core,
    aoi_geom,
    *,
    catalog: str | None,
    items: list | None,
    search: dict,
    max_items: int | None,
    default_max: int,
) -> tuple[list, list[str]]:
    """Item references ({collection_id, item_id}) given by the caller, or full item dicts from
    a search over the AOI; and notes. Searches are capped at `max_items`."""
    from ..discovery.query import ItemSearch
    from ..discovery.sources import open_source

    limit_cap = core.settings.limits.max_items
    wanted = min(max_items or default_max, limit_cap)
    notes = []
    if max_items and max_items > limit_cap:
        notes.append(f"max_items {max_items} capped at limits.max_items={limit_cap}")
    if items is not None:
        if any(v is not None for v in search.values()):
            raise InvalidArgument(
                "give either `items` or search arguments (collections, datetime, ...), not both"
            )
        refs = [_item_ref(r) for r in items]
        if not refs:
            raise InvalidArgument('items is empty; give [{"collection_id": ..., "item_id": ...}, ...]')
        if len(refs) > wanted:
            notes.append(f"only the first {wanted} of {len(refs)} items were measured (max_items)")
        return refs[:wanted], notes
    if not search.get("collections") and not search.get("ids"):
        raise InvalidArgument("give `collections` (or `ids`) to search, or an explicit `items` list")
    found: list[dict] = []
    cursor = None
    arguments = search_arguments(aoi_geom, search)
    while len(found) < wanted:
        request = ItemSearch.of(
            limit=min(wanted - len(found), core.settings.limits.page_size * 5),
            cursor=cursor,
            detail="full",
            **({} if cursor else arguments),
        )
        # read, not answered: whole items, whatever limits.max_result_bytes is
        page = open_source(core, catalog).search(request, bounded=False)
        found += page.items
        notes += [n for n in page.notes if n not in notes and not n.startswith("continuing from cursor")]
        cursor = page.next_cursor
        if not cursor or not page.items:
            break
    if cursor and len(found) >= wanted:
        notes.append(f"more items matched than max_items={wanted}; raise max_items or narrow the search")
    return found, notes


def _item_ref(ref: Any) -> dict:
    if isinstance(ref, dict):
        named = reference(ref)
        if named["collection_id"] and named["item_id"]:
            return {key: str(value) for key, value in named.items()}
    raise InvalidArgument(f'each item must be {{"collection_id": ..., "item_id": ...}} (got {ref!r})')


class Collections:
    """Collection documents fetched at most once each (for item_assets metadata)."""

    def __init__(self, catalog):
        self.catalog, self.cache = catalog, {}

    def get(self, collection_id: str | None) -> dict | None:
        if not collection_id:
            return None
        if collection_id not in self.cache:
            try:
                self.cache[collection_id] = self.catalog.collection(collection_id)
            except StacGdalMcpError:
                self.cache[collection_id] = None
        return self.cache[collection_id]


def item_mask(item: dict, collections: Collections, asset: str | None = None) -> MaskSource:
    """The item's mask, using its collection's item_assets when the item alone does not say."""
    try:
        return find_mask(item, asset=asset)
    except MaskNotFound:
        collection = collections.get(item.get("collection"))
        if collection is None:
            raise
        return find_mask(item, collection, asset=asset)
