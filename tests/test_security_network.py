"""Requests where they must not go: the address policy against every IANA
special-purpose block, redirects checked hop by hop for GDAL reads and catalog requests (through
the network guard proxy), ids that would climb out of the API, and Authorization headers kept
inside the catalog's root.

The test servers live on 127.0.0.1, which the policy refuses; each test allows exactly one
server by `network.allowed_private_hosts = ["127.0.0.1:<port>"]`, and that server redirects to
targets that stay refused: another loopback port, [::1] and 100.100.100.200.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastmcp import Client

from stac_gdal_mcp.catalogs.netguard import recent_refusal
from stac_gdal_mcp.catalogs.security import NetworkPolicy, check_url, non_public_reason
from stac_gdal_mcp.errors import AccessDenied, InvalidArgument
from testbed.faults import Redirect, Respond, serve_faults

SAMPLE = Path(__file__).parents[1] / "stac_gdal_mcp/data/sample/sentinel-2-l2a/S2A_33TUL_20240619_0_L2A"

# Every block of the IANA IPv4 and IPv6 special-purpose registries (and multicast): first, last
# and a middle address of each must be refused.
SPECIAL_BLOCKS = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.31.196.0/24",
    "192.52.193.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "192.175.48.0/24",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "255.255.255.255/32",
    "::/128",
    "::1/128",
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/23",
    "2001::/32",
    "2001:db8::/32",
    "2002::/16",
    "2620:4f:8000::/48",
    "3fff::/20",
    "5f00::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
    "::/96",  # IPv4-compatible (deprecated)
    "4000::/3",  # not yet allocated: outside global unicast
]


def _samples(block: str) -> list[str]:
    import ipaddress

    net = ipaddress.ip_network(block)
    return sorted({str(net[0]), str(net[-1]), str(net[net.num_addresses // 2])})


@pytest.mark.parametrize("block", SPECIAL_BLOCKS)
def test_every_special_purpose_block_is_refused(block):
    for addr in _samples(block):
        assert non_public_reason(addr) is not None, addr


@pytest.mark.parametrize(
    "addr",
    [
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "::ffff:100.100.100.200",  # mapped shared address space (the metadata address of the issue)
        "::ffff:169.254.169.254",
        "::ffff:10.1.2.3",
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b::6464:64c8",  # NAT64 of 100.100.100.200
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:0808:0808::1",  # 6to4, even of a public address
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "fe80::1%eth0",  # with a zone
    ],
)
def test_embedded_and_tunnelled_addresses_are_refused(addr):
    assert non_public_reason(addr) is not None


@pytest.mark.parametrize(
    "addr",
    ["8.8.8.8", "1.1.1.1", "93.184.216.34", "::ffff:8.8.8.8", "64:ff9b::808:808", "2606:4700:4700::1111"],
)
def test_public_addresses_pass(addr):
    assert non_public_reason(addr) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x.tif",
        "http://127.1/x.tif",  # short forms the resolver expands
        "http://2130706433/x.tif",
        "http://0x7f000001/x.tif",
        "http://localhost/x.tif",
        "http://[::1]/x.tif",
        "http://[::ffff:127.0.0.1]/x.tif",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
        "http://100.100.100.200/latest/meta-data",
        "http://169.254.169.254/latest/meta-data",
        "http://198.18.0.1/",
        "http://[fd00::1]/",
    ],
)
def test_urls_to_special_addresses_are_refused(url):
    with pytest.raises(AccessDenied) as info:
        check_url(url, allow_private=False)
    message = str(info.value)
    assert "\n" not in message and "non-public address" in message


def test_allowed_private_hosts_match_host_and_port():
    policy = NetworkPolicy(False, (("127.0.0.1", 8081), ("stac.internal", None)))
    assert policy.refusal("127.0.0.1", 8081, "127.0.0.1") is None
    assert policy.refusal("localhost", 8081, "127.0.0.1") is None  # an IP entry matches the address
    assert policy.refusal("127.0.0.1", 8082, "127.0.0.1") is not None  # another port stays refused
    assert policy.refusal("stac.internal", 443, "10.0.0.5") is None
    assert policy.refusal("other.internal", 443, "10.0.0.5") is not None
    assert NetworkPolicy(True).refusal("x", 80, "127.0.0.1") is None


def test_settings_build_the_policy(make_settings):
    from stac_gdal_mcp.catalogs.security import network_policy

    settings = make_settings(
        network={"allow_private_hosts": False, "allowed_private_hosts": ["127.0.0.1:8081", "[::1]:9", "a.b"]}
    )
    assert network_policy(settings).allowed == (("127.0.0.1", 8081), ("::1", 9), ("a.b", None))
    with pytest.raises(Exception, match="allowed_private_hosts"):
        make_settings(network={"allowed_private_hosts": ["http://x/"]})


# --- servers ---------------------------------------------------------------------------------------


@pytest.fixture
def cog_dir(tmp_path):
    folder = tmp_path / "cogs"
    folder.mkdir()
    for name in ("red.tif", "red2.tif", "red3.tif", "red4.tif", "red5.tif", "red6.tif"):
        shutil.copy(SAMPLE / "red.tif", folder / name)
    return folder


@pytest.fixture
def servers(cog_dir):
    """(allowed, refused): two fault servers over the same files; only the first is allowed."""
    with serve_faults(cog_dir) as allowed, serve_faults(cog_dir) as refused:
        yield allowed, refused


def _guarded(make_settings, *servers, **overrides):
    network = {
        "allow_private_hosts": False,
        "allowed_private_hosts": [f"127.0.0.1:{s.port}" for s in servers],
        "timeout_s": 10,
        "max_retries": 1,
    }
    network.update(overrides.pop("network", {}))
    return make_settings(network=network, **overrides)


REFUSED_TARGETS = {
    "loopback-port": lambda refused: f"{refused.url}/red.tif",
    "ipv6-loopback": lambda refused: "http://[::1]:9/red.tif",
    "metadata": lambda refused: "http://100.100.100.200/latest/meta-data",
}


def _text(result) -> str:
    return result.content[0].text if result.content else ""


@pytest.mark.parametrize("target", list(REFUSED_TARGETS))
async def test_gdal_reads_never_follow_a_redirect_to_a_refused_address(make_settings, build, servers, target):
    allowed, refused = servers
    location = REFUSED_TARGETS[target](refused)
    allowed.set_fault("/hop.tif", Redirect(location=location))
    async with Client(build(_guarded(make_settings, allowed))) as client:
        # control: the allowed server itself is read, through the guard
        ok = await client.call_tool("inspect_asset", {"href": f"{allowed.url}/red.tif"})
        assert ok.structured_content["width"] == 512
        for tool, args in [
            ("inspect_asset", {}),
            ("reproject_asset", {"dst_crs": "EPSG:4326", "resolution": 0.01}),
        ]:
            started = time.monotonic()
            result = await client.call_tool(
                tool, {"href": f"{allowed.url}/hop.tif", **args}, raise_on_error=False
            )
            assert result.is_error, (tool, _text(result))
            assert time.monotonic() - started < 8  # refused before connecting: no timeout to wait for
            assert "\n" not in _text(result)
            assert "non-public address" in (recent_refusal() or "")  # why GDAL saw "HTTP 403"
        listed = await client.call_tool("list_outputs", {})
        assert listed.structured_content["outputs"] == []
    assert refused.stats()["requests"] == 0


async def test_a_redirect_that_starts_after_the_header_is_refused_too(make_settings, build, servers):
    """Checking the URL once before GDAL opens it is not enough: here the header is served and
    only a later range request redirects. Every connection goes through the guard."""
    allowed, refused = servers
    allowed.set_fault("/red3.tif", Redirect(location=f"{refused.url}/red3.tif", after=1))
    async with Client(build(_guarded(make_settings, allowed))) as client:
        result = await client.call_tool(
            "convert_asset",
            {"href": f"{allowed.url}/red3.tif", "output_format": "GTiff"},
            raise_on_error=False,
        )
        assert result.is_error, _text(result)
        assert (await client.call_tool("list_outputs", {})).structured_content["outputs"] == []
    assert refused.stats()["requests"] == 0


async def test_redirects_between_allowed_hosts_still_work(make_settings, build, servers):
    allowed, other = servers
    allowed.set_fault("/hop2.tif", Redirect(location=f"{other.url}/red2.tif"))
    async with Client(build(_guarded(make_settings, allowed, other))) as client:
        result = await client.call_tool("inspect_asset", {"href": f"{allowed.url}/hop2.tif"})
        assert result.structured_content["width"] == 512
    assert other.stats()["requests"] >= 1


def test_guard_proxy_tunnels_and_refuses(make_settings, servers):
    """CONNECT (what curl and urllib3 use for https) is checked when the tunnel opens."""
    from stac_gdal_mcp.catalogs.netguard import guard_proxy

    allowed, refused = servers
    proxy = guard_proxy(_guarded(make_settings, allowed))

    def connect(target: str) -> bytes:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            answer = sock.recv(4096)
            if answer.startswith(b"HTTP/1.1 200"):
                sock.sendall(b"HEAD /red.tif HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                answer += sock.recv(4096)
            return answer

    assert b"HTTP/1.0 200 OK" in connect(f"127.0.0.1:{allowed.port}") or b" 200 " in connect(
        f"127.0.0.1:{allowed.port}"
    )
    for target in (f"127.0.0.1:{refused.port}", "[::1]:443", "100.100.100.200:80", "169.254.169.254:80"):
        answer = connect(target)
        assert answer.startswith(b"HTTP/1.1 403 Refused by network policy: "), answer
    assert refused.stats()["requests"] == 0


# --- the catalog client --------------------------------------------------------------------------


@dataclass(kw_only=True)
class Capture(Respond):
    """A fixed answer that also records each request's target and Authorization header."""

    seen: list = field(default_factory=list)

    def inject(self, handler, request):
        self.seen.append((request.target, handler.headers.get("Authorization")))
        return super().inject(handler, request)


