"""Runs over a catalog's pages end, items of the wrong shape are left out, get_item is bounded:
through an MCP client against STAC APIs served by the fault-injecting server (pages that never
end, pages that come slowly, a page holding one malformed item or a count that is not one) and
local catalogs.

- a count over pages that never end stops at its page bound, over slow pages at
  limits.job_timeout_s, and says "at least N" with why; a search over slow pages stops at the
  same limit with a cursor; a count whose client left stops requesting pages;
- an item whose id, collection, datetime, bbox, properties, assets or eo:bands has the wrong
  type is left out of its page (and of the count) with a one-line note naming it; the good
  items around it are answered;
- a numberMatched that is not a non-negative integer of sane size is ignored with a note;
- get_item answers within limits.max_result_bytes (a 3 MB property cut with a marker and a
  note), and an item nested 300 levels deep in one line.
"""

from __future__ import annotations

import json
import time

import anyio
import pytest
from fastmcp import Client
from helpers import found_items, scaled
from test_catalog_faults import _JSON, _item, _settings, _text
from test_catalog_faults import api as faulty_api  # noqa: F401  (a fixture)

from testbed.faults import EndlessPages, Respond

COUNT = {"detail": "count"}


@pytest.fixture
def api(faulty_api):  # noqa: F811  (the fixture imported above, by its name here)
    """A STAC API on the fault server (test_catalog_faults.api)."""
    return faulty_api


def _requests(server) -> int:
    return server.stats()["paths"].get("/api/search", {}).get("requests", 0)


async def test_a_count_over_pages_that_never_end_stops_at_its_page_bound(make_settings, build, api):
    api.write_search([])
    api.set_fault("/api/search", EndlessPages(per_page=1, template=_item(0)))
    async with Client(build(_settings(make_settings, api))) as client:
        with anyio.fail_after(scaled(60)):  # before: 100,000 pages of one item
            result = await client.call_tool("search_items", COUNT)
    text = _text(result)
    assert text.startswith("at least 200 items (counting stopped)"), text
    assert "counting stopped after 200 pages: at least 200 items match" in text, text
    assert _requests(api) <= 202  # the probe, then 200 pages


async def test_slow_pages_stop_a_count_and_a_search_at_the_job_time_limit(make_settings, build, api):
    api.write_search([])
    api.set_fault("/api/search", EndlessPages(per_page=1, delay_s=0.5, template=_item(0)))
    settings = _settings(make_settings, api)
    settings.limits.job_timeout_s = 3
    async with Client(build(settings)) as client:
        started = time.monotonic()
        with anyio.fail_after(scaled(40)):  # before: 100,000 pages at 0.5 s
            count = await client.call_tool("search_items", COUNT)
        elapsed = time.monotonic() - started
        with anyio.fail_after(scaled(40)):
            page = await client.call_tool("search_items", {"limit": 100})
    assert _text(count).startswith("at least "), _text(count)
    assert "counting stopped after 3 s (limits.job_timeout_s)" in _text(count), _text(count)
    assert 3 <= elapsed < 3 + scaled(3), elapsed
    content = page.structured_content
    assert 0 < content["returned"] < 100 and content.get("next_cursor"), content.get("notes", [])
    assert any("stopped paging after 3 s (limits.job_timeout_s)" in n for n in content.get("notes", []))


async def test_a_count_whose_client_left_stops_requesting_pages(make_settings, build, api):
    api.write_search([])
    api.set_fault("/api/search", EndlessPages(per_page=1, delay_s=0.05, template=_item(0)))
    mcp = build(_settings(make_settings, api))
    async with Client(mcp) as client:
        with anyio.move_on_after(1.5):  # the client gives up and leaves
            await client.call_tool("search_items", COUNT)
    left = _requests(api)
    assert left > 3  # it was counting
    await anyio.sleep(scaled(1.5))
    assert _requests(api) <= left + 1  # before: it went on for 100,000 pages


def _collections(server) -> int:
    return server.stats()["paths"].get("/api/collections", {}).get("requests", 0)


