"""Zonal statistics figures (issue 20), in one run, on the Range server:

1. bytes read / bytes of the tiles the polygons touch (the full-resolution tiles of red, nir and
   SCL whose area meets a polygon; target <= 1.3), for an NDVI (cloud-masked) run;
2. time / exactextract on the same remote COGs through /vsicurl/ (rasterio opens them, the same
   GDAL options; target <= 1.0), statistics of one band, the same polygons, item after item;
3. time / rasterstats (target <= 0.1), when rasterstats is installed (else a note);
4. peak RSS for --zones polygons x --items items (default 10,000 x 50; target < 1 GB).

The scene: a Sentinel-2-like item of 2048 x 2048 px at 10 m in 512 px tiles; every item has its own
URLs (hard links), so no read is answered from GDAL's cache. Fields: rotated rectangles of 80-400 m
in clusters (synthetic.field_polygons).

Run: python benchmarks/bench_zonal.py [--zones 10000] [--items 50] [--small-zones 1000] [--small-items 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from measure import peak_rss_mb, reset_peak  # noqa: E402

EPSG, ORIGIN, SIZE = 32633, (500000.0, 5000000.0), 2048
SCENE = (ORIGIN[0], ORIGIN[1] - SIZE * 10, ORIGIN[0] + SIZE * 10, ORIGIN[1])
KEEP = ("red", "nir", "scl")


def base_scene(folder: Path) -> tuple[dict, Path]:
    from stac_gdal_mcp.testing import synthetic

    item, _ = synthetic.write_scene(
        "sentinel-2-l2a",
        folder,
        "BASE",
        "2024-01-01T10:00:00Z",
        size_px=SIZE,
        blocksize=512,
        origin=ORIGIN,
        seed=3,
    )
    return item, folder / "BASE"


def make_items(server, base: dict, scene_dir: Path, count: int) -> tuple[list[dict], dict]:
    """`count` items of the base scene at 5-day steps, each asset under its own URL."""
    from datetime import UTC, datetime, timedelta

    start = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    items, files = [], {}
    for i in range(count):
        item = json.loads(json.dumps(base))
        item["id"] = f"S2_ZS_{i:03d}"
        item["properties"]["datetime"] = (start + timedelta(days=5 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assets = {}
        for key in KEEP:
            name = f"{key}-{uuid.uuid4().hex[:8]}.tif"
            (server.directory / name).hardlink_to(scene_dir / f"{key}.tif")
            assets[key] = dict(base["assets"][key], href=f"{server.url}/{name}")
            files.setdefault(item["id"], {})[key] = f"{server.url}/{name}"
        item["assets"] = assets
        items.append(item)
    return items, files


def touched_bytes(path: Path, polygons) -> int:
    """Bytes of the full-resolution tiles of `path` whose area meets a polygon (in its CRS)."""
    import rasterio
    import shapely
    from shapely.geometry import box

    with rasterio.open(path) as src:
        th, tw = src.block_shapes[0]
        tree = shapely.STRtree(polygons)
        total = 0
        for r in range(-(-src.height // th)):
            for c in range(-(-src.width // tw)):
                x0, y0 = src.transform * (c * tw, r * th)
                x1, y1 = src.transform * (min((c + 1) * tw, src.width), min((r + 1) * th, src.height))
                if len(tree.query(box(x0, y1, x1, y0), predicate="intersects")):
                    total += src.block_size(1, r, c)
        return total


def projected(features):
    import geopandas

    return geopandas.GeoDataFrame.from_features(features, crs="EPSG:4326").to_crs(EPSG)


def run_ours(core, zones, items, **arguments):
    from stac_gdal_mcp.processing import zonal

    request = zonal.check(core, zones, collections=["sentinel-2-l2a"], max_items=len(items), **arguments)
    start = time.perf_counter()
    frame = zonal.run(core, request)
    return frame, time.perf_counter() - start


def exactextract_vsicurl(core, frame_in_crs, hrefs: list[str], ops) -> float:
    """exactextract on each remote COG through /vsicurl/ (rasterio, our GDAL options), one by one."""
    import rasterio
    from exactextract import exact_extract

    from stac_gdal_mcp.processing.access import gdal_env

    start = time.perf_counter()
    with rasterio.Env(**gdal_env(core.settings)):
        for href in hrefs:
            with rasterio.open(f"/vsicurl/{href}") as src:
                exact_extract(src, frame_in_crs, ops, output="pandas")
    return time.perf_counter() - start


def rasterstats_time(frame_in_crs, paths: list[str], stats) -> float | None:
    try:
        from rasterstats import zonal_stats
    except ImportError:
        return None
    start = time.perf_counter()
    for path in paths:
        zonal_stats(frame_in_crs, f"/vsicurl/{path}", stats=stats)
    return time.perf_counter() - start


def current_rss_mb() -> float:
    """This process's resident memory now (Linux; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> None:
    from bench_cloud_bytes import local_catalog

    from stac_gdal_mcp.testing import synthetic
    from testbed import serve_directory

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zones", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--small-zones", type=int, default=1000)
    parser.add_argument("--small-items", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base, scene_dir = base_scene(folder)
        small = synthetic.field_polygons(EPSG, SCENE, args.small_zones, seed=5, clusters=12)
        big = synthetic.field_polygons(EPSG, SCENE, args.zones, seed=6, clusters=40)
        zones = {"type": "FeatureCollection", "features": small}
        in_crs = projected(small)
        with serve_directory(folder) as server:
            # 1. bytes of an NDVI (masked) run against the tiles the polygons touch
            items, files = make_items(server, base, scene_dir, args.small_items)
            core = local_catalog(folder, items)
            server.reset_stats()
            frame, ndvi_s = run_ours(core, zones, items, expression="ndvi", stats=["mean", "count"])
            sent = server.stats()["bytes"]
            touched = args.small_items * sum(
                touched_bytes(scene_dir / f"{k}.tif", list(in_crs.geometry)) for k in KEEP
            )
            # 2. one band, unmasked: ours against exactextract through /vsicurl/ (fresh URLs each)
            items, files = make_items(server, base, scene_dir, args.small_items)
            core = local_catalog(folder, items)
            _, ours_s = run_ours(
                core, zones, items, expression="red", stats=["mean", "count"], mask_clouds=False
            )
            fresh, _ = make_items(server, base, scene_dir, args.small_items)
            hrefs = [i["assets"]["red"]["href"] for i in fresh]
            baseline_s = exactextract_vsicurl(core, in_crs, hrefs, ["mean", "count"])
            fresh, _ = make_items(server, base, scene_dir, args.small_items)
            rs_s = rasterstats_time(in_crs, [i["assets"]["red"]["href"] for i in fresh], ["mean", "count"])
            # 4. scale: memory of zones x items
            items, _ = make_items(server, base, scene_dir, args.items)
            core = local_catalog(folder, items)
            before = current_rss_mb()
            reset_peak()
            frame_big, big_s = run_ours(
                core,
                {"type": "FeatureCollection", "features": big},
                items,
                expression="ndvi",
                stats=["mean", "count"],
            )
            rss = peak_rss_mb()
    n, k = args.small_zones, args.small_items
    print(f"zonal_stats, {n} fields in clusters over a {SIZE} px scene (512 px tiles), {k} items:")
    ratio = sent / touched
    print(
        f"  1. ndvi (masked): {ndvi_s:.2f} s, {len(frame)} rows; bytes sent {sent:,} / tiles the polygons touch "
        f"{touched:,} = {ratio:.2f}x (target <= 1.3): {'OK' if ratio <= 1.3 else 'MISSED'}"
    )
    ratio = ours_s / baseline_s
    print(
        f"  2. red, unmasked: {ours_s:.2f} s vs exactextract through /vsicurl/ {baseline_s:.2f} s = {ratio:.2f}x "
        f"(target <= 1.0): {'OK' if ratio <= 1.0 else 'MISSED'}"
    )
    if rs_s is None:
        print("  3. rasterstats is not installed (not in the lock): time / rasterstats not measured")
    else:
        ratio = ours_s / rs_s
        print(
            f"  3. vs rasterstats {rs_s:.2f} s = {ratio:.3f}x (target <= 0.1): {'OK' if ratio <= 0.1 else 'MISSED'}"
        )
    print(
        f"  4. {args.zones:,} fields x {args.items} items (ndvi, masked): {big_s:.1f} s, {len(frame_big):,} rows, "
        f"peak RSS {rss:.0f} MB, of which {before:.0f} MB resident before the call (the generated scene, the "
        f"earlier steps) (target < 1024): {'OK' if rss < 1024 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
