"""One redaction rule for what leaves the server: a catalog URL's userinfo and secret
query values, configured header values, an error body echoing an Authorization header, and
signed hrefs in GDAL's messages never reach list_catalogs, errors or the log - checked through
an MCP client against a real HTTP server (the fault server of the test bed)."""

from __future__ import annotations

import json
import logging

import pytest
from fastmcp import Client

from stac_gdal_mcp.catalogs.redact import masked, masked_url
from testbed.faults import Respond, serve_faults

KEY = "k3y-IN-the-query-77"
PASSWORD = "pa55-in-userinfo"
HEADER = "header-secret-0815"
SIG = "sv6Zsig%2Bsecret%3D"


@pytest.mark.parametrize(
    "url, hidden, kept",
    [
        (f"https://me:{PASSWORD}@stac.example.com/api", [PASSWORD, "me:"], ["stac.example.com/api"]),
        (f"https://stac.example.com/api?api_key={KEY}&limit=5", [KEY], ["api_key=***", "limit=5"]),
        (
            f"https://b.s3.amazonaws.com/x.tif?X-Amz-Signature={KEY}&X-Amz-Credential=AKIA",
            [KEY, "AKIA"],
            ["x.tif"],
        ),
        (
            f"https://acct.blob.core.windows.net/c/x.tif?st=2024-01-01&se=2030-01-01&sp=r&sig={SIG}",
            [SIG, "2030-01-01"],
            ["sig=***", "x.tif"],
        ),
        (
            "https://stac.example.com/search?collections=s2&datetime=2024",
            [],
            ["collections=s2&datetime=2024"],
        ),
    ],
)
def test_urls_are_masked(url, hidden, kept):
    shown = masked_url(url)
    assert all(h not in shown for h in hidden) and all(k in shown for k in kept), shown
    assert masked(f"reading {url}: failed") == f"reading {shown}: failed"


def test_free_text_secrets_are_masked_and_cut():
    body = f'{{"detail": "denied", "headers": {{"Authorization": "Bearer {HEADER}"}}, "api_key": "{KEY}"}}'
    shown = masked(body + " x" * 500, limit=300)
    assert HEADER not in shown and KEY not in shown and "denied" in shown and len(shown) <= 300


@pytest.fixture
def api(tmp_path):
    """An API whose search answers 500 with a body that echoes the request's Authorization."""
    with serve_faults(tmp_path) as server:
        base = f"{server.url}/api"
        landing = {
            "type": "Catalog",
            "id": "leaky",
            "description": "",
            "stac_version": "1.0.0",
            "conformsTo": ["https://api.stacspec.org/v1.0.0/item-search"],
            "links": [{"rel": "search", "href": f"{base}/search?api_key={KEY}", "method": "GET"}],
        }
        server.set_fault(
            "/api", Respond(body=json.dumps(landing).encode(), headers={"Content-Type": "application/json"})
        )
        echo = f"upstream said no; request headers: Authorization: Bearer {HEADER}; X-Api-Key: {HEADER}"
        server.set_fault(
            "/api/search", Respond(status=502, body=echo.encode(), headers={"Content-Type": "text/plain"})
        )
        yield server, base


async def test_no_credential_in_list_catalogs_errors_or_the_log(make_settings, build, api, caplog):
    server, base = api
    port = server.url.rsplit(":", 1)[1]
    settings = make_settings(
        catalogs=[
            {"id": "leaky", "url": f"{base}?api_key={KEY}", "headers": {"Authorization": f"Bearer {HEADER}"}},
            {
                "id": "closed",
                "url": f"http://me:{PASSWORD}@127.0.0.1:{int(port) + 0}/nothing-here?token={KEY}",
            },
        ],
        default_catalog="leaky",
        network={"timeout_s": 5, "max_retries": 0},
    )
    caplog.set_level(logging.DEBUG)
    async with Client(build(settings)) as client:
        listed = json.dumps(
            (await client.call_tool("list_catalogs", {"check_reachable": True})).structured_content
        )
        failed = await client.call_tool("search_items", {"limit": 2}, raise_on_error=False)
        closed = await client.call_tool(
            "search_items", {"catalog": "closed", "limit": 2}, raise_on_error=False
        )
        resource = json.dumps(
            [c.model_dump() for c in await client.read_resource("stac://catalogs")], default=str
        )
    error = failed.content[0].text
    assert failed.is_error and "HTTP 502" in error and "upstream said no" in error, error
    assert closed.is_error and "catalog 'closed'" in closed.content[0].text
    assert "leaky" in listed and "api_key=***" in listed
    ours = "\n".join(
        r.getMessage() for r in caplog.records if not r.name.startswith("testbed")
    )  # not the API's
    for text in (listed, error, closed.content[0].text, resource, ours):
        for secret in (KEY, PASSWORD, HEADER):
            assert secret not in text, (secret, text[-3000:])
    assert "/api/search" in ours  # urllib3's request lines were logged - masked


def test_signed_hrefs_in_gdal_messages_are_masked_in_the_log(tmp_path, caplog):
    """GDAL's message about a failed signed read (through rasterio's logger) is masked."""
    rasterio = pytest.importorskip("rasterio")
    from stac_gdal_mcp.catalogs.gdal_messages import capture_gdal_messages

    caplog.set_level(logging.DEBUG)
    with serve_faults(tmp_path) as server:
        server.set_fault("/c/x.tif", Respond(status=403, body=b"AuthenticationFailed"))
        href = f"{server.url}/c/x.tif?st=2024-01-01&se=2030-01-01&sp=r&sv=2021&sr=b&sig={SIG}"
        with capture_gdal_messages(), rasterio.Env(GDAL_HTTP_MAX_RETRY=0, CPL_DEBUG=True):
            with pytest.raises(rasterio.errors.RasterioIOError):
                rasterio.open(f"/vsicurl/{href}")
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("rasterio"))
    assert "x.tif" in ours and SIG not in ours and "2030-01-01" not in ours
