"""stac-geoparquet catalogs over HTTP: the file served
by the test bed's Range server answers searches exactly as the same file read locally does (the
local catalog is checked against pgstac in test_geoparquet.py), a page of a 100,000-item file
reads a small part of it (bytes counted by the server), and a server without range requests, a
missing file, a truncated file, a glob, a redirect off-policy and a URL carrying a secret each
fail in one line naming the (masked) URL.
"""

from __future__ import annotations

import functools
import os
import random
import threading
from datetime import UTC, datetime, timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from test_geoparquet import BOTH, CASES, S2, _items, pages, write_parquet

from stac_gdal_mcp import Session
from stac_gdal_mcp.catalogs import httpfs
from stac_gdal_mcp.catalogs.geoparquet import GeoparquetCatalog
from stac_gdal_mcp.errors import AccessDenied, NotFound, StacGdalMcpError
from stac_gdal_mcp.settings import CatalogConfig
from testbed import serve_directory
from testbed.faults import Redirect, serve_faults

BIG = 100_000


@pytest.fixture(scope="module")
def stac_items():
    return _items()


@pytest.fixture(scope="module")
def served(stac_items, tmp_path_factory):
    """The Range server over a folder: items.parquet, a truncated copy of it, and big.parquet."""
    collections, items = stac_items
    root = tmp_path_factory.mktemp("gp-http")
    whole = write_parquet(items, root / "items.parquet", collections)
    (root / "truncated.parquet").write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    _write_big(root / "big.parquet")
    with serve_directory(root) as server:
        server.root = root
        yield server


