"""inspect / reproject / convert / preview end to end through an in-memory fastmcp Client, against
COGs on the Range server and items in the pgstac test bed.

Expected values are independent: rasterio reads the local files directly, pyproj transforms
coordinates, numpy computes percentiles, hashlib the checksums, rio-cogeo validates COGs.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from fastmcp.exceptions import ToolError
from helpers import utm_aoi, write_cog
from pyproj import Transformer
from rasterio.io import MemoryFile
from rasterio.transform import from_origin
from rasterio.windows import Window
from rio_cogeo.cogeo import cog_validate

from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.testing import synthetic

UID = uuid.uuid4().hex[:8]
COLLECTION = f"proc-s2-{UID}"
ITEM = "S2A_PROC_20240601"
WHEN = "2024-06-01T10:30:00Z"
ORIGIN = (500000.0, 5000000.0)  # EPSG:32633, about 15 E 45.1 N
SIZE = 1024  # px at 10 m
TO_WGS84 = Transformer.from_crs(32633, 4326, always_xy=True)
TO_UTM = Transformer.from_crs(4326, 32633, always_xy=True)


@pytest.fixture(scope="module")
def scene(cog_server, pgstac_api):
    folder = f"proc-{UID}"
    item, _ = synthetic.write_scene(
        "sentinel-2-l2a",
        cog_server.root / folder,
        ITEM,
        WHEN,
        seed=3,
        collection_id=COLLECTION,
        size_px=SIZE,
        origin=ORIGIN,
        nodata_fraction=0.1,
        href_base=f"{cog_server.url}/{folder}",
    )
    collection = synthetic.collection("sentinel-2-l2a", COLLECTION)
    pgstac_api.load([collection], [item])
    noisy = f"{folder}/noisy.tif"  # incompressible data: byte counts mean something
    rng = np.random.default_rng(5)
    data = rng.integers(1, 60000, (SIZE, SIZE), dtype="uint16")
    data[:100, :100] = 0
    write_cog(cog_server.root / noisy, data, nodata=0, blocksize=256)
    return {
        "item": item,
        "dir": cog_server.root / folder / ITEM,
        "noisy_path": cog_server.root / noisy,
        "noisy_url": f"{cog_server.url}/{noisy}",
        "server": cog_server,
    }


@pytest.fixture
def settings(make_settings, pgstac_api):
    return make_settings(catalogs=[{"id": "testbed", "url": pgstac_api.url}], default_catalog="testbed")


async def call(client, tool, **arguments):
    result = await client.call_tool(tool, arguments)
    return result.structured_content


def item_args(asset):
    return {"collection_id": COLLECTION, "item_id": ITEM, "asset": asset}


def outputs_dir(settings):
    folders = [settings.workspace / "outputs", settings.workspace / "records"]
    return sorted(p.name for f in folders if f.exists() for p in f.iterdir())


# --- inspect ---------------------------------------------------------------------------------


async def test_inspect_asset_matches_rasterio(settings, scene):
    async with Client(build_server(settings)) as client:
        info = await call(client, "inspect_asset", **item_args("red"))
        scl = await call(client, "inspect_asset", **item_args("SCL"))
    with rasterio.open(scene["dir"] / "red.tif") as src:
        assert (info["width"], info["height"], info["count"]) == (src.width, src.height, src.count)
        assert info["dtypes"] == list(src.dtypes) and info["nodata"] == src.nodata
        assert info["crs"] == "EPSG:32633" and info["crs_name"] == "WGS 84 / UTM zone 33N"
        assert info["transform"] == list(src.transform)[:6]
        assert info["bounds"] == list(src.bounds)
        assert info["overviews"] == src.overviews(1) and info["block_size"] == [
            list(s) for s in src.block_shapes
        ]
        assert info["compression"] == "DEFLATE"
    west, south, east, north = info["bounds_wgs84"]
    lon, lat = TO_WGS84.transform(ORIGIN[0], ORIGIN[1])
    assert west == pytest.approx(lon, abs=1e-6) and north == pytest.approx(lat, abs=1e-3)
    assert info["is_cog"] is True and info["cog_errors"] == []
    assert info["href"].endswith(f"{ITEM}/red.tif") and info["asset"] == "red"
    assert scl["asset"] == "scl" and scl["resolution"] == [20.0, 20.0]


async def test_inspect_reads_only_the_header(settings, scene, tmp_path):
    server = scene["server"]
    plain = f"proc-{UID}/striped.tif"  # a non-COG: striped, no overviews
    data = np.random.default_rng(1).integers(0, 60000, (1000, 1000), dtype="uint16")
    profile = dict(
        driver="GTiff",
        width=1000,
        height=1000,
        count=1,
        dtype="uint16",
        crs="EPSG:32633",
        transform=from_origin(*ORIGIN, 10, 10),
    )
    with rasterio.open(server.root / plain, "w", **profile) as dst:
        dst.write(data, 1)
    size = (server.root / plain).stat().st_size
    server.reset_stats()
    async with Client(build_server(settings)) as client:
        info = await call(client, "inspect_asset", href=f"{server.url}/{plain}")
    assert info["is_cog"] is False and info["cog_errors"]
    sent = server.stats()["paths"][f"/{plain}"]["bytes"]
    assert sent < 0.05 * size, (sent, size)


# --- reproject -------------------------------------------------------------------------------


async def test_reproject_nearest_reproduces_source_values(settings, scene):
    aoi = utm_aoi(ORIGIN[0] + 1000, ORIGIN[1] - 9000, ORIGIN[0] + 8000, ORIGIN[1] - 1000)
    async with Client(build_server(settings)) as client:
        record = await call(client, "reproject_asset", dst_crs="EPSG:4326", bbox=aoi, **item_args("red"))
    path = record["assets"]["data"]["href"]
    valid, errors, _ = cog_validate(path)
    assert valid, errors
    with rasterio.open(scene["dir"] / "red.tif") as src, rasterio.open(path) as out:
        assert out.crs.to_epsg() == 4326 and out.overviews(1)
        left, bottom, right, top = out.bounds
        assert left >= aoi[0] - 1e-9 and right <= aoi[2] + out.res[0] and top <= aoi[3] + 1e-9
        assert bottom >= aoi[1] - out.res[1]
        source, result = src.read(1), out.read(1)
        rng = np.random.default_rng(0)
        rows, cols = rng.integers(0, out.height, 3000), rng.integers(0, out.width, 3000)
        lon, lat = rasterio.transform.xy(out.transform, rows, cols)  # pixel centres
        x, y = TO_UTM.transform(np.array(lon), np.array(lat))
        fc, fr = ~src.transform @ (np.array(x), np.array(y))
        fc, fr = np.asarray(fc), np.asarray(fr)
        # away from source pixel edges (GDAL's approximate transformer allows 1/8 px error)
        clear = (np.abs(fc - np.round(fc)) > 0.2) & (np.abs(fr - np.round(fr)) > 0.2)
        clear &= (fc >= 0) & (fr >= 0) & (fc < src.width) & (fr < src.height)
        assert clear.sum() > 500
        expected = source[fr[clear].astype(int), fc[clear].astype(int)]
        assert np.array_equal(result[rows[clear], cols[clear]], expected)
    props = record["properties"]
    assert props["proj:code"] == "EPSG:4326" and props["proj:shape"] == [out.height, out.width]
    assert props["datetime"] == WHEN
    assert props["processing:expression"]["expression"]["parameters"]["resampling"] == "nearest"
    assert record["assets"]["data"]["raster:bands"][0] == {"data_type": "uint16", "nodata": 0}
    with open(path, "rb") as f:
        assert record["assets"]["data"]["file:checksum"] == "1220" + hashlib.sha256(f.read()).hexdigest()
    derived = [link["href"] for link in record["links"] if link["rel"] == "derived_from"]
    assert scene["item"]["assets"]["red"]["href"] in derived
    assert any(f"/collections/{COLLECTION}/items/{ITEM}" in href for href in derived)


async def test_coarse_resolution_reads_an_overview(settings, scene):
    server, name = scene["server"], scene["noisy_url"].rsplit("/", 2)
    path_key = "/" + "/".join(name[1:])
    server.reset_stats()
    async with Client(build_server(settings)) as client:
        record = await call(
            client, "reproject_asset", href=scene["noisy_url"], dst_crs="EPSG:32633", resolution=40
        )
    params = record["properties"]["processing:expression"]["expression"]["parameters"]
    with rasterio.open(scene["noisy_path"]) as src:
        factors = src.overviews(1)
    assert factors[params["source_overview_level"]] == 4  # 40 m from 10 m: the x4 overview
    sent = server.stats()["paths"][path_key]["bytes"]
    assert sent < 0.2 * scene["noisy_path"].stat().st_size  # the x4 overview is 1/16 of the pixels
    with (
        rasterio.open(scene["noisy_path"], overview_level=params["source_overview_level"]) as ovr,
        rasterio.open(record["assets"]["data"]["href"]) as out,
    ):
        assert out.res == (40.0, 40.0) and out.shape == ovr.shape
        assert np.array_equal(out.read(1), ovr.read(1))  # same grid, nearest: identical


async def test_reproject_with_bbox_crs_and_netcdf(settings, scene):
    bbox = [ORIGIN[0] + 2000, ORIGIN[1] - 4000, ORIGIN[0] + 4000, ORIGIN[1] - 2000]
    async with Client(build_server(settings)) as client:
        record = await call(
            client,
            "reproject_asset",
            dst_crs="EPSG:32633",
            bbox=bbox,
            bbox_crs="EPSG:32633",
            resolution=10,
            output_format="netCDF",
            **item_args("nir"),
        )
    assert record["assets"]["data"]["type"] == "application/netcdf"
    with (
        rasterio.open(record["assets"]["data"]["href"]) as out,
        rasterio.open(scene["dir"] / "nir.tif") as src,
    ):
        assert out.shape == (200, 200)
        assert np.array_equal(out.read(1), src.read(1, window=Window(200, 200, 200, 200)))


# --- convert ---------------------------------------------------------------------------------


def expected_window(aoi, transform):
    """Pixel window covering a WGS84 bbox, from pyproj + the affine transform (rounded outwards)."""
    xs, ys = TO_UTM.transform([aoi[0], aoi[2], aoi[0], aoi[2]], [aoi[1], aoi[1], aoi[3], aoi[3]])
    cols, rows = ~transform @ (np.array(xs), np.array(ys))
    c0, c1 = math.floor(min(cols)), math.ceil(max(cols))
    r0, r1 = math.floor(min(rows)), math.ceil(max(rows))
    return Window(max(c0, 0), max(r0, 0), min(c1, SIZE) - max(c0, 0), min(r1, SIZE) - max(r0, 0))


@pytest.mark.parametrize("output_format", ["COG", "GTiff", "netCDF"])
async def test_convert_subset_keeps_values(settings, scene, output_format):
    aoi = utm_aoi(ORIGIN[0] + 3000, ORIGIN[1] - 7000, ORIGIN[0] + 6000, ORIGIN[1] - 4000)
    async with Client(build_server(settings)) as client:
        record = await call(
            client, "convert_asset", output_format=output_format, bbox=aoi, **item_args("red")
        )
    with rasterio.open(scene["dir"] / "red.tif") as src:
        window = expected_window(aoi, src.transform)
        expected, transform = src.read(1, window=window), src.window_transform(window)
    with rasterio.open(record["assets"]["data"]["href"]) as out:
        assert out.crs.to_epsg() == 32633
        assert out.transform.almost_equals(transform)
        assert np.array_equal(out.read(1), expected)
    if output_format == "COG":
        assert cog_validate(record["assets"]["data"]["href"])[0]
    assert record["properties"]["proj:shape"] == list(expected.shape)


async def test_convert_reads_only_intersecting_tiles(settings, scene):
    server = scene["server"]
    key = "/" + scene["noisy_url"].split("/", 3)[3]
    aoi = utm_aoi(ORIGIN[0] + 3000, ORIGIN[1] - 5000, ORIGIN[0] + 4000, ORIGIN[1] - 4000)  # 100 x 100 px
    server.reset_stats()
    async with Client(build_server(settings)) as client:
        await call(client, "convert_asset", href=scene["noisy_url"], output_format="GTiff", bbox=aoi)
    sent = server.stats()["paths"][key]["bytes"]
    size = scene["noisy_path"].stat().st_size
    # the 100 x 100 px window touches at most 4 of the 16 full-resolution 256 px tiles (+ header)
    assert sent < 0.3 * size, (sent, size)


async def test_convert_png_stretch_and_transparency(settings, scene):
    async with Client(build_server(settings)) as client:
        gray = await call(client, "convert_asset", output_format="PNG", **item_args("red"))
        jpeg = await call(client, "convert_asset", output_format="JPEG", **item_args("visual"))
    with rasterio.open(scene["dir"] / "red.tif") as src:
        red = src.read(1)
        valid = red != 0
    low, high = np.percentile(red[valid].astype("float64"), (2, 98))
    expected = np.where(valid, np.clip(1 + (red - low) * 254.0 / (high - low), 1, 255), 0).astype("uint8")
    with rasterio.open(gray["assets"]["data"]["href"]) as png:
        assert png.driver == "PNG" and png.count == 2  # gray + alpha
        values, alpha = png.read(1), png.read(2)
    assert np.array_equal(alpha == 0, ~valid)
    assert np.abs(values.astype(int) - expected.astype(int)).max() <= 1  # rounding vs truncation
    assert gray["properties"]["proj:code"] == "EPSG:32633"  # the record keeps the georeferencing
    with (
        rasterio.open(jpeg["assets"]["data"]["href"]) as jpg,
        rasterio.open(scene["dir"] / "visual.tif") as vis,
    ):
        assert jpg.driver == "JPEG" and jpg.count == 3 and jpg.shape == vis.shape
        diff = np.abs(jpg.read().astype(int) - vis.read().astype(int))
        assert diff.mean() < 8  # uint8 RGB kept as it is, up to JPEG loss


async def test_convert_refuses_bad_arguments(settings, scene):
    async with Client(build_server(settings)) as client:
        cases = [
            (dict(output_format="PNG", bands=[1, 2], asset="visual"), "1 band"),
            (dict(output_format="COG", bands=[2]), "band numbers"),
            (dict(output_format="GTiff", creation_options={"CONFIG_FILE": "/etc/passwd"}), "not allowed"),
            (dict(output_format="GTiff", creation_options={"COMPRESS": "../x"}), "plain word"),
            (dict(output_format="COG", bbox=[100, 10, 101, 11]), "does not overlap"),
            (dict(output_format="COG", bbox=[10, 10, 9, 11]), "west < east"),
            (dict(output_format="COG", output_name="../escape"), "output_name"),
        ]
        for arguments, message in cases:
            with pytest.raises(ToolError, match=message):
                await client.call_tool("convert_asset", {**item_args("red"), **arguments})
    assert outputs_dir(settings) == []


# --- preview ---------------------------------------------------------------------------------


def decode_png(data: bytes) -> np.ndarray:
    with MemoryFile(data) as memory, memory.open() as png:
        return png.read()


async def test_preview_item_as_image_and_output(settings, scene):
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(
            "preview", {"collection_id": COLLECTION, "item_id": ITEM, "max_size": 256}
        )
        image, text = result.content[0], result.content[1]
        record = result.structured_content
        assert image.type == "image" and image.mime_type == "image/png"
        import base64

        png = base64.b64decode(image.data)
        stored = await client.read_resource(f"stac-gdal://outputs/{record['id']}/file")
        doc = json.loads((await client.read_resource(f"stac-gdal://outputs/{record['id']}"))[0].text)
    assert stored[0].blob and base64.b64decode(stored[0].blob) == png
    assert doc["id"] == record["id"] and record["id"] in text.text
    rgba = decode_png(png)
    assert rgba.shape == (4, 256, 256)
    with rasterio.open(scene["dir"] / "visual.tif") as vis:  # the item has a visual asset: shown as is
        from rasterio.enums import Resampling

        expected = vis.read(out_shape=(3, 256, 256), resampling=Resampling.average, masked=True)
    invalid = np.ma.getmaskarray(expected).any(axis=0)
    assert np.array_equal(rgba[3] == 0, invalid)
    assert np.array_equal(rgba[:3][:, ~invalid], expected.data[:, ~invalid])
    assert record["properties"]["proj:shape"] == [256, 256]
    assert [l["href"] for l in record["links"] if l["rel"] == "derived_from"][-1].endswith("visual.tif")


async def test_preview_rgb_bands_single_band_and_bbox(settings, scene):
    aoi = utm_aoi(ORIGIN[0] + 1000, ORIGIN[1] - 6000, ORIGIN[0] + 6000, ORIGIN[1] - 1000)
    async with Client(build_server(settings)) as client:
        rgb = await client.call_tool(
            "preview",
            {
                "collection_id": COLLECTION,
                "item_id": ITEM,
                "assets": ["red", "green", "blue"],
                "bbox": aoi,
                "max_size": 128,
            },
        )
        single = await client.call_tool("preview", {**item_args("scl"), "max_size": 64})
        saved = await client.read_resource(f"stac-gdal://outputs/{single.structured_content['id']}/file")
    import base64

    image = decode_png(base64.b64decode(rgb.content[0].data))
    assert image.shape[0] == 4 and max(image.shape[1:]) == 128
    assert image[:3][:, image[3] > 0].std() > 5  # a stretched picture, not a flat one
    west, south, east, north = rgb.structured_content["bbox"]
    assert west == pytest.approx(aoi[0], abs=2e-4) and north == pytest.approx(aoi[3], abs=2e-4)
    assert (
        len([l for l in rgb.structured_content["links"] if l["rel"] == "derived_from"]) == 4
    )  # item + 3 assets
    # the saved quicklook is the picture alone (the map places it at its bbox); the client's image
    # of a single band carries a colour bar beside it, so it is larger
    gray = decode_png(base64.b64decode(saved[0].blob))
    assert gray.shape == (4, 64, 64)
    shown = decode_png(base64.b64decode(single.content[0].data))
    assert shown.shape[1] >= 64 and shown.shape[2] > 64


# --- outputs as resources, list and delete ---------------------------------------------------


async def test_outputs_list_resources_and_delete(make_settings, pgstac_api, scene):
    settings = make_settings(limits={"max_resource_bytes": 1000})
    async with Client(build_server(settings)) as client:
        record = await call(
            client, "convert_asset", href=scene["noisy_url"], output_format="COG", output_name="whole"
        )
        listed = await call(client, "list_outputs")
        assert [o["id"] for o in listed["outputs"]] == ["whole"]
        assert listed["outputs"][0]["uri"] == "stac-gdal://outputs/whole"
        doc = json.loads((await client.read_resource("stac-gdal://outputs/whole"))[0].text)
        assert doc == json.loads(json.dumps(record))
        with pytest.raises(Exception, match="max_resource_bytes=1000") as refused:
            await client.read_resource("stac-gdal://outputs/whole/file")
        assert "outputs/whole.tif in the server's workspace" in str(refused.value)
        assert str(settings.workspace) not in str(refused.value)  # no server path
        with pytest.raises(ToolError, match="already exists"):
            await call(
                client, "convert_asset", href=scene["noisy_url"], output_format="COG", output_name="whole"
            )
        deleted = await call(client, "delete_output", output_id="whole")
        assert deleted["id"] == "whole"
        assert (await call(client, "list_outputs"))["outputs"] == []
        with pytest.raises(ToolError, match="no output 'whole'"):
            await call(client, "delete_output", output_id="whole")
    assert outputs_dir(settings) == []
    with rasterio.open(scene["noisy_path"]) as src:  # whole-file convert: same pixels
        assert src.shape == tuple(record["properties"]["proj:shape"])


async def test_tool_annotations(settings):
    async with Client(build_server(settings)) as client:
        tools = {t.name: t.annotations for t in await client.list_tools()}
    # openWorldHint left out means true (the MCP spec's default)
    assert (
        tools["inspect_asset"].read_only_hint is True and tools["inspect_asset"].open_world_hint is not False
    )
    for name in ("reproject_asset", "convert_asset", "preview"):
        assert tools[name].read_only_hint is False and tools[name].destructive_hint is False
        assert tools[name].open_world_hint is not False
    assert tools["delete_output"].destructive_hint is True
    assert tools["list_outputs"].read_only_hint is True


async def test_security_refusals_through_the_tools(make_settings, scene):
    settings = make_settings(network={"allow_private_hosts": False})
    async with Client(build_server(settings)) as client:
        for href in [
            "file:///etc/passwd",
            "/vsicurl/http://example.com/x.tif",
            scene["noisy_url"],
            "http://169.254.169.254/latest/meta-data",
            "/etc/passwd",
        ]:
            for tool, extra in [
                ("inspect_asset", {}),
                ("reproject_asset", {"dst_crs": "EPSG:4326"}),
                ("convert_asset", {"output_format": "COG"}),
                ("preview", {}),
            ]:
                with pytest.raises(ToolError, match="not allowed|outside the allowed|non-public"):
                    await client.call_tool(tool, {"href": href, **extra})
