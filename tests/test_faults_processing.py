"""A failed read is never data: with the COG server stalling, answering 5xx or dropping the
connection mid-body, every processing tool fails with one line naming the asset and the reason,
after retrying what is retryable, and leaves nothing in the workspace.

The faults hit only the pixel data (`from_byte`: the smallest tile offset of any level, read
from the file's own TIFF tags with rasterio), so the header is read fine and the failure is in
the middle of the work. Expected pixels (retry cases) come from reading the file locally.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from fastmcp.exceptions import ToolError
from helpers import mask_only_scene, scaled
from test_processing_access import write_cog

from testbed.faults import AbortMidBody, ServerError, Stall, serve_faults

pytestmark = pytest.mark.testbed

SIZE = 1024


def first_tile_offset(path) -> int:
    """The smallest byte offset of any tile of any level (header bytes come before it)."""
    offsets = []
    with rasterio.open(path) as src:
        levels = [None, *range(len(src.overviews(1)))]
    for level in levels:
        extra = {} if level is None else {"overview_level": level}
        with rasterio.open(path, **extra) as src:
            rows, cols = -(-src.height // src.block_shapes[0][0]), -(-src.width // src.block_shapes[0][1])
            for i in range(rows):
                for j in range(cols):
                    value = src.get_tag_item(f"BLOCK_OFFSET_{j}_{i}", "TIFF", bidx=1)
                    if value:
                        offsets.append(int(value))
    return min(offsets)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    root = tmp_path_factory.mktemp("faulty")
    data = np.random.default_rng(5).integers(1, 60000, (SIZE, SIZE), dtype="uint16")
    write_cog(root / "scene.tif", data, nodata=0, blocksize=256)
    with serve_faults(root) as server:
        server.first_tile = first_tile_offset(root / "scene.tif")
        yield server


@pytest.fixture
def scene(faulty):
    """A fresh URL for the COG (GDAL caches what it read per URL, per process)."""
    name = f"scene-{uuid.uuid4().hex[:8]}.tif"
    (faulty.directory / name).hardlink_to(faulty.directory / "scene.tif")
    return name, f"{faulty.url}/{name}"


# A stalled server is recognised by the time limit itself, however loaded the machine: its
# cases wait STALL_TIMEOUT_S unscaled (about 4 timeouts through GDAL's retry; 3 s each under CI
# was about 80 s of the suite). The other cases keep the scaled limit for their honest reads.
STALL_TIMEOUT_S = 1


def network(request) -> dict:
    """The network settings of a test: an unscaled time limit for a stall fault."""
    callspec = getattr(request.node, "callspec", None)
    fault = callspec.params.get("fault") if callspec else None
    stall = fault == "stall" or isinstance(fault, Stall)
    return {"timeout_s": STALL_TIMEOUT_S if stall else scaled(1), "max_retries": 1}


@pytest.fixture
def settings(make_settings, request):
    return make_settings(network=network(request))


def leftovers(settings) -> list[str]:
    workspace = settings.workspace
    return sorted(
        str(p.relative_to(workspace))
        for p in workspace.rglob("*")
        if p.is_file() and p.suffix != ".alive"  # the live store's marker in .tmp
    )


TOOLS = {
    "reproject_asset": {"dst_crs": "EPSG:4326"},
    "convert_asset": {"output_format": "GTiff"},
    "convert_asset_png": {"output_format": "PNG"},
    "preview": {"max_size": 256},
}
FAULTS = {
    "stall": (
        lambda first: Stall(seconds=60, from_byte=first),
        f"did not answer within {STALL_TIMEOUT_S:g} s",
    ),
    "http-500": (lambda first: ServerError(status=500, from_byte=first), "HTTP 500"),
    "abort-mid-body": (
        lambda first: AbortMidBody(fraction=0.3, from_byte=first),
        "closed before the whole answer arrived",
    ),
}


async def call(settings, build, tool: str, url: str):
    arguments = {"href": url, **TOOLS[tool]}
    async with Client(build(settings)) as client:
        return await client.call_tool(tool.removesuffix("_png"), arguments)


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("tool", list(TOOLS))
async def test_failed_read_fails_the_tool(settings, build, faulty, scene, tool, fault):
    name, url = scene
    make, reason = FAULTS[fault]
    faulty.set_fault(f"/{name}", make(faulty.first_tile))
    start = time.monotonic()
    with pytest.raises(ToolError) as info:
        await call(settings, build, tool, url)
    message = str(info.value)
    assert name in message and reason in message, message
    assert "\n" not in message
    assert faulty.stats()["paths"][f"/{name}"]["faults"] >= 1  # the failure really was a pixel read
    assert leftovers(settings) == []
    assert time.monotonic() - start < 60


@pytest.mark.parametrize(
    "fault",
    [
        ServerError(status=503, times=1),
        AbortMidBody(fraction=0.5, times=1),
    ],
    ids=["transient-503", "one-abort"],
)
async def test_transient_failure_is_retried(settings, build, faulty, scene, fault):
    name, url = scene
    fault.from_byte = faulty.first_tile
    faulty.set_fault(f"/{name}", fault)
    result = await call(settings, build, "convert_asset", url)
    assert faulty.stats()["paths"][f"/{name}"]["faults"] == 1
    out = result.structured_content["assets"]["data"]["href"]
    with rasterio.open(out) as got, rasterio.open(faulty.directory / name) as truth:
        assert np.array_equal(got.read(), truth.read())


async def test_inspect_fails_when_the_header_cannot_be_read(settings, build, faulty, scene):
    name, url = scene
    faulty.set_fault(f"/{name}", ServerError(status=500))
    with pytest.raises(ToolError) as info:
        async with Client(build(settings)) as client:
            await client.call_tool("inspect_asset", {"href": url})
    assert name in str(info.value) and "500" in str(info.value)


@pytest.mark.parametrize(
    "fault, reason",
    [
        (Stall(seconds=60), f"did not answer within {STALL_TIMEOUT_S:g} s"),
        # GDAL says nothing about a short header read: the TIFF reader's error is the reason
        (AbortMidBody(fraction=0.01), "Failed to read directory"),
    ],
    ids=["stall", "abort-mid-body"],
)
async def test_inspect_fails_when_the_header_is_cut(settings, build, faulty, scene, fault, reason):
    name, url = scene
    faulty.set_fault(f"/{name}", fault)
    with pytest.raises(ToolError) as info:
        async with Client(build(settings)) as client:
            await client.call_tool("inspect_asset", {"href": url})
    assert name in str(info.value) and reason in str(info.value), str(info.value)


async def test_inspect_with_enough_of_a_cut_header_is_right(settings, build, faulty, scene):
    """Every answer cut at 20%: GDAL still gets the whole header of this small COG (or fails):
    what inspect reports must then equal the file's own header, never something half-read."""
    name, url = scene
    faulty.set_fault(f"/{name}", AbortMidBody(fraction=0.2))
    async with Client(build(settings)) as client:
        info = (await client.call_tool("inspect_asset", {"href": url})).structured_content
    with rasterio.open(faulty.directory / name) as truth:
        assert [info["width"], info["height"]] == [truth.width, truth.height]
        assert info["overviews"] == truth.overviews(1)
        assert info["block_size"] == [list(s) for s in truth.block_shapes]


