"""bench_zonal.py --region: zonal statistics at region scale (step 6 of bench_zonal.py's docstring).

Two tiles a day (2048 px of 10 m, 512 px COG tiles) either side of the 18 degrees E boundary
between UTM zones 33 and 34; fields (synthetic.field_polygons: rotated rectangles of 80-400 m in
clusters, holes, multipolygons) over both tiles and across the boundary, written as GeoParquet.
"""

from __future__ import annotations

import json
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
        yield address
    finally:
        for process in (worker, scheduler):
            process.terminate()
            process.wait(30)
        log.close()


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
    start = time.perf_counter()
    if spec["mode"] == "region":
        head = session.zonal_stats(spec["zones"], **arguments)
        seconds = time.perf_counter() - start
        facts = zonal.provenance_of(head).facts
        out = {"rows": facts["rows"], "output": str(session.outputs.path(facts["saved_as"]))}
    else:  # the ordinary threaded call over every zone at once, saved whole
        request = zonal.check(session.core, spec["zones"], **arguments)
        frame = zonal.run(session.core, request)
        seconds = time.perf_counter() - start
        path = folder / f"ordinary-{uuid.uuid4().hex[:6]}.parquet"
        frame.to_wkb().to_parquet(path)
        out = {"rows": len(frame), "output": str(path)}
    return {**out, "seconds": seconds, "peak": peak_rss_mb(), "before": before}


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
            frames = {n: fields(n, seed=11) for n in sizes}
            for n, frame in frames.items():
                frame.to_parquet(workspace / f"fields-{n}.parquet")
            spec = {"folder": str(folder), "workspace": str(workspace), "items": str(catalog)}
            results = {}
            for n in sizes:  # a fresh cluster each: no tile kept in a worker's GDAL cache from the last
                with dask_cluster(folder) as address:
                    server.reset_stats()
                    results[n] = child(
                        {**spec, "mode": "region", "zones": f"fields-{n}.parquet", "scheduler": address},
                        folder,
                    )
                    results[n]["sent"] = server.stats()["bytes"]
            small = sizes[0]
            threaded = child({**spec, "mode": "ordinary", "zones": f"fields-{small}.parquet"}, folder)
            same, why = equal(results[small]["output"], threaded["output"])
            touched_by = {n: touched(items, files, frames[n]) for n in sizes}
    print(f"region scale: fields x {len(items)} items ({days} days, 2 tiles a day across UTM 33/34), "
          "dask cluster of `dask scheduler` + `dask worker` (2 processes x 1 thread):")  # fmt: skip
    for n in sizes:
        r = results[n]
        per = r["seconds"] / (n * len(items)) * 1e6
        print(
            f"  {n:,} fields: {r['seconds']:.1f} s, {r['rows']:,} rows, {per:.1f} us per zone-item, peak RSS "
            f"{r['peak']:.0f} MB ({r['before']:.0f} MB before the call; target < 1024): "
            f"{'OK' if r['peak'] < 1024 else 'MISSED'}"
        )
    a, b = (results[n]["seconds"] / n for n in sizes)
    print(f"  time per zone-item {sizes[1]:,} / {sizes[0]:,} fields: {b / a:.2f}x (target <= 1.0): "
          f"{'OK' if b / a <= 1.0 else 'MISSED'}")  # fmt: skip
    memory_flatness(sizes, results)
    for n in sizes:
        ratio = results[n]["sent"] / touched_by[n]
        print(f"  {n:,} fields: bytes sent {results[n]['sent']:,} / tiles the fields touch {touched_by[n]:,} = "
              f"{ratio:.2f}x (target <= 1.3): {'OK' if ratio <= 1.3 else 'MISSED'}")  # fmt: skip
    print(f"  {small:,} fields on the cluster vs the threaded ordinary call ({threaded['seconds']:.1f} s, peak "
          f"{threaded['peak']:.0f} MB): {'equal: OK' if same else 'DIFFERENT: ' + why}")  # fmt: skip