def _json(doc) -> Respond:
    return Respond(status=200, body=json.dumps(doc).encode(), headers={"Content-Type": "application/json"})


def _fake_api(server, root="/api"):
    """A STAC API with one collection and one item, answered by fixed responses."""
    base = f"{server.url}{root}"
    server.set_fault(
        root,
        _json(
            {
                "type": "Catalog",
                "id": "fake",
                "description": "fake",
                "stac_version": "1.0.0",
                "conformsTo": ["https://api.stacspec.org/v1.0.0/core"],
                "links": [{"rel": "self", "href": base}],
            }
        ),
    )
    server.set_fault(
        f"{root}/collections/c1",
        _json(
            {"type": "Collection", "id": "c1", "description": "", "links": [], "extent": {}, "license": "x"}
        ),
    )
    item = {
        "type": "Feature",
        "stac_version": "1.0.0",
        "id": "i1",
        "collection": "c1",
        "geometry": None,
        "properties": {"datetime": "2024-01-01T00:00:00Z"},
        "assets": {},
        "links": [],
    }
    server.set_fault(f"{root}/collections/c1/items/i1", _json(item))
    return base


def _catalog_settings(make_settings, base, *servers):
    return _guarded(
        make_settings,
        *servers,
        catalogs=[{"id": "fake", "url": base, "headers": {"Authorization": "Bearer s3cret"}}],
        default_catalog="fake",
    )


