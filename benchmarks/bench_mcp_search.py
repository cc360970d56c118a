"""Agent-facing figures, measured the way hosts use the server: `stac-gdal-mcp serve` over
stdio driven by the official `mcp` Python SDK client, side by side with a baseline in the same run.

1. search_items wall (100 items per call) / raw pystac-client `search(...).items()` + `to_dict()`,
   same pgstac API holding Landsat-like items (stac_gdal_mcp.testing.synthetic). Target <= 1.0x.
2. cold start to the first tools/list / a one-tool fastmcp server, same client. Target <= 1.1x.
3. bytes of the summaries / bytes of the full items (the same items, as the API serves them).
   Target <= 5%.
4. tools/list size (all tools, JSON; also compact, as the SDK sends it). Target <= 20 KB.

Run: python benchmarks/bench_mcp_search.py [--rounds 15] [--items 300]
     (needs PostgreSQL/PostGIS: `bash scripts/install-test-deps.sh`)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from common import MINIMAL_SERVER  # noqa: E402

COLLECTION = "bench-landsat"
BBOX = [-180.0, -90.0, 180.0, 90.0]
DATETIME = "2020-01-01/2030-12-31"


def landsat_items(count: int) -> tuple[dict, list[dict]]:
    """`count` Landsat-like items on 3 WRS-2 frames, a 16-day revisit (synthetic, deterministic)."""
    import random

    from discovery_data import landsat_item

    from stac_gdal_mcp.testing import synthetic

    rng = random.Random(14)
    start = datetime(2021, 1, 1, 10, 0, tzinfo=UTC)
    items = []
    for i in range(count):
        path, step = i % 3, i // 3
        when = start + timedelta(days=16 * step, hours=path)
        items.append(landsat_item(path, step, when, rng, collection_id=COLLECTION, shape=(7801, 7681)))
    return synthetic.collection("landsat-c2-l2", COLLECTION), items


def _server(env: dict, command: list[str]):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=command[0], args=command[1:], env=env)


async def _session(params):
    from contextlib import AsyncExitStack

    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    stack = AsyncExitStack()
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return stack, session


async def search_figures(env: dict, api_url: str, rounds: int) -> dict:
    from pystac_client import Client as StacClient

    args = {"collections": [COLLECTION], "bbox": BBOX, "datetime": DATETIME, "limit": 100}
    serve = [sys.executable, "-m", "stac_gdal_mcp", "serve"]
    stack, session = await _session(_server(env, serve))
    try:
        listed = await session.list_tools()
        tools_json = listed.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]
        tools_bytes = len(json.dumps(tools_json))  # json.dumps' default ", " and ": " separators
        tools_compact = len(json.dumps(tools_json, separators=(",", ":")))  # as the SDK sends it
        stac = StacClient.open(api_url)

        def raw() -> list[dict]:
            search = stac.search(
                collections=[COLLECTION], bbox=BBOX, datetime=DATETIME, limit=100, max_items=100
            )
            return [item.to_dict() for item in search.items()]

        await session.call_tool("search_items", args)  # warm: root, conformance, validators
        raw()
        ours_s, raw_s = [], []
        for _ in range(rounds):  # interleaved, so both see the same machine state
            t = time.perf_counter()
            result = await session.call_tool("search_items", args)
            ours_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            full = raw()
            raw_s.append(time.perf_counter() - t)
        assert not result.is_error, result.content
        summaries = result.structured_content["items"]
        assert [s["id"] for s in summaries] == [i["id"] for i in full] and len(full) == 100
    finally:
        await stack.aclose()
    return {
        "ours": statistics.median(ours_s),
        "raw": statistics.median(raw_s),
        "summary_bytes": len(json.dumps(summaries)),
        "full_bytes": len(json.dumps(full)),
        "tools_bytes": tools_bytes,
        "tools_compact": tools_compact,
        "tools": len(listed.tools),
    }


async def _first_tools_list(params) -> float:
    t = time.perf_counter()
    stack, session = await _session(params)
    try:
        await session.list_tools()
        return time.perf_counter() - t
    finally:
        await stack.aclose()


async def cold_start(env: dict, folder: Path, rounds: int) -> tuple[float, float]:
    """Medians: serve, minimal. (The fastmcp-tasks extension is imported with the first task, not
    at start: server/tasks.py.)"""
    script = folder / "minimal.py"
    script.write_text(MINIMAL_SERVER)
    serve = [sys.executable, "-m", "stac_gdal_mcp", "serve"]
    ours, minimal = [], []
    for _ in range(rounds):  # interleaved, so both see the same machine state
        ours.append(await _first_tools_list(_server(env, serve)))
        minimal.append(await _first_tools_list(_server(env, [sys.executable, str(script)])))
    return statistics.median(ours), statistics.median(minimal)


def main() -> None:
    from testbed import start_pgstac

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument(
        "--start-rounds", type=int, default=11
    )  # a start varies by +-10% here: more pairs, a steadier median
    args = parser.parse_args()
    collection, items = landsat_items(args.items)
    with tempfile.TemporaryDirectory() as tmp, start_pgstac(tempfile.gettempdir()) as api:
        api.load([collection], items)
        config = Path(tmp) / "bench.toml"
        config.write_text(
            f'default_catalog = "bench"\n[network]\nallow_private_hosts = true\n'
            f'[[catalogs]]\nid = "bench"\nurl = "{api.url}"\n'
        )
        env = {
            **os.environ,
            "STAC_GDAL_MCP_CONFIG": str(config),
            "STAC_GDAL_MCP_WORKSPACE": tmp,
            "STAC_GDAL_MCP_LOG_LEVEL": "WARNING",
        }
        figures = asyncio.run(search_figures(env, api.url, args.rounds))
        ours_start, minimal_start = asyncio.run(cold_start(env, Path(tmp), args.start_rounds))

    def verdict(ok: bool) -> str:
        return "OK" if ok else "MISSED"

    ratio = figures["ours"] / figures["raw"]
    print(
        f"search_items, 100 items, mcp SDK over stdio: {figures['ours'] * 1000:.1f} ms vs pystac-client "
        f"items()+to_dict() {figures['raw'] * 1000:.1f} ms (median of {args.rounds}) -> {ratio:.2f}x "
        f"(target <= 1.0x): {verdict(ratio <= 1.0)}"
    )
    start_ratio = ours_start / minimal_start
    print(
        f"cold start to first tools/list: {ours_start * 1000:.0f} ms vs one-tool fastmcp "
        f"{minimal_start * 1000:.0f} ms (median of {args.start_rounds}) -> {start_ratio:.2f}x "
        f"(target <= 1.1x): {verdict(start_ratio <= 1.1)}"
    )
    share = figures["summary_bytes"] / figures["full_bytes"]
    print(
        f"summaries {figures['summary_bytes']:,} B vs full items {figures['full_bytes']:,} B -> {share:.1%} "
        f"(target <= 5%): {verdict(share <= 0.05)}"
    )
    kb = figures["tools_compact"] / 1000  # what goes over the wire: the SDK writes compact JSON
    print(
        f"tools/list: {figures['tools']} tools, {kb:.1f} KB as sent (compact JSON; "
        f"{figures['tools_bytes'] / 1000:.1f} KB with json.dumps' spaces) (target <= 20 KB): {verdict(kb <= 20)}"
    )


if __name__ == "__main__":
    main()
