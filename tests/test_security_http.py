"""DNS rebinding and cross-site pages over streamable HTTP, against the real
`stac-gdal-mcp serve --transport http` process: Host and Origin are checked before sessions and
tokens, loopback names by default, allow-lists from settings, 403 with the reason otherwise."""

from __future__ import annotations

import json
import os

import helpers
import httpx
import pytest

from stac_gdal_mcp.server.http_guard import HostOriginGuard

pytestmark = pytest.mark.testbed  # starts the server as a subprocess

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def serve_http(tmp_path, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
    env.update(
        STAC_GDAL_MCP_WORKSPACE=str(tmp_path / "ws"), STAC_GDAL_MCP_DEFAULT_CATALOG="sample", **env_extra
    )
    return helpers.serve_http(env)


def _post(port: int, headers: dict | None = None, body: dict = INITIALIZE) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}/mcp", json=body, headers={**ACCEPT, **(headers or {})}, timeout=10
    )


def _reason(response: httpx.Response) -> str:
    return response.json()["error"]["message"]


def test_without_a_token_foreign_hosts_and_origins_are_refused(tmp_path):
    with serve_http(tmp_path) as port:
        assert _post(port).status_code == 200  # a local client
        assert _post(port, {"Origin": f"http://localhost:{port}"}).status_code == 200
        assert _post(port, {"Origin": "http://127.0.0.1:5173"}).status_code == 200
        assert _post(port, {"Host": f"localhost:{port}"}).status_code == 200

        # the DNS-rebinding shape: the attacker's name resolves to 127.0.0.1
        rebinding = _post(
            port, {"Host": f"attacker.example:{port}", "Origin": f"http://attacker.example:{port}"}
        )
        assert rebinding.status_code == 403 and "Host" in _reason(rebinding)
        assert "http_allowed_hosts" in _reason(rebinding)
        # a foreign page through the right Host
        foreign = _post(port, {"Origin": "https://evil.example"})
        assert foreign.status_code == 403 and "Origin" in _reason(foreign)
        null = _post(port, {"Origin": "null"})
        assert null.status_code == 403 and "null" in _reason(null)
        # a tool call with a foreign Origin gets no further either
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_catalogs"}}
        assert _post(port, {"Origin": "https://evil.example"}, call).status_code == 403
        for response in (rebinding, foreign, null):
            assert "\n" not in _reason(response)


def test_with_a_token_foreign_origins_are_still_refused(tmp_path):
    with serve_http(tmp_path, STAC_GDAL_MCP_TOKEN="s3cret-token") as port:
        auth = {"Authorization": "Bearer s3cret-token"}
        assert _post(port, auth).status_code == 200
        assert _post(port).status_code == 401
        assert _post(port, {**auth, "Origin": "https://evil.example"}).status_code == 403
        assert _post(port, {**auth, "Origin": "null"}).status_code == 403
        assert _post(port, {**auth, "Host": "attacker.example"}).status_code == 403


def test_allow_lists_from_settings(tmp_path):
    env = {
        "STAC_GDAL_MCP_NETWORK__HTTP_ALLOWED_HOSTS": json.dumps(["mcp.example.com"]),
        "STAC_GDAL_MCP_NETWORK__HTTP_ALLOWED_ORIGINS": json.dumps(["https://app.example.com"]),
    }
    with serve_http(tmp_path, **env) as port:
        assert _post(port, {"Host": f"mcp.example.com:{port}"}).status_code == 200
        assert _post(port, {"Origin": "https://app.example.com"}).status_code == 200
        assert _post(port, {"Origin": "https://app.example.com:443"}).status_code == 200
        assert _post(port, {"Origin": "http://app.example.com"}).status_code == 403  # another scheme
        assert _post(port, {"Origin": "https://app.example.com.evil.example"}).status_code == 403
        assert _post(port, {"Host": "other.example.com"}).status_code == 403


@pytest.mark.parametrize(
    "headers, allowed",
    [
        ([("host", "127.0.0.1:8000")], True),
        ([("host", "[::1]:8000")], True),
        ([("host", "localhost")], True),
        ([("host", "LOCALHOST:8000")], True),
        ([], False),
        ([("host", "127.0.0.1"), ("host", "evil.example")], False),
        ([("host", "127.0.0.1.evil.example")], False),
        ([("host", "localhost:8000"), ("origin", "http://localhost:3000")], True),
        ([("host", "localhost:8000"), ("origin", "http://localhost.evil.example")], False),
        ([("host", "localhost:8000"), ("origin", "http://[::1]:3000")], True),
        ([("host", "localhost:8000"), ("origin", "file://")], False),
        ([("host", "localhost:8000"), ("origin", "http://localhost:3000/path")], False),
        ([("host", "localhost:8000"), ("origin", "http://a"), ("origin", "http://localhost")], False),
        ([("host", "192.168.1.5:8000")], True),  # the address the server is bound to
        ([("host", "192.168.1.6:8000")], False),
    ],
)
def test_header_rules(headers, allowed):
    guard = HostOriginGuard(None)
    scope = {"type": "http", "server": ("192.168.1.5", 8000)}
    assert (guard.refusal(scope, headers) is None) is allowed


def test_an_unspecified_bind_address_allows_no_extra_host():
    guard = HostOriginGuard(None, allowed_hosts=["mcp.example.com:8443"])
    scope = {"type": "http", "server": ("0.0.0.0", 8443)}
    assert guard.refusal(scope, [("host", "0.0.0.0:8443")]) is not None
    assert guard.refusal(scope, [("host", "mcp.example.com:8443")]) is None
    assert guard.refusal(scope, [("host", "mcp.example.com:9000")]) is not None