@pytest.mark.parametrize("target", list(REFUSED_TARGETS))
async def test_catalog_requests_check_every_redirect(make_settings, build, servers, target):
    allowed, refused = servers
    base = _fake_api(allowed)
    allowed.set_fault("/api/collections/c1/items/i2", Redirect(location=REFUSED_TARGETS[target](refused)))
    async with Client(build(_catalog_settings(make_settings, base, allowed))) as client:
        ok = await client.call_tool("get_item", {"collection_id": "c1", "item_id": "i1"})
        assert ok.structured_content["id"] == "i1"
        started = time.monotonic()
        result = await client.call_tool(
            "get_item", {"collection_id": "c1", "item_id": "i2"}, raise_on_error=False
        )
        assert time.monotonic() - started < 8
    assert result.is_error and "non-public address" in _text(result), _text(result)
    assert "\n" not in _text(result)
    assert refused.stats()["requests"] == 0


async def test_authorization_stays_inside_the_catalog_root(make_settings, build, servers):
    allowed, other = servers
    base = _fake_api(allowed)
    outside = Capture(body=b"{}", headers={"Content-Type": "application/json"})
    elsewhere = Capture(body=b"{}", headers={"Content-Type": "application/json"})
    allowed.set_fault("/f/x.json", outside)
    other.set_fault("/y.json", elsewhere)
    allowed.set_fault("/api/collections/c1/items/same-host", Redirect(location=f"{allowed.url}/f/x.json"))
    allowed.set_fault("/api/collections/c1/items/cross", Redirect(location=f"{other.url}/y.json"))
    inside = Capture(body=b"{}", headers={"Content-Type": "application/json"})
    allowed.set_fault("/api/collections/c1/items/a%20b%3Fc%23d", inside)
    allowed.set_fault("/api/collections/c1/items/a b?c#d", inside)
    async with Client(build(_catalog_settings(make_settings, base, allowed, other))) as client:
        for item_id in ("same-host", "cross"):
            await client.call_tool(
                "get_item", {"collection_id": "c1", "item_id": item_id}, raise_on_error=False
            )
        # an id with URL syntax in it is one escaped path segment, and gets the header
        await client.call_tool(
            "get_item", {"collection_id": "c1", "item_id": "a b?c#d"}, raise_on_error=False
        )
    assert outside.seen and all(auth is None for _, auth in outside.seen)
    assert elsewhere.seen and all(auth is None for _, auth in elsewhere.seen)
    assert inside.seen == [("/api/collections/c1/items/a%20b%3Fc%23d", "Bearer s3cret")]


