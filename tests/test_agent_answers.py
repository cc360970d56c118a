"""What an agent reads stays small, on the real pgstac API of the test bed with
real-shaped items, each answer checked against pystac-client on the same API:

- search summaries of 100 real-shaped items (the Planetary Computer items of
  tests/real_items/planetary-computer and tests/real_items, copies where there are fewer) at the
  default detail: <= 150 B of text per item, every item and its assets there;
- the ids of 179 items (fields=["id"]): <= 8 KB of text;
- an exact count of 1,000 matches: <= 1 KB of text (the API's count; paged and counted here
  where the API gives none: the mini API, a condition applied client-side).
(The time of a count is measured by benchmarks/agent_tasks.py, not here.)
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from fastmcp import Client
from helpers import bare_collection

from testbed.miniapi import serve_mini_api

REAL = Path(__file__).parent / "real_items"
PREFIX = "agent28-"


def _real_items() -> list[dict]:
    items = []
    for path in sorted((REAL / "planetary-computer").glob("*.json")) + sorted(REAL.glob("*.json")):
        document = json.loads(path.read_text())
        for item in document if isinstance(document, list) else [document]:
            if item.get("type") == "Feature" and len(item.get("bbox") or []) == 4:
                item = copy.deepcopy(item)
                where = "earth-search-" if "earth-search" in path.name else ""
                item["collection"] = PREFIX + where + item["collection"]
                items.append(item)
    return items


def _copies(item: dict, count: int, tag: str) -> list[dict]:
    out = []
    for index in range(count):
        copied = copy.deepcopy(item)
        copied["id"] = f"{item['id']}-{tag}{index:04d}"
        copied["collection"] = item["collection"] + f"-{tag}"
        copied["properties"]["eo:cloud_cover"] = (index * 7) % 101
        out.append(copied)
    return out


@pytest.fixture(scope="module")
def loaded(pgstac_api):
    real = _real_items()
    hundred = real + [
        dict(real[k % len(real)], id=f"{real[k % len(real)]['id']}-{k}") for k in range(100 - len(real))
    ]
    landsat = next(i for i in real if i["collection"] == PREFIX + "landsat-c2-l2")
    naip = next(i for i in real if i["collection"] == PREFIX + "naip")
    paged, counted = _copies(landsat, 179, "ids"), _copies(naip, 1000, "count")
    items = hundred + paged + counted
    pgstac_api.load([bare_collection(c) for c in dict.fromkeys(i["collection"] for i in items)], items)
    return {"hundred": hundred, "ids": paged, "count": counted}


@pytest.fixture
def settings(make_settings, pgstac_api):
    return make_settings(catalogs=[{"id": "bed", "url": pgstac_api.url}], default_catalog="bed")


def _truth(api, collections: list[str], **search) -> list:
    from pystac_client import Client as StacClient

    return list(StacClient.open(api.url).search(collections=collections, **search).items())


async def test_summaries_of_100_real_items_cost_at_most_150_bytes_each(loaded, settings, build, pgstac_api):
    collections = sorted({i["collection"] for i in loaded["hundred"]})
    async with Client(build(settings)) as client:
        result = await client.call_tool("search_items", {"collections": collections, "limit": 100})
    text = result.content[0].text
    answer = json.loads(text)
    truth = _truth(pgstac_api, collections)
    assert len(truth) == 100 and answer["returned"] == 100
    per_item = len(text.encode()) / 100
    assert per_item <= 150, f"{per_item:.1f} B per item"
    # the structured content is the same compact form, not the items again as objects
    structured = json.dumps(result.structured_content, separators=(",", ":"))
    assert len(structured.encode()) <= 1.5 * len(text.encode()), (len(structured), len(text))
    assert result.structured_content == answer
    id_at = answer["columns"].index("id")
    rows = {c: block["rows"] for c, block in answer["collections"].items()}
    assert sorted(r[id_at] for rs in rows.values() for r in rs) == sorted(i.id for i in truth)
    for item in truth:  # every data asset of each item is there: the collection's, or its own
        block = answer["collections"][item.collection_id]
        differs = block.get("items_with_other_assets", {}).get(item.id, {})
        assets = {k for k in {*block["assets"], *differs} if differs.get(k, True) is not None}
        data = {
            k
            for k, a in item.assets.items()
            if "thumbnail" not in (a.roles or []) and a.roles != ["metadata"]
        }
        assert set(assets) == data, item.id


async def test_ids_of_179_items_cost_at_most_8_kb(loaded, settings, build, pgstac_api):
    collection = loaded["ids"][0]["collection"]
    async with Client(build(settings)) as client:
        result = await client.call_tool(
            "search_items", {"collections": [collection], "limit": 200, "fields": ["id"]}
        )
    text = result.content[0].text
    answer = json.loads(text)
    assert len(text.encode()) <= 8 * 1024, len(text.encode())
    assert answer["columns"] == ["id"]
    got = [row[0] for row in answer["rows"]]
    assert sorted(got) == sorted(i.id for i in _truth(pgstac_api, [collection])) and len(got) == 179


async def test_an_exact_count_of_1000_matches_costs_at_most_1_kb(loaded, settings, build, pgstac_api):
    collection = loaded["count"][0]["collection"]
    async with Client(build(settings)) as client:
        result = await client.call_tool("search_items", {"collections": [collection], "detail": "count"})
    text = result.content[0].text
    assert len(text.encode()) <= 1024 and result.structured_content["matched"] == 1000
    from pystac_client import Client as StacClient

    matched = StacClient.open(pgstac_api.url).search(collections=[collection], limit=1).matched()
    assert matched == 1000 and text.splitlines()[0] == "1000 items (the catalog's count)"


async def test_a_count_the_api_cannot_give_is_paged_and_exact(make_settings, build):
    """The mini API has no filter extension: max_cloud_cover is applied here, so the API's count
    is not the answer; the matches are paged and counted."""
    item = _real_items()[0]
    items = _copies(item, 300, "mini")
    with serve_mini_api(items, [bare_collection(items[0]["collection"])]) as api:
        settings = make_settings(catalogs=[{"id": "mini", "url": api.url}], default_catalog="mini")
        async with Client(build(settings)) as client:
            result = await client.call_tool("search_items", {"max_cloud_cover": 50, "detail": "count"})
    expected = sum(1 for i in items if i["properties"]["eo:cloud_cover"] <= 50)
    text = result.content[0].text
    assert re.match(rf"{expected} items \(exact\)$", text.splitlines()[0]), text
    assert result.structured_content["matched_is"] == "exact" and len(text.encode()) <= 1024
