"""compare_periods on the test bed beside the same done by hand with odc-stac + exactextract.

The test bed: pgstac (stac-fastapi-pgstac on PostgreSQL) and the Range server, started here.
Items: --per-month Sentinel-2-like scenes (synthetic, --size px a side at 10 m, 256 px tiles,
clouds 30 %) in June and as many in August 2024, one grid; --zones fields (synthetic.field_polygons)
over the scene. The question: median NDVI per field in June and in August, the change, and the
hectares that lost more than 0.1 (clouds masked with the SCL).

- ours: `compare_periods` (library call: the two searches, the odc-stac load on the items' grid,
  the per-pixel median, exactextract per zone; the change raster kept in memory, not written);
- by hand: pystac-client searches per month, `odc.stac.load` of red, nir, scl on the fields'
  extent at the items' grid (groupby solar_day), the SCL's clear classes, NDVI, xarray's median
  over time, after - before, then exactextract's mean / count / sum per field - what an analyst
  writes with the field's libraries.

Printed: each side's time (median of --rounds runs, the two run in turn) and bytes the Range server
sent, the ratios ours / by hand, and the largest difference of delta_mean and decrease_ha between
the two (the same numbers, computed twice).

Run: python benchmarks/bench_change.py [--zones 100] [--per-month 3] [--size 1024] [--rounds 3]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from common import child_arguments, in_child  # noqa: E402

ORIGIN = (500000.0, 5000000.0)
NOT_CLEAR = [0, 1, 3, 8, 9, 10]  # SCL: nodata, defective, shadow, cloud x2, cirrus
COLLECTION = "bench-change"  # (a fresh pgstac each run)


def scenes(folder: Path, url: str, per_month: int, size: int) -> list[dict]:
    from stac_gdal_mcp.testing import synthetic

    items = []
    for month in (6, 8):
        for k in range(per_month):
            day = 2 + 9 * k
            item, _ = synthetic.write_scene(
                "sentinel-2-l2a", folder, f"S2_CH_{month:02d}{day:02d}", f"2024-{month:02d}-{day:02d}T10:00:00Z",
                collection_id=COLLECTION, seed=month * 10 + k, size_px=size, blocksize=256, origin=ORIGIN,
                with_visual=False, href_base=url, cloud_fraction=0.3,
            )  # fmt: skip
            items.append(item)
    return items


def ours(core, zones):
    from stac_gdal_mcp.operations import change

    call = change.ComparePeriods.of(
        zones, before="2024-06", after="2024-08", catalog="testbed", collections=[COLLECTION]
    )
    request = call.plan(core)
    return change.run(core, request).table


def by_hand(api_url: str, zones, env: dict):
    """pystac-client + odc-stac + xarray + exactextract, written as an analyst would."""
    import geopandas
    import numpy as np
    import odc.stac
    import rasterio
    from exactextract import exact_extract
    from pystac_client import Client

    fields = geopandas.GeoDataFrame.from_features(zones["features"], crs="EPSG:4326")
    client = Client.open(api_url)
    medians = {}
    with rasterio.Env(**env):
        for month in ("2024-06", "2024-08"):
            items = client.search(
                collections=[COLLECTION], bbox=fields.total_bounds, datetime=month
            ).item_collection()
            ds = odc.stac.load(items, bands=["red", "nir", "scl"], bbox=tuple(fields.total_bounds),
                               groupby="solar_day", chunks={}, resolution=10, crs="EPSG:32633",
                               anchor="edge")  # fmt: skip
            clear = ~ds.scl.isin(NOT_CLEAR)
            red = (ds.red.where(ds.red != 0) * 0.0001 - 0.1).where(clear)
            nir = (ds.nir.where(ds.nir != 0) * 0.0001 - 0.1).where(clear)
            medians[month] = ((nir - red) / (nir + red)).median("time").compute()
    before, after = medians["2024-06"], medians["2024-08"]
    both = np.isfinite(before.values) & np.isfinite(after.values)
    delta = after.copy(data=np.where(both, after.values - before.values, np.nan))
    lost = delta.copy(data=np.where(both, (delta.values < -0.1).astype("float64"), np.nan))
    projected = fields.to_crs(32633)
    found = {}
    for name, array, ops in (("delta", delta, ["mean", "count"]), ("lost", lost, ["sum"])):
        source = _numpy_source(array)
        frame = exact_extract(source, projected, ops, output="pandas")
        found |= {f"{name}_{op}": frame[op].to_numpy() for op in ops}
    return found


def _numpy_source(array):
    from exactextract.raster import NumPyRasterSource

    xs, ys = array.x.values, array.y.values
    half = abs(xs[1] - xs[0]) / 2
    return NumPyRasterSource(array.values, xs[0] - half, ys[-1] - half, xs[-1] + half, ys[0] + half)


# imported before the clock starts (third-party libraries and this package's modules): imports are
# not the work measured
WARM = (
    "odc.stac", "exactextract", "xarray", "dask.array", "geopandas", "rasterio", "pystac_client", "pyproj",
    "stac_gdal_mcp.session", "stac_gdal_mcp.operations", "stac_gdal_mcp.processing.load",
    "stac_gdal_mcp.processing.dask_runtime", "stac_gdal_mcp.processing.odc_reader",
    "stac_gdal_mcp.discovery.search", "stac_gdal_mcp.processing.selection",
)  # fmt: skip


def child(spec: dict) -> dict:
    """One side's run in this fresh process (cold GDAL caches): its seconds and its result."""
    import importlib

    for name in WARM:
        importlib.import_module(name)
    zones = json.loads(Path(spec["zones"]).read_text())
    start = time.perf_counter()
    if spec["side"] == "ours":
        from stac_gdal_mcp.session import Session

        session = Session(workspace=spec["workspace"], network={"allow_private_hosts": True},
                          catalogs=[{"id": "testbed", "url": spec["api"]}])  # fmt: skip
        table = ours(session.core, zones)
        found = {"delta_mean": table["delta_mean"].tolist(), "decrease_ha": table["decrease_ha"].tolist()}
    else:
        from stac_gdal_mcp.processing.access import gdal_env
        from stac_gdal_mcp.settings import load_settings

        hand = by_hand(spec["api"], zones, gdal_env(load_settings(network={"allow_private_hosts": True})))
        found = {"delta_mean": hand["delta_mean"].tolist(), "decrease_ha": (hand["lost_sum"] * 0.01).tolist()}
    return {"seconds": time.perf_counter() - start, **found}


