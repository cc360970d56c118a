"""Discovery tools, resources and prompts: catalogs, collections, queryables, search, items.
Each is one call of a Session method (prompts are registered by `register_prompts`)."""

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ...discovery.federated import FederatedSearchResult
from ...discovery.query import ItemSearch
from ...discovery.sources import open_source
from ...discovery.summaries import item_view
from ...discovery.table import answer_text, records_table
from ...models import (
    CatalogList,
    CollectionDetail,
    CollectionList,
    ItemSummary,
    MapLayer,
    Queryables,
    SearchAnswer,
    map_area,
)
from ...session import Session
from ...stac import is_thumbnail
from . import READ_ONLY, declared_by, session_resource, session_tool
from .args import CatalogArg, FieldsArg

CollectionIdArg = Annotated[str, Field(description="collection id")]
ItemIdArg = Annotated[str, Field(description="item id")]


@session_tool(READ_ONLY)
def list_catalogs(
    session: Session,
    check_reachable: Annotated[bool, Field(description="also contact the remote catalogs")] = False,
) -> CatalogList:
    """The configured STAC catalogs: id, title, url or path, search features, reachability (remote:
    check_reachable=true). Ids are other tools' `catalog`; "sample" works offline."""
    return CatalogList(catalogs=session.catalogs(check_reachable=check_reachable))


@session_tool(READ_ONLY)
def list_collections(
    session: Session,
    catalog: CatalogArg = None,
    q: Annotated[str | None, Field(description="free text (id, title, description, keywords)")] = None,
    limit: Annotated[int | None, Field(ge=1, description="collections per page")] = None,
    cursor: Annotated[str | None, Field(description="the previous call's next_cursor")] = None,
) -> CollectionList:
    """A catalog's collections: id, title, short description, extent, license, asset keys."""
    listed = session.collections(catalog, q=q, limit=limit, cursor=cursor)
    return text_result(records_table(listed, "collections"), listed)


@session_tool(READ_ONLY)
def get_collection(
    session: Session, collection_id: CollectionIdArg, catalog: CatalogArg = None
) -> CollectionDetail:
    """A collection: extent, summaries, item_assets (roles, bands, gsd), providers, license, links."""
    return session.collection(collection_id, catalog)


@session_tool(READ_ONLY)
def get_queryables(
    session: Session,
    collection_id: Annotated[str | None, Field(description="collection id (none: the catalog)")] = None,
    catalog: CatalogArg = None,
) -> Queryables:
    """Properties search_items can `filter` (CQL2) or `query` by, with their types."""
    return session.queryables(collection_id, catalog)


@session_tool(READ_ONLY, app=True)
@declared_by(ItemSearch, SearchAnswer)
def search_items(session: Session, **arguments) -> SearchAnswer:
    """Search catalogs for items (scenes): a table (`columns`, `rows`, what a collection's
    items share), `matched`, `next_cursor`, `notes`; several catalogs: one merged.

    Example: search_items(catalog="sample", collections=["sentinel-2-l2a"], bbox=[13.55, 45.85,
    13.75, 45.98], datetime="2024-06/2024-08", max_cloud_cover=20).
    """
    results = session.search(**arguments)
    page = FederatedSearchResult.model_construct(**dict(results.page))  # one catalog's: catalogs None
    page = page.model_copy(update={"items": _local_thumbnails(session, page.items)})
    source = open_source(session.core, arguments.get("catalog"), several=True)
    detail = arguments.get("detail", "summary")
    text, page = answer_text(source, page, detail, arguments.get("fields"))
    value = text if isinstance(text, dict) else counted_page(page)
    layer = MapLayer.of_items(page.items, area=map_area(arguments), notes=value.get("notes") or [])
    return text_result(text, value, layer)  # the map draws the footprints, the area and the notes


def counted_page(page) -> dict:
    """A count's structured content: the page's fields that have a value (no items)."""
    return {
        k: v for k, v in page.model_dump(mode="json").items() if v is not None and v != [] and k != "items"
    }


