"""Zonal statistics figures, in one run, on the Range server:

1. bytes read / bytes of the tiles the polygons touch (the full-resolution tiles of red, nir and
   SCL whose area meets a polygon; target <= 1.3), for an NDVI (cloud-masked) run;
2. time / exactextract on the same remote COGs through /vsicurl/ (rasterio opens them, the same
   GDAL options; target <= 1.0), statistics of one band, the same polygons, item after item;
3. time / rasterstats `zonal_stats` (target <= 0.1) on the same remote COGs through /vsicurl/
   (fresh URLs, the same GDAL options less the network guard's proxy), mean and count of the red
   band: the only statistics both compute (rasterstats counts whole pixels by centre or touch,
   not coverage-weighted: times are compared, not values). rasterstats runs in a child process:
   in this one its reads hung (the Range server answers from a thread of this process);
4. peak RSS for --zones polygons x --items items (default 10,000 x 50; target < 1 GB), in a fresh
   child process (measure.py's own peak: VmHWM reset just before the call);
5. a run on a dask LocalCluster (2 worker processes) equal to the threaded one (step 1's call);
6. with --region: region scale (zonal_region), a parcel-like layout of --region-zones fields (and
   a tenth of them) over two tiles either side of the UTM zone 33/34 boundary x --region-days
   days of a season (two items a day), on a dask cluster of a `dask scheduler` and a `dask
   worker` process (2 worker processes, 1 thread each, 127.0.0.1) started here: each run in a
   fresh child process (the server's peak RSS; target < 1 GB and flat), time per zone-item at the
   larger size against the smaller (target: no worse), bytes sent / bytes of the tiles the fields
   touch (target <= 1.3), the output equal to the threaded ordinary call (on at most 10,000
   fields), and exactextract called per item on a subset (at most 10,000 fields x 18 items).

The scene: a Sentinel-2-like item of 2048 x 2048 px at 10 m in 512 px tiles; every item has its own
URLs (hard links), so no read is answered from GDAL's cache. Fields: rotated rectangles of 80-400 m
in clusters (synthetic.field_polygons).

Run: python benchmarks/bench_zonal.py [--zones 10000] [--items 50] [--small-zones 1000] [--small-items 4]
     python benchmarks/bench_zonal.py --region [--region-zones 100000] [--region-days 18]
(`--child spec.json` is the children's entry point.)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from common import child_arguments, in_child  # noqa: E402
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
    from stac_gdal_mcp.operations import zonal
    from stac_gdal_mcp.operations.zonal import stats as zonal_stats

    request = zonal_stats.check(
        core, zones, collections=["sentinel-2-l2a"], max_items=len(items), **arguments
    )
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


def rasterstats_time(frame_in_crs, hrefs: list[str], env: dict, folder: Path) -> float:
    """rasterstats' zonal_stats (mean, count) on each remote COG through /vsicurl/, in a child."""
    zones = folder / f"zones-{uuid.uuid4().hex[:6]}.geojson"
    zones.write_text(frame_in_crs.to_json())
    spec = {"mode": "rasterstats", "zones": str(zones), "hrefs": hrefs, "env": env}
    return child(spec, folder)["seconds"]


def child(spec: dict, folder: Path) -> dict:
    """Run `spec` in a fresh Python process (this script's --child); its JSON answer."""
    return in_child(__file__, spec, folder, f"child {spec['mode']}")


def run_child(spec: dict) -> dict:
    """The work of a child process: rasterstats' time, or our call's time and own peak RSS."""
    if spec["mode"] == "rasterstats":
        import rasterio
        from rasterstats import zonal_stats

        start = time.perf_counter()
        with rasterio.Env(**spec["env"]):
            for href in spec["hrefs"]:
                zonal_stats(spec["zones"], f"/vsicurl/{href}", stats=["mean", "count"])
        return {"seconds": time.perf_counter() - start}
    if spec["mode"] in ("region", "ordinary"):
        from bench_zonal_region import region_child

        return region_child(spec)
    if spec["mode"] == "versus":
        from bench_zonal_region import versus_child

        return versus_child(spec)
    from bench_cloud_bytes import local_catalog

    items = json.loads(Path(spec["items"]).read_text())
    zones = json.loads(Path(spec["zones"]).read_text())
    core = local_catalog(Path(spec["folder"]), items)
    before = current_rss_mb()
    reset_peak()
    frame, seconds = run_ours(core, zones, items, expression="ndvi", stats=["mean", "count"])
    return {"seconds": seconds, "rows": len(frame), "peak": peak_rss_mb(), "before": before}


