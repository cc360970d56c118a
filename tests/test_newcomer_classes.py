"""Known classifications are named where a class raster appears: zonal_stats' `frac` of a
Sentinel-2 SCL whose items carry no classification extension names the classes (vegetation,
water ...) by the SCL definition, as it does for items that carry the extension. On the pgstac
test bed and the Range server, a synthetic Sentinel-2 scene with its SCL's classification
metadata removed; the fractions checked against numpy on the served file.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from helpers import utm_aoi

UID = uuid.uuid4().hex[:8]
S2 = f"classes-s2-{UID}"
ORIGIN = (500000.0, 5000000.0)


def _bare(asset: dict) -> dict:
    """`asset` without the classification extension's fields, on it or on its bands."""
    out = {k: v for k, v in asset.items() if not k.startswith("classification:")}
    for key in ("raster:bands", "bands", "eo:bands"):
        if isinstance(out.get(key), list):
            out[key] = [{k: v for k, v in b.items() if not k.startswith("classification:")} for b in out[key]]
    return out


@pytest.fixture(scope="module")
def scene(cog_server, pgstac_api):
    from stac_gdal_mcp.testing import synthetic

    folder = f"classes-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    item, _ = synthetic.write_scene(
        "sentinel-2-l2a", out_dir, "CLASSES_A", "2024-06-01T10:00:00Z", href_base=href_base,
        collection_id=S2, size_px=256, with_visual=False, seed=7, water_fraction=0.15,
    )  # fmt: skip
    item["assets"]["scl"] = _bare(item["assets"]["scl"])
    assert "classification:" not in json.dumps(item["assets"]["scl"])
    collection = synthetic.collection("sentinel-2-l2a", S2)
    collection.get("item_assets", {}).pop("scl", None)
    pgstac_api.load([collection], [item])
    return {"item": item, "scl": out_dir / "CLASSES_A" / "scl.tif"}


async def test_scl_fractions_are_named_without_the_classification_extension(
    scene, make_settings, pgstac_api, build
):
    aoi = utm_aoi(ORIGIN[0] + 200, ORIGIN[1] - 2400, ORIGIN[0] + 2400, ORIGIN[1] - 200)
    west, south, east, north = aoi
    zone = {"type": "Polygon", "coordinates": [[[west, south], [east, south], [east, north], [west, north], [west, south]]]}  # fmt: skip
    settings = make_settings(catalogs=[{"id": "bed", "url": pgstac_api.url}], default_catalog="bed")
    arguments = {
        "geometries": zone, "expression": "scl", "stats": ["frac"], "mask_clouds": False,
        "search": {"collections": [S2]},
    }  # fmt: skip
    async with Client(build(settings)) as client:
        result = await client.call_tool_mcp("zonal_stats", arguments)
    assert not result.is_error, result.content[0].text
    text = "\n".join(c.text for c in result.content if c.type == "text")
    answer = result.structured_content
    classes = answer["classes"]
    assert classes.get("4") == "Vegetation" and classes.get("6") == "Water", classes
    assert "Vegetation" in text and "Water" in text
    with rasterio.open(scene["scl"]) as src:  # the served file: water and vegetation are there
        values = src.read(1)
    assert (values == 6).any() and (values == 4).any() and np.isin(values, [4, 6]).mean() > 0.1
