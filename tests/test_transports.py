"""The real `stac-gdal-mcp serve` process over stdio and over streamable HTTP with a token."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import discovery_data as data
import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from helpers import found_items, serve_http

pytestmark = pytest.mark.testbed  # runs the server as a subprocess


@pytest.fixture
def server_env(tmp_path):
    _, items = data.build(seed=3)
    path = tmp_path / "items.ndjson"
    path.write_text("\n".join(json.dumps(i) for i in items))
    config = tmp_path / "config.toml"
    config.write_text(f'default_catalog = "mine"\n[[catalogs]]\nid = "mine"\npath = "{path}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
    env.update(STAC_GDAL_MCP_CONFIG=str(config), STAC_GDAL_MCP_WORKSPACE=str(tmp_path / "ws"))
    return env, items


async def test_stdio_subprocess(server_env):
    env, items = server_env
    transport = StdioTransport(sys.executable, ["-m", "stac_gdal_mcp", "serve"], env=env)
    async with Client(transport) as client:
        names = {t.name for t in await client.list_tools()}
        assert {"search_items", "get_item", "list_catalogs"} <= names
        result = await client.call_tool("search_items", {"collections": [data.LS], "limit": 100})
        assert sorted(i["id"] for i in found_items(result.structured_content)) == sorted(
            data.expected(items, collections=[data.LS])
        )
        bad = await client.call_tool("search_items", {"bbox": [0, 0, 1]}, raise_on_error=False)
        assert bad.is_error and "4 numbers" in bad.content[0].text


async def test_http_requires_the_token(server_env):
    env, items = server_env
    env = {**env, "STAC_GDAL_MCP_TOKEN": "s3cret-token"}
    with serve_http(env) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        plain = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert plain.status_code == 401
        wrong = httpx.post(url, json={}, headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401
        transport = StreamableHttpTransport(url, headers={"Authorization": "Bearer s3cret-token"})
        async with Client(transport) as client:
            result = await client.call_tool("search_items", {"collections": [data.S2], "limit": 3})
            assert result.structured_content["returned"] == 3
            assert result.structured_content.get("matched") == len(
                data.expected(items, collections=[data.S2])
            )
            cursor = result.structured_content.get("next_cursor")
            first = [i["id"] for i in found_items(result.structured_content)]
        # Cursors are the server's, not one HTTP session's (catalogs/cursors.py): another
        # session pages on from it, to the items a single search of 6 gives after the first 3.
        async with Client(
            StreamableHttpTransport(url, headers={"Authorization": "Bearer s3cret-token"})
        ) as other:
            six = await other.call_tool("search_items", {"collections": [data.S2], "limit": 6})
            more = await other.call_tool(
                "search_items", {"collections": [data.S2], "limit": 3, "cursor": cursor}
            )
            assert first + [i["id"] for i in found_items(more.structured_content)] == [
                i["id"] for i in found_items(six.structured_content)
            ]


def test_http_on_a_public_address_needs_a_token(server_env):
    env, _ = server_env
    result = subprocess.run(
        [sys.executable, "-m", "stac_gdal_mcp", "serve", "--transport", "http", "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "without a token" in result.stderr
    assert result.stdout == ""


def test_bad_config_exits_with_a_message(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('default_catalog = "nope"\n')
    result = subprocess.run(
        [sys.executable, "-m", "stac_gdal_mcp", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "default_catalog 'nope'" in result.stderr and result.stdout == ""


def test_demo_runs_offline(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
    result = subprocess.run(
        [sys.executable, "-m", "stac_gdal_mcp", "demo", "--workspace", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "demo finished: every step succeeded." in result.stdout
    assert ">>> search_items(" in result.stdout and "next_cursor" in result.stdout
