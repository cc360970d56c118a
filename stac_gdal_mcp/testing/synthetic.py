"""Synthetic Sentinel-2 L2A-like and Landsat C2 L2-like STAC items and COGs with known truth.

Used by the tests, the benchmarks and ``scripts/make_sample_catalog.py``.  Nothing here is a
real observation: the metadata imitates Element 84 Earth Search v1 (``sentinel-2-l2a``) and
Microsoft Planetary Computer / USGS (``landsat-c2-l2``) so that code written against those
catalogs runs unchanged, and the pixels are random blobs whose class counts are known.

* :func:`collection` -- a STAC 1.0 Collection dict (summaries, ``item_assets``).
* :func:`item` -- a STAC 1.0 Item dict for a given grid (``epsg`` + affine ``transform`` +
  ``shape``); geometry and bbox are the grid's footprint in WGS84.
* :func:`write_scene` -- writes the COGs of one item (plus a PNG thumbnail and the item JSON)
  and returns ``(item_dict, truth)``.

Assets
------
``sentinel-2-l2a`` (Earth Search v1 keys): ``red``, ``green``, ``blue``, ``nir`` (10 m uint16,
nodata 0, ``raster:bands`` scale 0.0001 offset -0.1, i.e. reflectance = DN * 0.0001 - 0.1),
``scl`` (scene classification at 20 m, uint8, nodata 0), ``visual`` (uint8 RGB true colour,
reflectance 0..0.2 -> 1..255, nodata 0), ``thumbnail`` (PNG).

``landsat-c2-l2`` (Planetary Computer keys): ``red``, ``green``, ``blue``, ``nir08`` (30 m
uint16, nodata 0, scale 0.0000275 offset -0.2), ``qa_pixel`` (uint16 bit field, fill = 1),
``thumbnail`` (PNG).

Mask definitions (also used to compute ``truth``)
-------------------------------------------------
Sentinel-2 SCL values: 0 no data, 1 saturated or defective, 2 dark area, 3 cloud shadow,
4 vegetation, 5 not vegetated, 6 water, 7 unclassified, 8 cloud medium probability,
9 cloud high probability, 10 thin cirrus, 11 snow.

* nodata = 0; valid = not nodata
* cloud = 8 or 9; shadow = 3; cirrus = 10; snow = 11; water = 6
* clear = valid and not (1, 3, 8, 9, 10)   (snow and water count as clear)

Landsat QA_PIXEL bits: 0 fill, 1 dilated cloud, 2 cirrus, 3 cloud, 4 cloud shadow, 5 snow,
6 clear, 7 water, 8-9 cloud confidence, 10-11 cloud shadow confidence, 12-13 snow/ice
confidence, 14-15 cirrus confidence (confidence 1 low, 2 medium, 3 high).  Fill pixels are
exactly 1.  Values written (as in USGS products): clear land 21824, clear water 21952,
cloud 22280, dilated cloud 21762, cloud shadow 23888, snow 30048, cirrus 54596.

* nodata = bit 0; valid = not nodata
* cloud = bit 3 or bit 1 (cloud or dilated cloud, i.e. what clears bit 6)
* shadow = bit 4 and not cloud; cirrus = bit 2 and not cloud; snow = bit 5; water = bit 7
* clear = valid and not (cloud, shadow, cirrus)

Truth fractions (``cloud_fraction`` ... ``clear_fraction``) are relative to the valid pixels,
``nodata_fraction`` is relative to all pixels, all counted on the mask grid (20 m SCL for
Sentinel-2, the 30 m grid for Landsat).  ``eo:cloud_cover`` of a written item is
``round(cloud_fraction * 100, 2)``; for Sentinel-2 it excludes thin cirrus (which is reported
as ``s2:thin_cirrus_percentage``).

The ``proj`` fields use projection extension v2.0.0 (``proj:code``) and also keep the older
``proj:epsg`` so that readers of either version find the CRS.  Note that pystac's default
migration (``Item.from_dict(..., migrate=True)``) drops ``proj:epsg`` in memory.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

KINDS = ("sentinel-2-l2a", "landsat-c2-l2")

STAC_VERSION = "1.0.0"
COG_MEDIA_TYPE = "image/tiff; application=geotiff; profile=cloud-optimized"

EO_SCHEMA = "https://stac-extensions.github.io/eo/v1.1.0/schema.json"
PROJECTION_SCHEMA = "https://stac-extensions.github.io/projection/v2.0.0/schema.json"
RASTER_SCHEMA = "https://stac-extensions.github.io/raster/v1.1.0/schema.json"
CLASSIFICATION_SCHEMA = "https://stac-extensions.github.io/classification/v2.0.0/schema.json"
GRID_SCHEMA = "https://stac-extensions.github.io/grid/v1.1.0/schema.json"
LANDSAT_SCHEMA = "https://stac-extensions.github.io/landsat/v2.0.0/schema.json"
ITEM_ASSETS_SCHEMA = "https://stac-extensions.github.io/item-assets/v1.0.0/schema.json"

# --------------------------------------------------------------------------- masks

SCL_NODATA, SCL_SATURATED, SCL_DARK, SCL_SHADOW = 0, 1, 2, 3
SCL_VEGETATION, SCL_NOT_VEGETATED, SCL_WATER, SCL_UNCLASSIFIED = 4, 5, 6, 7
SCL_CLOUD_MEDIUM, SCL_CLOUD_HIGH, SCL_CIRRUS, SCL_SNOW = 8, 9, 10, 11

SCL_CLASSES = [  # (value, name, description, color hint)
    (0, "no_data", "No data", "000000"),
    (1, "saturated_or_defective", "Saturated or defective", "FF0000"),
    (2, "dark_area_pixels", "Dark area pixels", "2F2F2F"),
    (3, "cloud_shadows", "Cloud shadows", "643200"),
    (4, "vegetation", "Vegetation", "00A000"),
    (5, "not_vegetated", "Not vegetated", "FFE65A"),
    (6, "water", "Water", "0000FF"),
    (7, "unclassified", "Unclassified", "808080"),
    (8, "cloud_medium_probability", "Cloud medium probability", "C0C0C0"),
    (9, "cloud_high_probability", "Cloud high probability", "FFFFFF"),
    (10, "thin_cirrus", "Thin cirrus", "64C8FF"),
    (11, "snow", "Snow or ice", "FF96FF"),
]

QA_FILL, QA_DILATED_CLOUD, QA_CIRRUS, QA_CLOUD = 0, 1, 2, 3
QA_CLOUD_SHADOW, QA_SNOW, QA_CLEAR, QA_WATER = 4, 5, 6, 7
QA_CLOUD_CONFIDENCE, QA_SHADOW_CONFIDENCE = 8, 10
QA_SNOW_CONFIDENCE, QA_CIRRUS_CONFIDENCE = 12, 14

_FLAG_BITS = [  # (offset, name, description)
    (QA_FILL, "fill", "Image or fill data"),
    (QA_DILATED_CLOUD, "dilated_cloud", "Dilated cloud"),
    (QA_CIRRUS, "cirrus", "Cirrus (high confidence)"),
    (QA_CLOUD, "cloud", "Cloud (high confidence)"),
    (QA_CLOUD_SHADOW, "cloud_shadow", "Cloud shadow (high confidence)"),
    (QA_SNOW, "snow", "Snow or ice (high confidence)"),
    (QA_CLEAR, "clear", "Clear: cloud and dilated cloud bits not set"),
    (QA_WATER, "water", "Water"),
]
_CONFIDENCE_BITS = [
    (QA_CLOUD_CONFIDENCE, "cloud_confidence", "Cloud confidence"),
    (QA_SHADOW_CONFIDENCE, "cloud_shadow_confidence", "Cloud shadow confidence"),
    (QA_SNOW_CONFIDENCE, "snow_ice_confidence", "Snow/ice confidence"),
    (QA_CIRRUS_CONFIDENCE, "cirrus_confidence", "Cirrus confidence"),
]


def qa_pixel_value(
    *,
    fill: bool = False,
    dilated_cloud: bool = False,
    cirrus: bool = False,
    cloud: bool = False,
    cloud_shadow: bool = False,
    snow: bool = False,
    water: bool = False,
    cloud_confidence: int = 1,
    shadow_confidence: int = 1,
    snow_confidence: int = 1,
    cirrus_confidence: int = 1,
) -> int:
    """One Landsat C2 QA_PIXEL value; the clear bit is derived (set unless cloud/dilated)."""
    if fill:
        return 1
    clear = not (cloud or dilated_cloud)
    flags = {
        QA_DILATED_CLOUD: dilated_cloud,
        QA_CIRRUS: cirrus,
        QA_CLOUD: cloud,
        QA_CLOUD_SHADOW: cloud_shadow,
        QA_SNOW: snow,
        QA_CLEAR: clear,
        QA_WATER: water,
    }
    value = sum(1 << bit for bit, on in flags.items() if on)
    confidences = {
        QA_CLOUD_CONFIDENCE: cloud_confidence,
        QA_SHADOW_CONFIDENCE: shadow_confidence,
        QA_SNOW_CONFIDENCE: snow_confidence,
        QA_CIRRUS_CONFIDENCE: cirrus_confidence,
    }
    return value + sum(level << bit for bit, level in confidences.items())


# SCL class of the generated scene -> QA_PIXEL value of the Landsat twin.
_QA_FOR_SCL = {
    SCL_NODATA: qa_pixel_value(fill=True),
    SCL_SATURATED: qa_pixel_value(),
    SCL_DARK: qa_pixel_value(),
    SCL_SHADOW: qa_pixel_value(cloud_shadow=True, shadow_confidence=3),
    SCL_VEGETATION: qa_pixel_value(),
    SCL_NOT_VEGETATED: qa_pixel_value(),
    SCL_WATER: qa_pixel_value(water=True),
    SCL_UNCLASSIFIED: qa_pixel_value(),
    SCL_CLOUD_MEDIUM: qa_pixel_value(dilated_cloud=True),  # the rim of a cloud blob
    SCL_CLOUD_HIGH: qa_pixel_value(cloud=True, cloud_confidence=3),
    SCL_CIRRUS: qa_pixel_value(cirrus=True, cirrus_confidence=3),
    SCL_SNOW: qa_pixel_value(snow=True, snow_confidence=3),
}

# ------------------------------------------------------------------- band tables

# (key, eo:bands name, common_name, description, center_wavelength, full_width_half_max)
_S2_BANDS = [
    ("red", "red", "red", "Red (band 4)", 0.665, 0.038),
    ("green", "green", "green", "Green (band 3)", 0.56, 0.045),
    ("blue", "blue", "blue", "Blue (band 2)", 0.49, 0.098),
    ("nir", "nir", "nir", "NIR 1 (band 8)", 0.842, 0.145),
]
_LANDSAT_BANDS = [
    ("red", "OLI_B4", "red", "Visible red", 0.65, 0.04),
    ("green", "OLI_B3", "green", "Visible green", 0.56, 0.06),
    ("blue", "OLI_B2", "blue", "Visible blue", 0.48, 0.06),
    ("nir08", "OLI_B5", "nir08", "Near infrared", 0.87, 0.03),
]

_KIND_INFO = {
    "sentinel-2-l2a": {
        "title": "Sentinel-2 Level-2A (synthetic)",
        "description": (
            "Synthetic Sentinel-2 L2A-like scenes shaped like Element 84 Earth Search v1 "
            "(asset keys, raster:bands scale/offset, SCL at 20 m). Generated by "
            "stac_gdal_mcp.synthetic; the pixels are random and not real observations."
        ),
        "bands": _S2_BANDS,
        "mask": "scl",
        "gsd": 10.0,
        "mask_factor": 2,
        "scale": 0.0001,
        "offset": -0.1,
        "bits_per_sample": 15,
        "platforms": ["sentinel-2a", "sentinel-2b"],
        "constellation": "sentinel-2",
        "instruments": ["msi"],
        "keywords": ["sentinel", "copernicus", "esa", "msi", "l2a"],
    },
    "landsat-c2-l2": {
        "title": "Landsat Collection 2 Level-2 (synthetic)",
        "description": (
            "Synthetic Landsat 8/9 Collection 2 Level-2 surface reflectance-like scenes shaped "
            "like the Planetary Computer / USGS items (asset keys, scale/offset, QA_PIXEL bit "
            "field). Generated by stac_gdal_mcp.synthetic; the pixels are random and not real "
            "observations."
        ),
        "bands": _LANDSAT_BANDS,
        "mask": "qa_pixel",
        "gsd": 30.0,
        "mask_factor": 1,
        "scale": 0.0000275,
        "offset": -0.2,
        "bits_per_sample": 16,
        "platforms": ["landsat-8", "landsat-9"],
        "constellation": "landsat",
        "instruments": ["oli", "tirs"],
        "keywords": ["landsat", "usgs", "nasa", "oli", "l2"],
    },
}


def _kind_info(kind: str) -> dict[str, Any]:
    try:
        return _KIND_INFO[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}") from None


def _eo_band(name: str, common_name: str, description: str, center: float, fwhm: float) -> dict:
    return {
        "name": name,
        "common_name": common_name,
        "description": description,
        "center_wavelength": center,
        "full_width_half_max": fwhm,
    }


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


def _qa_pixel_bitfields() -> list[dict]:
    fields = [
        {
            "name": name,
            "description": description,
            "offset": offset,
            "length": 1,
            "classes": [
                {"value": 0, "name": f"not_{name}", "description": f"{name} bit not set"},
                {"value": 1, "name": name, "description": description},
            ],
        }
        for offset, name, description in _FLAG_BITS
    ]
    levels = [
        (0, "not_set", "No confidence level set"),
        (1, "low", "Low confidence"),
        (2, "medium", "Medium confidence (reserved for shadow, snow, cirrus)"),
        (3, "high", "High confidence"),
    ]
    fields += [
        {
            "name": name,
            "description": description,
            "offset": offset,
            "length": 2,
            "classes": [{"value": v, "name": n, "description": d} for v, n, d in levels],
        }
        for offset, name, description in _CONFIDENCE_BITS
    ]
    return fields


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


# ---------------------------------------------------------------- write_scene


def write_scene(
    kind: str,
    out_dir,
    item_id: str,
    datetime: str,
    *,
    seed: int = 0,
    collection_id: str | None = None,
    epsg: int = 32633,
    origin=(500000.0, 5000000.0),
    size_px: int = 512,
    cloud_fraction: float = 0.3,
    shadow_fraction: float = 0.05,
    snow_fraction: float = 0.0,
    water_fraction: float = 0.0,
    nodata_fraction: float = 0.0,
    href_base: str | None = None,
    blocksize: int = 256,
    with_visual: bool = True,
    cirrus_fraction: float = 0.0,
    platform: str | None = None,
    tile: str | None = None,
) -> tuple[dict, dict]:
    """Write one synthetic scene as COGs and return ``(item_dict, truth)``.

    The scene is ``size_px`` x ``size_px`` pixels at the kind's band resolution (10 m for
    Sentinel-2, 30 m for Landsat) with upper-left corner ``origin`` in ``epsg``.  Files go to
    ``out_dir/<item_id>/<key>.tif`` (thumbnail ``.png``) and the item JSON to
    ``out_dir/<item_id>/<item_id>.json``.  Asset hrefs are ``f"{href_base}/{item_id}/{key}.tif"``
    when ``href_base`` is given, else relative (``./<key>.tif``).  The cloud, shadow, cirrus,
    snow and water fractions are of the valid pixels, ``nodata_fraction`` of the whole mask
    grid (a diagonal band along one corner, 0 in every band).  ``truth`` is counted from the
    mask that was written (see the module docstring for the definitions).
    """
    import numpy as np

    info = _kind_info(kind)
    collection_id = collection_id or kind
    resolution = info["gsd"]
    transform = (resolution, 0.0, float(origin[0]), 0.0, -resolution, float(origin[1]))
    scene = item(
        kind,
        item_id,
        datetime,
        collection_id=collection_id,
        epsg=epsg,
        transform=transform,
        shape=(size_px, size_px),
        platform=platform,
        tile=tile,
    )
    if not with_visual:
        scene["assets"].pop("visual", None)
    mask_key = info["mask"]
    mask_asset = scene["assets"][mask_key]
    mask_shape = tuple(mask_asset.get("proj:shape", scene["properties"]["proj:shape"]))

    rng = np.random.default_rng(seed)
    classes = scene_classes(
        rng,
        mask_shape,
        cloud=cloud_fraction,
        shadow=shadow_fraction,
        cirrus=cirrus_fraction,
        snow=snow_fraction,
        water=water_fraction,
        nodata=nodata_fraction,
    )
    factor = info["mask_factor"]
    band_classes = np.repeat(np.repeat(classes, factor, 0), factor, 1)[:size_px, :size_px]
    reflectance = _reflectance(rng, band_classes, [b[2] for b in info["bands"]])

    if kind == "sentinel-2-l2a":
        mask = classes.astype("uint8")
    else:
        lookup = np.zeros(max(_QA_FOR_SCL) + 1, dtype="uint16")
        for scl_value, qa_value in _QA_FOR_SCL.items():
            lookup[scl_value] = qa_value
        mask = lookup[classes]
    truth = mask_truth(kind, mask)

    item_dir = Path(out_dir) / item_id
    item_dir.mkdir(parents=True, exist_ok=True)
    grid = {"epsg": epsg, "transform": transform, "blocksize": blocksize}
    valid = band_classes != SCL_NODATA
    for index, band in enumerate(info["bands"]):
        key = band[0]
        dn = np.rint((reflectance[index] - info["offset"]) / info["scale"])
        dn = np.where(valid, np.clip(dn, 1, 65535), 0).astype("uint16")
        _write_cog(item_dir / f"{key}.tif", dn[None], nodata=0, resampling="average", description=key, **grid)
    mask_transform = tuple(mask_asset.get("proj:transform", transform))
    _write_cog(
        item_dir / f"{mask_key}.tif",
        mask[None],
        epsg=epsg,
        transform=mask_transform,
        blocksize=blocksize,
        nodata=int(mask_asset["raster:bands"][0]["nodata"]),
        resampling="nearest",
        description=mask_key,
    )
    rgb = _true_color(reflectance, [b[2] for b in info["bands"]], valid)
    if "visual" in scene["assets"]:
        _write_cog(item_dir / "visual.tif", rgb, nodata=0, resampling="average", description=None, **grid)
    _write_png(item_dir / "thumbnail.png", rgb, max_size=128)

    _finish_item(scene, kind, truth, classes, mask_transform, epsg)
    base = f"{href_base.rstrip('/')}/{item_id}" if href_base else "."
    for key, asset in scene["assets"].items():
        asset["href"] = f"{base}/{key}.{'png' if key == 'thumbnail' else 'tif'}"
    scene["links"][0]["href"] = (
        f"{href_base.rstrip('/')}/collection.json" if href_base else "../collection.json"
    )
    _write_json(item_dir / f"{item_id}.json", scene)
    return scene, truth


def scene_classes(
    rng,
    shape,
    *,
    cloud: float,
    shadow: float,
    cirrus: float = 0.0,
    snow: float = 0.0,
    water: float = 0.0,
    nodata: float = 0.0,
):
    """A random class map (SCL values) with exactly the requested pixel fractions.

    ``nodata`` is of all pixels; the others are of the valid pixels and are placed as blobs
    (thresholded smooth random fields; shadows are the cloud field shifted sideways).
    """
    import numpy as np

    fractions = {
        "cloud": cloud,
        "shadow": shadow,
        "cirrus": cirrus,
        "snow": snow,
        "water": water,
        "nodata": nodata,
    }
    for name, value in fractions.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} fraction must be within [0, 1], got {value}")
    if cloud + shadow + cirrus + snow + water > 1.0 + 1e-9:
        raise ValueError("cloud + shadow + cirrus + snow + water fractions exceed 1")

    rows, cols = shape
    size = max(rows, cols)
    classes = np.full(shape, SCL_VEGETATION, dtype="uint8")

    # Nodata: a band along the lower-right corner, as at the edge of a swath.
    yy, xx = np.mgrid[0:rows, 0:cols]
    edge = xx / cols * 0.8 + yy / rows
    free = np.ones(shape, dtype=bool)
    nodata_mask = _take_top(edge, free, round(nodata * rows * cols))
    classes[nodata_mask] = SCL_NODATA
    free &= ~nodata_mask
    n_valid = int(free.sum())

    cloud_field = _smooth_field(rng, shape, size / 14)
    clouds = _take_top(cloud_field, free, round(cloud * n_valid))
    cores = _take_top(cloud_field, clouds, round(0.65 * clouds.sum()))
    classes[clouds] = SCL_CLOUD_MEDIUM
    classes[cores] = SCL_CLOUD_HIGH
    free &= ~clouds

    # Late-morning sun from the south-east: shadows fall north-west of the clouds.
    shift = (-max(1, rows // 12), -max(1, cols // 10))
    shadows = _take_top(np.roll(cloud_field, shift, axis=(0, 1)), free, round(shadow * n_valid))
    classes[shadows] = SCL_SHADOW
    free &= ~shadows

    for value, fraction, scale in (
        (SCL_CIRRUS, cirrus, (size / 5, size / 5)),
        (SCL_SNOW, snow, (size / 10, size / 10)),
        (SCL_WATER, water, (size / 4, size / 40)),
    ):
        chosen = _take_top(_smooth_field(rng, shape, scale), free, round(fraction * n_valid))
        classes[chosen] = value
        free &= ~chosen

    # Clear land: vegetation with patches of bare soil, a little dark area and unclassified.
    land = _smooth_field(rng, shape, size / 20)
    n_free = int(free.sum())
    for value, share in ((SCL_NOT_VEGETATED, 0.3), (SCL_DARK, 0.01), (SCL_UNCLASSIFIED, 0.01)):
        chosen = _take_top(
            land if value == SCL_NOT_VEGETATED else rng.random(shape), free, round(share * n_free)
        )
        classes[chosen] = value
        free &= ~chosen
    return classes


def mask_truth(kind: str, mask) -> dict:
    """Truth fractions counted from an SCL or QA_PIXEL array (definitions in the docstring)."""
    import numpy as np

    _kind_info(kind)  # rejects unknown kinds
    mask = np.asarray(mask)
    if kind == "sentinel-2-l2a":
        valid = mask != SCL_NODATA
        cloud = np.isin(mask, (SCL_CLOUD_MEDIUM, SCL_CLOUD_HIGH))
        shadow = mask == SCL_SHADOW
        cirrus = mask == SCL_CIRRUS
        snow = mask == SCL_SNOW
        water = mask == SCL_WATER
        not_clear = cloud | shadow | cirrus | (mask == SCL_SATURATED)
    else:

        def bit(n):
            return (mask >> n) & 1 == 1

        valid = ~bit(QA_FILL)
        cloud = bit(QA_CLOUD) | bit(QA_DILATED_CLOUD)
        shadow = bit(QA_CLOUD_SHADOW) & ~cloud
        cirrus = bit(QA_CIRRUS) & ~cloud
        snow = bit(QA_SNOW)
        water = bit(QA_WATER)
        not_clear = cloud | shadow | cirrus
    n_valid = int(valid.sum())

    def share(flags) -> float:
        return float((flags & valid).sum()) / n_valid if n_valid else 0.0

    return {
        "cloud_fraction": share(cloud),
        "shadow_fraction": share(shadow),
        "cirrus_fraction": share(cirrus),
        "snow_fraction": share(snow),
        "water_fraction": share(water),
        "clear_fraction": share(~not_clear),
        "nodata_fraction": float((~valid).sum()) / mask.size,
        "valid_pixels": n_valid,
    }


def _finish_item(scene: dict, kind: str, truth: dict, classes, mask_transform, epsg) -> None:
    """Put the counted truth into the item properties and use the valid-data footprint."""
    props = scene["properties"]
    props["eo:cloud_cover"] = round(truth["cloud_fraction"] * 100, 2)
    if kind == "sentinel-2-l2a":
        valid = max(truth["valid_pixels"], 1)
        props.update(
            {
                "s2:high_proba_clouds_percentage": round(
                    100 * int((classes == SCL_CLOUD_HIGH).sum()) / valid, 2
                ),
                "s2:medium_proba_clouds_percentage": round(
                    100 * int((classes == SCL_CLOUD_MEDIUM).sum()) / valid, 2
                ),
                "s2:thin_cirrus_percentage": round(truth["cirrus_fraction"] * 100, 2),
                "s2:cloud_shadow_percentage": round(truth["shadow_fraction"] * 100, 2),
                "s2:snow_ice_percentage": round(truth["snow_fraction"] * 100, 2),
                "s2:water_percentage": round(truth["water_fraction"] * 100, 2),
                "s2:nodata_pixel_percentage": round(truth["nodata_fraction"] * 100, 2),
            }
        )
    else:
        props["landsat:cloud_cover_land"] = props["eo:cloud_cover"]
    if truth["nodata_fraction"] > 0 and truth["valid_pixels"] > 0:
        scene["geometry"], scene["bbox"] = _valid_footprint(classes != SCL_NODATA, mask_transform, epsg)


def _valid_footprint(valid, transform, epsg) -> tuple[dict, list[float]]:
    """WGS84 polygon around the valid pixels (simplified to about one pixel)."""
    from affine import Affine
    from pyproj import Transformer
    from rasterio.features import shapes
    from shapely import set_precision
    from shapely import transform as apply
    from shapely.geometry import shape
    from shapely.geometry.polygon import orient
    from shapely.ops import unary_union

    parts = [
        shape(geom)
        for geom, value in shapes(valid.astype("uint8"), mask=valid, transform=Affine(*transform))
        if value
    ]
    outline = unary_union(parts).simplify(abs(transform[0]), preserve_topology=True)
    if outline.geom_type == "MultiPolygon":
        outline = max(outline.geoms, key=lambda g: g.area)
    to_wgs84 = Transformer.from_crs(epsg, 4326, always_xy=True)
    polygon = orient(apply(outline.segmentize(abs(transform[0]) * 64), to_wgs84.transform, interleaved=False))
    polygon = set_precision(polygon, 1e-8)
    return _geojson(polygon), [round(v, 8) for v in polygon.bounds]


def _geojson(polygon) -> dict:
    """GeoJSON dict of a shapely Polygon with plain lists (as it reads back from JSON)."""
    rings = [polygon.exterior, *polygon.interiors]
    return {"type": "Polygon", "coordinates": [[[x, y] for x, y, *_ in ring.coords] for ring in rings]}


# ---------------------------------------------------------------- pixel values

# Surface reflectance per SCL class for (red, green, blue, nir) -- nir08 uses the nir column.
_REFLECTANCE = {
    SCL_SATURATED: (1.0, 1.0, 1.0, 1.0),
    SCL_DARK: (0.02, 0.025, 0.02, 0.04),
    SCL_SHADOW: (0.02, 0.025, 0.015, 0.08),
    SCL_VEGETATION: (0.04, 0.07, 0.035, 0.32),
    SCL_NOT_VEGETATED: (0.15, 0.12, 0.09, 0.24),
    SCL_WATER: (0.025, 0.045, 0.055, 0.012),
    SCL_UNCLASSIFIED: (0.09, 0.08, 0.07, 0.15),
    SCL_CLOUD_MEDIUM: (0.42, 0.42, 0.43, 0.45),
    SCL_CLOUD_HIGH: (0.68, 0.68, 0.70, 0.72),
    SCL_CIRRUS: (0.16, 0.16, 0.15, 0.33),
    SCL_SNOW: (0.82, 0.84, 0.86, 0.70),
}
_COMMON_NAME_COLUMN = {"red": 0, "green": 1, "blue": 2, "nir": 3, "nir08": 3}


def _reflectance(rng, classes, common_names):
    """Float32 reflectance (bands, rows, cols) for a class map.

    The texture is a smooth random field cut into flat brightness steps ("parcels"): it
    looks like fields and compresses well, which keeps the bundled sample catalog small.
    """
    import numpy as np

    size = max(classes.shape)
    texture = 1.0 + 0.05 * np.round(2 * _smooth_field(rng, classes.shape, size / 30))
    table = np.zeros((max(_REFLECTANCE) + 1, 4), dtype="float32")
    for value, row in _REFLECTANCE.items():
        table[value] = row
    bands = [np.clip(table[classes, _COMMON_NAME_COLUMN[name]] * texture, 0.0, 1.0) for name in common_names]
    return np.stack(bands).astype("float32")


def _true_color(reflectance, common_names, valid):
    """uint8 RGB like the Sentinel-2 TCI: reflectance 0..0.2 -> 1..255, nodata 0."""
    import numpy as np

    rgb = reflectance[[common_names.index(n) for n in ("red", "green", "blue")]]
    scaled = np.clip(np.rint(rgb / 0.2 * 254 + 1), 1, 255)
    return np.where(valid, scaled, 0).astype("uint8")


def _smooth_field(rng, shape, scale):
    """Zero-mean, unit-variance random field smoothed with a Gaussian of ``scale`` pixels."""
    import numpy as np

    sy, sx = scale if isinstance(scale, tuple) else (scale, scale)
    noise = rng.standard_normal(shape)
    fy = np.fft.fftfreq(shape[0])[:, None]
    fx = np.fft.rfftfreq(shape[1])[None, :]
    kernel = np.exp(-2 * np.pi**2 * ((sy * fy) ** 2 + (sx * fx) ** 2))
    field = np.fft.irfft2(np.fft.rfft2(noise) * kernel, s=shape)
    return (field - field.mean()) / (field.std() or 1.0)


def _take_top(score, candidates, k: int):
    """Boolean mask of the ``k`` candidate pixels with the highest score (exact count)."""
    import numpy as np

    chosen = np.zeros(score.shape, dtype=bool)
    index = np.flatnonzero(candidates)
    k = min(int(k), index.size)
    if k > 0:
        order = np.argsort(score.ravel()[index], kind="stable")
        chosen.flat[index[order[-k:]]] = True
    return chosen


# ----------------------------------------------------------------------- files


def _write_cog(
    path: Path,
    array,
    *,
    epsg: int,
    transform,
    blocksize: int,
    nodata,
    resampling: str,
    description: str | None,
) -> None:
    """Write a (bands, rows, cols) array as a DEFLATE COG with internal overviews."""
    import rasterio
    import rasterio.shutil
    from affine import Affine
    from rasterio.io import MemoryFile

    count, rows, cols = array.shape
    profile = {
        "driver": "GTiff",
        "width": cols,
        "height": rows,
        "count": count,
        "dtype": array.dtype.name,
        "crs": f"EPSG:{epsg}",
        "transform": Affine(*transform),
        "nodata": nodata,
    }
    tmp = _temp_name(path)
    try:
        with rasterio.Env(GDAL_PAM_ENABLED="NO"), MemoryFile() as memory:
            with memory.open(**profile) as dataset:
                dataset.write(array)
                if description:
                    dataset.set_band_description(1, description)
            with memory.open() as source:
                rasterio.shutil.copy(
                    source,
                    tmp,
                    driver="COG",
                    BLOCKSIZE=blocksize,
                    COMPRESS="DEFLATE",
                    LEVEL=9,
                    PREDICTOR="YES" if resampling != "nearest" else "NO",
                    OVERVIEW_RESAMPLING=resampling.upper(),
                    BIGTIFF="NO",
                )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _write_png(path: Path, rgb, max_size: int) -> None:
    """Write a small RGB PNG quicklook (no georeferencing)."""
    import warnings

    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    step = max(1, math.ceil(max(rgb.shape[1:]) / max_size))
    small = rgb[:, ::step, ::step]
    tmp = _temp_name(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with (
                rasterio.Env(GDAL_PAM_ENABLED="NO"),
                rasterio.open(
                    tmp,
                    "w",
                    driver="PNG",
                    width=small.shape[2],
                    height=small.shape[1],
                    count=3,
                    dtype="uint8",
                ) as dataset,
            ):
                dataset.write(small)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _write_json(path: Path, document: dict) -> None:
    tmp = _temp_name(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _temp_name(path: Path) -> str:
    """A fresh file name next to ``path`` (same directory, so os.replace is atomic)."""
    fd, name = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp", dir=Path(path).parent)
    os.close(fd)
    os.remove(name)
    return name


# ------------------------------------------------------------------ field polygons


def field_polygons(
    epsg: int,
    bounds,
    count: int,
    *,
    seed: int = 0,
    clusters: int = 4,
    size_m: tuple[float, float] = (80.0, 400.0),
    holes_every: int = 7,
    multi_every: int = 11,
) -> list[dict]:
    """GeoJSON Features (WGS84) of ``count`` field-like polygons in ``clusters`` clusters inside
    ``bounds`` (x0, y0, x1, y1 in ``epsg`` metres): rotated rectangles ``size_m`` across, every
    ``holes_every``-th with a hole (a pond), every ``multi_every``-th a MultiPolygon of two parts.
    Feature ids ``field-<n>``, property ``name``; vertices off the pixel grid on purpose."""
    import numpy as np
    from pyproj import Transformer
    from shapely import affinity
    from shapely import transform as apply
    from shapely.geometry import MultiPolygon, Polygon, box, mapping

    rng = np.random.default_rng(seed)
    x0, y0, x1, y1 = bounds
    centres = rng.uniform(
        (x0 + 0.1 * (x1 - x0), y0 + 0.1 * (y1 - y0)),
        (x1 - 0.1 * (x1 - x0), y1 - 0.1 * (y1 - y0)),
        (clusters, 2),
    )
    spread = 0.08 * min(x1 - x0, y1 - y0)
    to_wgs84 = Transformer.from_crs(epsg, 4326, always_xy=True)
    features = []
    for n in range(count):
        cx, cy = centres[n % clusters] + rng.normal(0, spread, 2)
        w, h = rng.uniform(*size_m, 2)
        shape = affinity.rotate(box(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), rng.uniform(0, 90))
        if holes_every and n % holes_every == holes_every - 1:
            shape = Polygon(shape.exterior, [box(cx - w / 8, cy - h / 8, cx + w / 8, cy + h / 8).exterior])
        if multi_every and n % multi_every == multi_every - 1:
            shape = MultiPolygon([shape, affinity.translate(shape, w * 1.5, 0)])
        geometry = apply(shape, to_wgs84.transform, interleaved=False)
        features.append(
            {
                "type": "Feature",
                "id": f"field-{n}",
                "properties": {"name": f"field {n}"},
                "geometry": mapping(geometry),
            }
        )
    return features
