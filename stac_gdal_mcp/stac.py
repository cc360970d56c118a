"""Reading STAC JSON: links, assets and the few item properties everything else needs.

Plain functions over the dicts of STAC 1.0 and 1.1 documents (items, collections, landing
pages, API responses), so the rest of the package never walks `links` or `eo:bands` by hand.
"""

from __future__ import annotations

from typing import Any


def find_link(doc: dict, rel: str, *, method: str | None = None) -> dict | None:
    """The first link of `doc` with relation `rel` and an href (and HTTP `method`, if given;
    a link without one is GET)."""
    for link in doc.get("links") or []:
        if link.get("rel") != rel or not link.get("href"):
            continue
        if method is None or str(link.get("method", "GET")).upper() == method.upper():
            return link
    return None


def link_href(doc: dict, rel: str) -> str | None:
    """The href of the first link of `doc` with relation `rel` (None if there is none)."""
    link = find_link(doc, rel)
    return link["href"] if link else None


def band_common_names(asset: dict) -> list[str]:
    """Band common names of an asset, from STAC 1.0 `eo:bands` or STAC 1.1 `bands`."""
    names = []
    for band in asset.get("eo:bands") or []:
        if band.get("common_name"):
            names.append(band["common_name"])
    for band in asset.get("bands") or []:
        name = band.get("eo:common_name") or band.get("common_name")
        if name:
            names.append(name)
    return names


def band_entries(asset: dict) -> list[dict[str, Any]]:
    """Every band entry of an asset: STAC 1.0 `raster:bands`, then STAC 1.1 `bands`."""
    return list(asset.get("raster:bands") or []) + list(asset.get("bands") or [])


def raster_band(asset: dict) -> dict[str, Any]:
    """The first `raster:bands` entry of an asset (scale, offset, nodata, ...), or {}."""
    return ((asset.get("raster:bands") or [{}])[0]) or {}


def proj_code(properties: dict) -> str | None:
    """`proj:code`, or `proj:epsg` as "EPSG:<code>", of item properties or an asset."""
    if properties.get("proj:code"):
        return properties["proj:code"]
    if properties.get("proj:epsg") is not None:
        return f"EPSG:{properties['proj:epsg']}"
    return None


def item_datetime(item: dict) -> str | None:
    """The item's `datetime`, or its `start_datetime` when it covers an interval."""
    props = item.get("properties") or {}
    return props.get("datetime") or props.get("start_datetime")


def is_thumbnail(key: str, asset: dict) -> bool:
    return key == "thumbnail" or "thumbnail" in (asset.get("roles") or [])


def thumbnail_href(item: dict) -> str | None:
    """The href of the item's thumbnail asset (role or key `thumbnail`), if it has one."""
    for key, asset in (item.get("assets") or {}).items():
        if is_thumbnail(key, asset):
            return asset.get("href")
    return None
