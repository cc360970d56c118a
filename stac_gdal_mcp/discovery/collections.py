"""Collections, queryables and single items of a catalog.

Every function takes the `Core` (settings, catalogs, cursor codec) first, like the rest of the
core; `get_item` is the one way an item is fetched (asset hrefs signed where the catalog needs it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..catalogs import LocalCatalog, PageTrail, RemoteCatalog, cursors
from ..catalogs.bounds import ID_CHARS, cut
from ..catalogs.geoparquet import GeoparquetCatalog
from ..errors import InvalidArgument, InvalidCursor, NotFound
from ..models import CollectionDetail, CollectionList, Queryable, Queryables
from ..stac import link_href
from .summaries import collection_detail, collection_summary

if TYPE_CHECKING:
    from ..core import Core


def _matches_text(collection: dict, q: str) -> bool:
    words = [w.lower() for w in q.replace(",", " ").split() if w]
    haystack = " ".join(
        [collection.get("id", ""), collection.get("title") or "", collection.get("description") or ""]
        + list(collection.get("keywords") or [])
    ).lower()
    return any(w in haystack for w in words)


def list_collections(
    core: Core,
    catalog: str | None = None,
    q: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> CollectionList:
    """One page of a catalog's collections (free-text `q` applied here when the API cannot)."""
    settings = core.settings
    cat = core.catalogs.get(catalog)
    limit = limit or settings.limits.page_size
    if limit < 1:
        raise InvalidArgument("limit must be a positive integer")
    limit = min(limit, settings.limits.max_items)
    notes: list[str] = []
    state = core.cursors.decode(cursor, "collections", cat.id) if cursor else None

    if isinstance(cat, (LocalCatalog, GeoparquetCatalog)) or (not cat.features.free_text and q):
        # Filter the whole list here: local catalogs, or APIs without free-text collection search.
        if isinstance(cat, RemoteCatalog):
            notes.append(f"catalog '{cat.id}' lacks free-text collection search: q applied client-side")
        all_collections = (
            list(cat.collections.values()) if not isinstance(cat, RemoteCatalog) else _all_collections(cat)
        )
        chosen = [c for c in all_collections if not q or _matches_text(c, q)]
        offset = cursors.offset(state, total=len(chosen)) if state else 0
        page = chosen[offset : offset + limit]
        end = offset + len(page)
        return CollectionList(
            collections=[collection_summary(c) for c in page],
            returned=len(page),
            matched=len(chosen),
            next_cursor=core.cursors.encode("collections", cat.id, {"offset": end})
            if end < len(chosen)
            else None,
            notes=notes,
        )

    href = cursors.checked(state, "href", str, optional=False) if state else cat.link("data", "collections")
    if urlsplit(href).netloc != urlsplit(cat.url).netloc:
        raise InvalidCursor(f"cursor does not point into catalog '{cat.id}'")
    params = None if state else {"limit": limit, **({"q": q} if q else {})}
    response = cat.request(href, "GET", params)
    collections = response.get("collections", [])
    following = link_href(response, "next")
    return CollectionList(
        collections=[collection_summary(c) for c in collections],
        returned=len(collections),
        matched=response.get("numberMatched"),
        next_cursor=core.cursors.encode("collections", cat.id, {"href": following}) if following else None,
        notes=notes,
    )


def _all_collections(cat: RemoteCatalog, max_pages: int = 50) -> list[dict]:
    href, params, out, trail = cat.link("data", "collections"), {"limit": 100}, [], PageTrail()
    for _ in range(max_pages):
        if trail.leads_back(href, "GET", params):  # a next link back to a page already read
            break
        trail.visit(href, "GET", params)
        response = cat.request(href, "GET", params)
        out += response.get("collections", [])
        href = link_href(response, "next")
        if not href:
            break
        params = None
    return out


def all_collection_ids(cat: RemoteCatalog | LocalCatalog) -> list[str]:
    if isinstance(cat, (LocalCatalog, GeoparquetCatalog)):
        return list(cat.collections)
    return [c["id"] for c in _all_collections(cat)]


def get_collection(core: Core, collection_id: str, catalog: str | None = None) -> CollectionDetail:
    """One collection: extent, summaries, item_assets, providers, license, useful links."""
    return collection_detail(core.catalogs.get(catalog).collection(collection_id))


def get_collection_json(core: Core, collection_id: str, catalog: str | None = None) -> dict:
    """A collection's full STAC JSON."""
    return core.catalogs.get(catalog).collection(collection_id)


def get_item(core: Core, collection_id: str, item_id: str, catalog: str | None = None) -> dict:
    """The full STAC item, asset hrefs signed where the catalog needs it (signed once, by the
    catalog's `item`)."""
    return core.catalogs.get(catalog).item(collection_id, item_id)


def _queryables_from_schema(schema: dict) -> list[Queryable]:
    out = []
    for name, spec in sorted((schema.get("properties") or {}).items()):
        kind = spec.get("type")
        if kind is None and "$ref" in spec:
            kind = spec["$ref"].rsplit("/", 1)[-1]
        if kind is None and spec.get("format"):
            kind = spec["format"]
        out.append(
            Queryable(
                name=name,
                type=kind if isinstance(kind, str) else None,
                title=spec.get("title"),
                description=(spec.get("description") or None) and spec["description"][:200],
                enum=spec.get("enum"),
            )
        )
    return out


def _infer_queryables(items: list[dict]) -> list[Queryable]:
    kinds: dict[str, str] = {
        "id": "string",
        "collection": "string",
        "geometry": "geometry",
        "datetime": "datetime",
    }
    for item in items:
        for key, value in item.get("properties", {}).items():
            if key in kinds or value is None:
                continue
            kinds[key] = (
                "boolean"
                if isinstance(value, bool)
                else "integer"
                if isinstance(value, int)
                else "number"
                if isinstance(value, float)
                else "string"
                if isinstance(value, str)
                else "array"
                if isinstance(value, list)
                else "object"
            )
    return [Queryable(name=cut(k, ID_CHARS), type=v) for k, v in sorted(kinds.items())]


def get_queryables(core: Core, collection_id: str | None = None, catalog: str | None = None) -> Queryables:
    """Properties usable in `filter`/`query`, with types (inferred for local catalogs)."""
    cat = core.catalogs.get(catalog)
    if isinstance(cat, GeoparquetCatalog):  # typed by the Parquet schema
        return Queryables(collection_id=collection_id, queryables=cat.queryables(collection_id))
    if isinstance(cat, LocalCatalog):
        items = cat.items
        if collection_id is not None:
            cat.collection(collection_id)
            items = [i for i in items if i.get("collection") == collection_id]
        return Queryables(
            collection_id=collection_id,
            queryables=_infer_queryables(items),
            notes=["local catalog: queryables inferred from the items' properties; filters run in-process"],
        )
    if collection_id is not None:
        cat.collection(collection_id)
        href = f"{cat.collection_url(collection_id)}/queryables"
    else:
        href = cat.link("http://www.opengis.net/def/rel/ogc/1.0/queryables", "queryables")
    try:
        schema = cat.request(href)
    except NotFound:
        return Queryables(
            collection_id=collection_id,
            queryables=[],
            notes=[f"catalog '{cat.id}' publishes no queryables; it may not support the filter extension"],
        )
    return Queryables(collection_id=collection_id, queryables=_queryables_from_schema(schema))