def cluster_equal(folder: Path, items: list[dict], zones: dict) -> tuple[bool, float, float]:
    """The small NDVI call on a LocalCluster of 2 worker processes and on threads: equal tables?"""
    import logging

    import pandas as pd
    from bench_cloud_bytes import local_catalog
    from distributed import LocalCluster

    core = local_catalog(folder, items)
    threads, threads_s = run_ours(core, zones, items, expression="ndvi", stats=["mean", "count"])
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    ) as cluster:
        core.settings.dask_scheduler = cluster.scheduler_address
        remote, remote_s = run_ours(core, zones, items, expression="ndvi", stats=["mean", "count"])
    try:
        pd.testing.assert_frame_equal(
            pd.DataFrame(remote.to_wkb()), pd.DataFrame(threads.to_wkb()), check_exact=True
        )
        return True, remote_s, threads_s
    except AssertionError:
        return False, remote_s, threads_s


def current_rss_mb() -> float:
    """This process's resident memory now (Linux; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure(args) -> dict:
    """Steps 1-5 on a scene served over HTTP: what report() prints."""
    from bench_cloud_bytes import local_catalog

    from stac_gdal_mcp.processing.access import gdal_env
    from stac_gdal_mcp.testing import synthetic
    from testbed import serve_directory

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
            env = {k: v for k, v in gdal_env(core.settings).items() if "PROXY" not in k}
            rs_s = rasterstats_time(in_crs, [i["assets"]["red"]["href"] for i in fresh], env, folder)
            # 5. a LocalCluster run equal to the threaded one
            items, _ = make_items(server, base, scene_dir, args.small_items)
            equal, cluster_s, threads_s = cluster_equal(folder, items, zones)
            # 4. scale: memory of zones x items, in a fresh process
            items, _ = make_items(server, base, scene_dir, args.items)
            (folder / "big-items.json").write_text(json.dumps(items))
            (folder / "big-zones.json").write_text(json.dumps({"type": "FeatureCollection", "features": big}))
            scale = child(
                {"mode": "scale", "folder": str(folder), "items": str(folder / "big-items.json"),
                 "zones": str(folder / "big-zones.json")},
                folder,
            )  # fmt: skip
    return dict(
        rows=len(frame),
        sent=sent,
        touched=touched,
        ndvi_s=ndvi_s,
        ours_s=ours_s,
        baseline_s=baseline_s,
        rs_s=rs_s,
        scale=scale,
        equal=equal,
        cluster_s=cluster_s,
        threads_s=threads_s,
    )


def report(
    args, *, rows, sent, touched, ndvi_s, ours_s, baseline_s, rs_s, scale, equal, cluster_s, threads_s
):
    """The figures of measure(), each against its target."""
    n, k = args.small_zones, args.small_items
    print(f"zonal_stats, {n} fields in clusters over a {SIZE} px scene (512 px tiles), {k} items:")
    ratio = sent / touched
    print(
        f"  1. ndvi (masked): {ndvi_s:.2f} s, {rows} rows; bytes sent {sent:,} / tiles the polygons touch "
        f"{touched:,} = {ratio:.2f}x (target <= 1.3): {'OK' if ratio <= 1.3 else 'MISSED'}"
    )
    ratio = ours_s / baseline_s
    print(
        f"  2. red, unmasked: {ours_s:.2f} s vs exactextract through /vsicurl/ {baseline_s:.2f} s = {ratio:.2f}x "
        f"(target <= 1.0): {'OK' if ratio <= 1.0 else 'MISSED'}"
    )
    ratio = ours_s / rs_s
    print(
        f"  3. vs rasterstats zonal_stats through /vsicurl/ (mean, count; a child process) {rs_s:.2f} s = "
        f"{ratio:.3f}x (target <= 0.1): {'OK' if ratio <= 0.1 else 'MISSED'}"
    )
    rss = scale["peak"]
    print(
        f"  4. {args.zones:,} fields x {args.items} items (ndvi, masked), a fresh process: {scale['seconds']:.1f} s, "
        f"{scale['rows']:,} rows, peak RSS {rss:.0f} MB, of which {scale['before']:.0f} MB resident before the "
        f"call (target < 1024): {'OK' if rss < 1024 else 'MISSED'}"
    )
    print(
        f"  5. LocalCluster (2 worker processes) {cluster_s:.2f} s vs threads {threads_s:.2f} s, "
        f"tables {'equal: OK' if equal else 'DIFFERENT: MISSED'}"
    )


def main() -> None:
    parser = child_arguments(
        __doc__, zones=10_000, items=50, small_zones=1000, small_items=4, region_zones=100_000, region_days=18
    )
    parser.add_argument("--region", action="store_true", help="region scale only (step 6)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(json.loads(args.child.read_text()))))
        return
    if args.region:
        from bench_zonal_region import region_main

        region_main(args.region_zones, args.region_days, child)
        return
    report(args, **measure(args))


if __name__ == "__main__":
    main()
