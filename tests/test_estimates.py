"""Estimates before work: dry_run=true answers, from COG headers only, what a call
would read and write; its byte estimate is checked against the bytes the Range server really
sent when the same call ran (within +-25%), for a subset (convert_asset with bbox), a reprojection,
cloud statistics and a composite - all through the MCP client.

GDAL caches what it fetched per URL: the dry run and the real call read the same files under
different names (hard links), so the real call fetches everything itself.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid

import numpy as np
import pytest
from fastmcp import Client
from helpers import utm_aoi, write_cog, write_days

from stac_gdal_mcp.server import build_server

TOLERANCE = 0.25
ORIGIN = (500000.0, 5000000.0)  # EPSG:32633, where write_cog and the synthetic scenes start
UID = uuid.uuid4().hex[:8]
S2 = f"est-s2-{UID}"


@pytest.fixture(scope="module")
def big(cog_server):
    """A 3072 x 3072 uint16 DEFLATE COG, 512 px tiles, smooth values plus noise."""
    rng = np.random.default_rng(5)
    smooth = np.kron(rng.uniform(300, 4000, (12, 12)), np.ones((256, 256)))
    data = np.clip(smooth + rng.normal(0, 60, smooth.shape), 1, 65535).astype("uint16")
    return write_cog(cog_server.root / f"est-{UID}.tif", data, blocksize=512)


def fresh(cog_server, path) -> str:
    """A new URL for the same file (GDAL caches what it read per URL, per process)."""
    name = f"{path.stem}-{uuid.uuid4().hex[:6]}{path.suffix}"
    os.link(path, cog_server.root / name)
    return f"{cog_server.url}/{name}"


def served(cog_server, url: str) -> int:
    return cog_server.stats()["paths"].get("/" + url.rsplit("/", 1)[-1], {}).get("bytes", 0)


async def dry_and_real(client, cog_server, tool: str, arguments: dict, path) -> tuple[dict, int]:
    """(the dry run's estimate, bytes the real call fetched), each on its own copy of `path`."""
    first, second = fresh(cog_server, path), fresh(cog_server, path)
    estimate = (
        await client.call_tool(tool, {**arguments, "href": first, "dry_run": True})
    ).structured_content
    result = await client.call_tool(tool, {**arguments, "href": second})
    assert not result.is_error
    return estimate, served(cog_server, second)


def check_ratio(estimate: dict, fetched: int) -> float:
    assert estimate["dry_run"] is True and fetched > 0
    ratio = estimate["read_bytes"] / fetched
    assert abs(ratio - 1) <= TOLERANCE, (estimate["operation"], estimate["read_bytes"], fetched)
    return ratio


# --- one file: subset and reprojection ------------------------------------------------------------


async def test_subset_estimate(make_settings, cog_server, big):
    settings = make_settings()
    bbox = utm_aoi(ORIGIN[0] + 7000, ORIGIN[1] - 21000, ORIGIN[0] + 19000, ORIGIN[1] - 9000)
    async with Client(build_server(settings)) as client:
        estimate, fetched = await dry_and_real(
            client, cog_server, "convert_asset", {"output_format": "GTiff", "bbox": bbox}, big
        )
        bbox_utm = [ORIGIN[0] + 7000, ORIGIN[1] - 21000, ORIGIN[0] + 19000, ORIGIN[1] - 9000]
        exact, fetched_exact = await dry_and_real(
            client,
            cog_server,
            "convert_asset",
            {"output_format": "COG", "bbox": bbox_utm, "bbox_crs": "EPSG:32633"},
            big,
        )
    check_ratio(estimate, fetched)
    check_ratio(exact, fetched_exact)
    assert exact["output"]["width"] == exact["output"]["height"] == 1200  # 12 km at 10 m
    # the window is columns 700..1899, rows 900..2099: tiles 1-3 across, 1-4 down
    assert exact["output"]["bytes"] == 1200 * 1200 * 2 and exact["read_tiles"] == 3 * 4
    assert estimate["read_requests"] >= 3 and not estimate["would_refuse"]
    assert estimate["files"][0]["overview_level"] is None


async def test_reproject_estimates(make_settings, cog_server, big):
    settings = make_settings()
    bbox = utm_aoi(ORIGIN[0] + 3000, ORIGIN[1] - 25000, ORIGIN[0] + 25000, ORIGIN[1] - 3000)
    cases = [
        {"dst_crs": "EPSG:4326", "bbox": bbox},  # full resolution, part of the scene
        {"dst_crs": "EPSG:3857"},  # the whole scene
        {"dst_crs": "EPSG:4326", "resolution": 0.0004, "resampling": "bilinear"},  # from an overview
    ]
    async with Client(build_server(settings)) as client:
        for arguments in cases:
            estimate, fetched = await dry_and_real(client, cog_server, "reproject_asset", arguments, big)
            check_ratio(estimate, fetched)
            assert estimate["output"]["crs"] == arguments["dst_crs"]
    assert estimate["files"][0]["overview_level"] is not None  # the coarse one reads an overview


async def test_dry_run_refuses_as_the_call_would(make_settings, cog_server, big):
    settings = make_settings(limits={"max_output_pixels": 1_000_000})
    url = fresh(cog_server, big)
    async with Client(build_server(settings)) as client:
        dry = await client.call_tool(
            "reproject_asset", {"href": url, "dst_crs": "EPSG:3857", "dry_run": True}
        )
        real = await client.call_tool(
            "reproject_asset", {"href": url, "dst_crs": "EPSG:3857"}, raise_on_error=False
        )
        small = await client.call_tool(
            "reproject_asset", {"href": url, "dst_crs": "EPSG:3857", "resolution": 60, "dry_run": True}
        )
    estimate = dry.structured_content
    assert estimate["would_refuse"] and "max_output_pixels" in estimate["refusal"]
    assert "coarser resolution" in estimate["refusal"]  # how to shrink it
    assert real.is_error and estimate["refusal"] in real.content[0].text
    check = next(c for c in estimate["limits"] if c["limit"] == "limits.max_output_pixels")
    assert check["ok"] is False and check["needed"] > check["allowed"]
    assert not small.structured_content["would_refuse"]
    assert served(cog_server, url) < 100_000  # headers only: no tile of the 3072 px level was read
    assert not list((settings.workspace / "outputs").glob("*"))  # nothing written


# --- many items: cloud statistics and a composite --------------------------------------------------

DAYS = {"S2E_D1": "2024-06-01T10:00:00Z", "S2E_D2": "2024-06-06T10:00:00Z", "S2E_D3": "2024-06-11T10:00:00Z"}
AOI = utm_aoi(ORIGIN[0] + 1500, ORIGIN[1] - 8000, ORIGIN[0] + 8000, ORIGIN[1] - 1500)


@pytest.fixture(scope="module")
def scenes(cog_server):
    """Three 1024 px Sentinel-2-like scenes (256 px tiles) under the Range server."""
    folder = cog_server.root / f"est-scenes-{UID}"
    items = write_days(
        folder, DAYS, seed=80, collection_id=S2, size_px=1024, blocksize=256, cloud_fraction=0.3
    )
    return folder, items


def scene_catalog(cog_server, scenes, tmp_path) -> str:
    """A local catalog of the scenes under a new folder name (new URLs: nothing cached)."""
    folder, items = scenes
    copy = cog_server.root / f"{folder.name}-{uuid.uuid4().hex[:6]}"
    shutil.copytree(folder, copy, copy_function=os.link)
    features = []
    for item in items:
        item = json.loads(json.dumps(item))
        for key, asset in item["assets"].items():
            name = f"{key}.{'png' if key == 'thumbnail' else 'tif'}"
            asset["href"] = f"{cog_server.url}/{copy.name}/{item['id']}/{name}"
        features.append(item)
    path = tmp_path / f"{copy.name}.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return str(path), copy.name


def folder_bytes(cog_server, folder: str) -> int:
    paths = cog_server.stats()["paths"]
    return sum(s["bytes"] for p, s in paths.items() if p.startswith(f"/{folder}/"))


async def dry_and_real_load(make_settings, cog_server, scenes, tmp_path, tool: str, arguments: dict):
    first, _ = scene_catalog(cog_server, scenes, tmp_path)
    second, folder = scene_catalog(cog_server, scenes, tmp_path)
    catalogs = [{"id": "dry", "path": first}, {"id": "real", "path": second}]
    async with Client(build_server(make_settings(catalogs=catalogs, default_catalog="dry"))) as client:
        arguments = {**arguments, "aoi": AOI}
        estimate = (
            await client.call_tool(
                tool, {**arguments, "search": {"catalog": "dry", "collections": [S2]}, "dry_run": True}
            )
        ).structured_content
        result = await client.call_tool(
            tool, {**arguments, "search": {"catalog": "real", "collections": [S2]}}
        )
    assert not result.is_error
    return estimate, folder_bytes(cog_server, folder), result.structured_content


async def test_cloud_cover_estimate(make_settings, cog_server, scenes, tmp_path):
    for resolution in (None, 60):
        arguments = {} if resolution is None else {"resolution": resolution}
        estimate, fetched, result = await dry_and_real_load(
            make_settings, cog_server, scenes, tmp_path, "cloud_cover_stats", arguments
        )
        check_ratio(estimate, fetched)
        assert sorted(estimate["item_ids"]) == sorted(DAYS) == sorted(r["item_id"] for r in result["items"])
        assert estimate["output"]["rows"] == 3


async def test_composite_estimate(make_settings, cog_server, scenes, tmp_path):
    estimate, fetched, result = await dry_and_real_load(
        make_settings, cog_server, scenes, tmp_path, "composite", {"bands": ["red", "green", "blue"]}
    )
    check_ratio(estimate, fetched)
    rows, cols = result["grid"]["shape"]
    assert (estimate["output"]["height"], estimate["output"]["width"]) == (rows, cols)
    assert estimate["output"]["bytes"] == rows * cols * 3 * 4  # float32
    assert sorted(estimate["item_ids"]) == sorted(DAYS)
    coarse, fetched, _ = await dry_and_real_load(
        make_settings, cog_server, scenes, tmp_path, "time_series", {"resolution": 40, "expression": "ndvi"}
    )
    check_ratio(coarse, fetched)
    assert coarse["output"]["rows"] == 3
