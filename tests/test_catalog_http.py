"""The catalogs' one guarded HTTP client (catalogs/http.py), through both of its users -
a STAC API's `RemoteCatalog.request` and a stac-geoparquet URL's `RangeReader` - against the test
bed's fault server: a body cut part-way is retried and then read whole (compared with the file's
bytes), a redirect loop stops after MAX_REDIRECTS hops, an answer larger than asked or than the
cap is a one-line error after one request, and the configured headers go only under the root.
"""

from __future__ import annotations

import json

import pytest
from test_security_network import Capture

from stac_gdal_mcp.catalogs import http
from stac_gdal_mcp.catalogs.httpfs import RangeReader
from stac_gdal_mcp.catalogs.remote import RemoteCatalog
from stac_gdal_mcp.errors import CatalogUnavailable
from stac_gdal_mcp.settings import CatalogConfig
from testbed.faults import AbortMidBody, Redirect, Respond, serve_faults

DOC = {"type": "Catalog", "id": "c", "description": "x" * 20_000, "links": []}


@pytest.fixture
def server(tmp_path):
    (tmp_path / "doc.json").write_text(json.dumps(DOC))
    (tmp_path / "data.bin").write_bytes(bytes(range(256)) * 400)  # 102,400 bytes
    with serve_faults(tmp_path) as served:
        served.root = tmp_path
        yield served


def _remote(make_settings, server, **headers) -> RemoteCatalog:
    settings = make_settings(network={"max_retries": 1})
    return RemoteCatalog(CatalogConfig(id="api", url=f"{server.url}/", headers=headers), settings)


def _reader(make_settings, server, path: str = "/data.bin", **headers) -> RangeReader:
    settings = make_settings(network={"max_retries": 1})
    return RangeReader(CatalogConfig(id="gp", url=f"{server.url}{path}", headers=headers), settings)


def _one_line(caught) -> str:
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600, message
    return message


def test_a_body_cut_part_way_is_retried_by_both_paths(make_settings, server):
    server.set_fault("/doc.json", AbortMidBody(fraction=0.5, times=1))
    assert _remote(make_settings, server).request(f"{server.url}/doc.json") == DOC
    assert server.stats()["paths"]["/doc.json"]["requests"] == 2

    data = (server.root / "data.bin").read_bytes()
    reader = _reader(make_settings, server)
    version = reader.version(f"{server.url}/data.bin")
    assert version.size == len(data)
    server.set_fault("/data.bin", AbortMidBody(fraction=0.5, times=1))
    server.reset_stats()
    assert reader.read(version, 1000, 90_000) == data[1000:90_000]
    assert server.stats()["paths"]["/data.bin"]["requests"] == 2


def test_a_redirect_loop_stops_after_max_redirects(make_settings, server):
    server.set_fault("/loop", Redirect(location=f"{server.url}/loop"))
    with pytest.raises(CatalogUnavailable) as caught:
        _remote(make_settings, server).request(f"{server.url}/loop")
    assert f"more than {http.MAX_REDIRECTS} redirects" in _one_line(caught)
    with pytest.raises(CatalogUnavailable) as caught:
        _reader(make_settings, server, "/loop").version(f"{server.url}/loop")
    assert f"more than {http.MAX_REDIRECTS} redirects" in _one_line(caught)
    assert server.stats()["paths"]["/loop"]["requests"] == 2 * (http.MAX_REDIRECTS + 1)


def test_answers_larger_than_asked_are_refused_after_one_request(make_settings, server, monkeypatch):
    too_long = Respond(status=206, body=bytes(100), headers={"Content-Range": "bytes 0-9/100"})
    server.set_fault("/long.bin", too_long)
    with pytest.raises(CatalogUnavailable) as caught:
        _reader(make_settings, server, "/long.bin").http.get_range(f"{server.url}/long.bin", 0, 9)
    assert "the answer is larger than 10 bytes" in _one_line(caught)
    monkeypatch.setattr(http, "MAX_ANSWER_BYTES", 1000)  # DOC is 20 kB
    with pytest.raises(CatalogUnavailable) as caught:
        _remote(make_settings, server).request(f"{server.url}/doc.json")
    assert "the answer is larger than 1,000 bytes" in _one_line(caught)
    paths = server.stats()["paths"]
    assert paths["/long.bin"]["requests"] == paths["/doc.json"]["requests"] == 1


def test_configured_headers_go_under_the_root_only_on_both_paths(make_settings, server):
    inside = Capture(status=206, body=b"x", headers={"Content-Range": "bytes 0-0/1"})
    outside = Capture(status=206, body=b"x", headers={"Content-Range": "bytes 0-0/1"})
    server.set_fault("/files/a.bin", inside)
    server.set_fault("/elsewhere/b.bin", outside)
    server.set_fault("/files/hop.bin", Redirect(location=f"{server.url}/elsewhere/b.bin"))
    reader = _reader(make_settings, server, "/files/a.bin", Authorization="Bearer s3cret")
    assert reader.version(f"{server.url}/files/a.bin").size == 1
    reader = _reader(make_settings, server, "/files/", Authorization="Bearer s3cret")
    assert reader.version(f"{server.url}/files/hop.bin").size == 1
    assert inside.seen == [("/files/a.bin", "Bearer s3cret")]
    assert outside.seen == [("/elsewhere/b.bin", None)]
