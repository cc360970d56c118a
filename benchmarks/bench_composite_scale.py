"""Composite figures at scale: `composite` (median, cloud-masked) of --items items written
as a COG, against odc.stac.load + xarray median written with rioxarray, in the same run; each side
in its own process, so its peak RSS is its own (during the run: benchmarks/measure.py).
Optionally (--distributed) the same composite on a dask.distributed LocalCluster of 2 worker
processes (as many threads in all as the threaded side), checked pixel for pixel against the
threaded one.

Both sides compute the same thing: the items' red/green/blue, scaled to reflectance with the
items' raster:bands scale/offset, NaN where SCL says nodata/defective/shadow/cloud/cirrus or the
band is 0, the per-pixel median over the solar days, written as a DEFLATE COG (float predictor,
512 px blocks, average overviews, compression on all cores). Both load in dask chunks of the same
size (composite.TILE) on dask's threaded scheduler with the same number of threads
(limits.max_concurrency's default). Baselines:

- odc: what a notebook writes - one lazy odc-stac load, `.median("time")`,
  `.rio.to_raster(driver="COG")` (the whole median computed, then written). dask's threaded
  scheduler reads every day's chunks before reducing: ~4.8 GB at 2048 px, so past ~3000 px it
  does not fit in --max-rss-gb and is stopped (the figure says so);
- odc-windows: the same load and median computed --window px at a time (`isel`: dask reads only
  that window's chunks), put into one array and written with rioxarray: the baseline at sizes
  where `odc` cannot run (run by default when --size > --window);
- odc-streamed: rioxarray's dask-aware write (GTiff with lock=, then a COG of it); it holds as
  much as `odc` (dask's order again), kept for the record.

Where two outputs both have a value they are compared (same grid: max abs difference).

The items are hard links of one generated Sentinel-2-like scene (--size px per side, 512 px
tiles, 10 m) under fresh URLs on the Range server (no added latency unless --delay); the AOI is
the whole scene, so the output is about --size x --size px. --keep DIR caches the scene
(generating the 10240 px one takes ~5 min).

Run: python benchmarks/bench_composite_scale.py [--size 2048] [--items 20] [--distributed] [--keep DIR]
     python benchmarks/bench_composite_scale.py --size 10240 --distributed --keep /tmp/bench-composite
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from measure import peak_rss_mb, reset_peak  # noqa: E402

ORIGIN = (500000.0, 5000000.0)
BANDS = ("red", "green", "blue")
NOT_CLEAR = [0, 1, 3, 8, 9, 10]  # SCL: nodata, defective, shadow, cloud medium/high, cirrus
WORKERS = 8  # threads on both sides: limits.max_concurrency's default


def base_scene(folder: Path, size: int) -> tuple[dict, Path]:
    from stac_gdal_mcp.testing import synthetic

    name = f"BASE{size}"
    cached = folder / name / f"{name}.json"
    if cached.exists():
        return json.loads(cached.read_text()), folder / name
    item, _ = synthetic.write_scene(
        "sentinel-2-l2a", folder, name, "2024-06-01T10:00:00Z", size_px=size, blocksize=512, origin=ORIGIN
    )
    return item, folder / name


def items_on(server, base: dict, scene_dir: Path, count: int) -> list[dict]:
    start = datetime(2024, 6, 1, 10, 0, tzinfo=UTC)
    out = []
    for i in range(count):
        item = json.loads(json.dumps(base))
        item["id"] = f"S2_COMP_{i:03d}"
        item["properties"]["datetime"] = (start + timedelta(days=5 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assets = {}
        for key in (*BANDS, "scl"):
            link = f"{key}-{uuid.uuid4().hex[:8]}.tif"
            (server.directory / link).hardlink_to(scene_dir / f"{key}.tif")
            assets[key] = dict(base["assets"][key], href=f"{server.url}/{link}")
        item["assets"] = assets
        out.append(item)
    return out


def aoi_of(item: dict) -> list[float]:
    b = item["bbox"]
    pad = 1e-4  # inside the scene
    return [b[0] + pad, b[1] + pad, b[2] - pad, b[3] - pad]


def run_ours(folder: Path, items: list[dict], scheduler: str | None) -> dict:
    from stac_gdal_mcp.core import Core
    from stac_gdal_mcp.operations.composite import composite, save_array
    from stac_gdal_mcp.settings import load_settings

    path = folder / f"items-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    extra = {"dask_scheduler": scheduler} if scheduler else {}
    settings = load_settings(
        workspace=folder / "workspace",
        network={"allow_private_hosts": True},
        catalogs=[{"id": "bench", "path": str(path)}],
        default_catalog="bench",
        limits={"max_output_pixels": 400_000_000, "max_concurrency": WORKERS, "job_timeout_s": 36_000},
        **extra,
    )
    core = Core(settings)
    start = time.perf_counter()
    array = composite(
        core, aoi_of(items[0]), bands=list(BANDS), collections=["sentinel-2-l2a"], max_items=len(items)
    )
    record = save_array(core, array)
    return {
        "seconds": time.perf_counter() - start,
        "file": str(core.outputs.path(record.id)),
        "items": array.attrs["items"],
        "valid_fraction": array.attrs["valid_fraction"],
    }


def baseline_median(items: list[dict]):
    """The baselines' lazy median: one odc-stac load (TILE chunks), SCL mask, scale/offset, `.median`."""
    import numpy as np
    import pystac
    import xarray as xr
    from odc.stac import load

    from stac_gdal_mcp.operations.composite import TILE

    ds = load(
        [pystac.Item.from_dict(i, migrate=False) for i in items],
        bands=[*BANDS, "scl"],
        bbox=aoi_of(items[0]),
        groupby="solar_day",
        chunks={"x": TILE, "y": TILE},
    )
    clear = ~ds.scl.isin(NOT_CLEAR)
    bands = []
    for name in BANDS:
        (entry,) = items[0]["assets"][name]["raster:bands"]
        value = ds[name].where(clear & (ds[name] != 0)).astype("float32")
        value = value * np.float32(entry.get("scale", 1.0)) + np.float32(entry.get("offset", 0.0))
        bands.append(value.median("time", skipna=True))
    return xr.concat(bands, dim="band").assign_coords(band=list(BANDS))


