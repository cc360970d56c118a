"""A failed item in `time_series` and `composite` is reported and left out, never read as
no-data, through the MCP client against the fault-injecting server: one of
three scenes (each on its own day) has its red band's tiles failing (HTTP 500, or the
connection dropped mid-body); on the items' own grid and on a reprojected grid (odc-stac's
warping read path)."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from fastmcp.exceptions import ToolError
from helpers import fractions, scaled, write_days
from test_faults_processing import first_tile_offset

from testbed.faults import AbortMidBody, ServerError, serve_faults

pytestmark = pytest.mark.testbed

DAYS = {"A": "2024-06-01T10:00:00Z", "BAD": "2024-06-06T10:00:00Z", "C": "2024-06-11T10:00:00Z"}
FAULTS = {
    "http-500": (lambda first: ServerError(status=500, from_byte=first), "HTTP 500"),
    "abort-mid-body": (
        lambda first: AbortMidBody(fraction=0.3, from_byte=first),
        "closed before the whole answer arrived",
    ),
}
GRIDS = {"native": {}, "reprojected": {"crs": "EPSG:3857", "resolution": 15}}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("loads")
    with serve_faults(root) as server:
        server.items = write_days(
            root / "scenes",
            DAYS,
            seed=0,
            size_px=512,
            blocksize=128,
            href_base=f"{server.url}/scenes",
            **fractions(cloud=0.0, shadow=0.0),
        )
        server.root = root
        yield server


@pytest.fixture
def scenes(served, make_settings):
    """The scenes under a fresh folder name (GDAL caches per URL), in a local catalog."""
    return fresh_scenes(served, make_settings)


def fresh_scenes(served, make_settings):
    fresh = f"s-{uuid.uuid4().hex[:8]}"
    for path in (served.root / "scenes").rglob("*"):
        if path.is_file():
            target = served.root / fresh / path.relative_to(served.root / "scenes")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.hardlink_to(path)
    items = json.loads(json.dumps(served.items).replace("/scenes/", f"/{fresh}/"))
    catalog = served.root / fresh / "items.json"
    catalog.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    settings = make_settings(
        catalogs=[{"id": "faulty", "path": str(catalog)}], network={"timeout_s": scaled(1), "max_retries": 1}
    )
    return settings, fresh, items


def aoi_of(items):
    west, south, east, north = items[0]["bbox"]
    dx, dy = (east - west) / 4, (north - south) / 4
    return [west + dx, south + dy, east - dx, north - dy]


def inject(served, fresh, fault, band="red"):
    make, reason = FAULTS[fault]
    path = f"/{fresh}/BAD/{band}.tif"
    served.set_fault(path, make(first_tile_offset(served.root / fresh / "BAD" / f"{band}.tif")))
    return path, reason


def read_output(settings, output_id):
    path = next((settings.workspace / "outputs").glob(f"{output_id}*"))
    with rasterio.open(path) as src:
        return src.read()


async def run(settings, build, tool, arguments):
    async with Client(build(settings)) as client:
        result = await client.call_tool(tool, arguments)
        record = None
        if tool == "composite":
            uri = result.structured_content["output"]["uri"]
            record = json.loads((await client.read_resource(uri))[0].text)
        return result.structured_content, record


@pytest.mark.parametrize("grid", list(GRIDS))
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_time_series_leaves_out_a_failed_item(build, served, scenes, make_settings, fault, grid):
    settings, fresh, items = scenes
    args = {
        "aoi": aoi_of(items),
        "search": {"catalog": "faulty", "collections": ["sentinel-2-l2a"]},
        "expression": "ndvi",
        **GRIDS[grid],
    }
    clean, _ = await run(fresh_scenes(served, make_settings)[0], build, "time_series", args)
    path, reason = inject(served, fresh, fault)
    result, _ = await run(settings, build, "time_series", args)
    assert served.stats()["paths"][path]["faults"] >= 1  # the fault really hit
    assert [r["item_ids"] for r in result["rows"]] == [["A"], ["C"]]
    assert [f["item_id"] for f in result["failed_items"]] == ["BAD"]
    assert reason in result["failed_items"][0]["error"], result["failed_items"]  # what really happened
    assert any("could not be read" in n for n in result["notes"])
    good = {r["date"]: r for r in clean["rows"]}
    for row in result["rows"]:  # the other days are exactly what they are without the fault
        assert row["value"] == good[row["date"]]["value"]
        assert row["valid_pixels"] == good[row["date"]]["valid_pixels"]


@pytest.mark.parametrize("grid", list(GRIDS))
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_composite_leaves_out_a_failed_item(build, served, scenes, fault, grid):
    settings, fresh, items = scenes
    args = {
        "aoi": aoi_of(items),
        "search": {"catalog": "faulty", "collections": ["sentinel-2-l2a"]},
        "bands": ["red", "nir"],
        **GRIDS[grid],
    }
    path, reason = inject(served, fresh, fault)
    result, record = await run(settings, build, "composite", args)
    assert served.stats()["paths"][path]["faults"] >= 1
    assert result["items"] == 2
    assert [f["item_id"] for f in result["failed_items"]] == ["BAD"]
    assert reason in result["failed_items"][0]["error"], result["failed_items"]
    derived = [link["href"] for link in record["links"] if link["rel"] == "derived_from"]
    assert derived and not any("/BAD/" in href for href in derived), derived
    assert any("/A/" in href for href in derived) and any("/C/" in href for href in derived)
    # the composite equals the one made from the two good items only
    served.clear_faults(path)
    want_args = {**args, "search": {**args["search"], "ids": ["A", "C"]}}
    want, _ = await run(settings, build, "composite", want_args)
    assert want["failed_items"] == []
    got = read_output(settings, result["output"]["id"])
    expected = read_output(settings, want["output"]["id"])
    np.testing.assert_array_equal(got, expected)


async def test_every_item_failing_is_an_error(build, served, scenes):
    settings, fresh, items = scenes
    for item_id in DAYS:
        served.set_fault(f"/{fresh}/{item_id}/red.tif", ServerError(status=500))
    with pytest.raises(ToolError, match="none of the 3 items could be read"):
        await run(
            settings,
            build,
            "composite",
            {
                "aoi": aoi_of(items),
                "search": {"catalog": "faulty", "collections": ["sentinel-2-l2a"]},
                "bands": ["red"],
            },
        )
