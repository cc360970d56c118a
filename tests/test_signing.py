"""Planetary Computer signing: asset hrefs of a `signing = "planetary-computer"` catalog are signed
with SAS tokens (through the planetary-computer package) by get_item and detail="full" searches.
The token endpoint is a real local HTTP server (PC_SDK_SAS_URL), the catalog the real pgstac API."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastmcp import Client
from helpers import found_items

from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.testing import synthetic

TOKEN = "sv=2024-01-01&se=2030-01-01&sig=local-test-signature"


@contextlib.contextmanager
def sas_token_server():
    requested: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            requested.append(self.path)
            body = json.dumps({"msft:expiry": "2030-01-01T00:00:00Z", "token": TOKEN}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/api/sas/v1/token", requested
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def pc_items(pgstac_api):
    base = "https://pctestaccount.blob.core.windows.net/sentinel2-l2"
    items = [
        synthetic.item(
            "sentinel-2-l2a", f"S2A_PC_{n}", f"2024-07-0{n}T10:00:00Z", collection_id="pc-s2", href_base=base
        )
        for n in range(1, 4)
    ]
    pgstac_api.load([synthetic.collection("sentinel-2-l2a", "pc-s2")], items)
    return items


async def test_planetary_computer_hrefs_are_signed(make_settings, pgstac_api, pc_items, monkeypatch):
    import planetary_computer.sas
    import planetary_computer.settings

    with sas_token_server() as (sas_url, requested):
        monkeypatch.setenv("PC_SDK_SAS_URL", sas_url)
        planetary_computer.settings.Settings.get.cache_clear()
        monkeypatch.setattr(planetary_computer.sas, "TOKEN_CACHE", {})
        settings = make_settings(
            catalogs=[{"id": "pc", "url": pgstac_api.url, "signing": "planetary-computer"}],
            default_catalog="pc",
        )
        source = pc_items[0]
        async with Client(build_server(settings)) as client:
            item = (
                await client.call_tool("get_item", {"collection_id": "pc-s2", "item_id": source["id"]})
            ).structured_content
            full = (
                await client.call_tool("search_items", {"collections": ["pc-s2"], "detail": "full"})
            ).structured_content
            summary = (await client.call_tool("search_items", {"collections": ["pc-s2"]})).structured_content
        planetary_computer.settings.Settings.get.cache_clear()
    for key, asset in source["assets"].items():
        assert item["assets"][key]["href"] == f"{asset['href']}?{TOKEN}"
    assert all(a["href"].endswith(TOKEN) for i in found_items(full) for a in i["assets"].values())
    assert requested and all(path.endswith("/pctestaccount/sentinel2-l2") for path in requested)
    # summaries carry no asset hrefs except the thumbnail, which stays as the catalog gave it
    assert found_items(summary) and TOKEN not in json.dumps(summary)
