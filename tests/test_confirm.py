"""Confirm before large jobs: above limits.confirm_bytes a job runs only once the user
said yes - asked through MCP elicitation by a fastmcp Client with an elicitation handler (accept,
decline), or, from a client without one, answered with the estimate and a note to call again
with confirm=true. On the bundled sample catalog, with a limit below what the calls need."""

import pytest
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

S2 = "sentinel-2-l2a"
REF = {"catalog": "sample", "collection_id": S2, "item_id": "S2A_33TUL_20240808_0_L2A", "asset": "red"}
REPROJECT = {**REF, "dst_crs": "EPSG:4326", "bbox": [13.55, 45.85, 13.75, 45.98]}
AOI = [13.60, 45.92, 13.62, 45.935]
SEARCH = {"catalog": "sample", "collections": [S2], "datetime": "2024-06-01/2024-07-31"}


def _server(tmp_path, confirm_bytes: int):
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    return build_server(load_settings(workspace=tmp_path / "ws", limits={"confirm_bytes": confirm_bytes}))


def _size(estimate: dict) -> int:
    """What the limit is compared with, from the estimate's own fields."""
    return max(estimate.get("read_bytes") or 0, (estimate.get("output") or {}).get("bytes") or 0)


def _answering(action: str, asked: list):
    async def handler(message, response_type, params, context):
        asked.append((message, params.requested_schema))
        return True if action == "accept" else ElicitResult(action=action)

    return handler


async def _outputs(client) -> list:
    return (await client.call_tool("list_outputs", {})).structured_content["outputs"]


MODES = ["auto", "legacy"]  # a 2026-07-28 connection (input_required), a handshake-era one (elicit)


@pytest.mark.parametrize("mode", MODES)
async def test_accept_runs_the_job_after_asking_with_the_estimate(tmp_path, mode):
    asked: list = []
    handler = _answering("accept", asked)
    async with Client(_server(tmp_path, 1), elicitation_handler=handler, mode=mode) as client:
        estimate = (
            await client.call_tool("reproject_asset", {**REPROJECT, "dry_run": True})
        ).structured_content
        result = await client.call_tool("reproject_asset", REPROJECT)
        outputs = await _outputs(client)
    assert _size(estimate) > 1
    ((message, schema),) = asked
    assert message.startswith(f"dry run of {estimate['operation']}") and "run it?" in message
    assert f"{_size(estimate):,} bytes, more than limits.confirm_bytes=1" in message
    assert schema["properties"]["value"]["type"] == "boolean"
    assert result.structured_content["id"] == outputs[0]["id"] and len(outputs) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_runs_nothing_and_answers_the_estimate(tmp_path, action, mode):
    asked: list = []
    handler = _answering(action, asked)
    async with Client(_server(tmp_path, 1), elicitation_handler=handler, mode=mode) as client:
        result = await client.call_tool("reproject_asset", REPROJECT)
        outputs = await _outputs(client)
    assert len(asked) == 1 and outputs == []
    answer = result.structured_content
    assert answer["dry_run"] is True and not result.is_error
    assert answer["notes"][-1].startswith(f"not run: the user did not confirm it ({action};")
    assert result.content[0].text == answer["notes"][-1]
    assert not any(list((tmp_path / "ws").rglob("*.tif")))


@pytest.mark.parametrize("mode", MODES)
async def test_without_elicitation_the_estimate_asks_for_confirm_true(tmp_path, mode):
    async with Client(_server(tmp_path, 1), mode=mode) as client:
        first = await client.call_tool("cloud_cover_stats", {"aoi": AOI, "search": SEARCH})
        assert await _outputs(client) == []
        second = await client.call_tool("cloud_cover_stats", {"aoi": AOI, "search": SEARCH, "confirm": True})
        dry = await client.call_tool("cloud_cover_stats", {"aoi": AOI, "search": SEARCH, "dry_run": True})
    note = first.structured_content["notes"][-1]
    assert note.startswith("not run: ") and "call again with confirm=true" in note
    assert f"{_size(dry.structured_content):,} bytes" in note
    first, dry = first.structured_content, dry.structured_content
    assert (first["read_bytes"], first.get("output"), sorted(first["inputs"])) == (
        dry["read_bytes"],
        dry.get("output"),
        sorted(dry["inputs"]),
    )
    rows = second.structured_content["items"]
    assert rows and all("clear_fraction" in row for row in rows)  # measured


