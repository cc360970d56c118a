"""The fault-injecting server itself: each mode misbehaves as its docstring says.

Expected bytes come from the files on disk; every check talks plain HTTP (http.client), so
the server is tested without the code under test.
"""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from helpers import scaled

from testbed.faults import (
    AbortMidBody,
    Drip,
    LoopNext,
    MalformedJSON,
    Redirect,
    Respond,
    ServerError,
    Stall,
    WrongLength,
    serve_faults,
)

pytestmark = pytest.mark.testbed


@pytest.fixture
def served(tmp_path):
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 64)  # 16 KiB
    page = {"type": "FeatureCollection", "features": [], "links": [{"rel": "self", "href": "x"}]}
    (tmp_path / "page.json").write_text(json.dumps(page))
    with serve_faults(tmp_path) as srv:
        srv.data = (tmp_path / "a.bin").read_bytes()
        yield srv


def get(srv, path, headers=None, timeout=5, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    conn.request(method, path, headers=headers or {})
    resp = conn.getresponse()
    return resp, conn


def test_normal_ranges(served):
    resp, _ = get(served, "/a.bin", {"Range": "bytes=10-19"})
    assert resp.status == 206 and resp.read() == served.data[10:20]
    resp, _ = get(served, "/a.bin")
    assert resp.status == 200 and resp.read() == served.data


def test_server_error_after_and_times(served):
    served.set_fault("/a.bin", ServerError(status=503, after=2, times=1))
    statuses = [get(served, "/a.bin", {"Range": "bytes=0-9"})[0].status for _ in range(4)]
    assert statuses == [206, 206, 503, 206]
    assert served.stats()["paths"]["/a.bin"]["faults"] == 1


def test_from_byte_spares_the_header(served):
    served.set_fault("/a.bin", ServerError(from_byte=1024, times=1))
    assert get(served, "/a.bin", {"Range": "bytes=0-99"})[0].status == 206
    assert get(served, "/a.bin")[0].status == 200  # no Range: not a pixel read
    assert get(served, "/a.bin", {"Range": "bytes=2048-4095"})[0].status == 500
    resp, _ = get(served, "/a.bin", {"Range": "bytes=2048-4095"})  # `times` counts only these
    assert resp.status == 206 and resp.read() == served.data[2048:4096]


def test_stall_times_out(served):
    served.set_fault(None, Stall(seconds=30))
    start = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout)):
        get(served, "/a.bin", timeout=0.5)
    assert time.monotonic() - start < scaled(5)


def test_abort_mid_body(served):
    served.set_fault("/a.bin", AbortMidBody(fraction=0.25))
    resp, _ = get(served, "/a.bin", {"Range": "bytes=0-4095"})
    assert resp.status == 206
    with pytest.raises(http.client.IncompleteRead) as info:
        resp.read()
    assert info.value.partial == served.data[:1024]


def test_wrong_length(served):
    served.set_fault("/a.bin", WrongLength(extra=100))
    resp, _ = get(served, "/a.bin", {"Range": "bytes=0-99"})
    assert resp.getheader("Content-Length") == "200"
    with pytest.raises(http.client.IncompleteRead):
        resp.read()


def test_drip(served):
    served.set_fault("/a.bin", Drip(interval_s=0.3))
    resp, conn = get(served, "/a.bin", {"Range": "bytes=0-99"})
    start = time.monotonic()
    first = resp.read(2)
    assert first == served.data[:2] and time.monotonic() - start >= 0.25
    conn.close()


@pytest.mark.parametrize("location", ["http://127.0.0.1:9/x", "http://[::1]/x", "http://100.100.100.200/x"])
def test_redirect(served, location):
    served.set_fault("/a.bin", Redirect(location=location))
    resp, _ = get(served, "/a.bin")
    assert resp.status == 302 and resp.getheader("Location") == location
    served.set_fault("/a.bin", Redirect(location="http://100.100.100.200", append_path=True, status=307))
    resp, _ = get(served, "/a.bin?q=1")
    assert resp.status == 307 and resp.getheader("Location") == "http://100.100.100.200/a.bin?q=1"


def test_malformed_json(served):
    served.set_fault("/page.json", MalformedJSON())
    resp, _ = get(served, "/page.json")
    assert resp.status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(resp.read())


def test_loop_next(served):
    served.set_fault("/page.json", LoopNext(pages=2))
    found = []
    for method in ("GET", "POST", "GET"):
        resp, _ = get(served, "/page.json?token=1", method=method)
        page = json.loads(resp.read())
        found.append([link["href"] for link in page["links"] if link["rel"] == "next"])
    here = f"{served.url}/page.json?token=1"
    assert found == [[here], [here], []]  # two looping pages, then the file as it is


def test_respond(served):
    served.set_fault(None, Respond(status=418, body=b"teapot", headers={"X-A": "1"}))
    resp, _ = get(served, "/anything")
    assert resp.status == 418 and resp.getheader("X-A") == "1" and resp.read() == b"teapot"
    served.clear_faults()
    assert get(served, "/anything")[0].status == 404
