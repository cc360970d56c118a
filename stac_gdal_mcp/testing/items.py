"""STAC 1.0 Collection and Item dicts of the imitated catalogs for a given grid, and their
footprints in WGS84."""

from __future__ import annotations

import datetime as _dt
import itertools
import math
import re
from typing import Any

from .kinds import (
    CLASSIFICATION_SCHEMA,
    COG_MEDIA_TYPE,
    EO_SCHEMA,
    GRID_SCHEMA,
    ITEM_ASSETS_SCHEMA,
    LANDSAT_SCHEMA,
    PROJECTION_SCHEMA,
    RASTER_SCHEMA,
    STAC_VERSION,
    _eo_band,
    _kind_info,
)
from .masks import SCL_CLASSES, SCL_NODATA, _qa_pixel_bitfields

# ------------------------------------------------------------ asset definitions


def _asset_definitions(kind: str, pixel_size: float, with_visual: bool = True) -> dict[str, dict]:
    """Asset definitions without href/proj, keyed like the imitated catalog.

    Each definition carries a private ``_factor`` (asset pixel size / item pixel size) and
    ``_dtype``; :func:`item` and :func:`collection` strip them.
    """
    info = _kind_info(kind)
    sentinel = kind == "sentinel-2-l2a"
    assets: dict[str, dict] = {}
    for key, name, common_name, description, center, fwhm in info["bands"]:
        title = (
            f"{description} - {pixel_size:g}m"
            if sentinel
            else f"{description} band ({name}) surface reflectance"
        )
        assets[key] = {
            "title": title,
            "type": COG_MEDIA_TYPE,
            "roles": ["data"],
            "gsd": pixel_size,
            "eo:bands": [_eo_band(name, common_name, description, center, fwhm)],
            "raster:bands": [
                {
                    "nodata": 0,
                    "data_type": "uint16",
                    "bits_per_sample": info["bits_per_sample"],
                    "spatial_resolution": pixel_size,
                    "scale": info["scale"],
                    "offset": info["offset"],
                }
            ],
            "_factor": 1,
            "_dtype": "uint16",
        }
    if sentinel:
        mask_size = pixel_size * info["mask_factor"]
        assets["scl"] = {
            "title": f"Scene classification map (SCL) - {mask_size:g}m",
            "type": COG_MEDIA_TYPE,
            "roles": ["data"],
            "gsd": mask_size,
            "raster:bands": [{"nodata": 0, "data_type": "uint8", "spatial_resolution": mask_size}],
            "classification:classes": [
                {
                    "value": v,
                    "name": n,
                    "description": d,
                    "color_hint": c,
                    **({"nodata": True} if v == SCL_NODATA else {}),
                }
                for v, n, d, c in SCL_CLASSES
            ],
            "_factor": info["mask_factor"],
            "_dtype": "uint8",
        }
        if with_visual:
            rgb = [b for b in info["bands"] if b[0] in ("red", "green", "blue")]
            assets["visual"] = {
                "title": f"True color image - {pixel_size:g}m",
                "type": COG_MEDIA_TYPE,
                "roles": ["visual"],
                "gsd": pixel_size,
                "eo:bands": [_eo_band(*b[1:]) for b in rgb],
                "raster:bands": [{"nodata": 0, "data_type": "uint8", "spatial_resolution": pixel_size}] * 3,
                "_factor": 1,
                "_dtype": "uint8",
            }
    else:
        assets["qa_pixel"] = {
            "title": "Pixel Quality Assessment Band",
            "type": COG_MEDIA_TYPE,
            "roles": ["cloud"],
            "gsd": pixel_size,
            "description": "Collection 2 Level-2 pixel quality band (QA_PIXEL) bit field",
            "raster:bands": [
                {"nodata": 1, "data_type": "uint16", "unit": "bit index", "spatial_resolution": pixel_size}
            ],
            "classification:bitfields": _qa_pixel_bitfields(),
            "_factor": 1,
            "_dtype": "uint16",
        }
    assets["thumbnail"] = {
        "title": "Thumbnail image",
        "type": "image/png",
        "roles": ["thumbnail"],
        "_factor": None,
        "_dtype": "uint8",
    }
    return assets


def _public(definition: dict) -> dict:
    return {k: v for k, v in definition.items() if not k.startswith("_")}


# -------------------------------------------------------------------- geometry


def footprint(epsg: int, transform, shape) -> tuple[dict, list[float]]:
    """(GeoJSON polygon, bbox) in WGS84 of a grid given as EPSG code + affine + (rows, cols)."""
    from pyproj import Transformer
    from shapely.geometry import Polygon
    from shapely.geometry.polygon import orient

    a, b, c, d, e, f = transform[:6]
    rows, cols = shape
    corners = [(0, 0), (cols, 0), (cols, rows), (0, rows), (0, 0)]
    ring = []
    for (c0, r0), (c1, r1) in itertools.pairwise(corners):  # densify: UTM edges curve in lon/lat
        for t in (i / 8 for i in range(8)):
            col, row = c0 + (c1 - c0) * t, r0 + (r1 - r0) * t
            ring.append((a * col + b * row + c, d * col + e * row + f))
    to_wgs84 = Transformer.from_crs(epsg, 4326, always_xy=True)
    lon, lat = to_wgs84.transform([p[0] for p in ring], [p[1] for p in ring])
    polygon = orient(Polygon([(round(x, 8), round(y, 8)) for x, y in zip(lon, lat)]))
    return _geojson(polygon), [round(v, 8) for v in polygon.bounds]