async def test_a_collection_list_that_never_ends_stops_with_a_note_saying_why(make_settings, build, api):
    collection = {"type": "Collection", "description": "water", "links": []}
    api.set_fault("/api/collections", EndlessPages(per_page=2, template=collection, key="collections"))
    async with Client(build(_settings(make_settings, api))) as client:
        with anyio.fail_after(scaled(60)):
            listed = await client.call_tool("list_collections", {"q": "water", "limit": 5})
    content = listed.structured_content
    assert [c["id"] for c in content["collections"]] == [f"endless-{i}" for i in range(5)], content
    stopped = [n for n in content["notes"] if "stopped" in n]
    assert stopped == ["listing collections stopped after 50 pages: at least 100 collections read"], content[
        "notes"
    ]  # before: the first 100 collections answered as if they were all
    assert _collections(api) == 50


async def test_a_slow_collection_list_stops_at_the_job_time_limit_with_a_note(make_settings, build, api):
    collection = {"type": "Collection", "description": "water", "links": []}
    api.set_fault("/api/collections", EndlessPages(delay_s=0.5, template=collection, key="collections"))
    settings = _settings(make_settings, api)
    settings.limits.job_timeout_s = 2
    async with Client(build(settings)) as client:
        started = time.monotonic()
        with anyio.fail_after(scaled(40)):
            listed = await client.call_tool("list_collections", {"q": "water"})
        elapsed = time.monotonic() - started
    notes = listed.structured_content["notes"]
    assert any(
        n.startswith("listing collections stopped after 2 s (limits.job_timeout_s): at least ") for n in notes
    ), notes
    assert 2 <= elapsed < 2 + scaled(3), elapsed  # a page started before the limit may finish


async def test_a_federated_search_whose_client_left_stops_every_catalogs_walk(make_settings, build, api):
    api.write_search([])
    api.set_fault("/api/search", EndlessPages(per_page=1, delay_s=0.2, template=_item(0)))
    settings = make_settings(
        catalogs=[{"id": "a", "url": api.base}, {"id": "b", "url": api.base}],
        default_catalog="a",
        network={"timeout_s": 10, "max_retries": 1},
    )
    async with Client(build(settings)) as client:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client.call_tool, "search_items", {"catalog": "a,b", "limit": 300})
            with anyio.fail_after(scaled(30)):
                while _requests(api) < 6:  # both catalogs are being read
                    await anyio.sleep(0.05)
            tasks.cancel_scope.cancel()  # the client gives up and leaves
            started = time.monotonic()
    left, elapsed = _requests(api), time.monotonic() - started
    await anyio.sleep(scaled(1.5))
    assert _requests(api) <= left + 2  # a page in flight per catalog; before: 300 pages each
    assert elapsed < scaled(2), elapsed  # before: the call held its server up to 20 s


WRONG_SHAPES = {
    "id an int": ("id", 42),
    "id a list": ("id", ["a", "b"]),
    "id an object": ("id", {"a": 1}),
    "id null": ("id", None),
    "collection a list": ("collection", ["c1"]),
    "collection a number": ("collection", 7),
    "datetime a list": ("properties.datetime", ["2024-06-01T00:00:00Z"]),
    "bbox a string": ("bbox", "13,45,14,46"),
    "properties a list": ("properties", [1, 2]),
    "assets a list": ("assets", [{"href": "x"}]),
    "eo:bands a string": ("assets.red.eo:bands", "red,green"),
}


def _malformed(path: str, value) -> dict:
    item, *parts, last = [_item(1), *path.split(".", 2)]
    holder = item
    for part in parts:
        holder = holder[part]
    holder[last] = value
    return item


@pytest.mark.parametrize("case", list(WRONG_SHAPES))
async def test_an_item_of_the_wrong_shape_is_left_out_of_its_page_with_a_note(
    make_settings, build, api, case
):
    api.write_search([_item(0), _malformed(*WRONG_SHAPES[case]), _item(2)])
    async with Client(build(_settings(make_settings, api))) as client:
        page = await client.call_tool("search_items", {"limit": 10})
        full = await client.call_tool("search_items", {"limit": 10, "detail": "full"})
        count = await client.call_tool("search_items", COUNT)
    for result in (page, full):
        content = result.structured_content
        assert [i["id"] for i in found_items(content)] == ["item-000", "item-002"], case
        wrong = [n for n in content.get("notes", []) if "wrong shape" in n]
        assert len(wrong) == 1 and "\n" not in wrong[0] and len(wrong[0]) < 300, content.get("notes", [])
        name = WRONG_SHAPES[case][0].split(".")[-1]
        assert name in wrong[0] or "its id" in wrong[0], wrong
    assert _text(count).startswith("2 items (exact)") and "wrong shape" in _text(count), _text(count)


