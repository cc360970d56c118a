"""bench_zonal.py --region: zonal statistics at region scale (step 6 of bench_zonal.py's docstring).

Two tiles a day (2048 px of 10 m, 512 px COG tiles) either side of the 18 degrees E boundary
between UTM zones 33 and 34; fields (synthetic.field_polygons: rotated rectangles of 80-400 m in
clusters, holes, multipolygons) over both tiles and across the boundary, written as GeoParquet.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

SIZE = 2048
EAST = (32633, (736477.0 - SIZE * 10, 4990000.0))  # its east edge at 18 E (about)
WEST = (32634, (263523.0, 4990000.0))
KEEP = ("red", "nir", "scl")
VERSUS_DAYS = 9  # days of items (two a day) measured by exactextract called per item, and by us
# fields of that comparison, and of the cluster's output against the threaded call, at most
# (exactextract takes ~5 s per item per 10,000 fields: the tenth of a million, 100,000, kept it
# over 30 minutes on the shared machine; the threaded call holds every zone's rows at once)
VERSUS_ZONES = 10_000


def scenes(folder: Path, server, days: int) -> tuple[list[dict], dict]:
    """Two items a day (east, west tile) at 5-day steps from 2024-04-01; every asset its own URL."""
    from datetime import UTC, datetime, timedelta

    from stac_gdal_mcp.testing import synthetic

    bases = {}
    for name, (epsg, origin) in (("E", EAST), ("W", WEST)):
        item, _ = synthetic.write_scene(
            "sentinel-2-l2a", folder, f"BASE_{name}", "2024-04-01T10:00:00Z", size_px=SIZE, blocksize=512,
            epsg=epsg, origin=origin, seed=7 if name == "E" else 8, with_visual=False,
        )  # fmt: skip
        bases[name] = (item, folder / f"BASE_{name}")
    items, files = [], {}
    start = datetime(2024, 4, 1, 10, 0, tzinfo=UTC)
    for day in range(days):
        for name, (base, scene_dir) in bases.items():
            item = json.loads(json.dumps(base))
            item["id"] = f"S2_RG_{name}_{day:03d}"
            item["properties"]["datetime"] = (start + timedelta(days=5 * day)).strftime("%Y-%m-%dT%H:%M:%SZ")
            for key in KEEP:
                file = f"{key}-{uuid.uuid4().hex[:8]}.tif"
                (server.directory / file).hardlink_to(scene_dir / f"{key}.tif")
                item["assets"][key] = dict(base["assets"][key], href=f"{server.url}/{file}")
            item["assets"] = {k: item["assets"][k] for k in KEEP}
            files[item["id"]] = (scene_dir, base["properties"]["proj:code"])
            items.append(item)
    return items, files


def fields(count: int, seed: int):
    """`count` fields, 45 % on each tile and a tenth across the UTM boundary, as a GeoDataFrame."""
    import geopandas

    from stac_gdal_mcp.testing import synthetic

    (e_epsg, (ex, ey)), (w_epsg, (wx, wy)) = EAST, WEST
    extent = SIZE * 10
    east = (ex, ey - extent, ex + extent, ey)
    west = (wx, wy - extent, wx + extent, wy)
    across = (ex + extent - 3000, ey - extent * 0.8, ex + extent + 2500, ey - extent * 0.2)
    share = int(count * 0.45)
    features = [
        *synthetic.field_polygons(e_epsg, east, share, seed=seed, clusters=60),
        *synthetic.field_polygons(w_epsg, west, share, seed=seed + 1, clusters=60),
        *synthetic.field_polygons(e_epsg, across, count - 2 * share, seed=seed + 2, clusters=8),
    ]
    frame = geopandas.GeoDataFrame.from_features(features, crs="EPSG:4326")
    frame["field_id"] = [f"p{i:07d}" for i in range(len(frame))]
    return frame


def touched(items: list[dict], files: dict, frame) -> int:
    """Bytes of the full-resolution tiles of every item's assets that a field's area meets."""
    from bench_zonal import touched_bytes

    per_scene = {}
    for item in items:
        scene_dir, code = files[item["id"]]
        if scene_dir not in per_scene:
            polygons = list(frame.to_crs(code).geometry)
            per_scene[scene_dir] = sum(touched_bytes(scene_dir / f"{k}.tif", polygons) for k in KEEP)
    return sum(per_scene[files[i["id"]][0]] for i in items)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dask_cluster(folder: Path):
    """`dask scheduler` and `dask worker` (2 processes, 1 thread each) on 127.0.0.1, as processes."""
    dask = str(Path(sys.executable).with_name("dask"))
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    log = open(folder / "dask.log", "w")  # noqa: SIM115
    scheduler = subprocess.Popen(
        [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=log,
        stderr=log,
    )
    worker = subprocess.Popen(
        [dask, "worker", address, "--nworkers", "2", "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
         "--memory-limit", "0"],
        stdout=log, stderr=log,
    )  # fmt: skip
    try:
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        yield address, worker
    finally:
        for process in (worker, scheduler):
            process.terminate()
            process.wait(30)
        log.close()


def workers_cpu(worker) -> float:
    """CPU seconds (user + system) of the `dask worker` process and its worker processes so far."""
    import psutil

    root = psutil.Process(worker.pid)
    return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])


def region_child(spec: dict) -> dict:
    """One call in a fresh process set up as `stac-gdal-mcp serve` sets up its own (Arrow's
    allocator: `cli.server_allocator`, before pyarrow is imported): its time, peak RSS (VmHWM reset
    before the call), rows."""
    from bench_zonal import current_rss_mb
    from measure import peak_rss_mb, reset_peak

    from stac_gdal_mcp.cli import server_allocator

    if "pyarrow" in sys.modules:
        sys.exit("bench_zonal_region: pyarrow was imported before the server's allocator was set")
    server_allocator()
    from stac_gdal_mcp import Session
    from stac_gdal_mcp.operations import zonal
    from stac_gdal_mcp.operations.zonal import stats as zonal_stats
    from stac_gdal_mcp.settings import load_settings

    folder = Path(spec["folder"])
    settings = load_settings(
        workspace=spec["workspace"],
        network={"allow_private_hosts": True},
        catalogs=[{"id": "bench", "path": spec["items"]}],
        default_catalog="bench",
        dask_scheduler=spec.get("scheduler"),
        limits={"zonal_region_zones": 100, "job_timeout_s": 7200, "max_items": 1000},
    )
    session = Session(settings)
    items = json.loads(Path(spec["items"]).read_text())["features"]
    arguments = dict(
        id_property="field_id", items=[{"collection_id": i["collection"], "item_id": i["id"]} for i in items]
    )
    before = current_rss_mb()
    reset_peak()
    start, cpu = time.perf_counter(), time.process_time()
    if spec.get("scl"):  # (the comparison with exactextract: one band as stored, every row kept)
        arguments = dict(
            arguments, expression="scl", stats=["mean", "count"], mask_clouds=False, min_valid_fraction=0
        )
        arguments["items"] = [a for a in arguments["items"] if a["item_id"] in spec["item_ids"]]
    if spec["mode"] == "region":
        head = session.zonal_stats(spec["zones"], **arguments)
        seconds = time.perf_counter() - start
        facts = head.provenance.facts
        out = {"rows": facts["rows"], "output": str(session.outputs.path(facts["saved_as"]))}
    else:  # the ordinary threaded call over every zone at once, saved whole
        request = zonal_stats.check(session.core, spec["zones"], **arguments)
        frame = zonal.run(session.core, request)
        seconds = time.perf_counter() - start
        path = folder / f"ordinary-{uuid.uuid4().hex[:6]}.parquet"
        frame.to_wkb().to_parquet(path)
        out = {"rows": len(frame), "output": str(path)}
    cpu = time.process_time() - cpu  # (every thread of this process: the server's share of the work)
    return {
        **out,
        "seconds": seconds,
        "cpu": cpu,
        "peak": peak_rss_mb(),
        "before": before,
        "load": os.getloadavg(),
    }


def versus_child(spec: dict) -> dict:
    """One side of the comparison with exactextract, in a fresh process (nothing in GDAL's cache):
    `ours` (the call at region scale on this process's threads: SCL's mean and count, unmasked,
    every zone-observation kept) or `exactextract` (`exact_extract` on each item's SCL COG through
    /vsicurl/, the zones projected to its CRS once per CRS), both over the same items; the time
    and the rows (zone, item, mean, count) written as Parquet."""
    folder, items = Path(spec["folder"]), spec["item_ids"]
    out = folder / f"versus-{spec['side']}-{uuid.uuid4().hex[:6]}.parquet"
    if spec["side"] == "ours":
        result = region_child({**spec, "mode": "region", "scl": True})  # (first: it sets the allocator)
        import pyarrow.dataset as ds

        frame = ds.dataset(result["output"], format="parquet").to_table().to_pandas()
        frame = frame.rename(columns={"zone_id": "field_id", "item_ids": "item_id"})
        frame[["field_id", "item_id", "mean", "count"]].to_parquet(out)
        return {"seconds": result["seconds"], "rows": str(out)}
    import geopandas
    import pandas as pd
    import rasterio
    from exactextract import exact_extract

    from stac_gdal_mcp.processing.access import gdal_env
    from stac_gdal_mcp.settings import load_settings

    env = gdal_env(load_settings(workspace=spec["workspace"], network={"allow_private_hosts": True}))
    env = {k: v for k, v in env.items() if "PROXY" not in k}
    catalog = {i["id"]: i for i in json.loads(Path(spec["items"]).read_text())["features"]}
    zones = geopandas.read_parquet(Path(spec["workspace"]) / spec["zones"])
    # (invalid fields repaired as the call repairs them - make_valid, its polygons kept - and as a
    # user would before exactextract: on a self-overlapping field it counts the overlap twice)
    from stac_gdal_mcp.operations.zonal.checks import _polygons_of

    invalid = ~zones.geometry.is_valid
    zones.loc[invalid, "geometry"] = [_polygons_of(g) for g in zones.geometry[invalid].make_valid()]
    start, parts, projected = time.perf_counter(), [], {}
    with rasterio.Env(**env):
        for item_id in items:
            href = catalog[item_id]["assets"]["scl"]["href"]
            with rasterio.open(f"/vsicurl/{href}") as src:
                key = src.crs.to_string()
                if key not in projected:
                    projected[key] = zones[["field_id", "geometry"]].to_crs(src.crs)
                found = exact_extract(
                    src, projected[key], ["mean", "count"], include_cols=["field_id"], output="pandas"
                )
            parts.append(found.assign(item_id=item_id))
    seconds = time.perf_counter() - start
    frame = pd.concat(parts, ignore_index=True)
    frame[frame["count"] > 0][["field_id", "item_id", "mean", "count"]].to_parquet(out)
    return {"seconds": seconds, "rows": str(out)}


def versus_equal(ours: str, theirs: str) -> tuple[bool, str, int]:
    """Every zone-item either side measured (count > 0), with equal mean and count?"""
    import numpy as np
    import pandas as pd

    a = pd.read_parquet(ours)
    a = a[a["count"] > 0].set_index(["field_id", "item_id"]).sort_index()
    b = pd.read_parquet(theirs).set_index(["field_id", "item_id"]).sort_index()
    if not a.index.equals(b.index):
        return (
            False,
            f"{len(a.index.symmetric_difference(b.index))} zone-items measured on one side only",
            len(a),
        )
    worst = max(
        float(np.nanmax(np.abs(a[c].to_numpy(float) - b[c].to_numpy(float)))) for c in ("mean", "count")
    )
    same = all(
        np.array_equal(a[c].to_numpy(float), b[c].to_numpy(float), equal_nan=True) for c in ("mean", "count")
    )
    return same, "equal to the bit" if same else f"largest difference {worst:.3g}", len(a)


def equal(region_folder: str, ordinary_file: str) -> tuple[bool, str]:
    import pandas as pd
    import pyarrow.dataset as ds

    parts = [f.to_table().to_pandas() for f in ds.dataset(region_folder, format="parquet").get_fragments()]
    region = pd.concat(parts, ignore_index=True)
    whole = pd.read_parquet(ordinary_file)
    keys = ["zone_id", "datetime"]
    region = region.sort_values(keys, kind="stable").reset_index(drop=True)
    whole = whole.sort_values(keys, kind="stable").reset_index(drop=True)
    for frame in (region, whole):
        for column in ("collection_id", "item_ids", "note", "error"):
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    try:
        pd.testing.assert_frame_equal(region[whole.columns], whole, check_dtype=False)
        return True, "equal"
    except AssertionError as exc:
        return False, " ".join(str(exc).split())[:400]


def memory_flatness(sizes: list[int], results: dict) -> None:
    """The server process's peak RSS per zone count, and its growth from the smaller count to the
    larger (flat: the larger peak <= 1.1x the smaller)."""
    small, big = (results[n] for n in sizes)
    for n in sizes:
        r = results[n]
        print(f"  memory, {n:,} zones: peak RSS {r['peak']:.0f} MB, {r['peak'] - r['before']:.0f} MB above the "
              f"{r['before']:.0f} MB resident before the call")  # fmt: skip
    ratio = big["peak"] / small["peak"]
    print(f"  memory flatness: peak RSS at {sizes[1]:,} / {sizes[0]:,} zones = {ratio:.2f}x, "
          f"+{big['peak'] - small['peak']:.0f} MB for {sizes[1] // sizes[0]}x the zones "
          f"(flat: <= 1.1x): {'OK' if ratio <= 1.1 else 'MISSED'}")  # fmt: skip


def region_main(zones: int, days: int, child) -> None:
    """The figures, each printed as soon as it is measured (a run stopped early still says what it
    measured): the smaller size, the comparison with exactextract, the larger size, the threaded
    call; then the ratios."""
    import tempfile

    from testbed import serve_directory

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with serve_directory(folder) as server:
            items, files = scenes(folder, server, days)
            catalog = folder / "items.json"
            catalog.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
            workspace = folder / "workspace"
            workspace.mkdir()
            sizes = [zones // 10, zones]
            versus = min(sizes[0], VERSUS_ZONES)
            frames = {n: fields(n, seed=11) for n in sorted({versus, *sizes})}
            for n, frame in frames.items():
                frame.to_parquet(workspace / f"fields-{n}.parquet")
            touched_by = {n: touched(items, files, frames[n]) for n in sizes}
            del frames
            spec = {"folder": str(folder), "workspace": str(workspace), "items": str(catalog)}
            say(f"region scale: fields x {len(items)} items ({days} days, 2 tiles a day across UTM 33/34), "
                "dask cluster of `dask scheduler` + `dask worker` (2 processes x 1 thread):")  # fmt: skip
            results, small = {}, sizes[0]
            for n in sizes:  # a fresh cluster each: no tile kept in a worker's GDAL cache from the last
                with dask_cluster(folder) as (address, workers):
                    server.reset_stats()
                    before = workers_cpu(workers)
                    results[n] = child(
                        {**spec, "mode": "region", "zones": f"fields-{n}.parquet", "scheduler": address},
                        folder,
                    )
                    results[n]["sent"] = server.stats()["bytes"]
                    results[n]["workers_cpu"] = workers_cpu(workers) - before
                size_line(n, len(items), results[n], touched_by[n])
                if n == small:
                    versus_lines(child, spec, folder, [i["id"] for i in items[: 2 * VERSUS_DAYS]], versus)
            same, why, threaded = same_as_threaded(child, spec, folder, versus, results.get(versus))
    a, b = (results[n]["seconds"] / n for n in sizes)
    say(f"  time per zone-item {sizes[1]:,} / {sizes[0]:,} fields: {b / a:.2f}x (target <= 1.0): "
        f"{'OK' if b / a <= 1.0 else 'MISSED'}")  # fmt: skip
    per = results[sizes[1]]["seconds"] / (sizes[1] * len(items)) * 1e6
    say(f"  time per zone-item at {sizes[1]:,} fields x {len(items)} items: {per:.1f} us (target <= 10): "
        f"{'OK' if per <= 10 else 'MISSED'}")  # fmt: skip
    memory_flatness(sizes, results)
    say(f"  {versus:,} fields on the cluster vs the threaded ordinary call ({threaded['seconds']:.1f} s, peak "
        f"{threaded['peak']:.0f} MB): {'equal: OK' if same else 'DIFFERENT: ' + why}")  # fmt: skip


def same_as_threaded(child, spec: dict, folder: Path, n: int, done: dict | None) -> tuple[bool, str, dict]:
    """The cluster's output on `n` fields (`done`: that run's, else run now on a fresh cluster)
    against the ordinary threaded call over every zone at once (the smaller size when it is at
    most VERSUS_ZONES fields: the threaded call holds every zone's rows in memory)."""
    zones = f"fields-{n}.parquet"
    if done is None:
        with dask_cluster(folder) as (address, _):
            done = child({**spec, "mode": "region", "zones": zones, "scheduler": address}, folder)
    threaded = child({**spec, "mode": "ordinary", "zones": zones}, folder)
    return (*equal(done["output"], threaded["output"]), threaded)


def say(text: str) -> None:
    print(text, flush=True)


def size_line(n: int, items: int, r: dict, touched_bytes: int) -> None:
    per = r["seconds"] / (n * items) * 1e6
    cpu = r["cpu"] + r["workers_cpu"]
    say(f"  {n:,} fields: CPU {r['cpu']:.1f} s in the server process + {r['workers_cpu']:.1f} s in the dask worker "
        f"processes = {cpu / (n * items) * 1e6:.1f} us CPU per zone-item; load average at the end "
        f"{'/'.join(f'{v:.1f}' for v in r['load'])}")  # fmt: skip
    say(f"  {n:,} fields: {r['seconds']:.1f} s, {r['rows']:,} rows, {per:.1f} us per zone-item, peak RSS "
        f"{r['peak']:.0f} MB ({r['before']:.0f} MB before the call; target < 1024): "
        f"{'OK' if r['peak'] < 1024 else 'MISSED'}; bytes sent {r['sent']:,} / tiles the fields touch "
        f"{touched_bytes:,} = {r['sent'] / touched_bytes:.2f}x (target <= 1.3): "
        f"{'OK' if r['sent'] / touched_bytes <= 1.3 else 'MISSED'}")  # fmt: skip


def versus_lines(child, spec: dict, folder: Path, chosen: list[str], small: int) -> None:
    """Ours and exactextract called per item on the same zones and items, each in a fresh process."""
    versus = {
        side: child({**spec, "mode": "versus", "side": side, "item_ids": chosen, "zones": f"fields-{small}.parquet"}, folder)
        for side in ("ours", "exactextract")
    }  # fmt: skip
    same_values, how, rows = versus_equal(versus["ours"]["rows"], versus["exactextract"]["rows"])
    ours, theirs, k = versus["ours"]["seconds"], versus["exactextract"]["seconds"], len(chosen)
    say(f"  vs exactextract called per item, on a subset: {small:,} fields x {k} items ({k // 2} days; SCL mean and count, "
        f"unmasked; each side in a fresh process, on its threads): ours {ours / k:.2f} s per item "
        f"({ours / (small * k) * 1e6:.1f} us per zone-item), exactextract through /vsicurl/ {theirs / k:.2f} s per "
        f"item = {theirs / ours:.1f}x faster (target >= 5x): {'OK' if theirs / ours >= 5 else 'MISSED'}; "
        f"{rows:,} zone-items measured, values {'equal: OK' if same_values else 'DIFFERENT: MISSED'} ({how})")  # fmt: skip