def mgrs_tile(lon: float, lat: float) -> str:
    """MGRS 100 km grid square (Sentinel-2 tile id, e.g. '33TUL') containing lon/lat.

    Standard UTM zones only (the Norway/Svalbard exceptions are ignored).
    """
    from pyproj import Transformer

    zone = min(int((lon + 180) // 6) + 1, 60)
    band = "CDEFGHJKLMNPQRSTUVWXX"[max(0, min(20, int((lat + 80) // 8)))]
    epsg = (32600 if lat >= 0 else 32700) + zone
    easting, northing = Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    column_letters = ("STUVWXYZ", "ABCDEFGH", "JKLMNPQR")[zone % 3]
    row_letters = "ABCDEFGHJKLMNPQRSTUV"
    column = column_letters[int(easting // 100_000) - 1]
    row = row_letters[(int(northing // 100_000) + (5 if zone % 2 == 0 else 0)) % 20]
    return f"{zone:02d}{band}{column}{row}"


# ------------------------------------------------------------------ collection


def collection(
    kind: str,
    collection_id: str | None = None,
    *,
    bbox=(-180, -90, 180, 90),
    interval=("2015-06-27T00:00:00Z", None),
    asset_href_base: str | None = None,
) -> dict:
    """A STAC 1.0 Collection dict for ``kind`` (id defaults to ``kind``).

    ``asset_href_base``, when given, adds a collection-level ``thumbnail`` asset at
    ``f"{asset_href_base}/{collection_id}/thumbnail.png"`` (the caller provides that file).
    """
    info = _kind_info(kind)
    collection_id = collection_id or kind
    definitions = _asset_definitions(kind, info["gsd"])
    eo_bands = [b for d in definitions.values() for b in d.get("eo:bands", []) if d["roles"] == ["data"]]
    gsds = sorted({d["gsd"] for d in definitions.values() if "gsd" in d})
    result = {
        "type": "Collection",
        "stac_version": STAC_VERSION,
        "stac_extensions": [EO_SCHEMA, RASTER_SCHEMA, CLASSIFICATION_SCHEMA, ITEM_ASSETS_SCHEMA],
        "id": collection_id,
        "title": info["title"],
        "description": info["description"],
        "keywords": info["keywords"] + ["synthetic"],
        "license": "CC0-1.0",
        "providers": [
            {
                "name": "stac-gdal-mcp synthetic data",
                "description": "Random test scenes written by stac_gdal_mcp.synthetic",
                "roles": ["producer", "processor", "host"],
            }
        ],
        "extent": {
            "spatial": {"bbox": [list(bbox)]},
            "temporal": {
                "interval": [
                    [
                        _rfc3339(interval[0]) if interval[0] else None,
                        _rfc3339(interval[1]) if interval[1] else None,
                    ]
                ]
            },
        },
        "summaries": {
            "platform": info["platforms"],
            "constellation": [info["constellation"]],
            "instruments": info["instruments"],
            "gsd": gsds,
            "eo:bands": eo_bands,
            "eo:cloud_cover": {"minimum": 0, "maximum": 100},
        },
        "item_assets": {key: _public(d) for key, d in definitions.items()},
        "links": [],
    }
    if asset_href_base:
        result["assets"] = {
            "thumbnail": {
                "href": f"{asset_href_base.rstrip('/')}/{collection_id}/thumbnail.png",
                "type": "image/png",
                "roles": ["thumbnail"],
                "title": "Collection thumbnail",
            }
        }
    return result


# ------------------------------------------------------------------------ item


def item(
    kind: str,
    item_id: str,
    datetime: str,
    *,
    collection_id: str | None = None,
    epsg: int = 32633,
    transform: tuple = (10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0),
    shape: tuple[int, int] = (1098, 1098),
    cloud_cover: float = 10.0,
    platform: str | None = None,
    tile: str | None = None,
    href_base: str = "https://data.example.invalid",
) -> dict:
    """A STAC 1.0 Item dict for one scene on the grid ``epsg`` + ``transform`` + ``shape``.

    ``tile`` is the MGRS tile for Sentinel-2 (default: computed from the footprint centre)
    or the WRS-2 path/row ``"PPPRRR"`` for Landsat (default: taken from a USGS-style id such
    as ``LC09_L2SP_190028_...``, else ``"190028"``).  Asset hrefs are
    ``f"{href_base}/{collection_id}/{item_id}/{key}.tif"`` (``.png`` for the thumbnail).
    """
    info = _kind_info(kind)
    collection_id = collection_id or kind
    transform = tuple(float(v) for v in transform[:6])
    shape = (int(shape[0]), int(shape[1]))
    pixel_size = abs(transform[0]) if transform[1] == 0 else math.hypot(transform[0], transform[3])
    geometry, bbox = footprint(epsg, transform, shape)
    when = _rfc3339(datetime)
    sentinel = kind == "sentinel-2-l2a"

    properties: dict[str, Any] = {
        "datetime": when,
        "platform": platform or _platform_from_id(kind, item_id),
        "constellation": info["constellation"],
        "instruments": list(info["instruments"]),
        "gsd": pixel_size,
        "eo:cloud_cover": float(cloud_cover),
        "proj:epsg": int(epsg),
        "proj:code": f"EPSG:{int(epsg)}",
        "proj:shape": list(shape),
        "proj:transform": list(transform),
    }
    extensions = [EO_SCHEMA, PROJECTION_SCHEMA, RASTER_SCHEMA, CLASSIFICATION_SCHEMA]
    if sentinel:
        lon = (bbox[0] + bbox[2]) / 2
        lat = (bbox[1] + bbox[3]) / 2
        tile = tile or mgrs_tile(lon, lat)
        properties.update(
            {
                "s2:mgrs_tile": tile,
                "grid:code": f"MGRS-{tile}",
                "mgrs:utm_zone": int(tile[:2]),
                "mgrs:latitude_band": tile[2],
                "mgrs:grid_square": tile[3:],
                "s2:product_type": "S2MSI2A",
                "s2:processing_baseline": "05.10",
            }
        )
        extensions.append(GRID_SCHEMA)
    else:
        path_row = _wrs_path_row(tile, item_id)
        day = _dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        satellite = properties["platform"].rsplit("-", 1)[-1]
        properties.update(
            {
                "landsat:wrs_type": "2",
                "landsat:wrs_path": path_row[:3],
                "landsat:wrs_row": path_row[3:],
                "landsat:scene_id": f"LC{satellite[-1]}{path_row}{day:%Y%j}LGN00",
                "landsat:collection_category": "T1",
                "landsat:collection_number": "02",
                "landsat:correction": "L2SP",
                "landsat:cloud_cover_land": float(cloud_cover),
            }
        )
        extensions.append(LANDSAT_SCHEMA)

    base = f"{href_base.rstrip('/')}/{collection_id}/{item_id}"
    assets = {}
    for key, definition in _asset_definitions(kind, pixel_size).items():
        asset = {"href": f"{base}/{key}.{'png' if key == 'thumbnail' else 'tif'}"}
        asset.update(_public(definition))
        factor = definition["_factor"]
        if factor not in (None, 1):
            asset_shape, asset_transform = _scaled_grid(transform, shape, factor)
            asset["proj:shape"] = list(asset_shape)
            asset["proj:transform"] = list(asset_transform)
        assets[key] = asset

    return {
        "type": "Feature",
        "stac_version": STAC_VERSION,
        "stac_extensions": extensions,
        "id": item_id,
        "collection": collection_id,
        "geometry": geometry,
        "bbox": bbox,
        "properties": properties,
        "links": [
            {
                "rel": "collection",
                "type": "application/json",
                "href": f"{href_base.rstrip('/')}/{collection_id}/collection.json",
            }
        ],
        "assets": assets,
    }


def _scaled_grid(transform, shape, factor: int) -> tuple[tuple[int, int], tuple]:
    """The grid covering the same extent with pixels ``factor`` times larger."""
    a, b, c, d, e, f = transform
    asset_shape = (math.ceil(shape[0] / factor), math.ceil(shape[1] / factor))
    return asset_shape, (a * factor, b * factor, c, d * factor, e * factor, f)


def _rfc3339(value) -> str:
    if isinstance(value, _dt.datetime):
        when = value
    else:
        when = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    when = when.astimezone(_dt.UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.microsecond:
        text += f".{when.microsecond:06d}"
    return text + "Z"


def _platform_from_id(kind: str, item_id: str) -> str:
    if kind == "sentinel-2-l2a":
        match = re.match(r"S2([A-D])_", item_id)
        return f"sentinel-2{match.group(1).lower()}" if match else "sentinel-2a"
    match = re.match(r"L[CO]0?([89])_", item_id)
    return f"landsat-{match.group(1)}" if match else "landsat-9"


def _wrs_path_row(tile: str | None, item_id: str) -> str:
    if tile is None:
        match = re.match(r"L[A-Z]\d\d_L2S[PR]_(\d{6})_", item_id)
        tile = match.group(1) if match else "190028"
    digits = re.sub(r"\D", "", tile)
    if len(digits) != 6:
        raise ValueError(f"Landsat tile must be WRS-2 path/row 'PPPRRR', got {tile!r}")
    return digits


def _geojson(polygon) -> dict:
    """GeoJSON dict of a shapely Polygon with plain lists (as it reads back from JSON)."""
    rings = [polygon.exterior, *polygon.interiors]
    return {"type": "Polygon", "coordinates": [[[x, y] for x, y, *_ in ring.coords] for ring in rings]}
