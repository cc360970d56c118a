"""Cloud-cover figures (issue: cloud cover inside the AOI). Wall time of cloud_cover_stats over
24 items whose masks sit behind 50 ms of added latency per HTTP request (the Range server
sleeps before each answer), against the same 24 items measured one by one (24 calls of one
item each) - target: >= 4x faster.

Each item has its own SCL COG (2048 x 2048, 512 px tiles, hard links of one generated file under
fresh names, so no read is served from GDAL's cache). Items sit in a local ItemCollection.

Run: python benchmarks/bench_cloud_latency.py [--keep DIR] [--delay 0.05] [--items 24]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cloud_bytes import ORIGIN, aoi_5km, fresh_href, local_catalog, make_scl, scene_item  # noqa: E402
from common import arguments, data_folder  # noqa: E402

SMALL = 2048  # SCL pixels per side of each item
COLLECTION = "sentinel-2-l2a"


def make_items(server, scl: Path, count: int, prefix: str) -> tuple[list[dict], list[str]]:
    """`count` items, each with a fresh URL for the SCL; returns (items, served paths)."""
    items, keys = [], []
    for i in range(count):
        href, key = fresh_href(server, scl)
        items.append(
            scene_item(f"{prefix}{i:02d}", href, size=SMALL, when=f"2024-07-{1 + i % 28:02d}T10:00:00Z")
        )
        keys.append(key)
    return items, keys


def refs(items: list[dict]) -> list[dict]:
    return [{"collection_id": COLLECTION, "item_id": item["id"]} for item in items]


AOI = aoi_5km(ORIGIN[0] + 400 * 20, ORIGIN[1] - 400 * 20)  # crosses the tile corner at (512, 512)


def main() -> None:
    from stac_gdal_mcp.operations.cloud import cloud_cover_stats
    from testbed import serve_directory

    parser = arguments(__doc__)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds added to every HTTP request")
    parser.add_argument("--items", type=int, default=24)
    args = parser.parse_args()
    with data_folder(args.keep) as folder:
        scl = make_scl(folder / f"scl{SMALL}.tif", size=SMALL, seed=7)
        with serve_directory(folder, delay_s=args.delay) as server:
            batch, _ = make_items(server, scl, args.items, "S2_BATCH_")
            single, _ = make_items(server, scl, args.items, "S2_ONE_")
            warm, _ = make_items(server, scl, 8, "S2_WARM_")
            core = local_catalog(folder, batch + single + warm)
            concurrency = core.settings.limits.max_concurrency
            # imports and each reader thread's GDAL set-up (once per process), counted for neither side
            cloud_cover_stats(core, AOI, items=refs(warm[:concurrency]), catalog="bench")

            server.reset_stats()
            start = time.perf_counter()
            result = cloud_cover_stats(core, AOI, items=refs(batch), catalog="bench")
            together = time.perf_counter() - start
            requests_together = server.stats()["requests"]
            assert result.failed == 0 and result.returned == args.items, result.notes

            server.reset_stats()
            start = time.perf_counter()
            rows = [
                cloud_cover_stats(core, AOI, items=[ref], catalog="bench").items[0] for ref in refs(single)
            ]
            one_by_one = time.perf_counter() - start
            requests_single = server.stats()["requests"]
            assert all(r.error is None for r in rows)
            assert [r.cloud_fraction for r in rows] == [r.cloud_fraction for r in result.items]
        print(
            f"{args.items} items, {args.delay * 1000:.0f} ms added per HTTP request, "
            f"limits.max_concurrency={concurrency}"
        )
        print(f"  one call, {args.items} items:   {together:6.2f} s  ({requests_together} requests)")
        print(f"  {args.items} calls, one item each: {one_by_one:6.2f} s  ({requests_single} requests)")
        ratio = one_by_one / together
        print(
            f"one by one / together = {ratio:.1f}x faster (target >= 4x): {'OK' if ratio >= 4 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
