"""Search answers that looked right but were not, as a newcomer met them, on the real pgstac API
of the test bed with real Planetary Computer items (tests/real_items/planetary-computer):

- NAIP searched with max_cloud_cover: its items carry no eo:cloud_cover, and the answer says so
  (not a bare "0 items");
- save_search of 716 items with limits.max_items=500 says "500 of 716" in its text;
- STAC's sortby form ([{"field", "direction"}]) gives what the short form gives;
- a bbox given latitude first is answered with the swapped one, out of range or not;
- counts of one are singular ("1 item").
Each answer is checked against pystac-client on the same API where it states a number.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from fastmcp import Client
from helpers import bare_collection

REAL = Path(__file__).parent / "real_items" / "planetary-computer"
NAIP, S2, MANY = "nc-naip", "nc-s2", "nc-naip-716"


def _items(name: str, collection: str) -> list[dict]:
    items = json.loads((REAL / f"{name}.json").read_text())
    out = []
    for item in items:
        item = copy.deepcopy(item)
        item["collection"] = collection
        item["links"] = []
        out.append(item)
    return out


@pytest.fixture(scope="module")
def loaded(pgstac_api):
    naip, s2 = _items("naip-pc", NAIP), _items("sentinel-2-l2a-pc", S2)
    base = _items("naip-pc", MANY)[0]
    many = [dict(copy.deepcopy(base), id=f"{base['id']}-{k:03d}") for k in range(716)]
    pgstac_api.load([bare_collection(c) for c in (NAIP, S2, MANY)], naip + s2 + many)
    return {"naip": naip, "s2": s2}


@pytest.fixture
def settings(make_settings, pgstac_api, loaded):
    return make_settings(
        catalogs=[{"id": "bed", "url": pgstac_api.url}], default_catalog="bed", limits={"max_items": 500}
    )


async def _call(settings, build, tool: str, arguments: dict):
    async with Client(build(settings)) as client:
        return await client.call_tool_mcp(tool, arguments)


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def test_naip_with_max_cloud_cover_notes_the_missing_property(settings, build, pgstac_api):
    from pystac_client import Client as StacClient

    truth = list(StacClient.open(pgstac_api.url).search(collections=[NAIP]).items())
    assert truth and all("eo:cloud_cover" not in i.properties for i in truth)
    result = await _call(settings, build, "search_items", {"collections": [NAIP], "max_cloud_cover": 10})
    assert not result.is_error, _text(result)
    answer = json.loads(_text(result))
    assert answer["returned"] == 0
    note = next((n for n in answer.get("notes", []) if "eo:cloud_cover" in n and NAIP in n), None)
    assert note is not None, answer.get("notes", [])
    assert "no cloud property" in note, note
    # a collection that has the property gets no such note when nothing is clear enough
    result = await _call(settings, build, "search_items", {"collections": [S2], "max_cloud_cover": 0.1})
    notes = json.loads(_text(result)).get("notes", [])
    assert not [n for n in notes if "have no eo:cloud_cover" in n], notes


async def test_save_search_says_how_many_of_how_many_it_saved(settings, build, pgstac_api):
    from pystac_client import Client as StacClient

    matched = StacClient.open(pgstac_api.url).search(collections=[MANY]).matched()
    assert matched == 716
    result = await _call(settings, build, "save_search", {"search": {"collections": [MANY]}})
    assert not result.is_error, _text(result)
    assert result.structured_content["properties"]["search:items"] == 500
    assert "500 of 716 items saved: limits.max_items; pass max_items to save more" in _text(result)
    result = await _call(
        settings, build, "save_search", {"search": {"collections": [NAIP]}, "format": "ndjson"}
    )
    assert f"{len(json.loads((REAL / 'naip-pc.json').read_text()))} items saved: every item" in _text(result)


async def test_stac_sortby_form_equals_the_short_form(settings, build):
    stac = [{"field": "properties.eo:cloud_cover", "direction": "desc"}]
    answers = []
    for sortby in (stac, "-eo:cloud_cover"):
        result = await _call(settings, build, "search_items", {"collections": [S2], "sortby": sortby})
        assert not result.is_error, _text(result)
        answers.append(json.loads(_text(result)))
    ids = [
        [r[a["columns"].index("id")] for b in a["collections"].values() for r in b["rows"]] for a in answers
    ]
    assert ids[0] == ids[1]
    clouds = {i["id"]: i["properties"]["eo:cloud_cover"] for i in _items("sentinel-2-l2a-pc", S2)}
    assert ids[0] == sorted(clouds, key=clouds.get, reverse=True)
    # the same form in the `search` object of an analysis tool is taken too (a dry run: no reads)
    result = await _call(
        settings,
        build,
        "cloud_cover_stats",
        {"aoi": [93.0, 81.0, 93.5, 81.5], "search": {"collections": [S2], "sortby": stac}, "dry_run": True},
    )
    assert "sortby" not in _text(result), _text(result)


async def test_a_latitude_first_bbox_is_answered_with_the_swapped_one(settings, build):
    # out of range as [west, south, east, north]: Tasmania given latitude first (147 is no latitude)
    result = await _call(settings, build, "search_items", {"bbox": [-42.2, 147.3, -42.0, 147.6]})
    assert result.is_error
    assert "bbox=[147.3, -42.2, 147.6, -42.0]" in _text(result), _text(result)
    # in range both ways: NAIP's Puerto Rico given latitude first matches nothing, and the note says so
    result = await _call(
        settings, build, "search_items", {"collections": [NAIP], "bbox": [18.19, -65.75, 18.25, -65.69]}
    )
    notes = json.loads(_text(result)).get("notes", [])
    assert any("bbox=[-65.75, 18.19, -65.69, 18.25]" in n for n in notes), notes


async def test_a_count_of_one_is_singular(settings, build, loaded):
    # the test bed is shared: other tests load the same NAIP ids into collections of their own
    one = loaded["naip"][0]["id"]
    result = await _call(
        settings, build, "search_items", {"ids": [one], "collections": [NAIP], "detail": "count"}
    )
    assert _text(result).splitlines()[0].startswith("1 item ("), _text(result)


async def test_a_mistyped_argument_name_is_answered_with_the_right_one(settings, build):
    """The issue's two slips, then every tool: one of its parameters with a letter dropped."""
    async with Client(build(settings)) as client:
        slips = [
            ("search_items", {"collections": [S2], "max_cloud_cove": 10}, "max_cloud_cover"),
            ("zonal_stats", {"geometries": [0, 0, 1, 1], "min_valid_fracton": 0.2}, "min_valid_fraction"),
            ("time_series", {"aoi": [0, 0, 1, 1], "min_valid_fracton": 0.2}, "min_valid_fraction"),
        ]
        for tool in await client.list_tools():
            names = [p for p in (tool.inputSchema or {}).get("properties", {}) if len(p) >= 5]
            if names:
                slips.append((tool.name, {names[-1][:-2] + names[-1][-1]: 1}, names[-1]))
        assert len(slips) > 15
        for tool, arguments, meant in slips:
            result = await client.call_tool_mcp(tool, arguments)
            assert result.is_error and meant in _text(result), (tool, arguments, _text(result))