async def test_inspect_unaffected_by_pixel_faults(settings, build, faulty, scene):
    """inspect reads the header only: a server failing on tile data changes nothing."""
    name, url = scene
    faulty.set_fault(f"/{name}", ServerError(status=500, from_byte=faulty.first_tile))
    async with Client(build(settings)) as client:
        info = (await client.call_tool("inspect_asset", {"href": url})).structured_content
    with rasterio.open(faulty.directory / name) as truth:
        assert [info["width"], info["height"]] == [truth.width, truth.height]
        assert info["overviews"] == truth.overviews(1)
    assert info["is_cog"] is True


@pytest.fixture(scope="module")
def cloud_folder(faulty):
    """Two Sentinel-2-like scenes (GOOD, BAD) of their SCL only (all cloud_cover_stats reads),
    written once; tests serve copies under fresh names."""
    folder = "cloud-scenes"
    items = [
        mask_only_scene(
            faulty.directory / folder,
            f"{faulty.url}/{folder}",
            item_id,
            size_px=2048,  # a 1024 px SCL: more than GDAL's first read of the file
            blocksize=128,
            seed=number,
        )[0]
        for number, item_id in enumerate(["GOOD", "BAD"])
    ]
    return folder, items


@pytest.fixture
def cloud_scenes(faulty, make_settings, cloud_folder, request):
    """The scenes under a fresh folder name (GDAL caches per URL), in a local catalog."""
    import json

    folder, items = cloud_folder
    fresh = f"cloud-{uuid.uuid4().hex[:8]}"
    for path in (faulty.directory / folder).rglob("*"):
        if path.is_file():
            target = faulty.directory / fresh / path.relative_to(faulty.directory / folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.hardlink_to(path)
    items = json.loads(json.dumps(items).replace(f"/{folder}/", f"/{fresh}/"))
    catalog = faulty.directory / fresh / "items.json"
    catalog.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    settings = make_settings(
        catalogs=[{"id": "faulty", "path": str(catalog)}],
        network=network(request),
    )
    bad_mask = faulty.directory / fresh / "BAD-scl.tif"
    return settings, f"/{fresh}/BAD-scl.tif", first_tile_offset(bad_mask), items


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_cloud_cover_row_gets_the_error(build, faulty, cloud_scenes, fault):
    settings, bad_path, first, items = cloud_scenes
    make, reason = FAULTS[fault]
    faulty.set_fault(bad_path, make(first))
    aoi = items[0]["bbox"]
    refs = [{"collection_id": i["collection"], "item_id": i["id"]} for i in items]
    async with Client(build(settings)) as client:
        result = await client.call_tool(
            "cloud_cover_stats", {"aoi": aoi, "search": {"catalog": "faulty", "items": refs}}
        )
    rows = {r["item_id"]: r for r in result.structured_content["items"]}
    # lean rows: a null is left out, so a good row has no `error` key
    assert rows["GOOD"].get("error") is None and rows["GOOD"]["clear_fraction"] is not None
    bad = rows["BAD"]
    assert "scl" in bad["error"] and reason in bad["error"], bad["error"]
    fractions = [k for k in bad if k.endswith("_fraction") or k in ("valid_pixels", "aoi_pixels")]
    assert all(bad[k] is None for k in fractions), bad  # not counted as clear, cloud or no data
    assert result.structured_content["failed"] == 1
    assert faulty.stats()["paths"][bad_path]["faults"] >= 1
