"""What names the input of an operation, as a notebook or a tool gives it, resolved once.

An asset is named by an href; an item (a STAC item dict, a pystac.Item, an ItemSummary of a
search), an item reference (`(collection_id, item_id)`, a `{collection_id, item_id}` dict) or an
`AssetRef` (as the MCP tools name it), with the asset's key or band common name; or it is an
`AssetSource` already. `resolve` makes one `AssetSource` of any of them (href policy applied,
signed where the catalog needs it); `preview_sources` the one or three a preview shows;
`item_refs` the items of search results as the item-list operations take them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import AssetNotFound, InvalidArgument
from ..processing import access
from ..processing.requests import AssetRef

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..core import Core


def resolve(core: Core, source: Any, asset: str | None, ref: AssetRef) -> access.AssetSource:
    """The input named by `source` (+ `asset`), or by `ref` (href / collection_id + item_id +
    asset, as the tools name it) when `source` is None; not both."""
    if source is None:
        return ref.resolve(core)
    if isinstance(source, AssetRef) and not ref.given and asset is None:
        return source.resolve(core)
    if ref.given:
        raise InvalidArgument(
            "give the input either as `source` or as href / collection_id + item_id, not both"
        )
    if isinstance(source, access.AssetSource):
        if asset is not None:
            raise InvalidArgument("an AssetSource names its asset already; do not pass asset")
        return source
    if isinstance(source, (str, os.PathLike)):
        if asset is not None:
            raise InvalidArgument("an href names one file; do not pass asset")
        return access.resolve_input(core, href=os.fspath(source))
    item = item_dict(source)
    if item is not None:
        if asset is None:
            raise InvalidArgument("name the asset of the item: a key or a band common name, e.g. 'red'")
        return access.asset_source(core, item, asset, catalog=ref.catalog)
    collection_id, item_id = item_ref(source)
    return access.resolve_input(
        core, collection_id=collection_id, item_id=item_id, asset=asset, catalog=ref.catalog
    )


def preview_sources(
    core: Core, source: Any, asset: str | None, assets: Sequence[str] | None, ref: AssetRef
) -> list[access.AssetSource]:
    """What a preview shows: one asset (named as for `resolve`; an `AssetRef` as the server's tool
    names it: an href, or an item's asset), or an item's `assets` (default: its visual asset, else
    red/green/blue)."""
    from ..discovery.collections import get_item

    named = source or ref if source is None or isinstance(source, AssetRef) else None
    if named is not None:
        one = named.href is not None or named.asset is not None
    else:
        one = asset is not None or isinstance(source, (str, os.PathLike, access.AssetSource))
    if one:
        if assets:
            raise InvalidArgument("give either asset or assets, not both")
        return [named.resolve(core) if named else resolve(core, source, asset, AssetRef(catalog=ref.catalog))]
    if named is not None:
        if named.collection_id is None or named.item_id is None:
            raise InvalidArgument("preview needs href, or collection_id + item_id (+ asset or assets)")
        ref, item = named, get_item(core, named.collection_id, named.item_id, named.catalog)
    else:
        item = item_dict(source) or get_item(core, *item_ref(source), ref.catalog)
    return [
        access.asset_source(core, item, name, catalog=ref.catalog) for name in preview_assets(item, assets)
    ]


def preview_assets(item: dict, assets: Sequence[str] | None) -> list[str]:
    """Which assets of `item` a preview shows (names as given; resolved with find_asset)."""
    if assets:
        if len(assets) not in (1, 3):
            raise InvalidArgument("assets: give 1 asset (single band) or 3 (red, green, blue)")
        return list(assets)
    for choice in (["visual"], ["red", "green", "blue"]):
        try:
            for name in choice:
                access.find_asset(item, name)
            return choice
        except AssetNotFound:
            continue
    for key, asset in (item.get("assets") or {}).items():
        roles = asset.get("roles") or []
        if "data" in roles and "tiff" in (asset.get("type") or "").lower():
            return [key]
    raise AssetNotFound(f"item '{item.get('id')}' has no visual, red/green/blue or data asset to preview")


def item_refs(items: Any) -> list | None:
    """The items of an item-list operation: search results as `{collection_id, item_id}` refs;
    any other list as it is (each checked where it is read)."""
    if getattr(type(items), "result_kind", None) == "search":
        return [{"collection_id": s.collection, "item_id": s.id} for s in items.summaries]
    return None if items is None else list(items)


def item_dict(source: Any) -> dict | None:
    """A full STAC item from `source` (a dict with assets, or a pystac.Item), else None."""
    if isinstance(source, dict) and "assets" in source:
        return source
    to_dict = getattr(source, "to_dict", None)
    if callable(to_dict) and getattr(source, "assets", None) is not None and hasattr(source, "collection_id"):
        return to_dict()
    return None


def item_ref(source: Any) -> tuple[str, str]:
    """(collection_id, item_id) of an ItemSummary, a {collection_id, item_id} dict or a pair."""
    from ..models import ItemSummary
    from ..processing.items import reference

    if isinstance(source, ItemSummary) and source.collection:
        return source.collection, source.id
    if isinstance(source, dict):
        ref = reference(source)  # the one reading of both spellings
        if ref["collection_id"] and ref["item_id"]:
            return str(ref["collection_id"]), str(ref["item_id"])
    if isinstance(source, (tuple, list)) and len(source) == 2 and all(isinstance(v, str) for v in source):
        return source[0], source[1]
    raise InvalidArgument(
        "name the input as an href, a STAC item (dict or pystac.Item), an ItemSummary, "
        f"or (collection_id, item_id); got {type(source).__name__}"
    )
