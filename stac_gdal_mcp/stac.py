"""Reading STAC JSON: links, assets and the few item properties everything else needs; and the
two facts every document written here shares: a raster's WGS84 footprint and a collection's extent.

Plain functions over the dicts of STAC 1.0 and 1.1 documents (items, collections, landing
pages, API responses), so the rest of the package never walks `links` or `eo:bands` by hand.
`footprint` is the one footprint of the package: output records (`processing.records`) and the
`index` command's items (`catalogs.indexing`) both take theirs from it; `collection_extent` is
the extent of the workspace catalog's collections and of an index's collection.
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


WORLD = [-180.0, -90.0, 180.0, 90.0]


def footprint(crs, bounds, per_edge: int = 4) -> tuple[dict[str, Any], list[float]]:
    """The WGS84 footprint polygon of `bounds` (left, bottom, right, top) in `crs`, and its bbox:
    rio-stac's `get_dataset_geom`, each edge cut in `per_edge` pieces (so that curved edges stay
    close) and coordinates rounded to 7 decimals (~1 cm). The target is OGC:CRS84 (longitude,
    latitude): a grid already in EPSG:4326 is densified too, so that every footprint has the
    same shape whatever the CRS."""
    from types import SimpleNamespace

    from rasterio.crs import CRS
    from rio_stac.stac import get_dataset_geom

    found = get_dataset_geom(
        SimpleNamespace(crs=crs, bounds=tuple(bounds)),  # all it reads of a dataset
        densify_pts=per_edge,
        precision=7,
        geographic_crs=CRS.from_string("OGC:CRS84"),
    )
    geometry = {"type": found["footprint"]["type"], "coordinates": _lists(found["footprint"]["coordinates"])}
    return geometry, [round(float(v), 7) for v in found["bbox"]]


def _lists(coordinates):
    """Coordinates as JSON arrays of floats (rasterio gives tuples)."""
    if isinstance(coordinates[0], (list, tuple)):
        return [_lists(c) for c in coordinates]
    return [float(v) for v in coordinates]


def collection_extent(items: list[dict]) -> dict[str, Any]:
    """The STAC `extent` of a collection of `items`: the union of their bboxes (the world when
    none has one) and the interval from the first to the last of their datetimes, start and end
    datetimes."""
    boxes = [i["bbox"] for i in items if i.get("bbox")]
    bbox = (
        [
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        ]
        if boxes
        else list(WORLD)
    )
    times = sorted(
        t
        for i in items
        for t in (i["properties"].get(k) for k in ("datetime", "start_datetime", "end_datetime"))
        if t
    )
    return {
        "spatial": {"bbox": [bbox]},
        "temporal": {"interval": [[times[0] if times else None, times[-1] if times else None]]},
    }
