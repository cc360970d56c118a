"""Cheap calls while heavy jobs run: 20 composites and time series on the bundled
sample catalog, beside two busy loops, while list_catalogs and search_items are called in turn
every 50 ms; the latency of those calls, the event loop's lag (a 5 ms sleep's overshoot) and
CPython's full (generation 2) collections, with `tools/jobs.responsive` (the server's setting
while jobs run) against the interpreter's defaults, run after run, side by side.

Each run is a fresh process (server and client in one, as in tests/test_load.py). The machine's
other load varies: compare the medians over rounds, not one pair.

Run: python benchmarks/bench_cheap_calls.py [--rounds 3] [--jobs 20] [--busy 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

RUN = r"""
import asyncio, gc, json, statistics, subprocess, sys, tempfile, threading, time
from pathlib import Path
from fastmcp import Client
import stac_gdal_mcp
from stac_gdal_mcp.server import build_server_parts
from stac_gdal_mcp.server.tools import jobs as server_jobs
from stac_gdal_mcp.settings import load_settings

JOBS, BUSY, BASELINE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "baseline"
if BASELINE:  # responsive() then keeps CPython's defaults (thresholds 700, 10, 10; 5 ms)
    server_jobs.FULL_COLLECTION_EVERY, server_jobs.SWITCH_INTERVAL_S = 10, 0.005
AOI = [13.59, 45.915, 13.635, 45.95]
CHEAP = [("list_catalogs", {}),
         ("search_items", {"catalog": "sample", "collections": ["sentinel-2-l2a"], "bbox": AOI})]
full, started = [], {}

def on_gc(phase, info):
    if info["generation"] == 2:
        if phase == "start":
            started[threading.get_ident()] = time.monotonic()
        else:
            full.append(time.monotonic() - started.pop(threading.get_ident(), time.monotonic()))

def job(i):
    search, aoi = {"collections": ["sentinel-2-l2a"]}, [AOI[0], AOI[1], AOI[2] - i * 0.0005, AOI[3]]
    if i % 2:
        return "time_series", {"aoi": aoi, "search": search}
    return "composite", {"aoi": aoi, "search": search, "bands": ["red", "green", "blue"], "quicklook": False}

async def main():
    sample = Path(stac_gdal_mcp.__file__).parent / "data/sample/catalog.json"
    settings = load_settings(workspace=Path(tempfile.mkdtemp()) / "ws", builtin_catalogs=False,
                             default_catalog="sample", catalogs=[{"id": "sample", "path": str(sample)}])
    parts = build_server_parts(settings)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BUSY)]
    latencies, lags, done = [], [], False
    async def monitor():
        while not done:
            t = time.monotonic()
            await asyncio.sleep(0.005)
            lags.append(time.monotonic() - t - 0.005)
    try:
        async with Client(parts.mcp) as client:
            await client.call_tool(*CHEAP[0])
            gc.callbacks.append(on_gc)
            lag = asyncio.create_task(monitor())
            t0 = time.monotonic()
            tasks = [asyncio.create_task(client.call_tool(*job(i), raise_on_error=False)) for i in range(JOBS)]
            await asyncio.sleep(0.5)
            while not all(t.done() for t in tasks):
                t = time.monotonic()
                assert not (await client.call_tool(*CHEAP[len(latencies) % 2])).is_error
                latencies.append(time.monotonic() - t)
                await asyncio.sleep(0.05)
            failed = sum(r.is_error for r in await asyncio.gather(*tasks))
            wall, done = time.monotonic() - t0, True
            await lag
    finally:
        for b in busy:
            b.kill()
    q = lambda xs: statistics.quantiles(xs, n=100, method="inclusive")[98]
    print(json.dumps({"calls": len(latencies), "p50": statistics.median(latencies), "p99": q(latencies),
                      "max": max(latencies), "over_1s": sum(x > 1 for x in latencies), "lag_max": max(lags),
                      "full_gcs": len(full), "full_gc_s": sum(full), "jobs_failed": failed, "wall": wall}))

asyncio.run(main())
"""


def run(kind: str, jobs: int, busy: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(jobs), str(busy), kind], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the runs")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"baseline": [], "responsive": []}
    print("run        calls  p50 ms  p99 ms  max ms  >1 s  loop lag max ms  full GCs (s)  jobs wall s")
    for _ in range(args.rounds):
        for kind in results:
            r = run(kind, args.jobs, args.busy)
            results[kind].append(r)
            print(
                f"{kind:<10} {r['calls']:>5} {r['p50'] * 1e3:>7.0f} {r['p99'] * 1e3:>7.0f} {r['max'] * 1e3:>7.0f}"
                f" {r['over_1s']:>5} {r['lag_max'] * 1e3:>16.0f} {r['full_gcs']:>4} ({r['full_gc_s']:.1f})"
                f" {r['wall']:>12.1f}" + (f"  {r['jobs_failed']} jobs FAILED" if r["jobs_failed"] else "")
            )
    for key in ("p99", "max", "wall"):
        base, new = (statistics.median(r[key] for r in results[k]) for k in results)
        print(f"median {key}: baseline {base:.2f} s, responsive {new:.2f} s, ratio {base / new:.1f}x")


if __name__ == "__main__":
    main()
