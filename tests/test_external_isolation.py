"""A misbehaving external server (stderr flood, an answer far over its size limit, death
mid-call, slowness) gets a clear error and never holds up the core tools or other servers.
Real child processes (tests/external_servers/echo_server.py); every wait is bounded
by the server's own `timeout_s` from the settings, never by a fixed number of seconds."""

import asyncio

import anyio
import pytest
from fastmcp import Client
from helpers import found_items
from test_external import ECHO, listed, settings_with

from stac_gdal_mcp.server.extensions.external import STDERR_KEEP

pytestmark = pytest.mark.testbed  # starts external MCP servers as subprocesses

LIMIT = 4096  # the echo server's max_result_bytes
HUGE = 40_000_000  # bytes of text in one answer: ~80 MB of JSON (text and structured copy)


async def search_sample(client, within: float) -> list:
    """search_items on the bundled catalog, which must answer within `within` seconds."""
    with anyio.fail_after(within):
        result = await client.call_tool("search_items", {"catalog": "sample", "limit": 3})
    return found_items(result.structured_content)


async def test_core_tools_and_other_servers_answer_through_a_misbehaving_server(build, tmp_path):
    settings = settings_with(
        tmp_path,
        {"name": "echo", "script": str(ECHO), "max_result_bytes": LIMIT, "timeout_s": 60},
        {"name": "other", "script": str(ECHO)},
    )
    wait = settings.external_servers[0].timeout_s
    mcp = build(settings)
    async with Client(mcp) as client:
        expected = await search_sample(client, wait)
        assert len(expected) == 3
        flood = asyncio.create_task(client.call_tool("echo_flood", {"n_bytes": 20_000_000}))
        huge = asyncio.create_task(client.call_tool("echo_big", {"n_bytes": HUGE}, raise_on_error=False))
        assert await search_sample(client, wait) == expected  # while both are under way
        with anyio.fail_after(wait):
            flooded, answer = await flood, await huge
        assert flooded.content[0].text == "flooded"
        assert answer.is_error
        message = answer.content[0].text
        assert message.startswith("external server 'echo' sent an answer to tool 'big' of more than ")
        assert message.endswith(f"bytes; it was dropped (max_result_bytes is {LIMIT})")
        # the server itself is fine: the next call answers, cut to its limit as usual
        small = await client.call_tool("echo_big", {"n_bytes": 100})
        assert small.content[0].text == ("abcdefghij" * 10)

        slow = asyncio.create_task(client.call_tool("echo_slow", {"seconds": 3 * wait}, raise_on_error=False))
        assert await search_sample(client, wait) == expected  # while the slow call waits
        assert (await client.call_tool("other_echo", {"text": "fine"})).content[0].text == "fine"
        slow.cancel()

        died = await client.call_tool("echo_crash", {}, raise_on_error=False)
        assert died.is_error and "is not available: it stopped during tool 'crash'" in died.content[0].text
        assert await search_sample(client, wait) == expected
        assert (await client.call_tool("other_echo", {"text": "still"})).content[0].text == "still"
        info = listed(await client.call_tool("list_extensions", {}))
    assert info["echo"]["status"] == "died" and info["other"]["status"] == "running"
    # the flood went through the ring buffer, which kept only its last STDERR_KEEP bytes
    ring = next(s for s in build.parts(mcp).extensions.external if s.name == "echo").stderr
    assert ring.total >= 20_000_000 and len(ring.since(0)) <= STDERR_KEEP
    assert info["echo"]["error"].startswith("it stopped during tool 'crash'")