async def test_an_item_of_the_wrong_shape_in_a_local_catalog_is_left_out(make_settings, build, tmp_path):
    path = tmp_path / "items.ndjson"
    lines = [_item(0), _malformed("properties", [1]), "not an item", _item(2)]
    path.write_text("\n".join(json.dumps(i) for i in lines))
    settings = make_settings(catalogs=[{"id": "local", "path": str(path)}], default_catalog="local")
    async with Client(build(settings)) as client:
        page = await client.call_tool("search_items", {"limit": 10})
        asked = await client.call_tool(
            "get_item", {"collection_id": "c1", "item_id": "item-001"}, raise_on_error=False
        )
    content = page.structured_content
    assert sorted(i["id"] for i in found_items(content)) == ["item-000", "item-002"]
    assert len([n for n in content.get("notes", []) if "wrong shape" in n]) == 2, content.get("notes", [])
    assert asked.is_error and "item-001" in _text(asked) and "properties is list" in _text(asked)


@pytest.mark.parametrize("stated", ["many", [3], {}, -5, 1e30, True])
async def test_a_number_matched_that_is_not_a_count_is_ignored_with_a_note(make_settings, build, api, stated):
    page = {"type": "FeatureCollection", "features": [_item(i) for i in range(3)], "links": []}
    body = json.dumps({**page, "numberMatched": stated}).encode()
    api.set_fault("/api/search", Respond(status=200, body=body, headers=_JSON))
    async with Client(build(_settings(make_settings, api))) as client:
        result = await client.call_tool("search_items", {"limit": 10})
        count = await client.call_tool("search_items", COUNT)
    content = result.structured_content
    assert content["returned"] == 3 and content.get("matched") is None, content
    assert any("numberMatched" in n and "not a count" in n for n in content.get("notes", [])), content.get(
        "notes", []
    )
    assert _text(count).startswith("3 items (exact)"), _text(count)
    assert "not a count" in _text(count)


def _local_catalog(make_settings, tmp_path, item: dict):
    path = tmp_path / "items.ndjson"
    path.write_text(json.dumps(item) + "\n")
    return make_settings(catalogs=[{"id": "local", "path": str(path)}], default_catalog="local")


async def test_get_item_is_cut_to_the_answer_budget_with_a_note(make_settings, build, tmp_path):
    item = _item(0)
    item["properties"]["history"] = "x" * 3_000_000
    settings = _local_catalog(make_settings, tmp_path, item)
    budget = settings.limits.max_result_bytes
    args = {"collection_id": "c1", "item_id": "item-000"}
    async with Client(build(settings)) as client:
        view = await client.call_tool("get_item", args)
        chosen = await client.call_tool("get_item", {**args, "fields": ["properties"]})
        resource = await client.read_resource("stac://local/collections/c1/items/item-000")
    for text in (_text(view), _text(chosen), resource[0].text):
        assert len(text) <= budget, len(text)  # before: 3.0 MB
        answer = json.loads(text)
        assert "more characters cut]" in answer["properties"]["history"]
        assert any("max_result_bytes" in n for n in answer.get("notes", [])), answer.get("notes")
        assert answer["properties"]["datetime"] == item["properties"]["datetime"]


async def test_an_item_nested_300_levels_deep_is_one_line(make_settings, build, api):
    item, deep = _item(0), {}
    item["properties"]["deep"] = deep
    for _ in range(300):
        deep["a"] = {}
        deep = deep["a"]
    collection = {"type": "Collection", "id": "c1", "description": "", "links": []}
    api.set_fault(
        "/api/collections/c1", Respond(status=200, body=json.dumps(collection).encode(), headers=_JSON)
    )
    api.set_fault(
        "/api/collections/c1/items/item-000", Respond(body=json.dumps(item).encode(), headers=_JSON)
    )
    async with Client(build(_settings(make_settings, api))) as client:
        result = await client.call_tool(
            "get_item", {"collection_id": "c1", "item_id": "item-000"}, raise_on_error=False
        )
    text = _text(result)
    assert result.is_error and "nested more than 64 levels" in text and "item-000" in text, text
    assert "\n" not in text and "Error calling tool" not in text
