"""Compact summaries of STAC items and collections: what an agent needs to choose, nothing more.

(`band_common_names`, `proj_code` and `thumbnail_href` live in `stac_gdal_mcp.stac`; they are
imported here for the modules that still look for them here.)
"""

from __future__ import annotations

import math
from typing import Any

from ..catalogs.bounds import ID_CHARS, TEXT_CHARS, cut
from ..models import (
    AssetDefinition,
    AssetSummary,
    CollectionDetail,
    CollectionSummary,
    ItemSummary,
    most_shared,
)
from ..stac import band_common_names, is_thumbnail, item_datetime, proj_code, thumbnail_href

MAX_ASSETS = 200  # assets named in one summary


def item_summary(item: dict) -> ItemSummary:
    """The summary of `item`; its strings cut to ID_CHARS (names) or TEXT_CHARS (hrefs), with a
    marker, and at most MAX_ASSETS assets (a last key says how many more there are). The
    thumbnail is its own field; metadata files (assets whose one role is "metadata": XML, text,
    JSON sidecars) are left out - a summary is for choosing scenes, get_item lists them."""
    props = item.get("properties", {})
    assets = item.get("assets", {})
    gsd = _number(props.get("gsd"))
    if gsd is None:
        gsd = next(
            (_number(a.get("gsd")) for a in assets.values() if _number(a.get("gsd")) is not None), None
        )
    cloud = _number(props.get("eo:cloud_cover"))
    shown_assets = {
        _name(key): AssetSummary(
            roles=[_name(r) for r in asset.get("roles") or []][:MAX_ASSETS],
            bands=[_name(b) for b in band_common_names(asset)][:MAX_ASSETS],
        )
        for key, asset in list(assets.items())[:MAX_ASSETS]
        if not is_thumbnail(key, asset) and (asset.get("roles") or []) != ["metadata"]
    }
    if len(assets) > MAX_ASSETS:
        shown_assets[f"…[{len(assets) - MAX_ASSETS:,} more assets]"] = AssetSummary()
    thumbnail = thumbnail_href(item)
    return ItemSummary(
        id=_name(item["id"]),
        collection=_name(item.get("collection")),
        datetime=_name(item_datetime(item)),
        cloud_cover=None if cloud is None else round(cloud, 2),
        bbox=_outward(item["bbox"]) if item.get("bbox") else None,
        platform=_name(props.get("platform")),
        gsd=gsd,
        proj_code=_name(proj_code(props)),
        assets=shown_assets,
        thumbnail=cut(thumbnail, TEXT_CHARS) if isinstance(thumbnail, str) else thumbnail,
    )


def _name(value):
    return cut(value, ID_CHARS) if isinstance(value, str) else value


def _number(value) -> float | None:
    """A finite number, or None for anything else (a catalog's text where a number belongs)."""
    if isinstance(value, str) and len(value) < 40:
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _outward(bbox: list[float], digits: int = 4) -> list[float]:
    """`bbox` rounded to `digits` decimals (1e-4 degree: about 11 m) away from its centre, so the
    rounded box still contains the footprint."""
    half = len(bbox) // 2
    scale = 10**digits
    low = [math.floor(v * scale) / scale for v in bbox[:half]]
    high = [math.ceil(v * scale) / scale for v in bbox[half:]]
    return [*low, *high]


def _short(text: str | None, n: int = 240) -> str | None:
    if not text:
        return text
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3].rsplit(" ", 1)[0] + "..."


def collection_summary(collection: dict) -> CollectionSummary:
    extent = collection.get("extent") or {}
    spatial = ((extent.get("spatial") or {}).get("bbox") or [None])[0]
    if isinstance(spatial, list) and all(_number(v) is not None for v in spatial):
        spatial = _outward(spatial)
    temporal = ((extent.get("temporal") or {}).get("interval") or [None])[0]
    return CollectionSummary(
        id=_name(collection["id"]),
        title=_short(collection.get("title")),
        description=_short(collection.get("description")),
        spatial_extent=spatial,
        temporal_extent=temporal,
        license=_name(collection.get("license")),
        asset_keys=[_name(k) for k in sorted((collection.get("item_assets") or {}).keys())][:MAX_ASSETS],
    )


_USEFUL_LINKS = {"license", "about", "cite-as", "describedby", "documentation", "items", "queryables"}


def collection_detail(collection: dict) -> CollectionDetail:
    extent = collection.get("extent") or {}
    item_assets = {
        key: AssetDefinition(
            title=a.get("title"),
            type=a.get("type"),
            roles=a.get("roles") or [],
            bands=band_common_names(a),
            gsd=a.get("gsd"),
        )
        for key, a in (collection.get("item_assets") or {}).items()
    }
    links = [
        {k: v for k, v in link.items() if k in ("rel", "href", "title", "type")}
        for link in collection.get("links", [])
        if link.get("rel") in _USEFUL_LINKS
    ]
    summaries: dict[str, Any] = collection.get("summaries") or {}
    return CollectionDetail(
        id=collection["id"],
        title=collection.get("title"),
        description=collection.get("description"),
        license=collection.get("license"),
        spatial_extent=(extent.get("spatial") or {}).get("bbox"),
        temporal_extent=(extent.get("temporal") or {}).get("interval"),
        summaries=summaries,
        item_assets=item_assets,
        providers=collection.get("providers") or [],
        links=links,
        keywords=collection.get("keywords") or [],
    )


ITEM_KEYS = ("id", "collection", "bbox", "properties")
ASSET_KEYS = ("href", "type", "roles")


def item_view(item: dict, fields=None, max_bytes: int | None = None) -> dict:
    """What get_item answers: the item's id, collection, bbox and properties, and per asset its
    href, media type, roles and bands (common names, else names) - not its links, geometry nor
    the metadata each asset repeats (raster:bands, proj:*, file:*). The type and roles most
    assets share are said once, as `asset_defaults`; an asset names them only when its own
    differ. `fields` (STAC fields extension, see fields.py) answers those parts of the full item
    instead. `max_bytes` (limits.max_result_bytes): a larger answer has its long strings cut,
    each marked, and a note saying so (catalogs/bounds.py)."""
    from ..catalogs import ResultBudget
    from .fields import apply_fields, parse_fields

    chosen = parse_fields(fields)
    budget = ResultBudget(max_bytes)
    view = apply_fields(item, chosen) if chosen is not None else _view(item)
    fitted = budget.fit(view)
    return {**fitted, "notes": budget.notes} if budget.shrunk else fitted


def _view(item: dict) -> dict:
    """The item as get_item answers it by default (see item_view)."""
    out = {key: item[key] for key in ITEM_KEYS if item.get(key) is not None}
    assets = {}
    for key, asset in (item.get("assets") or {}).items():
        view = {k: asset[k] for k in ASSET_KEYS if asset.get(k)}
        bands = band_common_names(asset) or [
            b["name"] for b in (asset.get("eo:bands") or asset.get("bands") or []) if b.get("name")
        ]
        if bands:
            view["bands"] = bands
        assets[key] = view
    defaults = {k: most_shared([a.get(k) for a in assets.values()]) for k in ("type", "roles")}
    defaults = {k: v for k, v in defaults.items() if v is not None}
    for view in assets.values():
        for k, v in defaults.items():
            if view.get(k) == v:
                del view[k]
            elif k not in view:
                view[k] = None  # said: it is not the default
    if defaults:
        out["asset_defaults"] = defaults
    out["assets"] = assets
    return out
