"""Every search answer is bounded by `limits.max_result_bytes`: summaries and full
items, one catalog and several, items with a 1 MB property and items larger than the whole
budget; a cursor leads to the rest, without gaps or repeats. Ids and names are echoed at most
about 100 characters. Local NDJSON catalogs of synthetic items, through the MCP client."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import discovery_data as data
import pytest
from fastmcp import Client
from helpers import found_items

from stac_gdal_mcp.server import build_server

MB = 1_000_000
FAT = "p" * MB  # one property of 1 MB


@pytest.fixture(scope="module")
def items():
    """20 items, each with a 1 MB platform (a summary field) and a 1 MB other property."""
    _, all_items = data.build(seed=11)
    out = []
    for item in all_items[:20]:
        fat = json.loads(json.dumps(item))
        fat["properties"]["platform"] = FAT
        fat["properties"]["notes"] = FAT
        out.append(fat)
    return out


def _later(item: dict, days: int) -> dict:
    """A copy of `item` as another acquisition (another id and day): not merged as a duplicate."""
    copy = json.loads(json.dumps(item))
    copy["id"] += f"-later-{days}"
    when = datetime.fromisoformat(copy["properties"]["datetime"].replace("Z", "+00:00"))
    copy["properties"]["datetime"] = (when + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return copy


def _settings(make_settings, tmp_path, catalogs: dict[str, list[dict]], **limits):
    entries = []
    for name, features in catalogs.items():
        path = tmp_path / f"{name}.ndjson"
        path.write_text("\n".join(json.dumps(f) for f in features))
        entries.append({"id": name, "path": str(path)})
    return make_settings(catalogs=entries, default_catalog=entries[0]["id"], limits=limits)


async def _pages(client, args: dict) -> tuple[list[dict], list[dict], list[int]]:
    """Every page of a search: items, results, and the size of each answer in bytes."""
    items, results, sizes, cursor = [], [], [], None
    for _ in range(100):
        result = await client.call_tool("search_items", {**args, **({"cursor": cursor} if cursor else {})})
        sizes.append(len(result.content[0].text.encode()))
        results.append(result.structured_content)
        items += found_items(result.structured_content)
        cursor = result.structured_content.get("next_cursor")
        if cursor is None:
            return items, results, sizes
    raise AssertionError("paging did not end")


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


CATALOGS = {"one": ["a"], "federated": ["a", "b"]}


def _stated_sizes() -> dict[str, float]:
    """The answer sizes (KB) docs/discovery.md's "Bounded answers" gives for these two searches."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "discovery.md").read_text()
    found = re.search(
        r"-> a \*\*([\d.]+) KB\*\* answer; federated over two catalogs\s+\*\*([\d.]+) KB\*\*", text
    )
    assert found, "discovery.md no longer states the bounded answers' sizes"
    return {"one": float(found.group(1)), "federated": float(found.group(2))}


@pytest.mark.parametrize("which", list(CATALOGS))
async def test_summaries_of_fat_items_are_bounded(make_settings, tmp_path, items, which):
    settings = _settings(make_settings, tmp_path, {"a": items, "b": [_later(i, 1) for i in items]})
    budget = settings.limits.max_result_bytes
    async with Client(build_server(settings)) as client:
        found, results, sizes = await _pages(client, {"catalog": CATALOGS[which], "limit": 40})
    expected = {i["id"] for i in items} | (
        {f"{i['id']}-later-1" for i in items} if which == "federated" else set()
    )
    assert {i["id"] for i in found} == expected and len(found) == len(expected)
    assert max(sizes) <= budget
    assert len(results) == 1  # 20 (or 40) small summaries fit in one answer
    stated = _stated_sizes()[which]  # what docs/discovery.md says this answer weighs
    assert abs(sizes[0] / 1000 - stated) <= 0.25 * stated, (sizes[0], stated, "correct discovery.md")
    assert [i.get("platform") for i in found] == ["p" * 100 + f"…[{MB - 100:,} more characters cut]"] * len(
        found
    )
    assert max(len(s) for i in found for s in _strings(i)) <= 100 + len(f"…[{MB:,} more characters cut]")


@pytest.mark.parametrize("which", list(CATALOGS))
async def test_full_items_with_a_1_mb_property_page_within_the_budget(make_settings, tmp_path, items, which):
    _, plain = data.build(seed=11)
    fat = [{**i, "properties": {**i["properties"], "notes": FAT}} for i in plain[:6]]
    settings = _settings(make_settings, tmp_path, {"a": fat, "b": [_later(i, 1) for i in fat]})
    budget = settings.limits.max_result_bytes
    async with Client(build_server(settings)) as client:
        found, results, sizes = await _pages(
            client, {"catalog": CATALOGS[which], "limit": 20, "detail": "full"}
        )
    n = 6 if which == "one" else 12
    assert len(found) == n and len({i["id"] for i in found}) == n  # all, once
    assert max(sizes) <= budget
    assert all(i["properties"].get("notes", []) == FAT for i in found)  # an item that fits is whole
    assert any("max_result_bytes" in note for note in results[0].get("notes", []))


