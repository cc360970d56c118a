"""An asset that cannot be reached is an error naming it and the reason, in the dry run as in the
run - never a "file whose read size cannot be estimated" to ask the user about (that stays for
files that are reachable but not tiled: tests/test_confirm.py). On the pgstac test bed and the
Range server: synthetic Sentinel-2 scenes served over HTTP, and copies of them whose SCL (or
bands) are on a host that does not resolve, on a port nothing listens on, or missing (404).

- some items unreachable: their rows carry the error, the others are measured; the dry run
  notes them and sizes only the files it could open;
- every item unreachable for the same reason: the call fails with that one reason, dry run or not.
"""

from __future__ import annotations

import copy
import socket
import uuid

import pytest
from fastmcp import Client

from stac_gdal_mcp.testing import synthetic

UID = uuid.uuid4().hex[:8]
S2 = f"reach-s2-{UID}"
DNS = "http://no-such-host.invalid/scenes"  # .invalid never resolves (RFC 6761)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def items(cog_server, pgstac_api):
    folder = f"reach-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    ok, _ = synthetic.write_scene(
        "sentinel-2-l2a", out_dir, "REACH_OK", "2024-06-01T10:00:00Z", href_base=href_base,
        collection_id=S2, size_px=256, with_visual=False, seed=5,
    )  # fmt: skip
    elsewhere = {
        "dns": DNS,
        "refused": f"http://127.0.0.1:{_closed_port()}/scenes",
        "missing": f"{cog_server.url}/missing-{UID}",
    }
    made = {"ok": ok}
    for number, (name, base) in enumerate(elsewhere.items()):
        item = copy.deepcopy(ok)
        item["id"] = f"REACH_{name.upper()}"
        item["properties"]["datetime"] = f"2024-06-0{number + 2}T10:00:00Z"
        for asset in item["assets"].values():
            asset["href"] = asset["href"].replace(href_base, base)
        made[name] = item
    pgstac_api.load([synthetic.collection("sentinel-2-l2a", S2)], list(made.values()))
    return made


@pytest.fixture
def settings(make_settings, pgstac_api):
    # a confirm limit no known size reaches: only files of unknown size would make it ask
    return make_settings(
        catalogs=[{"id": "bed", "url": pgstac_api.url}],
        default_catalog="bed",
        limits={"confirm_bytes": 10**12},
        network={"max_retries": 0, "timeout_s": 5},
    )


def _ids(*names) -> dict:
    return {"items": [{"collection_id": S2, "item_id": f"REACH_{n.upper()}"} for n in names]}


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


AOI_OF = lambda item: [  # noqa: E731 - a small square inside the scene
    item["bbox"][0] + 0.002,
    item["bbox"][1] + 0.002,
    item["bbox"][0] + 0.012,
    item["bbox"][1] + 0.008,
]
REASONS = {"dns": "Could not resolve host", "refused": "onnect", "missing": "404"}


@pytest.mark.parametrize("where", ["dns", "refused", "missing"])
async def test_an_unreachable_mask_is_an_error_naming_it_never_a_question(items, settings, build, where):
    arguments = {"aoi": AOI_OF(items["ok"]), "search": _ids(where)}
    async with Client(build(settings)) as client:
        dry = await client.call_tool_mcp("cloud_cover_stats", {**arguments, "dry_run": True})
        run = await client.call_tool_mcp("cloud_cover_stats", arguments)
    for result in (dry, run):
        assert result.is_error, _text(result)
        text = _text(result)
        assert "asset 'scl'" in text and f"REACH_{where.upper()}" in text, text
        assert REASONS[where] in text, text
        assert "cannot be estimated" not in text and "confirm" not in text, text


async def test_unreachable_items_keep_their_errors_in_rows_beside_the_measured(items, settings, build):
    arguments = {"aoi": AOI_OF(items["ok"]), "search": _ids("ok", "dns", "refused")}
    async with Client(build(settings)) as client:
        dry = await client.call_tool_mcp("cloud_cover_stats", {**arguments, "dry_run": True})
        run = await client.call_tool_mcp("cloud_cover_stats", arguments)
    assert not dry.is_error and not run.is_error, (_text(dry), _text(run))
    estimate = dry.structured_content
    assert [f["bytes"] is not None for f in estimate["files"]] == [True], estimate["files"]
    assert estimate["item_ids"] == ["REACH_OK"]
    failing = [n for n in estimate["notes"] if "would fail" in n]
    assert len(failing) == 2 and all("asset 'scl'" in n for n in failing), estimate["notes"]
    by_id = {row["item_id"]: row for row in run.structured_content["items"]}
    assert "error" not in by_id["REACH_OK"] and by_id["REACH_OK"]["valid_pixels"] > 0
    assert "Could not resolve host" in by_id["REACH_DNS"]["error"]
    assert by_id["REACH_REFUSED"]["error"] and "scl" in by_id["REACH_REFUSED"]["error"]


async def test_zonal_stats_on_bands_that_are_elsewhere_fails_with_the_reason(items, settings, build):
    west, south, east, north = AOI_OF(items["ok"])
    square = {
        "type": "Polygon",
        "coordinates": [[[west, south], [east, south], [east, north], [west, north], [west, south]]],
    }
    arguments = {"geometries": square, "search": _ids("dns"), "expression": "(nir - red) / (nir + red)"}
    async with Client(build(settings)) as client:
        dry = await client.call_tool_mcp("zonal_stats", {**arguments, "dry_run": True})
        run = await client.call_tool_mcp("zonal_stats", arguments)
    for result in (dry, run):
        assert result.is_error, _text(result)
        assert "Could not resolve host" in _text(result) and "of item 'REACH_DNS'" in _text(result), _text(
            result
        )
