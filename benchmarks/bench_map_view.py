"""The map's view in tool results: what it costs a host that declares MCP Apps.

The calls of tests/ui_fixtures/ (a search, a cloud_cover_stats ranking, a preview with its
quicklook, a time series with its chart) on the bundled sample catalog, through one server, called
in turn by a client without the extension (the baseline: no view) and by one that declares
`io.modelcontextprotocol/ui` (the result carries the view in `_meta`; a ranking's view has its
scenes' footprints, searched by the server). Side by side per tool: the median latency over
rounds and its ratio, the result's bytes (JSON), the view's bytes, and what the view would weigh
with its images inlined as `data:` URIs instead of named by their image block.

One call first warms the caches (not counted), so the latencies are the server's own work plus the
view; the machine's other load varies: compare medians, not one pair.

Run: python benchmarks/bench_map_view.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from fastmcp import Client
from fastmcp.apps import UI_EXTENSION_ID
from mcp.client.extension import advertise

from stac_gdal_mcp import Session
from stac_gdal_mcp.maps import build_map_view
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.server.map_app import VIEW_META
from stac_gdal_mcp.settings import load_settings

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "ui_fixtures"
CALLS = ("search_items", "cloud_cover_stats", "preview", "time_series")


def size(value) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


async def measure(rounds: int, workspace: Path) -> None:
    with Session(load_settings(default_catalog="sample", workspace=workspace)) as session:
        mcp = build_server(session=session)
        async with Client(mcp) as plain, Client(mcp, extensions=[advertise(UI_EXTENSION_ID)]) as host:
            print(
                f"{'call':18} {'baseline ms':>11} {'host ms':>8} {'ratio':>6} {'result B':>9} {'view B':>7} {'inlined B':>9}"
            )
            for name in CALLS:
                call = json.loads((FIXTURES / f"{name}.json").read_text())
                await plain.call_tool_mcp(call["tool"], call["arguments"])  # warm the caches, not counted
                times: dict[str, list[float]] = {"baseline": [], "host": []}
                for _ in range(rounds):
                    for label, client in (("baseline", plain), ("host", host)):
                        start = time.perf_counter()
                        result = await client.call_tool_mcp(call["tool"], call["arguments"])
                        times[label].append(time.perf_counter() - start)
                dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                view = dumped["_meta"][VIEW_META]
                inlined = build_map_view([{**call, "result": dumped}])  # the footprints' search aside
                base, with_view = (statistics.median(times[k]) * 1000 for k in ("baseline", "host"))
                print(
                    f"{name:18} {base:11.1f} {with_view:8.1f} {with_view / base:6.2f} "
                    f"{size(dumped):9d} {size(view):7d} {size(inlined):9d}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(measure(args.rounds, Path(tmp)))


if __name__ == "__main__":
    main()
