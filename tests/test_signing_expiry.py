"""Signing that lasts: hrefs of a signing catalog are signed when they are read, tokens
are cached per container until shortly before they expire, and a read refused with HTTP 403 gets
a new token once and goes on.

The test bed: a local SAS token endpoint issuing tokens valid for TOKEN_S seconds, and a Range
server that serves a file only with a token it issued that has not expired (403 otherwise),
answering slowly, so that every job below runs longer than one token lives: a GDAL read path
(convert_asset, through the MCP client) and odc-stac loads (composite on dask's threads, and on a
dask.distributed cluster of worker processes). Results are compared with the same work done on
the same files through a server that asks for no token.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from helpers import utm_aoi, write_cog, write_days

from stac_gdal_mcp import Session
from stac_gdal_mcp.catalogs.signing import TOKENS, PlanetaryComputerSigner, refresh_margin
from stac_gdal_mcp.processing import formats
from stac_gdal_mcp.processing.odc_reader import reader_driver
from stac_gdal_mcp.testing import synthetic
from testbed.rangeserver import RangeServer

# a token endpoint and a slow Range server in threads, jobs outliving tokens, a LocalCluster
pytestmark = pytest.mark.testbed

TOKEN_S = 2.0
UID = uuid.uuid4().hex[:8]
ORIGIN = (500000.0, 5000000.0)


class TokenEndpoint:
    """GET /token/<account>/<container> -> {"msft:expiry", "token"}; remembers every token."""

    def __init__(self, lifetime_s: float = TOKEN_S):
        self.lifetime_s = lifetime_s
        self.issued: dict[str, float] = {}  # sig -> expiry (time.time())
        self.requests: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                endpoint.requests.append(self.path)
                sig = uuid.uuid4().hex
                expiry = time.time() + endpoint.lifetime_s
                endpoint.issued[sig] = expiry
                stamp = datetime.fromtimestamp(expiry, UTC).isoformat().replace("+00:00", "Z")
                body = json.dumps(
                    {"msft:expiry": stamp, "token": f"se={int(expiry)}&sp=r&sig={sig}"}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/token"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()


@contextlib.contextmanager
def enforcing_server(directory, endpoint: TokenEndpoint, delay_s: float):
    """A Range server over `directory` that wants a valid token from `endpoint` on every request."""
    server = RangeServer(directory, delay_s=delay_s)
    server.refused = []
    base = server._httpd.RequestHandlerClass

    class Checked(base):
        def _respond(self, send_body):
            sig = parse_qs(urlsplit(self.path).query).get("sig", [None])[0]
            expiry = endpoint.issued.get(sig)
            if expiry is None or time.time() > expiry:
                server.refused.append((self.command, urlsplit(self.path).path))
                self._send_empty(403)
                return
            super()._respond(send_body)

    server._httpd.RequestHandlerClass = Checked
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def endpoint():
    TOKENS.clear()
    served = TokenEndpoint()
    yield served
    served.close()
    TOKENS.clear()


def signing_catalog(endpoint, path) -> dict:
    return {
        "id": "signed",
        "path": str(path),
        "signing": "planetary-computer",
        "sas_url": endpoint.url,
        "signed_hosts": ["127.0.0.1"],
    }


# --- the pieces -----------------------------------------------------------------------------------


def test_tokens_are_cached_until_shortly_before_expiry(endpoint):
    signer = PlanetaryComputerSigner(token_url=endpoint.url, hosts=("127.0.0.1",))
    href = "http://127.0.0.1:1/container-a/scene/red.tif"
    first = signer.sign(href)
    assert signer.sign(href) == first and len(endpoint.requests) == 1  # cached
    assert endpoint.requests == ["/token/127/container-a"]
    signer.sign("http://127.0.0.1:1/container-b/x.tif")
    assert len(endpoint.requests) == 2  # one token per container
    time.sleep(TOKEN_S - refresh_margin(TOKEN_S) + 0.05)  # inside the margin: renewed before use
    assert signer.sign(href) != first and len(endpoint.requests) == 3
    # readers failing with the same old token share one renewal
    old = signer.sign(href)
    renewed = [signer.renew(old) for _ in range(3)]
    assert len(set(renewed)) == 1 and renewed[0] != old and len(endpoint.requests) == 4
    assert signer.sign("https://example.com/c/x.tif") == "https://example.com/c/x.tif"  # other hosts
    # the odc-stac driver travels to dask workers in the graph
    driver = odc_driver_for(endpoint)
    copy = pickle.loads(pickle.dumps(driver))
    assert copy.signers == driver.signers


def odc_driver_for(endpoint):
    from stac_gdal_mcp.settings import load_settings

    settings = load_settings(
        catalogs=[
            {"id": "s", "url": "http://127.0.0.1:1", "signing": "planetary-computer", "sas_url": endpoint.url}
        ]
    )
    item = {"assets": {"a": {"href": "https://acct.blob.core.windows.net/c/x.tif"}}}
    assert reader_driver(settings, [{"assets": {"a": {"href": "https://example.com/x.tif"}}}]).signers == ()
    return reader_driver(settings, [item])


# --- a GDAL read path, through the MCP client -----------------------------------------------------


@pytest.fixture
def big_cog(tmp_path):
    rng = np.random.default_rng(7)
    data = rng.integers(1, 4000, (4096, 4096), dtype="uint16")
    folder = tmp_path / "served" / "container"
    folder.mkdir(parents=True)
    return write_cog(folder / "big.tif", data, blocksize=512)


async def test_gdal_read_outlives_its_token(make_settings, endpoint, big_cog, monkeypatch, caplog):
    monkeypatch.setattr(formats, "CHUNK_BYTES", 1)  # 512-row strips: one slow request each
    caplog.set_level(logging.INFO, logger="stac_gdal_mcp")
    root = big_cog.parent.parent
    items = root / "items.json"
    item = synthetic.item(
        "sentinel-2-l2a", "S2_SIGNED", "2024-06-01T10:00:00Z", collection_id="signed-s2", href_base="http://x"
    )
    with enforcing_server(root, endpoint, delay_s=0.4) as server:
        item["assets"] = {"red": {**item["assets"]["red"], "href": f"{server.url}/container/big.tif"}}
        items.write_text(json.dumps({"type": "FeatureCollection", "features": [item]}))
        settings = make_settings(catalogs=[signing_catalog(endpoint, items)], default_catalog="signed")
        started = time.monotonic()
        async with Client(build_server(settings)) as client:
            result = await client.call_tool(
                "convert_asset",
                {
                    "collection_id": "signed-s2",
                    "item_id": "S2_SIGNED",
                    "asset": "red",
                    "output_format": "GTiff",
                },
            )
        took = time.monotonic() - started
    record = result.structured_content
    assert took > 2 * TOKEN_S, took  # the job outlived its first token (and the second)
    assert len(endpoint.requests) >= 2 and server.refused  # a read was refused, then signed again
    assert any("signing it again" in r.getMessage() for r in caplog.records)
    assert "sig=" not in json.dumps(record)  # no token in the record
    out = settings.workspace / "outputs" / record["assets"]["data"]["href"].rsplit("/", 1)[-1]
    with rasterio.open(out) as got, rasterio.open(big_cog) as want:
        assert np.array_equal(got.read(1), want.read(1))


def build_server(settings):
    from stac_gdal_mcp.server import build_server as build

    return build(settings)


# --- odc-stac loads (threads and a distributed cluster) -------------------------------------------

DAYS = {"S2S_D1": "2024-07-01T10:00:00Z", "S2S_D2": "2024-07-06T10:00:00Z", "S2S_D3": "2024-07-11T10:00:00Z"}
AOI = utm_aoi(ORIGIN[0] + 500, ORIGIN[1] - 4500, ORIGIN[0] + 4500, ORIGIN[1] - 500)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    root = tmp_path_factory.mktemp("signed-scenes")
    items = write_days(
        root / "container",
        DAYS,
        seed=60,
        collection_id=f"signed-{UID}",
        size_px=512,
        blocksize=128,
        cloud_fraction=0.3,
    )
    return root, items


def catalog_file(root, items, base_url: str, name: str):
    out = []
    for item in items:
        copy = json.loads(json.dumps(item))
        for key, asset in copy["assets"].items():
            suffix = "png" if key == "thumbnail" else "tif"
            asset["href"] = f"{base_url}/container/{item['id']}/{key}.{suffix}"
        out.append(copy)
    path = root / f"{name}.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": out}))
    return path


def composite_of(session, collection):
    array = session.composite(AOI, ["red", "nir"], collections=[collection])
    return array.values


def check_load_outlives_tokens(make_settings, endpoint, scenes, **extra):
    from testbed.rangeserver import serve_directory

    root, items = scenes
    collection = items[0]["collection"]
    with serve_directory(root) as plain:
        want = composite_of(
            Session(
                make_settings(
                    catalogs=[{"id": "plain", "path": str(catalog_file(root, items, plain.url, "plain"))}],
                    default_catalog="plain",
                    **extra,
                )
            ),
            collection,
        )
    with enforcing_server(root, endpoint, delay_s=0.5) as server:
        path = catalog_file(root, items, server.url, f"signed-{uuid.uuid4().hex[:6]}")
        session = Session(
            make_settings(catalogs=[signing_catalog(endpoint, path)], default_catalog="signed", **extra)
        )
        started = time.monotonic()
        got = composite_of(session, collection)
        took = time.monotonic() - started
    assert took > TOKEN_S, took
    assert len(endpoint.requests) >= 2  # tokens were fetched again while the load ran
    assert server.refused  # reads that outlived their token were refused, then signed again
    assert np.isfinite(want).any()
    np.testing.assert_array_equal(got, want)


def test_odc_stac_load_outlives_its_tokens(make_settings, endpoint, scenes, caplog):
    caplog.set_level(logging.INFO)
    check_load_outlives_tokens(make_settings, endpoint, scenes)
    failed = [r.getMessage() for r in caplog.records if r.name == "odc.loader._rio"]
    assert failed and not any("sig=" in m for m in failed)  # odc-stac logged the refused reads, unsigned


@pytest.mark.testbed
def test_odc_stac_load_on_distributed_workers(make_settings, endpoint, scenes):
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    ) as cluster:
        check_load_outlives_tokens(make_settings, endpoint, scenes, dask_scheduler=cluster.scheduler_address)
