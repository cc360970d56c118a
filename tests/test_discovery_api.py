"""The discovery tools end to end through fastmcp's Client, against the real pgstac API."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import discovery_data as data
import pytest
from fastmcp import Client
from helpers import DISCOVERY_TOOLS, found_items

from stac_gdal_mcp.server import build_server

UTC = UTC


@pytest.fixture(scope="module")
def loaded(pgstac_api):
    collections, items = data.build()
    pgstac_api.load(collections, items)
    return collections, items


@pytest.fixture
def settings(make_settings, pgstac_api, loaded):
    return make_settings(catalogs=[{"id": "testbed", "url": pgstac_api.url}], default_catalog="testbed")


@pytest.fixture(params=["auto", "legacy"])
async def client(request, settings):
    async with Client(build_server(settings), mode=request.param) as c:
        yield c


async def call(client, tool, **args):
    result = await client.call_tool(tool, args)
    return result.structured_content


async def error_of(client, tool, **args) -> str:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error, f"{tool} should have failed"
    text = result.content[0].text
    assert "Traceback" not in text
    return text


async def test_tools_are_listed_with_annotations(client):
    tools = {t.name: t for t in await client.list_tools()}
    for name in DISCOVERY_TOOLS:
        assert tools[name].annotations.read_only_hint is True
        assert tools[name].annotations.open_world_hint is not False  # left out: true (spec default)
    assert "bbox" in tools["search_items"].input_schema["properties"]


async def test_list_catalogs_reports_conformance(client, pgstac_api):
    result = await call(client, "list_catalogs", check_reachable=True)
    by_id = {c["id"]: c for c in result["catalogs"]}
    testbed = by_id["testbed"]
    assert testbed["reachable"] is True
    features = testbed["features"]
    assert features["item_search"] == pgstac_api.conforms_to("item-search")
    assert features["sort"] == pgstac_api.conforms_to("item-search#sort")
    assert features["query"] == pgstac_api.conforms_to("item-search#query")
    assert features["filter_cql2_json"] == pgstac_api.conforms_to("cql2-json")
    assert by_id["earth-search"]["reachable"] is False  # no internet here: reported, not raised
    assert "unavailable" in by_id["earth-search"]["error"]


async def test_list_and_get_collection(client, loaded):
    collections, _ = loaded
    result = await call(client, "list_collections", limit=100)
    ids = [c["id"] for c in result["collections"]]
    assert data.S2 in ids and data.LS in ids
    s2 = next(c for c in result["collections"] if c["id"] == data.S2)
    assert s2["asset_keys"] == sorted(collections[0]["item_assets"])
    detail = await call(client, "get_collection", collection_id=data.LS)
    assert set(detail["item_assets"]) == set(collections[1]["item_assets"])
    assert detail["item_assets"]["red"]["bands"] == ["red"]
    assert detail["license"] == collections[1]["license"]


async def test_list_collections_free_text_and_paging(client):
    found = await call(client, "list_collections", q="landsat", limit=100)
    assert data.LS in [c["id"] for c in found["collections"]]
    assert data.S2 not in [c["id"] for c in found["collections"]]
    page = await call(client, "list_collections", limit=1)
    seen = [c["id"] for c in page["collections"]]
    while page.get("next_cursor"):
        page = await call(client, "list_collections", limit=1, cursor=page.get("next_cursor"))
        seen += [c["id"] for c in page["collections"]]
    assert len(seen) == len(set(seen)) and {data.S2, data.LS} <= set(seen)


async def test_queryables(client):
    result = await call(client, "get_queryables", collection_id=data.S2)
    types = {q["name"]: q["type"] for q in result["queryables"]}
    assert types["eo:cloud_cover"] == "number"


async def test_search_bbox_datetime_cloud(client, loaded):
    _, items = loaded
    bbox = [13.80, 45.90, 14.00, 46.10]
    args = dict(
        collections=[data.S2, data.LS], bbox=bbox, datetime="2024-05-10/2024-06-15", max_cloud_cover=40
    )
    want = data.expected(
        items,
        collections=[data.S2, data.LS],
        bbox=bbox,
        start=datetime(2024, 5, 10, tzinfo=UTC),
        end=datetime(2024, 6, 15, 23, 59, 59, 999999, tzinfo=UTC),
        max_cloud=40,
    )
    assert len(want) >= 3
    result = await call(client, "search_items", limit=100, **args)
    assert sorted(i["id"] for i in found_items(result)) == sorted(want)
    assert result.get("matched") == len(want)
    assert result.get("next_cursor") is None
    one = next(i for i in found_items(result) if i["collection"] == data.S2)
    source = next(i for i in items if i["id"] == one["id"])
    assert one["cloud_cover"] == pytest.approx(source["properties"]["eo:cloud_cover"], abs=0.01)
    assert one["proj_code"] == source["properties"]["proj:code"]
    assert one["assets"]["nir"] == {}  # a data asset named by its one band's common name
    assert one["assets"]["visual"] == {"roles": ["visual"], "bands": ["red", "green", "blue"]}
    # the item has a thumbnail, read from its thumbnail asset (the answer says where, once)
    assert one["thumbnail"] is True and "thumbnail" in source["assets"]
    assert result["thumbnail"] == "the thumbnail asset of item_uri"
    # the bbox to 4 decimals, rounded outward: it still holds the item's own bbox
    west, south, east, north = source["bbox"]
    assert one["bbox"] == pytest.approx(source["bbox"], abs=1e-4)
    assert one["bbox"][0] <= west and one["bbox"][1] <= south
    assert one["bbox"][2] >= east and one["bbox"][3] >= north


async def test_pagination_has_no_gaps_or_duplicates(client, loaded):
    _, items = loaded
    want = data.expected(items, collections=[data.S2])
    page = await call(client, "search_items", collections=[data.S2], sortby="eo:cloud_cover", limit=7)
    pages, seen, clouds = (
        1,
        [i["id"] for i in found_items(page)],
        [i["cloud_cover"] for i in found_items(page)],
    )
    while page.get("next_cursor"):
        page = await call(client, "search_items", cursor=page.get("next_cursor"), limit=7)
        pages += 1
        seen += [i["id"] for i in found_items(page)]
        clouds += [i["cloud_cover"] for i in found_items(page)]
    assert pages > 3
    assert len(seen) == len(set(seen)) == len(want)
    assert set(seen) == set(want)
    assert clouds == sorted(clouds)


async def test_cursor_with_a_different_limit_continues_mid_page(client, loaded):
    _, items = loaded
    want = data.expected(items, collections=[data.LS])
    page = await call(client, "search_items", collections=[data.LS], sortby="-eo:cloud_cover", limit=5)
    seen = [i["id"] for i in found_items(page)]
    sizes = [3, 8, 2, 100]
    while page.get("next_cursor"):
        page = await call(
            client, "search_items", cursor=page.get("next_cursor"), limit=sizes.pop(0) if sizes else 100
        )
        seen += [i["id"] for i in found_items(page)]
    assert seen and len(seen) == len(set(seen)) and set(seen) == set(want)


async def test_filter_query_and_sort(client, loaded):
    _, items = loaded
    want = data.expected(
        items,
        collections=[data.S2],
        where=lambda i: (
            i["properties"]["platform"] == "sentinel-2a" and i["properties"]["eo:cloud_cover"] < 50
        ),
    )
    s2 = {"collections": [data.S2], "limit": 100}
    cql2_text = "platform = 'sentinel-2a' AND eo:cloud_cover < 50"
    text = await call(client, "search_items", **s2, filter=cql2_text, sortby="eo:cloud_cover")
    assert sorted(i["id"] for i in found_items(text)) == sorted(want)
    assert [i["cloud_cover"] for i in found_items(text)] == sorted(
        i["cloud_cover"] for i in found_items(text)
    )
    cql2_json = {
        "op": "and",
        "args": [
            {"op": "=", "args": [{"property": "platform"}, "sentinel-2a"]},
            {"op": "<", "args": [{"property": "eo:cloud_cover"}, 50]},
        ],
    }
    as_json = await call(client, "search_items", **s2, filter_lang="cql2-json", filter=cql2_json)
    assert sorted(i["id"] for i in found_items(as_json)) == sorted(want)
    query = {"platform": {"eq": "sentinel-2a"}, "eo:cloud_cover": {"lt": 50}}
    query = await call(client, "search_items", **s2, query=query)
    assert sorted(i["id"] for i in found_items(query)) == sorted(want)


async def test_detail_full_and_get_item(client, loaded):
    _, items = loaded
    source = items[5]
    full = await call(
        client, "search_items", ids=[source["id"]], collections=[source["collection"]], detail="full"
    )
    assert full["returned"] == 1
    got = found_items(full)[0]
    assert got["id"] == source["id"]
    assert got["properties"]["eo:cloud_cover"] == source["properties"]["eo:cloud_cover"]
    assert set(got["assets"]) == set(source["assets"])
    item = (
        await client.call_tool("get_item", {"collection_id": source["collection"], "item_id": source["id"]})
    ).structured_content
    assert item["assets"]["red"]["href"] == source["assets"]["red"]["href"]
    assert item["properties"]["proj:transform"] == source["properties"]["proj:transform"]


async def test_resources(client, loaded):
    _, items = loaded
    source = items[-1]
    uri = f"stac://testbed/collections/{source['collection']}/items/{source['id']}"
    contents = await client.read_resource(uri)
    doc = json.loads(contents[0].text)
    assert doc["id"] == source["id"] and doc["bbox"] == pytest.approx(source["bbox"])
    collection = json.loads((await client.read_resource(f"stac://testbed/collections/{data.S2}"))[0].text)
    assert collection["id"] == data.S2
    templates = {t.uri_template for t in await client.list_resource_templates()}
    assert "stac://{catalog}/collections/{collection_id}/items/{item_id}" in templates
    prompts = {p.name for p in await client.list_prompts()}
    assert "find_clear_imagery" in prompts


async def test_summary_is_small(client, loaded):
    _, items = loaded
    summary = await call(client, "search_items", collections=[data.S2], limit=10)
    full = await call(client, "search_items", collections=[data.S2], limit=10, detail="full")
    assert [i["id"] for i in found_items(summary)] == [i["id"] for i in found_items(full)]
    ratio = len(json.dumps(found_items(summary))) / len(json.dumps(found_items(full)))
    assert ratio <= 0.10, ratio


async def test_limit_is_capped_by_max_items(make_settings, pgstac_api, loaded):
    settings = make_settings(
        catalogs=[{"id": "testbed", "url": pgstac_api.url}],
        default_catalog="testbed",
        limits={"max_items": 5},
    )
    async with Client(build_server(settings)) as c:
        result = await call(c, "search_items", collections=[data.S2], limit=50)
    assert result["returned"] == 5
    assert result.get("next_cursor")
    assert any("max_items=5" in n for n in result.get("notes", []))


@pytest.mark.parametrize(
    "args, words",
    [
        ({"bbox": [1, 2, 3]}, "4 numbers"),
        ({"bbox": [10, 50, 5, 60]}, "west (10.0) is greater than east"),
        ({"bbox": [10, 60, 12, 50]}, "south (60.0) is greater than north"),
        ({"bbox": [-200, 0, 0, 10]}, "within [-180, 180]"),
        ({"bbox": [0, -95, 10, 10]}, "within [-90, 90]"),
        ({"datetime": "last tuesday"}, "is not a date"),
        ({"datetime": "2024-07-01/2024-06-01"}, "ends before it starts"),
        ({"catalog": "nope"}, "unknown catalog 'nope'"),
        ({"filter": "eo:cloud_cover <"}, "not valid CQL2"),
        ({"filter": '{"op": "<"'}, "not valid CQL2"),
        ({"query": {"eo:cloud_cover": {"about": 3}}}, "query operator 'about'"),
        ({"cursor": "bm90IGEgY3Vyc29y"}, "cursor was not produced by this server"),
        ({"collections": ["disc-s3"]}, "did you mean"),
    ],
)
async def test_search_errors_are_actionable(client, args, words):
    text = await error_of(client, "search_items", **args)
    assert words in text
    # the server keeps serving after an error
    assert (await call(client, "search_items", collections=[data.LS], limit=1))["returned"] == 1


async def test_unknown_collection_and_item(client):
    text = await error_of(client, "get_collection", collection_id="disc-s2x")
    assert "collection 'disc-s2x' not found in catalog 'testbed'" in text
    text = await error_of(client, "get_item", collection_id=data.S2, item_id="nope")
    assert "item 'nope' not found in collection 'disc-s2'" in text
    text = await error_of(client, "get_item", collection_id="nope", item_id="x")
    assert "collection 'nope' not found" in text
