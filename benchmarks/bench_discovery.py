"""Discovery figures (issue: STAC discovery server). Prints ratios against baselines run side by side.

1. Search overhead: `search_items` through the MCP client (in memory) vs the same search with raw
   pystac-client, same pgstac, same run. Target <= 1.2x.
2. Summary size: bytes of `detail="summary"` items vs the full item JSON of the same items. Target <= 10%.
3. Cold start: `stac-gdal-mcp serve` over stdio until the first tools/list is answered, vs a minimal
   fastmcp server with one tool, same run. Target <= 1.3x.

Run: python benchmarks/bench_discovery.py  (needs PostgreSQL/PostGIS: `bash scripts/install-test-deps.sh`)
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from common import MINIMAL_SERVER  # noqa: E402

ROUNDS = 15


def _items():
    import discovery_data

    return discovery_data.build(seed=1)


async def search_overhead(api_url: str, collections: list[str]) -> tuple[float, float, float]:
    from fastmcp import Client
    from pystac_client import Client as StacClient

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    args = dict(collections=collections, bbox=[13.6, 45.8, 14.2, 46.3], datetime="2024-05-01/2024-07-31")
    with tempfile.TemporaryDirectory() as ws:
        settings = load_settings(
            workspace=ws,
            network={"allow_private_hosts": True},
            catalogs=[{"id": "bench", "url": api_url}],
            default_catalog="bench",
        )
        stac = StacClient.open(api_url)
        ours, raw = [], []
        async with Client(build_server(settings)) as client:
            await client.call_tool("search_items", {**args, "limit": 20})  # warm: root + conformance
            stac.search(**args, limit=20, max_items=20).item_collection_as_dict()
            for _ in range(ROUNDS):
                t = time.perf_counter()
                result = await client.call_tool("search_items", {**args, "limit": 20})
                ours.append(time.perf_counter() - t)
                t = time.perf_counter()
                items = stac.search(**args, limit=20, max_items=20).item_collection_as_dict()["features"]
                raw.append(time.perf_counter() - t)
            assert [i["id"] for i in result.structured_content["items"]] == [i["id"] for i in items]
            full = await client.call_tool("search_items", {**args, "limit": 20, "detail": "full"})
        summary_bytes = len(json.dumps(result.structured_content["items"]))
        full_bytes = len(json.dumps(full.structured_content["items"]))
    return statistics.median(ours), statistics.median(raw), summary_bytes / full_bytes


async def _first_tools_list(command: list[str], env: dict | None = None) -> float:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    t = time.perf_counter()
    async with Client(StdioTransport(command[0], command[1:], env=env)) as client:
        await client.list_tools()
        return time.perf_counter() - t


async def cold_start(rounds: int = 7) -> tuple[float, float]:
    import os

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "minimal.py"
        script.write_text(MINIMAL_SERVER)
        env = {**os.environ, "STAC_GDAL_MCP_WORKSPACE": tmp, "STAC_GDAL_MCP_LOG_LEVEL": "WARNING"}
        ours, minimal = [], []
        for _ in range(rounds):  # interleaved, so both see the same machine state
            ours.append(await _first_tools_list([sys.executable, "-m", "stac_gdal_mcp", "serve"], env))
            minimal.append(await _first_tools_list([sys.executable, str(script)], env))
    return statistics.median(ours), statistics.median(minimal)


def main() -> None:
    from testbed import start_pgstac

    collections, items = _items()
    with start_pgstac(tempfile.gettempdir()) as api:
        api.load(collections, items)
        ours, raw, size_ratio = asyncio.run(search_overhead(api.url, [c["id"] for c in collections]))
    ours_start, minimal_start = asyncio.run(cold_start())
    print(
        f"search overhead : search_items via MCP {ours * 1000:.1f} ms vs pystac-client {raw * 1000:.1f} ms "
        f"(median of {ROUNDS}) -> {ours / raw:.2f}x (target <= 1.2x)"
    )
    print(f"summary size    : summaries are {size_ratio:.1%} of the full item JSON (target <= 10%)")
    print(
        f"cold start      : serve -> first tools/list {ours_start * 1000:.0f} ms vs minimal fastmcp "
        f"{minimal_start * 1000:.0f} ms -> {ours_start / minimal_start:.2f}x (target <= 1.3x)"
    )


if __name__ == "__main__":
    main()
