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
* :func:`field_polygons` -- field-like polygons for zonal statistics.

This module gathers the names of the modules that do the work: ``kinds`` (the two imitated
collections' band tables and schemas), ``masks`` (SCL / QA_PIXEL values, class maps, truth),
``items`` (Collection and Item dicts, footprints), ``scenes`` (``write_scene`` and its pixel
values), ``files`` (COG, PNG and JSON files written whole) and ``fields`` (field polygons).

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

from .fields import field_polygons
from .items import collection, footprint, item, mgrs_tile
from .kinds import (
    CLASSIFICATION_SCHEMA,
    COG_MEDIA_TYPE,
    EO_SCHEMA,
    GRID_SCHEMA,
    ITEM_ASSETS_SCHEMA,
    KINDS,
    LANDSAT_SCHEMA,
    PROJECTION_SCHEMA,
    RASTER_SCHEMA,
    STAC_VERSION,
)
from .masks import (
    QA_CIRRUS,
    QA_CIRRUS_CONFIDENCE,
    QA_CLEAR,
    QA_CLOUD,
    QA_CLOUD_CONFIDENCE,
    QA_CLOUD_SHADOW,
    QA_DILATED_CLOUD,
    QA_FILL,
    QA_SHADOW_CONFIDENCE,
    QA_SNOW,
    QA_SNOW_CONFIDENCE,
    QA_WATER,
    SCL_CIRRUS,
    SCL_CLASSES,
    SCL_CLOUD_HIGH,
    SCL_CLOUD_MEDIUM,
    SCL_DARK,
    SCL_NODATA,
    SCL_NOT_VEGETATED,
    SCL_SATURATED,
    SCL_SHADOW,
    SCL_SNOW,
    SCL_UNCLASSIFIED,
    SCL_VEGETATION,
    SCL_WATER,
    mask_truth,
    qa_pixel_value,
    scene_classes,
)
from .scenes import write_scene

__all__ = [
    "CLASSIFICATION_SCHEMA",
    "COG_MEDIA_TYPE",
    "EO_SCHEMA",
    "GRID_SCHEMA",
    "ITEM_ASSETS_SCHEMA",
    "KINDS",
    "LANDSAT_SCHEMA",
    "PROJECTION_SCHEMA",
    "QA_CIRRUS",
    "QA_CIRRUS_CONFIDENCE",
    "QA_CLEAR",
    "QA_CLOUD",
    "QA_CLOUD_CONFIDENCE",
    "QA_CLOUD_SHADOW",
    "QA_DILATED_CLOUD",
    "QA_FILL",
    "QA_SHADOW_CONFIDENCE",
    "QA_SNOW",
    "QA_SNOW_CONFIDENCE",
    "QA_WATER",
    "RASTER_SCHEMA",
    "SCL_CIRRUS",
    "SCL_CLASSES",
    "SCL_CLOUD_HIGH",
    "SCL_CLOUD_MEDIUM",
    "SCL_DARK",
    "SCL_NODATA",
    "SCL_NOT_VEGETATED",
    "SCL_SATURATED",
    "SCL_SHADOW",
    "SCL_SNOW",
    "SCL_UNCLASSIFIED",
    "SCL_VEGETATION",
    "SCL_WATER",
    "STAC_VERSION",
    "collection",
    "field_polygons",
    "footprint",
    "item",
    "mask_truth",
    "mgrs_tile",
    "qa_pixel_value",
    "scene_classes",
    "write_scene",
]
