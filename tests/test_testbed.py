"""The test services themselves: a real pgstac STAC API and the Range-capable COG server.

Expected values are computed from the item dicts (shapely, datetime) and from the files
on disk (plain reads, rasterio on the local path), never from the services under test.
"""

from __future__ import annotations

import datetime as dt
import http.client
import os

import httpx
import numpy as np
import pytest
import rasterio
from pystac_client import Client
from rasterio.windows import Window
from shapely.geometry import box, shape

from stac_gdal_mcp.testing import synthetic
from testbed import TestbedUnavailable, pgstac_for_pytest, serve_directory, start_pgstac

pytestmark = pytest.mark.testbed  # starts its own pgstac API and Range server

IN_CI = os.environ.get("CI", "").lower() == "true"

S2_COUNT, LANDSAT_COUNT = 40, 20
START = dt.datetime(2024, 1, 1, 10, 30, tzinfo=dt.UTC)
# Two 10 km x 10 km footprints in UTM 33N, 50 km apart (a bbox inside one misses the other).
WEST = (100.0, 0.0, 400000.0, 0.0, -100.0, 5650000.0)
EAST = (100.0, 0.0, 460000.0, 0.0, -100.0, 5650000.0)
SHAPE = (100, 100)


def make_catalog() -> tuple[list[dict], list[dict]]:
    """2 collections, 60 items: every few days, alternating footprints, distinct cloud covers."""
    collections = [synthetic.collection("sentinel-2-l2a"), synthetic.collection("landsat-c2-l2")]
    items = []
    for i in range(S2_COUNT):
        items.append(
            synthetic.item(
                "sentinel-2-l2a",
                f"S2_{i:03d}",
                START + dt.timedelta(days=3 * i),
                transform=WEST if i % 2 == 0 else EAST,
                shape=SHAPE,
                cloud_cover=round((i * 37) % 100 + 0.25, 2),
                platform="sentinel-2a" if i % 3 else "sentinel-2b",
            )
        )
    for i in range(LANDSAT_COUNT):
        items.append(
            synthetic.item(
                "landsat-c2-l2",
                f"LC09_{i:03d}",
                START + dt.timedelta(days=5 * i, hours=1),
                transform=WEST if i % 3 == 0 else EAST,
                shape=SHAPE,
                cloud_cover=round((i * 53) % 100 + 0.5, 2),
                platform="landsat-9",
            )
        )
    return collections, items


def query_bbox(case: str | None, items: list[dict]) -> tuple[float, ...] | None:
    """A search bbox placed relative to the two footprints (read from the item dicts)."""
    if case is None:
        return None
    west = next(i["bbox"] for i in items if i["properties"]["proj:transform"][2] == WEST[2])
    east = next(i["bbox"] for i in items if i["properties"]["proj:transform"][2] == EAST[2])
    mid_y = (west[1] + west[3]) / 2
    return {
        "inside-west": (
            west[0] + (west[2] - west[0]) / 4,
            west[1] + (west[3] - west[1]) / 4,
            west[2] - (west[2] - west[0]) / 4,
            west[3] - (west[3] - west[1]) / 4,
        ),
        "gap": (west[2] + 0.05, mid_y - 0.01, east[0] - 0.05, mid_y + 0.01),
        "both": ((west[0] + west[2]) / 2, mid_y - 0.01, (east[0] + east[2]) / 2, mid_y + 0.01),
        "east-corner": (east[0] - 0.01, east[1] - 0.01, east[0] + 0.02, east[1] + 0.02),
    }[case]


