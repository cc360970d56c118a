"""Catalog faults, through an MCP client against a STAC API served by the
fault-injecting server: a drip answer meets the whole-request deadline, a `next` link that loops
stops with a note and no repeated item, `detail="full"` answers stay within
limits.max_result_bytes with a cursor that continues without gaps or repeats, and malformed or
failing answers are one-line errors."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest
from fastmcp import Client
from helpers import found_items, scaled

from testbed.faults import Drip, Fault, LoopNext, MalformedJSON, Respond, ServerError, serve_faults

ITEM_SEARCH = [
    "https://api.stacspec.org/v1.0.0/core",
    "https://api.stacspec.org/v1.0.0/item-search",
    "https://api.stacspec.org/v1.0.0/collections",
]


def _item(i: int, padding: int = 0) -> dict:
    return {
        "type": "Feature",
        "stac_version": "1.0.0",
        "id": f"item-{i:03d}",
        "collection": "c1",
        "bbox": [13.0, 45.0, 14.0, 46.0],
        "geometry": {
            "type": "Polygon",
            "coordinates": [[[13, 45], [14, 45], [14, 46], [13, 46], [13, 45]]],
        },
        "properties": {"datetime": f"2024-06-{1 + i % 28:02d}T10:00:00Z", "eo:cloud_cover": i % 100},
        "assets": {"red": {"href": f"https://example.com/{i}/red.tif", "description": "x" * padding}},
        "links": [],
    }


@pytest.fixture
def api(tmp_path):
    """A STAC API on the fault server: landing page and collection as fixed answers, `/api/search`
    a file (so that file faults - drip, looping next - apply to it)."""
    root = tmp_path / "srv"
    (root / "api").mkdir(parents=True)
    with serve_faults(root) as server:
        base = f"{server.url}/api"
        landing = {
            "type": "Catalog",
            "id": "faulty",
            "description": "faulty",
            "stac_version": "1.0.0",
            "conformsTo": ITEM_SEARCH,
            "links": [
                {"rel": "self", "href": base},
                {"rel": "data", "href": f"{base}/collections"},
                {"rel": "search", "href": f"{base}/search", "method": "GET"},
            ],
        }
        (root / "api" / "landing.json").write_text(json.dumps(landing))
        server.set_fault("/api", Respond(status=200, body=json.dumps(landing).encode(), headers=_JSON))
        collections = {
            "collections": [{"type": "Collection", "id": "c1", "description": "", "links": []}],
            "links": [],
        }
        (root / "api" / "collections").write_text(json.dumps(collections))
        server.root, server.base = root, base
        server.write_search = lambda features, links=(): (root / "api" / "search").write_text(
            json.dumps({"type": "FeatureCollection", "features": features, "links": list(links)})
        )
        yield server


_JSON = {"Content-Type": "application/json"}


def _settings(make_settings, api, **network):
    return make_settings(
        catalogs=[{"id": "faulty", "url": api.base}],
        default_catalog="faulty",
        network={"timeout_s": 10, "max_retries": 1, **network},
    )


def _text(result) -> str:
    return result.content[0].text if result.content else ""


async def test_a_dripping_answer_fails_at_the_whole_request_deadline(make_settings, build, api):
    api.write_search([_item(i) for i in range(5)])
    api.set_fault("/api/search", Drip(interval_s=2.0))
    async with Client(build(_settings(make_settings, api, timeout_s=10))) as client:
        started = time.monotonic()
        result = await client.call_tool("search_items", {"limit": 5}, raise_on_error=False)
        elapsed = time.monotonic() - started
        assert result.is_error and "no complete answer within 10 s" in _text(result), _text(result)
        assert "\n" not in _text(result)
        assert 9 <= elapsed < min(10 + scaled(4), 19), elapsed  # one attempt: a retry would take 20 s
        api.clear_faults("/api/search")
        ok = await client.call_tool("search_items", {"limit": 5})  # the server still answers
        assert ok.structured_content["returned"] == 5


async def test_a_next_link_to_itself_stops_with_a_note(make_settings, build, api):
    api.write_search([_item(i) for i in range(5)])
    api.set_fault("/api/search", LoopNext())
    async with Client(build(_settings(make_settings, api))) as client:
        result = await client.call_tool("search_items", {"limit": 500})
    content = result.structured_content
    ids = [i["id"] for i in found_items(content)]
    assert sorted(ids) == [f"item-{i:03d}" for i in range(5)]
    assert content.get("next_cursor") is None
    assert any("paging loop" in note for note in content.get("notes", []))
    assert api.stats()["paths"]["/api/search"]["requests"] <= 2


@dataclass(kw_only=True)
class NextByCounter(Fault):
    """The same page every time, with a `next` link that differs each time (?n=1, ?n=2, ...):
    a loop no URL comparison sees."""

    def inject(self, handler, request):
        page = json.loads(request.file.read_text())
        host = handler.headers.get("Host")
        page["links"] = [{"rel": "next", "href": f"http://{host}{request.path}?n={request.index + 1}"}]
        handler.send_body(200, json.dumps(page).encode(), "application/geo+json")
        return True


async def test_pages_that_repeat_items_stop_with_a_note(make_settings, build, api):
    api.write_search([_item(i) for i in range(5)])
    api.set_fault("/api/search", NextByCounter())
    async with Client(build(_settings(make_settings, api))) as client:
        result = await client.call_tool("search_items", {"limit": 500})
    ids = [i["id"] for i in found_items(result.structured_content)]
    assert len(ids) == len(set(ids)) == 5
    assert any("paging loop" in note for note in result.structured_content.get("notes", []))
    assert api.stats()["paths"]["/api/search"]["requests"] <= 3


async def _all_pages(client, args: dict) -> tuple[list[dict], list[int]]:
    items, sizes, cursor = [], [], None
    for _ in range(100):
        result = await client.call_tool("search_items", {**args, **({"cursor": cursor} if cursor else {})})
        sizes.append(len(json.dumps(result.structured_content)))
        items += found_items(result.structured_content)
        cursor = result.structured_content.get("next_cursor")
        if cursor is None:
            return items, sizes
    raise AssertionError("paging did not end")


async def test_full_detail_answers_stay_within_the_byte_budget(make_settings, build, api):
    features = [_item(i, padding=100_000) for i in range(50)]  # a 5 MB page
    api.write_search(features)
    settings = _settings(make_settings, api)
    budget = settings.limits.max_result_bytes
    async with Client(build(settings)) as client:
        first = await client.call_tool("search_items", {"limit": 50, "detail": "full"})
        assert first.structured_content["returned"] < 50
        assert any("max_result_bytes" in n for n in first.structured_content.get("notes", []))
        items, sizes = await _all_pages(client, {"limit": 50, "detail": "full"})
        summary = await client.call_tool("search_items", {"limit": 50})
    assert [i["id"] for i in items] == [f["id"] for f in features]  # all, in order, once
    assert max(sizes) < budget + 150_000  # one item over the budget at most
    assert summary.structured_content["returned"] == 50  # summaries are not cut


async def test_full_detail_on_a_local_catalog_is_bounded_too(make_settings, build, tmp_path):
    path = tmp_path / "big.ndjson"
    features = [_item(i, padding=100_000) for i in range(30)]
    path.write_text("\n".join(json.dumps(f) for f in features))
    settings = make_settings(catalogs=[{"id": "big", "path": str(path)}], default_catalog="big")
    async with Client(build(settings)) as client:
        items, sizes = await _all_pages(client, {"limit": 30, "detail": "full"})
        order = await client.call_tool("search_items", {"limit": 30})
    assert [i["id"] for i in items] == [i["id"] for i in found_items(order.structured_content)]
    assert len({i["id"] for i in items}) == 30
    assert max(sizes) < settings.limits.max_result_bytes + 150_000


@pytest.mark.parametrize(
    "fault, words",
    [
        (MalformedJSON(), "not JSON"),
        (MalformedJSON(body=b"[" * 100_000), "not JSON"),
        (MalformedJSON(body=b'["a list", "not an object"]'), "not a JSON object"),
        (ServerError(status=500), "HTTP 500"),
        (ServerError(status=503), "HTTP 503"),
        (
            Respond(status=200, body=b"<html>maintenance</html>", headers={"Content-Type": "text/html"}),
            "not JSON",
        ),
    ],
)
async def test_bad_answers_are_one_line_errors(make_settings, build, api, fault, words):
    api.write_search([_item(0)])
    api.set_fault("/api/search", fault)
    async with Client(build(_settings(make_settings, api, max_retries=1))) as client:
        result = await client.call_tool("search_items", {"limit": 5}, raise_on_error=False)
    assert result.is_error and words in _text(result) and "catalog 'faulty'" in _text(result), _text(result)
    assert "\n" not in _text(result) and len(_text(result)) < 600
