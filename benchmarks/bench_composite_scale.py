"""Composite figures at scale (issue 14): `composite` (median, cloud-masked) of 20 items written as a
COG, against odc.stac.load + xarray median written with rasterio (rioxarray is not installed), in
the same run; each in its own process so peak RSS (ru_maxrss) is its own. Optionally the same
composite on a dask.distributed LocalCluster of 2 worker processes (--distributed), checked
identical to the threaded one.

The items are hard links of one generated Sentinel-2-like scene (--size px per side, 512 px tiles,
10 m) under fresh URLs on the Range server (no added latency unless --delay); the AOI is the
whole scene, so the output is --size x --size px.

Run: python benchmarks/bench_composite_scale.py [--size 2048] [--items 20] [--distributed] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

ORIGIN = (500000.0, 5000000.0)
BANDS = ("red", "green", "blue")


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
    from stac_gdal_mcp.processing.composite import composite, save_array
    from stac_gdal_mcp.settings import load_settings

    path = folder / f"items-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    extra = {"dask_scheduler": scheduler} if scheduler else {}
    settings = load_settings(
        workspace=folder / "workspace",
        network={"allow_private_hosts": True},
        catalogs=[{"id": "bench", "path": str(path)}],
        default_catalog="bench",
        limits={"max_output_pixels": 400_000_000, "max_read_pixels": 10_000_000_000},
        **extra,
    )
    core = Core(settings)
    start = time.perf_counter()
    array = composite(
        core, aoi_of(items[0]), bands=list(BANDS), collections=["sentinel-2-l2a"], max_items=len(items)
    )
    record = save_array(core, array)
    return {"seconds": time.perf_counter() - start, "file": record.assets["data"].href}


def run_odc(folder: Path, items: list[dict]) -> dict:
    import numpy as np
    import pystac
    import rasterio
    from odc.stac import load

    start = time.perf_counter()
    ds = load(
        [pystac.Item.from_dict(i, migrate=False) for i in items],
        bands=[*BANDS, "scl"],
        bbox=aoi_of(items[0]),
        groupby="solar_day",
        chunks={"x": 2048, "y": 2048},
    )
    clear = ~ds.scl.isin([0, 1, 3, 8, 9, 10])
    stack = [ds[b].where(clear & (ds[b] != 0)).astype("float32") for b in BANDS]
    median = [s.median("time", skipna=True).compute() for s in stack]
    out = folder / f"odc-{uuid.uuid4().hex[:6]}.tif"
    profile = {
        "driver": "COG",
        "dtype": "float32",
        "count": len(BANDS),
        "width": ds.sizes["x"],
        "height": ds.sizes["y"],
        "crs": ds.odc.geobox.crs.to_wkt(),
        "transform": ds.odc.geobox.affine,
        "compress": "deflate",
        "blocksize": 512,
        "nodata": np.nan,
    }
    with rasterio.open(out, "w", **profile) as dst:
        for i, band in enumerate(median, start=1):
            dst.write(band.values, i)
    return {"seconds": time.perf_counter() - start, "file": str(out)}


def child(args) -> None:
    from testbed import serve_directory

    folder = args.keep
    base, scene_dir = base_scene(folder, args.size)
    with serve_directory(folder, delay_s=args.delay) as server:
        items = items_on(server, base, scene_dir, args.items)
        if args.mode == "odc":
            row = run_odc(folder, items)
        else:
            row = run_ours(folder, items, None)
            if args.mode == "distributed":
                from dask.distributed import LocalCluster

                with LocalCluster(n_workers=2, threads_per_worker=2, processes=True) as cluster:
                    threaded = row
                    row = run_ours(folder, items, cluster.scheduler_address)
                    row["threaded_seconds"] = threaded["seconds"]
                    row["identical"] = _identical(threaded["file"], row["file"])
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row))


def _identical(a: str, b: str) -> bool:
    import numpy as np
    import rasterio

    with rasterio.open(a) as x, rasterio.open(b) as y:
        return bool(np.array_equal(x.read(), y.read(), equal_nan=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--distributed", action="store_true")
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        base_scene(folder, args.size)
        rows = {}
        for mode in ["ours", "odc"] + (["distributed"] if args.distributed else []):
            command = [sys.executable, __file__, "--mode", mode, "--keep", str(folder)]
            command += ["--size", str(args.size), "--items", str(args.items), "--delay", str(args.delay)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            rows[mode] = json.loads(out.strip().splitlines()[-1])
    ours, odc = rows["ours"], rows["odc"]
    ratio = ours["seconds"] / odc["seconds"]
    print(
        f"composite (median, masked, {len(BANDS)} bands) of {args.items} items, {args.size} x {args.size} px: "
        f"{ours['seconds']:.1f} s, peak RSS {ours['peak_rss_mb']:.0f} MB; odc.stac.load + xarray median + "
        f"rasterio write {odc['seconds']:.1f} s, peak RSS {odc['peak_rss_mb']:.0f} MB -> {ratio:.2f}x "
        f"(target <= 1.0x): {'OK' if ratio <= 1.0 else 'MISSED'}"
    )
    if "distributed" in rows:
        d = rows["distributed"]
        print(
            f"  LocalCluster (2 worker processes) {d['seconds']:.1f} s vs threads {d['threaded_seconds']:.1f} s "
            f"-> {d['threaded_seconds'] / d['seconds']:.2f}x speed-up, identical output: {d['identical']}"
        )


if __name__ == "__main__":
    main()
