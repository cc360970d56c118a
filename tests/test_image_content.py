"""Image content beside structured results, through an in-memory fastmcp Client on the sample
catalog: time_series returns its chart, composite and reproject_asset a quicklook of their output
when asked (`quicklook=true`); each a valid PNG, bounded in size, and the structured content the
same as without it.

Expected pixels come from the output file itself, read with rasterio: where the output is nodata
(or NaN) the quicklook is transparent, and only there.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from PIL import Image
from rasterio.enums import Resampling

from stac_gdal_mcp.processing.quicklook import QUICKLOOK_BYTES, QUICKLOOK_SIZE
from stac_gdal_mcp.server import build_server

AOI = [13.60, 45.92, 13.62, 45.935]
S2 = ["sentinel-2-l2a"]
ITEM = "S2A_33TUL_20240808_0_L2A"


@pytest.fixture
def settings(make_settings):
    return make_settings(default_catalog="sample")


def images(result) -> list[bytes]:
    blocks = [block for block in result.content if block.type == "image"]
    assert all(block.mime_type == "image/png" for block in blocks)
    return [base64.b64decode(block.data) for block in blocks]


def decode(png: bytes) -> np.ndarray:
    """(rows, cols, channels) of a PNG, checking it is one."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(png))
    image.load()
    return np.asarray(image)


def without_ids(value):
    """Structured content without what differs between two runs (ids, times, paths, checksums)."""
    if isinstance(value, dict):
        return {
            k: without_ids(v)
            for k, v in value.items()
            if k
            not in {
                "id",
                "uri",
                "href",
                "file",
                "created",
                "datetime",
                "processing:datetime",
                "file:checksum",
                "file:size",
                "title",
            }
        }
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


def output_invalid(path, shape) -> np.ndarray:
    """Where the output file has no value (nodata or NaN), read at the quicklook's size."""
    with rasterio.open(path) as src:
        count = 3 if src.count >= 3 else 1
        data = src.read(
            list(range(1, count + 1)), out_shape=(count, *shape), resampling=Resampling.nearest, masked=True
        )
    return np.ma.getmaskarray(np.ma.masked_invalid(data.astype("float32"))).any(axis=0)


async def test_time_series_returns_its_chart_as_image(settings):
    args = {"aoi": AOI, "search": {"collections": S2, "datetime": "2024-06-01/2024-07-31"}}
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("time_series", args)
        chart = await client.read_resource(
            f"stac-gdal://outputs/{result.structured_content['chart']['id']}/file"
        )
    (png,) = images(result)
    rgba = decode(png)
    assert len(png) <= 1_000_000 and max(rgba.shape[:2]) <= 2048
    assert rgba.std() > 5  # a drawing, not a blank
    assert base64.b64decode(chart[0].blob) == png  # the very chart the output resource serves
    structured = result.structured_content
    assert [row["date"] for row in structured["rows"]] == ["2024-06-04", "2024-06-19", "2024-07-14"]
    assert structured["csv"]["uri"] and structured["chart"]["uri"]


async def test_composite_quicklook_is_opt_in_and_matches_the_output(settings):
    args = {"aoi": AOI, "bands": ["red", "green", "blue"], "search": {"collections": S2}}
    async with Client(build_server(settings)) as client:
        plain = await client.call_tool("composite", args)
        shown = await client.call_tool("composite", {**args, "quicklook": True})
    assert images(plain) == []
    assert without_ids(shown.structured_content) == without_ids(plain.structured_content)
    (png,) = images(shown)
    assert len(png) <= QUICKLOOK_BYTES
    rgba = decode(png)
    assert rgba.shape[2] == 4 and max(rgba.shape[:2]) <= QUICKLOOK_SIZE
    output = output_file(settings, shown.structured_content["output"]["id"])
    invalid = output_invalid(output, rgba.shape[:2])
    assert np.array_equal(rgba[..., 3] == 0, invalid)
    assert rgba[..., :3][~invalid].std() > 5  # a stretched picture


def output_file(settings, output_id):
    from stac_gdal_mcp import Session

    with Session(settings) as session:
        return session.outputs.path(output_id)


async def test_reproject_quicklook_transparent_where_the_output_is_nodata(settings):
    args = {"collection_id": "sentinel-2-l2a", "item_id": ITEM, "asset": "red", "dst_crs": "EPSG:3857"}
    async with Client(build_server(settings)) as client:
        plain = await client.call_tool("reproject_asset", args)
        shown = await client.call_tool("reproject_asset", {**args, "quicklook": True})
    assert images(plain) == []
    assert without_ids(shown.structured_content) == without_ids(plain.structured_content)
    (png,) = images(shown)
    assert len(png) <= QUICKLOOK_BYTES
    rgba = decode(png)
    assert rgba.shape[2] == 4 and max(rgba.shape[:2]) == QUICKLOOK_SIZE
    invalid = output_invalid(output_file(settings, shown.structured_content["id"]), rgba.shape[:2])
    assert invalid.any() and not invalid.all()  # a rotated scene: nodata corners
    assert np.array_equal(rgba[..., 3] == 0, invalid)
    assert (rgba[..., :3][invalid] == 0).all()
    assert rgba[..., :3][~invalid].std() > 5


async def test_single_band_preview_says_its_stretch_and_shows_a_colour_bar(settings):
    """The text gives the colormap and the 2-98 % stretch in the asset's values, equal to the
    percentiles of the band read with rasterio at the preview's size (scale and offset of the
    item's raster:bands applied); the image sent carries a colour bar below the picture, while
    the saved output stays the bare picture."""
    import json

    from stac_gdal_mcp.settings import SAMPLE_CATALOG

    ref = {"catalog": "sample", "collection_id": S2[0], "item_id": ITEM, "asset": "nir", "max_size": 128}
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("preview", ref)
        record = result.structured_content
        [saved] = await client.read_resource(f"stac-gdal://outputs/{record['id']}/file")
    item_path = SAMPLE_CATALOG.parent / S2[0] / ITEM / f"{ITEM}.json"
    band = json.loads(item_path.read_text())["assets"]["nir"].get("raster:bands", [{}])[0]
    scale, offset = band.get("scale", 1.0), band.get("offset", 0.0)
    height, width = record["properties"]["proj:shape"]
    with rasterio.open(item_path.parent / "nir.tif") as src:
        data = src.read(1, out_shape=(height, width), resampling=Resampling.nearest, masked=True)
    low, high = np.percentile(data.compressed().astype("float64"), (2, 98)) * scale + offset
    text = " ".join(block.text for block in result.content if block.type == "text")
    assert f"viridis, 2-98 % stretch: {low:.4g} (dark) to {high:.4g} (bright)" in text
    (png,) = images(result)
    shown, bare = decode(png), decode(base64.b64decode(saved.blob))
    assert bare.shape[:2] == (height, width)
    assert shown.shape[0] >= bare.shape[0] + 60  # the colour bar below the picture
