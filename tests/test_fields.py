"""The STAC fields extension: sent to an API that conforms (the pgstac test bed) and
applied here where a catalog does not (a local catalog of the same items) - the same answer
both ways, equal to what pystac-client gets from the API with the same fields; get_item's lean
answer and its `fields`; bad `fields` refused in one line; a search matching nothing with a
latitude-first bbox says so."""

from __future__ import annotations

import json

import pytest
from fastmcp import Client

from stac_gdal_mcp.discovery.fields import apply_fields, parse_fields
from stac_gdal_mcp.errors import InvalidArgument
from stac_gdal_mcp.testing import synthetic

COLLECTION = "fields28-s2"


@pytest.fixture(scope="module")
def items(pgstac_api, tmp_path_factory):
    made = [
        synthetic.item(
            "sentinel-2-l2a", f"S2A_FIELDS_{day:02d}", f"2024-06-{day:02d}T10:00:00Z", collection_id=COLLECTION,
            transform=(10.0, 0.0, 300000.0, 0.0, -10.0, 5100000.0), shape=(1098, 1098), cloud_cover=float(day),
        )
        for day in range(1, 7)
    ]  # fmt: skip
    collection = synthetic.collection("sentinel-2-l2a", COLLECTION)
    pgstac_api.load([collection], made)
    folder = tmp_path_factory.mktemp("fields-local")
    (folder / "items.ndjson").write_text("".join(json.dumps(i) + "\n" for i in made))
    return made, folder / "items.ndjson"


@pytest.fixture
def settings(make_settings, pgstac_api, items):
    return make_settings(
        catalogs=[{"id": "api", "url": pgstac_api.url}, {"id": "local", "path": str(items[1])}],
        default_catalog="api",
    )


async def test_fields_are_the_same_sent_or_applied_here(settings, build, pgstac_api, items):
    from pystac_client import Client as StacClient

    args = {"collections": [COLLECTION], "detail": "full", "fields": ["id", "eo:cloud_cover"], "limit": 10}
    async with Client(build(settings)) as client:
        api = (await client.call_tool("search_items", {**args, "catalog": "api"})).structured_content["items"]
        local = (await client.call_tool("search_items", {**args, "catalog": "local"})).structured_content[
            "items"
        ]
    search = StacClient.open(pgstac_api.url).search(
        collections=[COLLECTION],
        fields={"include": ["id", "collection", "properties.eo:cloud_cover"], "exclude": []},
    )
    truth = {f["id"]: f["properties"]["eo:cloud_cover"] for f in search.item_collection_as_dict()["features"]}
    for got in (api, local):
        assert {i["id"]: i["properties"]["eo:cloud_cover"] for i in got} == truth and len(truth) == 6
        assert all(set(i) <= {"id", "collection", "properties", "links", "type", "stac_version"} for i in got)
        assert all(set(i["properties"]) == {"eo:cloud_cover"} for i in got)


async def test_summary_fields_choose_the_columns(settings, build, items):
    async with Client(build(settings)) as client:
        result = await client.call_tool(
            "search_items",
            {"collections": [COLLECTION], "fields": ["id", "cloud_cover"], "sortby": "eo:cloud_cover"},
        )
    answer = json.loads(result.content[0].text)
    assert answer["columns"] == ["id", "cloud_cover"]
    assert answer["rows"] == [[i["id"], i["properties"]["eo:cloud_cover"]] for i in items[0]]


async def test_get_item_is_lean_and_fields_give_the_rest(settings, build, items):
    source = items[0][0]
    ask = {"collection_id": COLLECTION, "item_id": source["id"]}
    async with Client(build(settings)) as client:
        lean = (await client.call_tool("get_item", ask)).structured_content
        links = (
            await client.call_tool("get_item", {**ask, "fields": ["links", "assets.red"]})
        ).structured_content
    assert "links" not in lean and "geometry" not in lean and lean["properties"] == source["properties"]
    defaults = lean.get("asset_defaults", {})
    for key, asset in source["assets"].items():
        got = lean["assets"][key]
        assert got["href"] == asset["href"]
        assert got.get("roles", defaults.get("roles")) == asset.get("roles")
        assert got.get("type", defaults.get("type")) == asset.get("type")
        assert "raster:bands" not in got
    assert links["assets"] == {"red": source["assets"]["red"]} and links["links"]
    assert set(links) == {"id", "collection", "assets", "links"}


async def test_a_latitude_first_bbox_that_matches_nothing_says_so(settings, build, items):
    async with Client(build(settings)) as client:
        result = await client.call_tool(
            "search_items", {"collections": [COLLECTION], "bbox": [45.0, 9.0, 46.0, 10.0]}
        )
    note = " ".join(json.loads(result.content[0].text)["notes"])
    assert "latitude first" in note and "[9.0, 45.0, 10.0, 46.0]" in note


@pytest.mark.parametrize(
    "value",
    [["id", 3], "id,..", {"include": "id"}, {"only": ["id"]}, ["x" * 300], [f"f{i}" for i in range(60)]],
)
def test_bad_fields_are_one_clear_error(value):
    with pytest.raises(InvalidArgument, match="fields"):
        parse_fields(value)


def test_apply_fields_leaves_the_item_alone():
    item = {
        "id": "a",
        "collection": "c",
        "properties": {"datetime": "x", "gsd": 10},
        "assets": {"b": {"href": "h"}},
    }
    assert apply_fields(item, parse_fields(["-gsd", "-assets.b"])) == {
        "id": "a", "collection": "c", "properties": {"datetime": "x"}, "assets": {},
    }  # fmt: skip
    assert item["properties"]["gsd"] == 10 and item["assets"]["b"] == {"href": "h"}