@pytest.mark.parametrize(
    "item_id", ["../../../../f/x.json", "..", ".", "%2e%2e", "%252e%252e", "a/b", "a%2Fb", "..\\x", "a\nb"]
)
async def test_ids_cannot_leave_the_api(make_settings, build, servers, item_id):
    allowed, _ = servers
    base = _fake_api(allowed)
    secret = Capture(body=b'{"secret": true}', headers={"Content-Type": "application/json"})
    allowed.set_fault("/f/x.json", secret)
    async with Client(build(_catalog_settings(make_settings, base, allowed))) as client:
        result = await client.call_tool(
            "get_item", {"collection_id": "c1", "item_id": item_id}, raise_on_error=False
        )
        assert result.is_error and "not a valid id" in _text(result), _text(result)
        assert "\n" not in _text(result)
        result = await client.call_tool("get_collection", {"collection_id": item_id}, raise_on_error=False)
        assert result.is_error and "not a valid id" in _text(result)
    assert secret.seen == []


def test_url_under_root():
    from stac_gdal_mcp.catalogs import url_under

    root = "https://stac.example.com/api/v1"
    assert url_under("https://stac.example.com/api/v1", root)
    assert url_under("https://stac.example.com:443/api/v1/collections/x", root)
    assert url_under("https://STAC.example.com/api/v1/search?x=1", root)
    for url in (
        "https://stac.example.com/api/v1/../../f/x.json",
        "https://stac.example.com/api/v1/%2e%2e/%2E%2E/f",
        "https://stac.example.com/api/v10",
        "http://stac.example.com/api/v1/x",
        "https://stac.example.com:8443/api/v1/x",
        "https://stac.example.com.evil.org/api/v1/x",
        "https://user:pw@stac.example.com/api/v1/x",
    ):
        assert not url_under(url, root), url


def test_path_segments_are_escaped():
    from stac_gdal_mcp.catalogs import path_segment

    assert path_segment("S2A_33TUL_20240619_0_L2A", "item_id") == "S2A_33TUL_20240619_0_L2A"
    assert path_segment("a b?c#d%", "item_id") == "a%20b%3Fc%23d%25"
    for bad in ("..", ".", "%2e%2e", "a/b", "a%2fb", "", "a\\b"):
        with pytest.raises(InvalidArgument):
            path_segment(bad, "item_id")