async def test_small_jobs_and_a_zero_limit_are_not_asked(tmp_path):
    asked: list = []
    for limit in (10**12, 0):
        async with Client(
            _server(tmp_path / str(limit), limit), elicitation_handler=_answering("decline", asked)
        ) as c:
            result = await c.call_tool("time_series", {"aoi": AOI, "search": SEARCH, "expression": "ndvi"})
        assert result.structured_content.get("dry_run") is None and result.structured_content["rows"]
    assert asked == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value", ["no", "", "false", 0, None])
async def test_an_accept_without_an_explicit_yes_runs_nothing(tmp_path, mode, value):
    """An elicitation answered 'accept' whose content is not a yes (text 'no', empty, 0) declines."""
    asked: list = []

    async def handler(message, response_type, params, context):
        asked.append(message)
        return ElicitResult(action="accept", content={"value": value})

    async with Client(_server(tmp_path, 1), elicitation_handler=handler, mode=mode) as client:
        result = await client.call_tool("reproject_asset", REPROJECT, raise_on_error=False)
        outputs = await _outputs(client)
    assert outputs == [] and not any(list((tmp_path / "ws").rglob("*.tif")))
    text = result.content[0].text
    assert result.is_error or text.startswith("not run: the user did not confirm it"), text[:300]


def _jp2_sample(folder):
    """The bundled sample catalog with its Sentinel-2 bands as JPEG 2000 (no tile index: the
    estimate cannot size their reads)."""
    import json
    import shutil
    from pathlib import Path

    import rasterio.shutil

    import stac_gdal_mcp

    shutil.copytree(Path(stac_gdal_mcp.__file__).parent / "data/sample", folder)
    for path in (folder / S2).glob("*/*.json"):
        item = json.loads(path.read_text())
        for key in ("red", "nir", "scl"):
            tif = path.parent / f"{key}.tif"
            rasterio.shutil.copy(
                tif, tif.with_suffix(".jp2"), driver="JP2OpenJPEG", REVERSIBLE="YES", QUALITY="100"
            )
            item["assets"][key].update(href=f"./{key}.jp2", type="image/jp2")
        path.write_text(json.dumps(item))
    return folder / "catalog.json"


@pytest.mark.parametrize("tool", ["time_series", "zonal_stats"])
async def test_reads_of_unknown_size_are_asked_about(tmp_path, tool):
    """JPEG 2000 assets have no tile index: their bytes are unknown, never counted as 0, so the
    user is asked even under a limit no known size reaches."""
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    settings = load_settings(
        workspace=tmp_path / "ws",
        builtin_catalogs=False,
        default_catalog="jp2",
        catalogs=[{"id": "jp2", "path": str(_jp2_sample(tmp_path / "sample"))}],
        limits={"confirm_bytes": 10**12},
    )
    search = {**SEARCH, "catalog": "jp2"}
    square = {
        "type": "Polygon",
        "coordinates": [[[13.60, 45.92], [13.62, 45.92], [13.62, 45.935], [13.60, 45.92]]],
    }
    arguments = (
        {"aoi": AOI, "search": search} if tool == "time_series" else {"geometries": square, "search": search}
    )
    asked: list = []
    async with Client(build_server(settings), elicitation_handler=_answering("decline", asked)) as client:
        dry = (await client.call_tool(tool, {**arguments, "dry_run": True})).structured_content
        result = await client.call_tool(tool, arguments)
        outputs = await _outputs(client)
    assert [f["bytes"] for f in dry["files"]] and all(f["bytes"] is None for f in dry["files"]), dry["files"]
    assert _size(dry) <= 10**12
    ((message, _),) = asked
    assert "cannot be estimated" in message and "run it?" in message, message
    assert outputs == [] and result.structured_content["notes"][-1].startswith(
        "not run: the user did not confirm"
    )
