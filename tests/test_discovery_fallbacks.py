"""Local catalogs (static, ItemCollection, NDJSON) and an API without filter/query/sort:
conditions applied client-side and said so; failures of remote catalogs reported clearly."""

from __future__ import annotations

import json
import socket
import time
from datetime import UTC, datetime

import discovery_data as data
import pystac
import pytest
from fastmcp import Client
from helpers import found_items

from stac_gdal_mcp.server import build_server
from testbed.miniapi import serve_mini_api

UTC = UTC


@pytest.fixture(scope="module")
def dataset():
    return data.build(seed=11)


@pytest.fixture
def local_files(tmp_path, dataset):
    collections, items = dataset
    ndjson = tmp_path / "items.ndjson"
    ndjson.write_text("\n".join(json.dumps(i) for i in items))
    fc = tmp_path / "items.json"
    fc.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    catalog = pystac.Catalog("static", "a static catalog")
    for cdict in collections:
        collection = pystac.Collection.from_dict(cdict)
        collection.add_items([pystac.Item.from_dict(i) for i in items if i["collection"] == cdict["id"]])
        catalog.add_child(collection)
    catalog.normalize_hrefs(str(tmp_path / "static"))
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    return {"ndjson": ndjson, "itemcollection": fc, "static": tmp_path / "static" / "catalog.json"}


@pytest.mark.parametrize("kind", ["ndjson", "itemcollection", "static"])
async def test_local_catalog_search_matches_independent_result(make_settings, local_files, dataset, kind):
    _, items = dataset
    settings = make_settings(
        catalogs=[{"id": "mine", "path": str(local_files[kind])}], default_catalog="mine"
    )
    bbox = [13.5, 45.8, 14.0, 46.2]
    want = data.expected(
        items,
        bbox=bbox,
        start=datetime(2024, 5, 5, tzinfo=UTC),
        max_cloud=60,
        where=lambda i: i["properties"]["platform"] != "landsat-8",
    )
    async with Client(build_server(settings)) as client:
        page = (
            await client.call_tool(
                "search_items",
                {
                    "bbox": bbox,
                    "datetime": "2024-05-05/..",
                    "max_cloud_cover": 60,
                    "filter": "platform <> 'landsat-8'",
                    "sortby": "-eo:cloud_cover",
                    "limit": 4,
                },
            )
        ).structured_content
        assert page.get("matched") == len(want)
        found = found_items(page)
        while page.get("next_cursor"):
            page = (
                await client.call_tool("search_items", {"cursor": page.get("next_cursor"), "limit": 4})
            ).structured_content
            found += found_items(page)
        seen = [i["id"] for i in found]
        assert sorted(seen) == sorted(want) and len(seen) == len(set(seen))
        for collection in {i["collection"] for i in found}:  # (rows in page order per collection)
            clouds = [i["cloud_cover"] for i in found if i["collection"] == collection]
            assert clouds == sorted(clouds, reverse=True)
        if kind == "static":
            cols = (await client.call_tool("list_collections", {"q": "landsat"})).structured_content
            assert [c["id"] for c in cols["collections"]] == [data.LS]
            q = (await client.call_tool("get_queryables", {"collection_id": data.S2})).structured_content
            assert {"name": "eo:cloud_cover", "type": "number"}.items() <= next(
                x for x in q["queryables"] if x["name"] == "eo:cloud_cover"
            ).items()


def on_mini(api) -> dict:
    """The settings of a server whose default catalog is the mini API `api`."""
    return {"catalogs": [{"id": "mini", "url": api.url}], "default_catalog": "mini"}