def _write_big(path) -> None:
    """BIG items, one every 157 s from 2020 (a snapshot in time order), written by stac-geoparquet
    in row groups of 10,000 items."""
    from stac_geoparquet.arrow import parse_stac_items_to_arrow, to_parquet

    rng, start = random.Random(21), datetime(2020, 1, 1, tzinfo=UTC)

    def item(n: int) -> dict:
        west, south = rng.uniform(-179, 178), rng.uniform(-60, 69)
        return {
            "type": "Feature",
            "stac_version": "1.0.0",
            "id": f"S2_{n:07d}",
            "collection": "big",
            "geometry": {
                "type": "Polygon",
                "coordinates": [[[west, south], [west + 1, south], [west + 1, south + 1], [west, south]]],
            },
            "bbox": [west, south, west + 1, south + 1],
            "properties": {
                "datetime": (start + timedelta(seconds=157 * n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "eo:cloud_cover": round(rng.uniform(0, 100), 2),
            },
            "links": [],
            "assets": {b: {"href": f"https://example.com/{n}/{b}.tif"} for b in ("red", "green", "nir")},
        }

    to_parquet(
        parse_stac_items_to_arrow((item(n) for n in range(BIG)), chunk_size=10_000, schema="FirstBatch"), path
    )


@pytest.fixture
def session(make_settings, served):
    catalogs = [
        {"id": "local", "path": str(served.root / "items.parquet")},
        {"id": "http", "url": f"{served.url}/items.parquet"},
    ]
    with Session(make_settings(catalogs=catalogs, default_catalog="local")) as s:
        yield s


@pytest.mark.parametrize(
    "case",
    ["bbox", "intersects", "datetime-interval", "datetime-open-end", "ids", "cql2-text"]
    + ["cql2-json-or-not-in", "cql2-s_intersects", "query", "sortby-cloud-desc", "sortby-two-keys"],
)
def test_same_answers_as_the_local_file(session, case):
    want = pages(session, "local", 7, **CASES[case])
    assert pages(session, "http", 7, **CASES[case]) == want
    assert want[0], "a case that matches nothing proves little"


def test_paging_collections_and_items_as_the_local_file(session, stac_items):
    collections, _ = stac_items
    assert pages(session, "http", 1, sortby="-platform") == pages(session, "local", 50, sortby="-platform")
    assert session.collection(S2, catalog="http").license == collections[0]["license"]  # file metadata
    assert sorted(c.id for c in session.collections(catalog="http").collections) == sorted(BOTH)
    assert session.get_item(S2, "S2A_T33T2_20240610", catalog="http") == session.get_item(
        S2, "S2A_T33T2_20240610", catalog="local"
    )
    local = {q.name: q.type for q in session.queryables(catalog="local").queryables}
    assert {q.name: q.type for q in session.queryables(catalog="http").queryables} == local


def test_a_page_of_a_large_file_reads_a_small_part_of_it(make_settings, served):
    """The first page of a datetime search reads the footer and the row groups the statistics
    keep: far fewer bytes than the file; the same page again reads nothing (blocks cached)."""
    path = served.root / "big.parquet"
    catalogs = [{"id": "big", "url": f"{served.url}/big.parquet"}, {"id": "local", "path": str(path)}]
    args = {"datetime": "2020-03-01/2020-03-10", "limit": 100}
    with Session(make_settings(catalogs=catalogs, limits={"http_copies_mb": 0})) as s:  # by range only
        served.reset_stats()
        page = s.search(catalog="big", **args)
        read = served.stats()["paths"]["/big.parquet"]["bytes"]
        local = s.search(catalog="local", **args)
        assert page.ids == local.ids and len(page.ids) == 100 and page.matched == local.matched > 5000
        assert read < 0.2 * path.stat().st_size, f"{read} bytes read of {path.stat().st_size}"
        served.reset_stats()
        assert s.search(catalog="big", **args).ids == page.ids
        assert served.stats()["bytes"] == 0


def test_a_changed_file_is_read_afresh(make_settings, served, stac_items, monkeypatch):
    collections, items = stac_items
    live = served.root / "live.parquet"
    write_parquet(items[:10], live, collections)
    settings = make_settings(catalogs=[{"id": "live", "url": f"{served.url}/live.parquet"}])
    with Session(settings) as s:
        assert sorted(s.search(catalog="live", limit=100).ids) == sorted(i["id"] for i in items[:10])
        write_parquet(items[10:], served.root / "live.tmp", collections)
        os.replace(served.root / "live.tmp", live)
        monkeypatch.setattr(httpfs, "STALE_S", 0.0)  # the next search waits for the versions
        assert sorted(s.search(catalog="live", limit=100).ids) == sorted(i["id"] for i in items[10:])


def test_a_change_is_seen_by_the_search_after_the_check_that_follows_a_search(
    make_settings, served, stac_items, monkeypatch
):
    """Within STALE_S of the last sweep a search does not wait for the versions: they are asked
    after it (REVALIDATE_S passed), and the search after that check reads the changed file."""
    collections, items = stac_items
    live = served.root / "live-later.parquet"
    write_parquet(items[:10], live, collections)
    settings = make_settings(catalogs=[{"id": "live", "url": f"{served.url}/live-later.parquet"}])
    before, after = sorted(i["id"] for i in items[:10]), sorted(i["id"] for i in items[10:])
    with Session(settings) as s:
        catalog = s.core.catalogs.get("live")
        assert sorted(s.search(catalog="live", limit=100).ids) == before
        write_parquet(items[10:], served.root / "live.tmp", collections)
        os.replace(served.root / "live.tmp", live)
        monkeypatch.setattr(httpfs, "REVALIDATE_S", 0.0)
        served.reset_stats()
        assert sorted(s.search(catalog="live", limit=100).ids) == before  # from the kept blocks
        catalog.freshness.wait(30)
        assert served.request_log() == [("/live-later.parquet", "bytes=0-0", 1)]  # after the search
        assert catalog.reader.changed
        assert sorted(s.search(catalog="live", limit=100).ids) == after


def _footer_bytes(path) -> int:
    """A Parquet file's footer and the 8 bytes after it, from its last 8 bytes (read by hand)."""
    return int.from_bytes(path.read_bytes()[-8:-4], "little") + 8


def test_a_footer_is_read_in_one_request_sized_to_it(make_settings, served):
    """Checking a file reads its last FOOTER_READ bytes (one request, nothing kept: a search then
    fetches its own blocks); a footer longer than that in a second request of the rest only."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    wide = served.root / "wide-footer.parquet"
    columns = {"id": [f"i{n}" for n in range(40)], "geometry": [b"\x01"] * 40}
    columns |= {f"property_{c:03d}": list(range(40)) for c in range(300)}
    pq.write_table(pa.table(columns), wide, row_group_size=10)
    assert _footer_bytes(wide) > httpfs.FOOTER_READ < (served.root / "big.parquet").stat().st_size
    for name, footer in (("big.parquet", httpfs.FOOTER_READ), (wide.name, _footer_bytes(wide))):
        served.reset_stats()
        catalog = GeoparquetCatalog(CatalogConfig(id="f", url=f"{served.url}/{name}"), make_settings())
        assert catalog.files.rows[f"{served.url}/{name}"] == pq.read_metadata(served.root / name).num_rows
        got = served.stats()["paths"][f"/{name}"]
        assert got["bytes"] == 1 + footer  # the version's byte, then the footer's
        assert got["requests"] == (2 if footer == httpfs.FOOTER_READ else 3)
        assert catalog.reader.blocks.held == 0


def test_versions_are_asked_again_of_the_files_read_only(make_settings, served, monkeypatch):
    """A search that reads one of two files asks its version again after REVALIDATE_S, not the
    other's (a walk over one part of a snapshot of 780 asks one URL); every file after SWEEP_S."""
    urls = [f"{served.url}/items.parquet", f"{served.url}/big.parquet"]
    march = {"datetime": "2020-03-01/2020-03-10", "limit": 10}  # big.parquet's items only
    with Session(make_settings(catalogs=[{"id": "two", "urls": urls}], limits={"http_copies_mb": 0})) as s:
        first = s.search(catalog="two", **march)
        freshness = s.core.catalogs.get("two").freshness
        monkeypatch.setattr(httpfs, "REVALIDATE_S", 0.0)
        served.reset_stats()
        assert s.search(catalog="two", **march).ids == first.ids
        freshness.wait(30)  # the versions are asked after the search
        paths = served.stats()["paths"]
        assert "/items.parquet" not in paths
        assert paths["/big.parquet"]["requests"] == paths["/big.parquet"]["bytes"] >= 1  # 0-0 only
        monkeypatch.setattr(httpfs, "SWEEP_S", 0.0)
        served.reset_stats()
        assert s.search(catalog="two", **march).ids == first.ids
        freshness.wait(30)
        assert served.stats()["paths"]["/items.parquet"]["requests"] == 1


def test_the_block_cache_is_bounded_before_it_grows(make_settings, served, monkeypatch):
    """Blocks past the cache's bound push the least recently used out before they are kept: the
    cache never holds more, and a page read again is the same page."""
    monkeypatch.setattr(httpfs, "cache_bytes", lambda settings: 3 * httpfs.BLOCK)
    kept = []
    keep = httpfs.RangeReader._keep

    def watched(reader, key, block):
        keep(reader, key, block)
        kept.append(reader.blocks.held)

    monkeypatch.setattr(httpfs.RangeReader, "_keep", watched)
    args = {"datetime": "2020-03-01/2020-03-10", "limit": 100}
    catalogs = [{"id": "big", "url": f"{served.url}/big.parquet"}]  # blocks kept in memory only
    with Session(
        make_settings(catalogs=catalogs, limits={"http_disk_cache_mb": 0, "http_copies_mb": 0})
    ) as s:
        page = s.search(catalog="big", **args)
        assert s.search(catalog="big", **args).ids == page.ids and len(page.ids) == 100
    assert len(kept) > 3 and max(kept) <= 3 * httpfs.BLOCK


def _message(settings, catalog: str, error=StacGdalMcpError) -> str:
    with Session(settings) as s, pytest.raises(error) as caught:
        s.search(catalog=catalog)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_a_server_without_range_requests_is_refused(make_settings, served):
    """Python's own http.server answers every GET with the whole file (it ignores Range)."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served.root))
    handler.func.log_message = lambda *args: None
    plain = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{plain.server_address[1]}/items.parquet"
        message = _message(make_settings(catalogs=[{"id": "plain", "url": url}]), "plain")
        assert f"the server of {url} does not answer HTTP range requests" in message
    finally:
        plain.shutdown()
        plain.server_close()


def test_a_missing_or_truncated_file_is_named(make_settings, served):
    missing, truncated = f"{served.url}/missing.parquet", f"{served.url}/truncated.parquet"
    settings = make_settings(catalogs=[{"id": "missing", "url": missing}, {"id": "cut", "url": truncated}])
    assert f"{missing} was not found (HTTP 404)" in _message(settings, "missing", NotFound)
    assert f"{truncated} is not a readable Parquet file" in _message(settings, "cut")


def test_a_secret_in_the_url_is_masked(make_settings, served):
    settings = make_settings()
    for name, query in (("missing", "token=s3cr3t-value"), ("truncated", "X-Amz-Signature=s3cr3t-value")):
        config = CatalogConfig(id="signed", url=f"{served.url}/{name}.parquet?{query}")
        with pytest.raises(StacGdalMcpError) as caught:
            _ = GeoparquetCatalog(config, settings).files
        message = str(caught.value)
        assert "s3cr3t" not in message and f"{served.url}/{name}.parquet?{query.split('=')[0]}=***" in message


def test_a_glob_over_http_is_refused(make_settings, served):
    settings = make_settings(catalogs=[{"id": "glob", "url": f"{served.url}/*.parquet"}])
    assert "is a glob, and HTTP has no listing" in _message(settings, "glob")


def test_redirects_are_checked_by_the_network_policy(make_settings, served, stac_items, tmp_path):
    """Loopback is allowed only for the listed host:port pairs: a redirect to the Range server
    is followed when it is listed, refused when it is not."""
    with serve_faults(tmp_path) as hop:
        hop.set_fault("/items.parquet", Redirect(location=f"{served.url}/items.parquet"))
        catalogs = [{"id": "hop", "url": f"{hop.url}/items.parquet"}]
        hop_only = {"allow_private_hosts": False, "allowed_private_hosts": [hop.url.split("//")[1]]}
        message = _message(make_settings(catalogs=catalogs, network=hop_only), "hop", AccessDenied)
        assert "non-public address" in message
        both = {**hop_only, "allowed_private_hosts": [u.split("//")[1] for u in (hop.url, served.url)]}
        with Session(make_settings(catalogs=catalogs, network=both)) as s:
            first = sorted(i["id"] for i in stac_items[1])[:5]
            assert s.search(catalog="hop", limit=5, sortby="id", collections=BOTH).ids == first
