"""Collections, queryables and single items of a catalog, each read through the catalog's
`Source` (source.py).

Every function takes the `Core` (settings, catalogs, cursor codec) first, like the rest of the
core; `get_item` is the one way an item is fetched (asset hrefs signed where the catalog needs it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InvalidArgument
from ..models import CollectionDetail, CollectionList, Queryables
from .sources import open_source
from .summaries import collection_detail

if TYPE_CHECKING:
    from ..core import Core


def list_collections(
    core: Core,
    catalog: str | None = None,
    q: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> CollectionList:
    """One page of a catalog's collections (free-text `q` applied here when the API cannot)."""
    settings = core.settings
    source = open_source(core, catalog)
    limit = limit or settings.limits.page_size
    if limit < 1:
        raise InvalidArgument("limit must be a positive integer")
    limit = min(limit, settings.limits.max_items)
    state = core.cursors.decode(cursor, "collections", source.id) if cursor else None
    return source.collections_page(q, limit, state, [])


def get_collection(core: Core, collection_id: str, catalog: str | None = None) -> CollectionDetail:
    """One collection: extent, summaries, item_assets, providers, license, useful links."""
    return collection_detail(open_source(core, catalog).collection(collection_id))


def get_collection_json(core: Core, collection_id: str, catalog: str | None = None) -> dict:
    """A collection's full STAC JSON."""
    return open_source(core, catalog).collection(collection_id)


def get_item(core: Core, collection_id: str, item_id: str, catalog: str | None = None) -> dict:
    """The full STAC item, asset hrefs signed where the catalog needs it (signed once, by the
    catalog's `item`)."""
    return open_source(core, catalog).item(collection_id, item_id)


def get_queryables(core: Core, collection_id: str | None = None, catalog: str | None = None) -> Queryables:
    """Properties usable in `filter`/`query`, with types (inferred for local catalogs)."""
    return open_source(core, catalog).queryables(collection_id)