def text_result(text: dict | str, value, layer: MapLayer | None = None):
    """A ToolResult whose text (what an agent reads) is `text` as compact JSON and whose
    structured content (what an app or a program reads) is `value` (a dict: the same compact
    form); `layer`: what the map draws of it, in `_meta` (the server turns it into the map's view)."""
    import pydantic_core
    from fastmcp.tools.base import ToolResult
    from mcp.types import TextContent

    text = text if isinstance(text, str) else pydantic_core.to_json(text).decode()
    text_block = TextContent(type="text", text=text)
    structured = value if isinstance(value, dict) else value.model_dump(mode="json")
    meta = layer.as_meta() if layer is not None else None
    return ToolResult(content=[text_block], structured_content=structured, meta=meta)


THUMBNAIL_URI = "stac://{catalog}/collections/{collection_id}/items/{item_id}/thumbnail"


def _local_roots(session: Session) -> dict[str, Path]:
    """The folder of each local catalog (a catalog file's folder, or the folder itself)."""
    roots = {}
    for config in session.settings.catalogs:
        if config.path is not None and "*" not in str(config.path):
            path = Path(config.path).resolve()
            roots[config.id] = path if path.is_dir() else path.parent
    return roots


def _local_thumbnails(session: Session, items: list) -> list:
    """Summaries whose thumbnail is a file of a local catalog name it by its resource
    (THUMBNAIL_URI), which a client can read, instead of the server's file path."""
    roots = _local_roots(session)
    out = []
    for item in items:
        href = item.thumbnail if isinstance(item, ItemSummary) else None
        if href and "://" not in href and item.collection:
            path = Path(href).resolve()
            found = next((cid for cid, root in roots.items() if path.is_relative_to(root)), None)
            if found:
                uri = THUMBNAIL_URI.format(catalog=found, collection_id=item.collection, item_id=item.id)
                item = item.model_copy(update={"thumbnail": uri})
        out.append(item)
    return out


@session_resource(THUMBNAIL_URI, mime_type="image/png")
def thumbnail_resource(session: Session, catalog: str, collection_id: str, item_id: str):
    """The thumbnail image of an item of a local catalog (a file inside the catalog's folder)."""
    from fastmcp.resources import ResourceContent, ResourceResult

    from ...errors import AccessDenied, AssetNotFound, LimitExceeded

    item = session.get_item(collection_id, item_id, catalog)
    key, asset = next(((k, a) for k, a in item.get("assets", {}).items() if is_thumbnail(k, a)), (None, {}))
    href = str(asset.get("href") or "").removeprefix("file://")
    root = _local_roots(session).get(catalog)
    if not href or "://" in href:
        raise AssetNotFound(f"item '{item_id}' has no thumbnail file in catalog '{catalog}'")
    path = Path(href).resolve()
    if root is None or not path.is_relative_to(root) or not path.is_file():
        raise AccessDenied(f"the thumbnail of item '{item_id}' is not a file inside catalog '{catalog}'")
    limit = session.settings.limits.max_resource_bytes
    if path.stat().st_size > limit:
        raise LimitExceeded(
            f"the thumbnail of item '{item_id}' is larger than limits.max_resource_bytes={limit}"
        )
    media = asset.get("type") or {".jpg": "image/jpeg", ".jpeg": "image/jpeg"}.get(
        path.suffix.lower(), "image/png"
    )
    return ResourceResult([ResourceContent(path.read_bytes(), mime_type=media)])


@session_tool(READ_ONLY)
def get_item(
    session: Session,
    collection_id: CollectionIdArg,
    item_id: ItemIdArg,
    catalog: CatalogArg = None,
    fields: FieldsArg = None,
) -> dict[str, Any]:
    """An item: properties, bbox, assets (href, type, roles, bands). Links, geometry, other
    asset metadata: by `fields`."""
    limit = session.settings.limits.max_result_bytes
    return item_view(session.get_item(collection_id, item_id, catalog), fields, limit)


@session_resource("stac://catalogs", mime_type="application/json")
def catalogs_resource(session: Session) -> str:
    """The configured catalogs."""
    return CatalogList(catalogs=session.catalogs()).model_dump_json(exclude_none=True)


