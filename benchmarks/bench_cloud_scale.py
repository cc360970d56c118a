"""Cloud-cover figures at scale, on the Range server with added latency per request.

1. 24 items at 50 ms per request: one by one (24 calls) / one call. Target >= 8x.
2. cloud_cover_stats / odc.stac.load + numpy count, each with its defaults (odc-stac: no `pool`,
   so it reads the items one after another; ours: limits.max_concurrency), same 24 items, same
   AOI and resolution. Target <= 0.5x.
3. Scale: cloud_cover_stats over 24, 100, 500 items (fresh URLs of one generated 2048² SCL COG,
   512 px tiles), each size in its own process: seconds per item (target: flat) and peak RSS
   (of that process, during the call: benchmarks/measure.py).

Run: python benchmarks/bench_cloud_scale.py [--delay 0.05] [--sizes 24,100,500] [--concurrency N] [--remote]
     [--nodelay]
     (--remote: figures 1 and 2 again with the Range server in a process of its own;
      --nodelay: the Range server sets TCP_NODELAY, so a short answer is not held back ~40 ms by
      Nagle's algorithm and the client's delayed ACK - every request then costs the added delay)
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_cloud_bytes import make_scl  # noqa: E402
from bench_cloud_latency import AOI, SMALL, make_items, refs  # noqa: E402
from bench_cloud_vs_odc import odc_scl  # noqa: E402
from common import arguments, data_folder  # noqa: E402
from measure import peak_rss_mb, reset_peak  # noqa: E402

ROUND_TRIPS = 3  # per item, one after the other: HEAD, the header (16 KB), the AOI's tiles


def make_core(folder: Path, items: list[dict], concurrency: int | None):
    from stac_gdal_mcp.core import Core
    from stac_gdal_mcp.settings import load_settings

    path = folder / f"items-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    limits = {"max_items": 10_000}
    if concurrency:
        limits["max_concurrency"] = concurrency
    settings = load_settings(
        workspace=folder / "workspace",
        network={"allow_private_hosts": True},
        catalogs=[{"id": "bench", "path": str(path)}],
        default_catalog="bench",
        limits=limits,
    )
    return Core(settings)


def odc_defaults(items: list[dict]) -> list[float | None]:
    """What a notebook user writes: odc.stac.load with its defaults over the AOI, then counts."""
    import numpy as np

    layers, inside = odc_scl(items, AOI)
    out = []
    for scl in layers:
        values = scl[inside]
        n = int((values != 0).sum())
        out.append(float(np.isin(values, (8, 9)).sum() / n) if n else None)
    return out


def one_size(folder: Path, count: int, delay: float, concurrency: int | None, nodelay: bool = False) -> dict:
    from stac_gdal_mcp.operations.cloud import cloud_cover_stats
    from testbed import serve_directory

    scl = make_scl(folder / f"scl{SMALL}.tif", size=SMALL, seed=7)
    with serve_directory(folder, delay_s=delay, nodelay=nodelay) as server:
        items, _ = make_items(server, scl, count, f"S2_SCALE{count}_")
        core = make_core(folder, items, concurrency)
        server.reset_stats()
        reset_peak()
        start = time.perf_counter()
        result = cloud_cover_stats(core, AOI, items=refs(items), catalog="bench", max_items=count)
        seconds = time.perf_counter() - start
        assert result.failed == 0 and result.returned == count, result.notes
        return {
            "items": count,
            "seconds": seconds,
            "requests": server.stats()["requests"],
            "peak_rss_mb": peak_rss_mb(),
            "concurrency": core.settings.limits.max_concurrency,
        }


SERVE = """
import sys, time
sys.path.insert(0, {tests!r})
from testbed import serve_directory
with serve_directory({folder!r}, delay_s={delay!r}, nodelay={nodelay!r}) as server:
    print(server.url, flush=True)
    sys.stdin.read()
