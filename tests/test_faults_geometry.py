"""Items without geometry: a STAC API that answers a bbox search with items whose
`geometry` is null (their bbox matched). odc-stac cannot place such an item ("Can not process
items without defined footprint", which escaped the error mapping); the loads leave them out with
a note, and when none is left every analysis tool answers one line naming the geometry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastmcp import Client

import stac_gdal_mcp
from testbed.miniapi import serve_mini_api

SAMPLE = Path(stac_gdal_mcp.__file__).parent / "data/sample"
AOI = [13.6, 45.92, 13.62, 45.94]
SEARCH = {"collections": ["sentinel-2-l2a"]}
GRID = {"crs": "EPSG:32633", "resolution": 10}  # the items no longer say theirs (no proj:*)


def _items(folder: Path, *, keep_geometry: int = 0) -> tuple[list[dict], list[dict]]:
    """The sample's Sentinel-2 items (their files copied into `folder`, hrefs made absolute),
    without proj:* fields and with geometry null for all but the first `keep_geometry`; and the
    collection. (odc-stac draws a footprint from proj:shape and proj:transform when there is no
    geometry: without both it cannot place an item.)"""
    shutil.copytree(SAMPLE / "sentinel-2-l2a", folder / "sentinel-2-l2a")
    items = []
    for path in sorted((folder / "sentinel-2-l2a").glob("*/*.json")):
        item = json.loads(path.read_text())
        for holder in (item["properties"], *item["assets"].values()):
            for key in [k for k in holder if k.startswith("proj:")]:
                del holder[key]
        for asset in item["assets"].values():
            asset["href"] = str((path.parent / asset["href"]).resolve())
        if len(items) >= keep_geometry:
            item["geometry"] = None
        items.append(item)
    collection = json.loads((folder / "sentinel-2-l2a/collection.json").read_text())
    return items, [collection]


async def _call(make_settings, build, api, workspace, name, arguments):
    settings = make_settings(
        workspace=workspace,
        builtin_catalogs=False,
        default_catalog="mini",
        catalogs=[{"id": "mini", "url": api.url}],
    )
    async with Client(build(settings)) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("time_series", {"aoi": AOI, "search": SEARCH, **GRID}),
        ("composite", {"aoi": AOI, "search": SEARCH, "bands": ["red"], **GRID}),
        ("time_series", {"aoi": AOI, "search": SEARCH, "dry_run": True, **GRID}),
        ("composite", {"aoi": AOI, "search": SEARCH, "bands": ["red"], "dry_run": True, **GRID}),
    ],
)
async def test_no_item_with_geometry_is_one_clear_line(tmp_path, make_settings, build, name, arguments):
    workspace = tmp_path / "workspace"
    items, collections = _items(workspace / "data")
    with serve_mini_api(items, collections) as api:
        result = await _call(make_settings, build, api, workspace, name, arguments)
    text = result.content[0].text
    assert result.is_error or "WOULD BE REFUSED" in text, text[:300]
    assert "geometry" in text and "Error calling tool" not in text and "\n" not in text, text


async def test_items_without_geometry_are_left_out_with_a_note(tmp_path, make_settings, build):
    workspace = tmp_path / "workspace"
    items, collections = _items(workspace / "data", keep_geometry=2)
    with serve_mini_api(items, collections) as api:
        result = await _call(
            make_settings, build, api, workspace, "time_series", {"aoi": AOI, "search": SEARCH, **GRID}
        )
    assert not result.is_error, result.content[0].text
    notes = result.structured_content["notes"]
    note = next((n for n in notes if "without a geometry (footprint) were left out" in n), "")
    assert note.startswith(f"{len(items) - 2} items"), notes
    assert all(item["id"] in note for item in items[2:]), note
