"""Time-series figures at scale: `time_series` (NDVI, cloud-masked, mean) over a year of
a 5-day revisit (73 Sentinel-2-like items) for a field-sized AOI (~600 m x 600 m, crossing a tile
corner), on the Range server with added latency per request.

Prints the seconds, and the bytes the server sent against the bytes of the full-resolution tiles
of the read assets (red, nir, SCL) that intersect the AOI's window - target <= 1.5x.

Every item has its own URLs (hard links of one generated scene: 2048² px, 512 px tiles), so GDAL
never answers a read from its cache.

Run: python benchmarks/bench_timeseries_scale.py [--items 73] [--delay 0.05] [--keep DIR] [--nodelay]
     (--nodelay: the Range server sets TCP_NODELAY; see bench_cloud_scale.py)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from common import dated_copies  # noqa: E402
from measure import peak_rss_mb, reset_peak  # noqa: E402

KIND, COLLECTION = "sentinel-2-l2a", "sentinel-2-l2a"
ORIGIN = (500000.0, 5000000.0)
KEEP = ("red", "nir", "scl")


def base_scene(folder: Path) -> tuple[dict, Path]:
    from stac_gdal_mcp.testing import synthetic

    scene_dir = folder / "BASE"
    cached = scene_dir / "BASE.json"
    if cached.exists():
        return json.loads(cached.read_text()), scene_dir
    item, _ = synthetic.write_scene(
        KIND, folder, "BASE", "2024-01-01T10:00:00Z", size_px=2048, blocksize=512, origin=ORIGIN, seed=3
    )
    return item, scene_dir


def make_items(server, base: dict, scene_dir: Path, count: int) -> tuple[list[dict], list[Path]]:
    """The items, and the scene file behind each of their assets."""
    items = dated_copies(server, base, scene_dir, count, "S2_TS_", KEEP)
    return items, [scene_dir / f"{key}.tif" for _ in items for key in KEEP]


def touched_bytes(path: Path, aoi: list[float]) -> int:
    """Bytes of the full-resolution tiles of `path` intersecting the AOI's window."""
    import rasterio
    from rasterio.warp import transform_bounds
    from rasterio.windows import from_bounds

    with rasterio.open(path) as src:
        th, tw = src.block_shapes[0]
        bounds = transform_bounds("EPSG:4326", src.crs, *aoi, densify_pts=64)
        (r0, r1), (c0, c1) = from_bounds(*bounds, transform=src.transform).toranges()
        rows = range(max(math.floor(r0), 0) // th, math.ceil(min(r1, src.height) / th))
        cols = range(max(math.floor(c0), 0) // tw, math.ceil(min(c1, src.width) / tw))
        return sum(src.block_size(1, r, c) for r in rows for c in cols)


def field_aoi() -> list[float]:
    """~600 m x 600 m around the tile corner at pixel (1024, 1024) of the 10 m grid."""
    from pyproj import Transformer

    to_wgs84 = Transformer.from_crs(32633, 4326, always_xy=True)
    x, y = ORIGIN[0] + 1024 * 10, ORIGIN[1] - 1024 * 10
    lons, lats = to_wgs84.transform([x - 300, x + 300], [y - 300, y + 300])
    return [min(lons), min(lats), max(lons), max(lats)]


def main() -> None:
    from bench_cloud_bytes import local_catalog

    from stac_gdal_mcp.operations.series import time_series
    from testbed import serve_directory

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=73)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--nodelay", action="store_true", help="the Range server sets TCP_NODELAY")
    args = parser.parse_args()
    aoi = field_aoi()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        base, scene_dir = base_scene(folder)
        with serve_directory(folder, delay_s=args.delay, nodelay=args.nodelay) as server:
            items, files = make_items(server, base, scene_dir, args.items)
            core = local_catalog(folder, items)
            server.reset_stats()
            reset_peak()  # the peak of the call, not of making the items
            start = time.perf_counter()
            table = time_series(
                core, aoi, collections=[COLLECTION], datetime="2024-01-01/2024-12-31", max_items=args.items
            )
            seconds = time.perf_counter() - start
            rss = peak_rss_mb()
            sent, requests = server.stats()["bytes"], server.stats()["requests"]
        touched = sum(touched_bytes(f, aoi) for f in files)
    print(
        f"time_series (ndvi, masked, mean) over {args.items} items (5-day revisit), ~600 m AOI, "
        f"{args.delay * 1000:.0f} ms per request{' (TCP_NODELAY)' if args.nodelay else ''}: {seconds:.2f} s ({seconds / args.items * 1000:.0f} ms/item), "
        f"{len(table)} rows, {requests} requests, peak RSS {rss:.0f} MB"
    )
    ratio = sent / touched
    print(
        f"  bytes sent {sent:,} vs intersecting tiles {touched:,} -> {ratio:.2f}x (target <= 1.5x): "
        f"{'OK' if ratio <= 1.5 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