def main() -> None:
    import statistics

    import numpy as np

    from stac_gdal_mcp.testing import synthetic
    from testbed import serve_directory, start_pgstac

    args = child_arguments(__doc__, zones=100, per_month=3, size=1024, rounds=3).parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child.read_text()))))
        return
    scene = (ORIGIN[0], ORIGIN[1] - args.size * 10, ORIGIN[0] + args.size * 10, ORIGIN[1])
    zones = {
        "type": "FeatureCollection",
        "features": synthetic.field_polygons(32633, scene, args.zones, seed=11),
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        start_pgstac(tempfile.gettempdir()) as api,
        serve_directory(tmp) as cogs,
    ):
        items = scenes(Path(tmp), cogs.url, args.per_month, args.size)
        api.load([synthetic.collection("sentinel-2-l2a", COLLECTION)], items)
        (Path(tmp) / "zones.json").write_text(json.dumps(zones))
        spec = {"zones": str(Path(tmp) / "zones.json"), "api": api.url, "workspace": str(Path(tmp) / "ws")}
        times, sent, results = {"ours": [], "by hand": []}, {}, {}
        for _ in range(args.rounds):
            for side in times:
                cogs.reset_stats()
                results[side] = in_child(__file__, {**spec, "side": side}, Path(tmp), side)
                times[side].append(results[side]["seconds"])
                sent[side] = cogs.stats()["bytes"]
        mine, hand = results["ours"], results["by hand"]
        warm = warm_seconds(spec, zones)
        print(
            f"{args.zones} zones x two one-month periods ({args.per_month} items each, {args.size} px scenes)"
        )
        for side in times:
            print(f"  {side:8s}: {statistics.median(times[side]):6.2f} s in a fresh process, {warm[side]:5.2f} s warm"
                  f" (a second call), {sent[side] / 1e6:6.2f} MB read")  # fmt: skip
        ratio = statistics.median(times["ours"]) / statistics.median(times["by hand"])
        print(f"  ratio ours / by hand: time {ratio:.2f} (warm {warm['ours'] / warm['by hand']:.2f}), "
              f"bytes {sent['ours'] / sent['by hand']:.2f}")  # fmt: skip
        differences = {
            k: np.nanmax(np.abs(np.array(mine[k], float) - np.array(hand[k], float)))
            for k in ("delta_mean", "decrease_ha")
        }
        print("  largest difference: " + ", ".join(f"{k} {v:.2g}" for k, v in differences.items()))


def warm_seconds(spec: dict, zones: dict) -> dict:
    """Each side's second call in this process (after one call each): the time of a notebook's or
    a server's next call, GDAL's caches warm for both."""
    from stac_gdal_mcp.processing.access import gdal_env
    from stac_gdal_mcp.session import Session

    session = Session(workspace=spec["workspace"], network={"allow_private_hosts": True},
                      catalogs=[{"id": "testbed", "url": spec["api"]}])  # fmt: skip
    runs = {
        "ours": lambda: ours(session.core, zones),
        "by hand": lambda: by_hand(spec["api"], zones, gdal_env(session.settings)),
    }
    found = {}
    for side, run in runs.items():
        run()
        start = time.perf_counter()
        run()
        found[side] = time.perf_counter() - start
    return found


if __name__ == "__main__":
    main()