"""


class _Remote:
    """The Range server in a process of its own (as a remote server would be): `url`, `directory`."""

    def __init__(self, folder: Path, delay: float, nodelay: bool = False):
        code = SERVE.format(
            tests=str(HERE.parent / "tests"), folder=str(folder), delay=delay, nodelay=nodelay
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.url = self.process.stdout.readline().strip()
        self.directory = folder.resolve()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.process.stdin.close()
        self.process.wait(timeout=10)


def latency_figures(
    folder: Path, delay: float, concurrency: int | None, remote: bool = False, nodelay: bool = False
) -> None:
    from stac_gdal_mcp.operations.cloud import cloud_cover_stats
    from testbed import serve_directory

    scl = make_scl(folder / f"scl{SMALL}.tif", size=SMALL, seed=7)
    serving = (
        _Remote(folder, delay, nodelay) if remote else serve_directory(folder, delay_s=delay, nodelay=nodelay)
    )
    with serving as server:
        # imports and GDAL's set-up, not counted for either side: one call of as many items as
        # reader threads (each thread's first open builds its PROJ context, ~20 ms, once per
        # process: a running server has paid it after its first call)
        warm_core = make_core(folder, [], concurrency)
        warm, _ = make_items(server, scl, warm_core.settings.limits.max_concurrency, "S2_WARM_")
        cloud_cover_stats(make_core(folder, warm, concurrency), AOI, items=refs(warm), catalog="bench")
        odc_defaults(warm[:2])

        batch, _ = make_items(server, scl, 24, "S2_BATCH_")
        single, _ = make_items(server, scl, 24, "S2_ONE_")
        theirs, _ = make_items(server, scl, 24, "S2_ODC_")
        core = make_core(folder, batch + single, concurrency)
        start = time.perf_counter()
        result = cloud_cover_stats(core, AOI, items=refs(batch), catalog="bench")
        together = time.perf_counter() - start
        start = time.perf_counter()
        rows = [cloud_cover_stats(core, AOI, items=[ref], catalog="bench").items[0] for ref in refs(single)]
        one_by_one = time.perf_counter() - start
        start = time.perf_counter()
        baseline = odc_defaults(theirs)
        odc_s = time.perf_counter() - start
    assert result.failed == 0 and all(r.error is None for r in rows)
    ours = {r.item_id[-2:]: r.cloud_fraction for r in result.items}
    assert all(abs(ours[f"{i:02d}"] - b) < 1e-3 for i, b in enumerate(baseline)), (ours, baseline)
    ratio = one_by_one / together
    print(
        f"24 items, {delay * 1000:.0f} ms per request (Range server in "
        f"{'its own process' if remote else 'this process'}{', TCP_NODELAY' if nodelay else ''}), "
        "limits.max_concurrency="
        f"{core.settings.limits.max_concurrency}: one call {together:.2f} s, one by one {one_by_one:.2f} s "
        f"-> {ratio:.1f}x (target >= 8x): {'OK' if ratio >= 8 else 'MISSED'}"
    )
    # the one call cannot beat its latency floor: each item is 3 round trips one after the other
    # (GDAL's HEAD, the header, then the AOI's tiles as parallel ranges), items in waves of
    # max_concurrency; one by one pays the same round trips plus each call's own overhead
    workers = core.settings.limits.max_concurrency
    floor = math.ceil(24 / workers) * ROUND_TRIPS * delay
    print(
        f"  ceiling: one call >= {math.ceil(24 / workers)} waves x {ROUND_TRIPS} round trips x "
        f"{delay * 1000:.0f} ms = {floor:.2f} s -> at most {one_by_one / floor:.1f}x with this one-by-one time"
        + ("" if nodelay else " (a short answer may also wait ~40 ms for a delayed ACK: see --nodelay)")
    )
    ratio = together / odc_s
    print(
        f"  vs odc.stac.load + numpy with its defaults {odc_s:.2f} s -> {ratio:.2f}x (target <= 0.5x): "
        f"{'OK' if ratio <= 0.5 else 'MISSED'}"
    )


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--sizes", default="24,100,500")
    parser.add_argument("--concurrency", type=int, help="limits.max_concurrency (default: the setting's)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one size, in this process
    parser.add_argument("--remote", action="store_true", help="also with the Range server in its own process")
    parser.add_argument("--nodelay", action="store_true", help="the Range server sets TCP_NODELAY")
    args = parser.parse_args()
    with data_folder(args.keep) as folder:
        if args.one:
            print(json.dumps(one_size(folder, args.one, args.delay, args.concurrency, args.nodelay)))
            return
        latency_figures(folder, args.delay, args.concurrency, nodelay=args.nodelay)
        if args.remote:
            latency_figures(folder, args.delay, args.concurrency, remote=True, nodelay=args.nodelay)
        rows = []
        for size in [int(s) for s in args.sizes.split(",")]:
            command = [sys.executable, __file__, "--one", str(size), "--delay", str(args.delay)]
            command += ["--keep", str(folder)]
            if args.concurrency:
                command += ["--concurrency", str(args.concurrency)]
            if args.nodelay:
                command += ["--nodelay"]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
        base = rows[0]["seconds"] / rows[0]["items"]
        for row in rows:
            per_item = row["seconds"] / row["items"]
            print(
                f"scale: {row['items']:4d} items in {row['seconds']:6.2f} s = {per_item * 1000:5.1f} ms/item "
                f"({per_item / base:.2f}x of the first), {row['requests']} requests, "
                f"peak RSS {row['peak_rss_mb']:.0f} MB"
            )


if __name__ == "__main__":
    main()