def run_odc(folder: Path, items: list[dict], streamed: bool = False) -> dict:
    import dask
    import numpy as np
    import rioxarray  # noqa: F401  (the .rio accessor)

    start = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=WORKERS):
        median = baseline_median(items).rio.write_nodata(np.nan)
        out = folder / f"odc-{uuid.uuid4().hex[:6]}.tif"
        cog = {"compress": "DEFLATE", "predictor": "YES", "blocksize": 512, "overview_resampling": "AVERAGE"}
        if not streamed:  # the whole median in memory, then GDAL's COG driver
            median.rio.to_raster(out, driver="COG", dtype="float32", num_threads="ALL_CPUS", **cog)
        else:  # rioxarray writes the dask chunks as they are computed (lock), then a COG of that
            import threading

            import rasterio.shutil

            tiled = out.with_suffix(".gtiff.tif")
            median.rio.to_raster(
                tiled, dtype="float32", tiled=True, blockxsize=512, blockysize=512, lock=threading.Lock()
            )
            options = {k.upper(): str(v) for k, v in cog.items()}
            rasterio.shutil.copy(tiled, out, driver="COG", NUM_THREADS="ALL_CPUS", **options)
            tiled.unlink()
    return {"seconds": time.perf_counter() - start, "file": str(out)}


def run_odc_windows(folder: Path, items: list[dict], window: int) -> dict:
    """The baseline for an AOI too large for it at once: the same lazy load and median, computed
    `window` px at a time (xarray's isel: dask reads only that window's chunks), the windows put
    into one array, written with rioxarray as a COG."""
    import dask
    import numpy as np
    import rioxarray  # noqa: F401

    start = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=WORKERS):
        median = baseline_median(items)
        out_values = np.empty(median.shape, dtype="float32")
        height, width = median.shape[1:]
        for r0 in range(0, height, window):
            for c0 in range(0, width, window):
                part = median.isel(y=slice(r0, r0 + window), x=slice(c0, c0 + window))
                out_values[:, r0 : r0 + window, c0 : c0 + window] = part.values
        result = median.copy(data=out_values).rio.write_nodata(np.nan)
        out = folder / f"odcw-{uuid.uuid4().hex[:6]}.tif"
        result.rio.to_raster(
            out,
            driver="COG",
            dtype="float32",
            num_threads="ALL_CPUS",
            compress="DEFLATE",
            predictor="YES",
            blocksize=512,
            overview_resampling="AVERAGE",
        )
    return {"seconds": time.perf_counter() - start, "file": str(out), "window": window}