def _when(item: dict) -> dt.datetime:
    return dt.datetime.fromisoformat(item["properties"]["datetime"].replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def catalog():
    return make_catalog()


@pytest.fixture(scope="module")
def stac_api(catalog):
    with pgstac_for_pytest() as api:  # its own API: these tests count every item in it
        api.load(*catalog)
        yield api


@pytest.fixture(scope="module")
def client(stac_api):
    return Client.open(stac_api.url)


def _ids(search) -> list[str]:
    return [item.id for item in search.items()]


# --- pgstac STAC API ---------------------------------------------------------------------


def test_api_starts_quickly_and_declares_the_extensions_tests_need(stac_api):
    assert stac_api.startup_s < 30, stac_api.startup_s
    for fragment in (
        "item-search",
        "item-search#sort",
        "item-search#filter",
        "item-search#query",
        "item-search#fields",
        "cql2-text",
        "cql2-json",
        "collection-search#free-text",
    ):
        assert stac_api.conforms_to(fragment), fragment


def test_all_items_loaded_per_collection(client, catalog):
    _, items = catalog
    for collection_id in ("sentinel-2-l2a", "landsat-c2-l2"):
        expected = {i["id"] for i in items if i["collection"] == collection_id}
        got = _ids(client.search(collections=[collection_id], limit=100))
        assert len(got) == len(expected)
        assert set(got) == expected


@pytest.mark.parametrize(
    "bbox_case, datetime",
    [
        ("inside-west", None),
        ("gap", None),  # nothing there
        ("both", None),
        (None, "2024-02-01T00:00:00Z/2024-03-31T23:59:59Z"),
        ("east-corner", "2024-01-15T00:00:00Z/2024-04-15T00:00:00Z"),
    ],
)
def test_search_counts_match_item_dicts(client, catalog, bbox_case, datetime):
    _, items = catalog
    bbox = query_bbox(bbox_case, items)
    expected = set()
    for item in items:
        if bbox and not shape(item["geometry"]).intersects(box(*bbox)):
            continue
        if datetime:
            start, end = (dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in datetime.split("/"))
            if not start <= _when(item) <= end:
                continue
        expected.add(item["id"])
    assert (len(expected) == 0) == (bbox_case == "gap"), "test case does not test anything"
    search = client.search(bbox=bbox, datetime=datetime, limit=100)
    got = _ids(search)
    assert len(got) == len(set(got)) == len(expected)
    assert set(got) == expected
    assert search.matched() == len(expected)  # context is on: numberMatched is reported


# pystac-client 0.9 matches sort conformance only for v1.0.x; stac-fastapi 7 declares v1.1.0.
@pytest.mark.filterwarnings("ignore::pystac_client.warnings.DoesNotConformTo")
def test_sortby_cloud_cover_ascending(client, catalog):
    _, items = catalog
    search = client.search(collections=["sentinel-2-l2a"], sortby="+eo:cloud_cover", limit=100)
    got = [item.properties["eo:cloud_cover"] for item in search.items()]
    expected = sorted(i["properties"]["eo:cloud_cover"] for i in items if i["collection"] == "sentinel-2-l2a")
    assert got == expected
    assert got != sorted(got, reverse=True)  # the data is not trivially ordered


def test_paging_limit_10_yields_every_item_once(client, catalog):
    _, items = catalog
    search = client.search(collections=["sentinel-2-l2a", "landsat-c2-l2"], limit=10)
    pages = [[item.id for item in page] for page in search.pages()]
    assert len(pages) == 6
    assert all(len(page) == 10 for page in pages)
    got = [item_id for page in pages for item_id in page]
    assert len(got) == len(set(got)) == len(items)
    assert set(got) == {i["id"] for i in items}


def test_next_link_is_token_based(stac_api):
    body = httpx.get(f"{stac_api.url}/search", params={"limit": 10}).json()
    next_links = [link for link in body["links"] if link["rel"] == "next"]
    assert len(next_links) == 1
    assert "token=" in next_links[0]["href"]


@pytest.mark.parametrize(
    "filter, filter_lang, method",
    [
        ("eo:cloud_cover < 20", "cql2-text", "GET"),  # cql2-text goes in the query string
        ({"op": "<", "args": [{"property": "eo:cloud_cover"}, 20]}, "cql2-json", "POST"),
        ("eo:cloud_cover < 20", None, "POST"),  # pystac-client turns the text into JSON (cql2)
    ],
)
def test_filter_cloud_cover_below_20(client, catalog, filter, filter_lang, method):
    _, items = catalog
    expected = {i["id"] for i in items if i["properties"]["eo:cloud_cover"] < 20}
    assert 0 < len(expected) < len(items)
    search = client.search(filter=filter, filter_lang=filter_lang, method=method, limit=100)
    got = _ids(search)
    assert sorted(got) == sorted(expected)


def test_filter_on_platform_and_query_extension(client, catalog):
    _, items = catalog
    expected = {i["id"] for i in items if i["properties"]["platform"] == "sentinel-2b"}
    got = _ids(client.search(filter="platform = 'sentinel-2b'", method="GET", limit=100))
    assert set(got) == expected and len(got) == len(expected)
    expected = {i["id"] for i in items if i["properties"]["eo:cloud_cover"] >= 90}
    got = _ids(client.search(query={"eo:cloud_cover": {"gte": 90}}, limit=100))
    assert set(got) == expected and len(got) == len(expected)


def test_queryables_list_registered_properties(stac_api):
    body = httpx.get(f"{stac_api.url}/queryables").json()
    assert body["properties"]["eo:cloud_cover"]["type"] == "number"
    assert body["properties"]["platform"]["type"] == "string"
    assert "datetime" in body["properties"]


def test_free_text_collection_search(client):
    found = [c.id for c in client.collection_search(q="landsat").collections()]
    assert found == ["landsat-c2-l2"]


def test_reload_upserts_instead_of_duplicating(stac_api, client, catalog):
    _, items = catalog
    changed = dict(items[0], properties=dict(items[0]["properties"], platform="sentinel-2c"))
    stac_api.load(items=[changed])
    got = client.search(ids=[changed["id"]]).item_collection()
    assert len(got) == 1 and got[0].properties["platform"] == "sentinel-2c"
    stac_api.load(items=[items[0]])  # restore for the other tests
    assert len(_ids(client.search(limit=100))) == len(items)


def test_teardown_removes_everything():
    try:
        with start_pgstac() as api:
            url, workdir = api.url, api.workdir
            assert httpx.get(f"{url}/collections").status_code == 200
            assert (workdir / "pgdata").is_dir()
    except TestbedUnavailable as exc:
        if IN_CI:
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    assert not workdir.exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/collections", timeout=2)


def test_missing_postgres_raises_testbed_unavailable(monkeypatch):
    import testbed.pgstac as pgstac

    monkeypatch.setattr(pgstac, "PG_MAJOR", "99")
    with pytest.raises(TestbedUnavailable, match="PostgreSQL 99 .*install-test-deps.sh"):
        with start_pgstac():
            pass


# --- Range server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cog(tmp_path_factory) -> tuple:
    """A 1024x1024 uint16 COG with 256 px tiles and incompressible values."""
    directory = tmp_path_factory.mktemp("cogs")
    path = directory / "scene.tif"
    data = np.random.default_rng(42).integers(0, 10000, (1024, 1024), dtype=np.uint16)
    profile = {
        "driver": "COG",
        "width": 1024,
        "height": 1024,
        "count": 1,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": rasterio.transform.Affine(10, 0, 500000, 0, -10, 5600000),
        "blocksize": 256,
        "compress": "deflate",
        "overview_resampling": "average",
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)
    return directory, path


def test_byte_ranges_equal_file_slices(cog):
    directory, path = cog
    content = path.read_bytes()
    size = len(content)
    cases = {
        "bytes=0-99": (0, 99),
        "bytes=1000-1999": (1000, 1999),
        f"bytes={size - 10}-": (size - 10, size - 1),
        "bytes=-16": (size - 16, size - 1),
        f"bytes=100-{size + 500}": (100, size - 1),  # clipped at the end
        "bytes=5-9,20-29": (5, 9),  # multi-range: first range only
    }
    with serve_directory(directory) as srv, httpx.Client() as http:
        for header, (first, last) in cases.items():
            r = http.get(f"{srv.url}/scene.tif", headers={"Range": header})
            assert r.status_code == 206, header
            assert r.content == content[first : last + 1], header
            assert r.headers["Content-Range"] == f"bytes {first}-{last}/{size}"
            assert int(r.headers["Content-Length"]) == last - first + 1
        expected_bytes = sum(last - first + 1 for first, last in cases.values())
        stats = srv.stats()
        assert stats["bytes"] == expected_bytes
        assert stats["requests"] == len(cases)
        assert stats["paths"]["/scene.tif"]["ranges"] == len(cases)


def test_full_get_head_404_and_416(cog):
    directory, path = cog
    content = path.read_bytes()
    with serve_directory(directory) as srv, httpx.Client() as http:
        r = http.get(f"{srv.url}/scene.tif")
        assert r.status_code == 200 and r.content == content
        assert r.headers["Accept-Ranges"] == "bytes"
        r = http.head(f"{srv.url}/scene.tif")
        assert r.status_code == 200 and int(r.headers["Content-Length"]) == len(content)
        assert r.content == b""
        r = http.get(f"{srv.url}/scene.tif", headers={"Range": f"bytes={len(content)}-"})
        assert r.status_code == 416
        assert r.headers["Content-Range"] == f"bytes */{len(content)}"
        r = http.get(f"{srv.url}/scene.tif", headers={"Range": "lines=1-2"})
        assert r.status_code == 200 and len(r.content) == len(content)  # ignored
        assert http.get(f"{srv.url}/missing.tif").status_code == 404
        stats = srv.stats()
        assert stats["bytes"] == 2 * len(content)
        assert stats["requests"] == 5
        srv.reset_stats()
        assert srv.stats() == {"requests": 0, "bytes": 0, "paths": {}}


def test_no_escape_from_the_directory(cog):
    directory, _ = cog
    (directory.parent / "secret.txt").write_text("secret")
    with serve_directory(directory) as srv:
        host, port = srv.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("GET", "/../secret.txt")  # sent as is, no client-side normalising
        response = conn.getresponse()
        assert response.status == 404
        conn.close()


def test_delay_is_added_per_request(cog):
    directory, _ = cog
    with serve_directory(directory, delay_s=0.2) as srv, httpx.Client() as http:
        elapsed = []
        for _ in range(2):
            r = http.get(f"{srv.url}/scene.tif", headers={"Range": "bytes=0-0"})
            elapsed.append(r.elapsed.total_seconds())
    assert min(elapsed) >= 0.2


def test_gdal_window_read_over_http_equals_local_read(cog):
    directory, path = cog
    window = Window(300, 500, 100, 60)
    with rasterio.open(path) as local:
        expected = local.read(1, window=window)
    with serve_directory(directory) as srv:
        with rasterio.Env(GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR"):
            with rasterio.open(f"{srv.url}/scene.tif") as remote:
                assert remote.profile["blockxsize"] == 256
                got = remote.read(1, window=window)
        stats = srv.stats()
    np.testing.assert_array_equal(got, expected)
    size = path.stat().st_size
    # The window touches 2 of 16 full-resolution tiles: GDAL must not fetch the whole file.
    assert 0 < stats["bytes"] < size / 2, (stats, size)
    assert stats["paths"]["/scene.tif"]["ranges"] >= 1