async def test_api_without_filter_gets_conditions_client_side(make_settings, dataset):
    collections, items = dataset
    with serve_mini_api(items, collections) as api:
        settings = make_settings(**on_mini(api))
        want = data.expected(
            items,
            collections=[data.S2],
            max_cloud=30,
            where=lambda i: i["properties"]["platform"] == "sentinel-2b",
        )
        async with Client(build_server(settings)) as client:
            info = (await client.call_tool("list_catalogs", {"check_reachable": True})).structured_content[
                "catalogs"
            ]
            features = next(c for c in info if c["id"] == "mini")["features"]
            assert features["item_search"] and not features["filter_cql2_text"] and not features["query"]
            page = (
                await client.call_tool(
                    "search_items",
                    {
                        "collections": [data.S2],
                        "max_cloud_cover": 30,
                        "query": {"platform": {"eq": "sentinel-2b"}},
                        "sortby": "eo:cloud_cover",
                        "limit": 3,
                    },
                )
            ).structured_content
            notes = " ".join(page.get("notes", []))
            assert "query applied client-side" in notes
            assert "max_cloud_cover applied client-side" in notes
            assert "sortby was not applied" in notes
            assert page.get("matched") is None  # the API's count would not include our conditions
            seen = [i["id"] for i in found_items(page)]
            while page.get("next_cursor"):
                page = (
                    await client.call_tool("search_items", {"cursor": page.get("next_cursor"), "limit": 3})
                ).structured_content
                assert "query applied client-side" in " ".join(page.get("notes", []))
                seen += [i["id"] for i in found_items(page)]
            assert sorted(seen) == sorted(want) and len(seen) == len(set(seen))


async def test_retries_then_success_and_then_reported_failure(make_settings, dataset):
    collections, items = dataset
    with serve_mini_api(items, collections) as api:
        settings = make_settings(**on_mini(api), network={"max_retries": 2, "timeout_s": 5})
        async with Client(build_server(settings)) as client:
            api.fail_next = [503, 429]  # two failures, then the root answers
            before = api.requests
            result = await client.call_tool("search_items", {"collections": [data.LS], "limit": 2})
            assert result.structured_content["returned"] == 2
            assert api.requests - before >= 4  # 2 failed + root + search
            api.fail_next = [503] * 10
            result = await client.call_tool(
                "get_collection", {"collection_id": data.LS}, raise_on_error=False
            )
            assert result.is_error
            assert "catalog 'mini'" in result.content[0].text and "unavailable" in result.content[0].text
            assert "HTTP 503" in result.content[0].text
            api.fail_next = []
            result = await client.call_tool("get_collection", {"collection_id": data.LS})
            assert result.structured_content["id"] == data.LS  # still serving


async def test_timeout_is_reported(make_settings, dataset):
    collections, items = dataset
    with serve_mini_api(items, collections) as api:
        api.delay_s = 2.0
        settings = make_settings(
            catalogs=[{"id": "slow", "url": api.url}],
            default_catalog="slow",
            network={"max_retries": 0, "timeout_s": 0.5},
        )
        async with Client(build_server(settings)) as client:
            started = time.monotonic()
            result = await client.call_tool("list_collections", {}, raise_on_error=False)
            assert time.monotonic() - started < 5
    assert result.is_error
    assert "catalog 'slow'" in result.content[0].text and "Timeout" in result.content[0].text


async def test_catalog_down_is_reported(make_settings):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = make_settings(
        catalogs=[{"id": "down", "url": f"http://127.0.0.1:{port}"}],
        default_catalog="down",
        network={"max_retries": 1},
    )
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("search_items", {"limit": 1}, raise_on_error=False)
        assert result.is_error and "catalog 'down'" in result.content[0].text
        assert "unavailable" in result.content[0].text
        catalogs = (await client.call_tool("list_catalogs", {"check_reachable": True})).structured_content[
            "catalogs"
        ]
        down = next(c for c in catalogs if c["id"] == "down")
        assert down["reachable"] is False and "ConnectionError" in down["error"]


async def test_private_hosts_refused_by_default(make_settings, dataset):
    collections, items = dataset
    with serve_mini_api(items, collections) as api:
        settings = make_settings(**on_mini(api), network={"allow_private_hosts": False})
        async with Client(build_server(settings)) as client:
            result = await client.call_tool("search_items", {"limit": 1}, raise_on_error=False)
    assert result.is_error and "allow_private_hosts" in result.content[0].text
    assert api.requests == 0


async def test_cursor_from_another_catalog_is_refused(make_settings, local_files, dataset):
    collections, items = dataset
    settings = make_settings(
        catalogs=[
            {"id": "a", "path": str(local_files["ndjson"])},
            {"id": "b", "path": str(local_files["static"])},
        ],
        default_catalog="a",
    )
    async with Client(build_server(settings)) as client:
        page = (await client.call_tool("search_items", {"limit": 2})).structured_content
        result = await client.call_tool(
            "search_items", {"catalog": "b", "cursor": page.get("next_cursor")}, raise_on_error=False
        )
    assert result.is_error and "belongs to catalog 'a'" in result.content[0].text