def child(args) -> None:
    from testbed import serve_directory

    folder = args.keep
    base, scene_dir = base_scene(folder, args.size)
    with serve_directory(folder, delay_s=args.delay) as server:
        items = items_on(server, base, scene_dir, args.items)
        reset_peak()
        if args.mode in ("odc", "odc-streamed"):
            row = run_odc(folder, items, streamed=args.mode == "odc-streamed")
        elif args.mode == "odc-windows":
            row = run_odc_windows(folder, items, args.window)
        elif args.mode == "ours":
            row = run_ours(folder, items, None)
        else:
            from dask.distributed import LocalCluster

            with LocalCluster(n_workers=2, threads_per_worker=WORKERS // 2, processes=True) as cluster:
                row = run_ours(folder, items, cluster.scheduler_address)
    row["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(row))


def run_side(command: list[str], max_rss_gb: float) -> tuple[dict | None, float]:
    """Run one side; stop it when it and its children hold more than `max_rss_gb`. Returns
    (its row or None when stopped, the largest RSS of the process tree seen, MB)."""
    import psutil

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree_peak, stopped = 0.0, threading.Event()

    def watch():
        nonlocal tree_peak
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            except psutil.Error:
                rss = 0
            tree_peak = max(tree_peak, rss / 1024**2)
            if rss > max_rss_gb * 1024**3:
                stopped.set()
                for p in [*root.children(recursive=True), root]:
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = proc.communicate()
    watcher.join()
    if stopped.is_set():
        return None, tree_peak
    if proc.returncode != 0:
        raise SystemExit(f"{command[3]} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1]), tree_peak


def compare(a: str, b: str) -> dict:
    """Pixel comparison of two outputs: identical (NaN where NaN), or where both have values."""
    import numpy as np
    import rasterio

    with rasterio.open(a) as x, rasterio.open(b) as y:
        same_grid = x.shape == y.shape and x.transform.almost_equals(y.transform) and x.count == y.count
        if not same_grid:
            return {"same_grid": False}
        identical, both, max_diff = True, 0, 0.0
        for _, window in x.block_windows(1):
            p, q = x.read(window=window), y.read(window=window)
            identical = identical and bool(np.array_equal(p, q, equal_nan=True))
            valid = np.isfinite(p) & np.isfinite(q)
            both += int(valid.sum())
            if valid.any():
                max_diff = max(max_diff, float(np.abs(p[valid] - q[valid]).max()))
    return {"same_grid": True, "identical": identical, "both_valid": both, "max_abs_diff": max_diff}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--distributed", action="store_true")
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--max-rss-gb", type=float, default=12.0)
    parser.add_argument("--window", type=int, default=2048, help="odc-windows: px per window")
    parser.add_argument(
        "--sides",
        default=None,
        help="comma-separated sides: ours, odc, odc-streamed, odc-windows "
        "(default: ours, odc, and odc-windows when --size is larger than --window)",
    )
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        base_scene(folder, args.size)
        rows, trees = {}, {}
        sides = (args.sides or "ours,odc" + (",odc-windows" if args.size > args.window else "")).split(",")
        sides += ["distributed"] if args.distributed else []
        for mode in sides:
            command = [sys.executable, __file__, "--mode", mode, "--keep", str(folder)]
            command += ["--size", str(args.size), "--items", str(args.items), "--delay", str(args.delay)]
            command += ["--window", str(args.window)]
            rows[mode], trees[mode] = run_side(command, args.max_rss_gb)
            print(f"  {mode}: {json.dumps(rows[mode])} (process tree peak {trees[mode]:.0f} MB)", flush=True)
        report(args, rows, trees)


def report(args, rows: dict, trees: dict) -> None:
    what = (
        f"composite (median, cloud-masked, {len(BANDS)} bands) of {args.items} items, "
        f"{args.size} x {args.size} px, {WORKERS} dask threads"
    )
    ours = rows.get("ours")
    if ours:
        print(
            f"{what}: composite {ours['seconds']:.1f} s, peak RSS {ours['peak_rss_mb']:.0f} MB "
            f"(target < 2048 MB: {'OK' if ours['peak_rss_mb'] < 2048 else 'MISSED'})"
        )
    baselines = {
        "odc": "odc.stac.load + xarray median + rioxarray COG (whole AOI at once)",
        "odc-streamed": "odc.stac.load + xarray median + rioxarray GTiff with lock= (dask store), then COG",
        "odc-windows": f"odc.stac.load + xarray median, {args.window} px windows, + rioxarray COG",
    }
    for mode, name in baselines.items():
        if mode not in rows or not ours:
            continue
        row = rows[mode]
        if row is None:
            print(
                f"  vs {name}: STOPPED at {trees[mode]:.0f} MB (> --max-rss-gb {args.max_rss_gb:g}): no time"
            )
            continue
        ratio = ours["seconds"] / row["seconds"]
        agree = compare(ours["file"], row["file"])
        print(
            f"  vs {name}: {row['seconds']:.1f} s, peak RSS {row['peak_rss_mb']:.0f} MB -> time {ratio:.2f}x "
            f"(target <= 1.0x: {'OK' if ratio <= 1.0 else 'MISSED'}); same values where both have one: "
            f"{agree.get('max_abs_diff') == 0.0} ({agree})"
        )
    if rows.get("distributed") and ours:
        d = rows["distributed"]
        same = compare(ours["file"], d["file"])
        print(
            f"  LocalCluster (2 worker processes x {WORKERS // 2} threads) {d['seconds']:.1f} s vs threads "
            f"{ours['seconds']:.1f} s -> speed-up {ours['seconds'] / d['seconds']:.2f}x; output identical "
            f"pixel for pixel: {same.get('identical', False)}; client peak RSS {d['peak_rss_mb']:.0f} MB, "
            f"process tree peak {trees['distributed']:.0f} MB"
        )


if __name__ == "__main__":
    main()