async def test_items_larger_than_the_budget_are_cut_with_a_note(make_settings, tmp_path, items):
    huge = []
    for item in items[:5]:
        item = json.loads(json.dumps(item))
        item["properties"]["notes"] = "n" * (1_100_000)  # alone over the 1 MiB budget
        huge.append(item)
    settings = _settings(make_settings, tmp_path, {"a": huge})
    budget = settings.limits.max_result_bytes
    async with Client(build_server(settings)) as client:
        found, results, sizes = await _pages(client, {"limit": 5, "detail": "full"})
        order = found_items((await client.call_tool("search_items", {"limit": 5})).structured_content)
    assert [i["id"] for i in found] == [i["id"] for i in order]  # each once, in order
    assert {i["id"] for i in found} == {i["id"] for i in huge}
    assert max(sizes) <= budget
    for item, result in zip(found, results, strict=True):
        assert item["properties"].get("notes", []).startswith("nnnn") and item["properties"].get(
            "notes", []
        ).endswith("more characters cut]")
        assert item["assets"].keys() == huge[0]["assets"].keys()  # the rest of the item is there
        assert any(
            f"item(s) {item['id']} alone exceeded limits.max_result_bytes" in n
            for n in result.get("notes", [])
        )


@pytest.mark.parametrize(
    "args",
    [
        {"collections": ["c" * MB]},
        {"catalog": ["a", "b"], "collections": ["c" * MB]},
        {"ids": ["i" * MB], "datetime": "x" * MB},
        {"bbox": "1," * (MB // 2)},
        {"filter_lang": "f" * MB, "filter": "eo:cloud_cover < 5"},
        {"query": {"q" * MB: {"lt": 5}}},
        {"query": {"eo:cloud_cover": {"o" * MB: 5}}},
        {"sortby": [{"field": "datetime", "direction": "d" * MB}]},
        {"catalog": "k" * MB},
        {"tool": "get_item", "collection_id": "disc-s2", "item_id": "i" * MB},
        {"tool": "get_item", "collection_id": "c" * MB, "item_id": "i" * MB},
        {"tool": "get_collection", "collection_id": "c" * MB},
        {"tool": "get_queryables", "collection_id": "c" * MB},
        {"tool": "list_collections", "catalog": "k" * MB},
    ],
)
async def test_long_ids_and_names_are_not_echoed_whole(make_settings, tmp_path, items, args):
    tool = args.pop("tool", "search_items")
    settings = _settings(make_settings, tmp_path, {"a": items[:2], "b": items[2:4]})
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error
    assert len(result.content[0].text) < 600, result.content[0].text[:600]


async def test_queryables_and_collections_of_a_fat_catalog_are_short(make_settings, tmp_path, items):
    odd = json.loads(json.dumps(items[0]))
    odd["properties"]["k" * MB] = 1  # a property name of 1 MB
    odd["collection"] = "c" * MB
    settings = _settings(make_settings, tmp_path, {"a": [odd, *items[1:3]]})
    async with Client(build_server(settings)) as client:
        queryables = await client.call_tool("get_queryables", {})
        collections = await client.call_tool("list_collections", {})
    assert len(queryables.content[0].text) < 10_000 and len(collections.content[0].text) < 10_000
    names = [q["name"] for q in queryables.structured_content["queryables"]]
    assert "k" * 100 + f"…[{MB - 100:,} more characters cut]" in names


def test_items_an_operation_reads_are_not_cut_to_the_answer_budget(tmp_path):
    """The budget bounds answers, not what an operation reads: with a 2 KB limits.max_result_bytes
    (each sample item is larger), the items an operation selects over its AOI are whole, equal to
    the catalog's own items, and an operation on them equals the run under the default budget."""
    from shapely.geometry import box

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.processing.selection import select_items

    aoi = [13.60, 45.92, 13.62, 45.935]
    search = dict(collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-09-30")
    tiny = Session(default_catalog="sample", workspace=tmp_path / "a", limits={"max_result_bytes": 2048})
    usual = Session(default_catalog="sample", workspace=tmp_path / "b")
    found, _ = select_items(
        tiny.core, box(*aoi), catalog=None, items=None, search=search, max_items=None, default_max=50
    )
    assert len(found) == 5
    for item in found:
        whole = usual.get_item(item["collection"], item["id"])
        assert json.dumps(item, sort_keys=True) == json.dumps(whole, sort_keys=True)
        assert len(json.dumps(item)) > 2048
    got = tiny.cloud_cover(aoi, **search).to_dataframe()
    want = usual.cloud_cover(aoi, **search).to_dataframe()
    assert got[["item_id", "cloud_fraction"]].to_dict("records") == want[
        ["item_id", "cloud_fraction"]
    ].to_dict("records")