@session_resource("stac://{catalog}/collections/{collection_id}", mime_type="application/json")
def collection_resource(session: Session, catalog: str, collection_id: str) -> str:
    """A collection's full STAC JSON."""
    return json.dumps(session.collection_json(collection_id, catalog))


@session_resource(
    "stac://{catalog}/collections/{collection_id}/items/{item_id}", mime_type="application/json"
)
def item_resource(session: Session, catalog: str, collection_id: str, item_id: str) -> str:
    """An item as get_item answers it: properties, bbox, assets' hrefs (signed), roles and bands."""
    limit = session.settings.limits.max_result_bytes
    return json.dumps(item_view(session.get_item(collection_id, item_id, catalog), max_bytes=limit))


def _checked_prompt(fn, description: str):
    """`fn` as a prompt whose missing required arguments are one clear error naming them (fastmcp's
    own check is masked as "Error rendering prompt")."""
    from fastmcp.exceptions import PromptError
    from fastmcp.prompts.function_prompt import FunctionPrompt

    class CheckedPrompt(FunctionPrompt):
        async def render(self, arguments=None):
            required = [a.name for a in self.arguments or [] if a.required]
            missing = [name for name in required if not (arguments or {}).get(name)]
            if missing:
                raise PromptError(
                    f"prompt {self.name!r} needs {', '.join(missing)} (required: {', '.join(required)})"
                )
            return await super().render(arguments)

    # the description given, not a docstring: fastmcp would import griffe to parse it (cold start)
    return CheckedPrompt.from_function(fn, description=description)


def find_clear_imagery(place: str, start: str, end: str, max_cloud_cover: int = 60) -> str:
    return (
        f"Find the clearest satellite imagery of {place} between {start} and {end}.\n"
        "1. Work out the area of interest: a WGS84 bbox [west, south, east, north] around the place "
        "(small: a town, a field, a lake).\n"
        '2. list_catalogs ("sample" works offline), then list_collections to pick a collection '
        "(sentinel-2-l2a for 10 m optical, landsat-c2-l2 for a longer record).\n"
        f"3. search_items(catalog=..., collections=[...], bbox=..., datetime='{start}/{end}', "
        f"max_cloud_cover={max_cloud_cover}) to see what there is. Scene-wide eo:cloud_cover says "
        "little about a small area, so do not rank by it.\n"
        '4. cloud_cover_stats(aoi=<the bbox>, search={"catalog": ..., "collections": [...], '
        f'"datetime": "{start}/{end}", "max_cloud_cover": {max_cloud_cover}}}): how cloudy the area '
        "itself was in each scene, clearest first.\n"
        "5. For the clearest scene (highest clear_fraction, low nodata_fraction): preview(catalog=..., "
        "collection_id=..., item_id=..., bbox=<the bbox>) to show it. If no single scene is clear "
        'enough, composite(aoi=<the bbox>, bands=["red", "green", "blue"], search=<as in 4>, '
        "quicklook=true) for a cloud-free picture.\n"
        "6. Report the best few scenes (id, date, clear fraction in the area, scene cloud cover) and "
        "any `notes` the tools returned."
    )


def explore_catalog(catalog: str) -> str:
    return (
        f"Explore the STAC catalog '{catalog}': call list_catalogs(check_reachable=true) to see "
        f"what '{catalog}' supports, list_collections(catalog='{catalog}') for its collections, "
        "get_collection on the most relevant ones (assets, bands, resolution, time range) and "
        "get_queryables to see what can be filtered. Summarise what the catalog is good for."
    )


def register_prompts(mcp) -> None:
    """The prompts (no session needed)."""
    mcp.add_prompt(
        _checked_prompt(
            find_clear_imagery,
            "Find the clearest imagery of a place: search, cloud cover in the area itself "
            "(cloud_cover_stats), then a preview or a composite of the clearest.",
        )
    )
    mcp.add_prompt(_checked_prompt(explore_catalog, "Get to know a STAC catalog."))
