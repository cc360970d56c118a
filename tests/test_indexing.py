"""`stac-gdal-mcp index DIR`: a folder of generated COGs (and one plain GeoTIFF) becomes a local
catalog that the MCP tools search by bbox/datetime and process. Expected sets come from how the
files were made (places, dates), footprints from pyproj/rasterio directly."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from pyproj import Transformer
from rasterio.transform import from_origin
from rasterio.warp import transform_bounds

from stac_gdal_mcp.cli import main
from stac_gdal_mcp.testing import synthetic

TO_WGS84 = Transformer.from_crs(32633, 4326, always_xy=True)
SITE_A, SITE_B = (300000.0, 5100000.0), (420000.0, 5000000.0)
SCENES = [  # item folder, date, site
    ("S2B_33TUL_20240604_0_L2A", "2024-06-04T10:05:59Z", SITE_A),
    ("S2A_33TUL_20240619_0_L2A", "2024-06-19T10:05:49Z", SITE_A),
    ("S2A_33TVK_20240619_0_L2A", "2024-06-19T10:05:49Z", SITE_B),
]
BANDS = ("red", "green", "blue", "nir", "scl")
PLAIN = "plain/mosaic.tif"  # not a COG: striped, no overviews, no date in its name


def bbox_around(site, size_m=2560.0):
    """A small WGS84 bbox inside a scene written at `site` (upper-left corner, 2.56 km wide)."""
    x, y = site[0] + size_m / 2, site[1] - size_m / 2
    lon, lat = TO_WGS84.transform(x, y)
    return [lon - 0.003, lat - 0.003, lon + 0.003, lat + 0.003]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("mycogs")
    for seed, (name, when, site) in enumerate(SCENES):
        synthetic.write_scene(
            "sentinel-2-l2a",
            root / "scenes",
            name,
            when,
            seed=seed,
            origin=site,
            size_px=256,
            with_visual=False,
        )
    (root / "plain").mkdir()
    profile = {
        "driver": "GTiff",
        "width": 1024,
        "height": 1024,
        "count": 1,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(*SITE_B, 10, 10),
        "tiled": False,
        "nodata": 0,
    }
    with rasterio.open(root / PLAIN, "w", **profile) as dst:
        dst.write(np.arange(1024 * 1024, dtype="uint32").reshape(1, 1024, 1024).astype("uint16") % 5000 + 1)
        dst.update_tags(TIFFTAG_DATETIME="2024:07:01 10:30:00")
    return root


def files(root: Path, names) -> set[str]:
    return {str((root / n).resolve()) for n in names}


def test_index_command_flags_the_plain_geotiff_and_is_incremental(folder, tmp_path, capsys):
    work = tmp_path / "copy"
    shutil.copytree(folder, work)
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    out = capsys.readouterr().out
    n = len(SCENES) * len(BANDS) + 1
    assert f"indexed {n} file(s)" in out and f"{n} added" in out
    assert f"not a COG: {PLAIN}" in out and "rio cogeo create" in out
    assert out.count("not a COG") == 1
    index = json.loads((work / "stac-index.json").read_text())
    by_href = {i["assets"]["data"]["href"]: i for i in index["features"]}
    assert by_href[PLAIN]["assets"]["data"]["type"] == "image/tiff; application=geotiff"
    assert by_href[PLAIN]["properties"]["datetime"] == "2024-07-01T10:30:00Z"  # TIFFTAG_DATETIME
    red = by_href[f"scenes/{SCENES[0][0]}/red.tif"]
    assert red["properties"]["datetime"] == "2024-06-04T00:00:00Z"  # the pattern, from the path
    assert red["assets"]["data"]["type"].endswith("profile=cloud-optimized")
    with rasterio.open(work / "scenes" / SCENES[0][0] / "red.tif") as src:
        want = transform_bounds(src.crs, "EPSG:4326", *src.bounds)
        assert red["properties"]["proj:code"] == "EPSG:32633"
        assert red["properties"]["proj:shape"] == [src.height, src.width]
        assert red["assets"]["data"]["raster:bands"][0]["data_type"] == src.dtypes[0]
    assert red["bbox"] == pytest.approx(list(want), abs=1e-4)
    assert red["assets"]["data"]["eo:bands"][0]["common_name"] == "red"

    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    assert f"0 added, 0 updated, {n} unchanged, 0 removed" in capsys.readouterr().out

    (work / "scenes" / SCENES[2][0] / "nir.tif").unlink()
    os.utime(work / "scenes" / SCENES[1][0] / "red.tif", ns=(10**18, 10**18))
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    out = capsys.readouterr().out
    assert f"0 added, 1 updated, {n - 2} unchanged, 1 removed" in out
    assert "not a COG" in out  # still flagged when unchanged
    hrefs = {
        i["assets"]["data"]["href"] for i in json.loads((work / "stac-index.json").read_text())["features"]
    }
    assert f"scenes/{SCENES[2][0]}/nir.tif" not in hrefs and len(hrefs) == n - 1


def test_index_refuses_an_output_below_the_folder(folder, tmp_path, capsys):
    assert main(["index", str(folder), "--output", str(folder / "scenes" / "x.json")]) == 2
    assert "must be in" in capsys.readouterr().err


@pytest.fixture(scope="module")
def indexed(folder):
    assert main(["index", str(folder), "--datetime-pattern", "%Y%m%d", "--collection", "my-cogs"]) == 0
    return folder / "stac-index.json"


async def test_search_by_bbox_and_datetime_then_reproject(build, make_settings, indexed, folder):
    settings = make_settings(catalogs=[{"id": "mine", "path": str(indexed)}])
    async with Client(build(settings)) as client:

        async def search(**args):
            result = await client.call_tool(
                "search_items", {"catalog": "mine", "detail": "full", "limit": 100, **args}
            )
            return {i["assets"]["data"]["href"] for i in result.structured_content["items"]}

        site_a = bbox_around(SITE_A)
        assert await search(bbox=site_a) == files(
            folder, [f"scenes/{s[0]}/{b}.tif" for s in SCENES[:2] for b in BANDS]
        )
        assert await search(bbox=site_a, datetime="2024-06-01/2024-06-10") == files(
            folder, [f"scenes/{SCENES[0][0]}/{b}.tif" for b in BANDS]
        )
        assert await search(bbox=bbox_around(SITE_B), datetime="2024-06-25/2024-07-31") == files(
            folder, [PLAIN]
        )
        assert await search(collections=["my-cogs"], datetime="2024-06-19") == files(
            folder, [f"scenes/{s[0]}/{b}.tif" for s in SCENES[1:] for b in BANDS]
        )

        found = await client.call_tool(
            "search_items", {"catalog": "mine", "bbox": site_a, "datetime": "2024-06-04", "limit": 100}
        )
        nir = next(i for i in found.structured_content["items"] if i["id"].endswith("nir"))
        assert nir["assets"]["data"]["bands"] == ["nir"]
        record = (
            await client.call_tool(
                "reproject_asset",
                {
                    "catalog": "mine",
                    "collection_id": "my-cogs",
                    "item_id": nir["id"],
                    "asset": "nir",  # the band common name read from the header
                    "dst_crs": "EPSG:4326",
                },
            )
        ).structured_content
    source = folder / "scenes" / SCENES[0][0] / "nir.tif"
    with rasterio.open(source) as src, rasterio.open(record["assets"]["data"]["href"]) as out:
        west, south, east, north = transform_bounds(src.crs, "EPSG:4326", *src.bounds)
        assert out.crs.to_epsg() == 4326
        assert out.bounds.left == pytest.approx(west, abs=2 * out.res[0])
        assert out.bounds.top == pytest.approx(north, abs=2 * out.res[1])
        assert out.bounds.right == pytest.approx(east, abs=2 * out.res[0])
        data = out.read(1, masked=True)
        assert 0.9 * src.read(1).mean() < data.mean() < 1.1 * src.read(1).mean()
    assert str(source) in [link["href"] for link in record["links"]]


async def test_a_running_server_sees_a_re_index(build, make_settings, folder, tmp_path, capsys):
    """Re-running `index` while the server runs: the next search sees the new file, no restart."""
    work = tmp_path / "live"
    shutil.copytree(folder, work)
    new = work / "scenes" / SCENES[1][0] / "red.tif"
    moved = tmp_path / "red.tif"
    new.rename(moved)  # indexed without it first
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    settings = make_settings(catalogs=[{"id": "mine", "path": str(work / "stac-index.json")}])
    async with Client(build(settings)) as client:

        async def hrefs():
            result = await client.call_tool(
                "search_items",
                {"catalog": "mine", "detail": "full", "limit": 100, "bbox": bbox_around(SITE_A)},
            )
            return {i["assets"]["data"]["href"] for i in result.structured_content["items"]}

        before = await hrefs()
        assert str(new.resolve()) not in before
        moved.rename(new)
        assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
        assert "1 added" in capsys.readouterr().out
        assert await hrefs() == before | {str(new.resolve())}
