"""Cloud-cover figures (issue: cloud cover inside the AOI). Wall time of cloud_cover_stats over
24 items against the baseline a notebook user would write: odc.stac.load of the same SCL masks
over the same AOI at the same resolution (20 m, the masks' own CRS, groupby="id" so each item
stays separate), then a numpy count of the classes inside the AOI - target: <= 1.0x.

Measured in the same run with no added latency and with 50 ms added per HTTP request: a
warm-up round, then the median of 5 rounds.
odc-stac gets the same GDAL settings and the same number of threads (pool=limits.max_concurrency);
fresh URLs for every measurement, so no read comes from GDAL's cache.

Run: python benchmarks/bench_cloud_vs_odc.py [--keep DIR] [--items 24]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cloud_bytes import local_catalog, make_scl  # noqa: E402
from bench_cloud_latency import AOI, SMALL, make_items, refs  # noqa: E402
from common import arguments, data_folder  # noqa: E402

ROUNDS = 5


def odc_scl(items: list[dict], aoi: list[float], **options):
    """odc.stac.load of the items' SCL over `aoi` (EPSG:32633, 20 m, one layer an item) with
    `options`: (the SCL layers, the mask of their pixels inside the AOI)."""
    import pystac
    from odc.stac import load
    from rasterio.features import geometry_mask
    from rasterio.warp import transform_geom
    from shapely.geometry import box, mapping

    stac_items = [pystac.Item.from_dict(i, migrate=False) for i in items]
    ds = load(stac_items, bands=["scl"], crs="EPSG:32633", resolution=20, bbox=aoi, groupby="id", **options)
    geom = transform_geom("EPSG:4326", "EPSG:32633", mapping(box(*aoi)))
    inside = geometry_mask([geom], out_shape=ds.scl.shape[1:], transform=ds.odc.geobox.affine, invert=True)
    return ds.scl.values, inside


def odc_baseline(core, items: list[dict], aoi: list[float]) -> list[dict]:
    """odc.stac.load of the SCL over the AOI (native CRS, 20 m, nearest) + numpy class counts."""
    import numpy as np
    import rasterio

    from stac_gdal_mcp.operations.cloud import ONE_THREAD_PER_READ
    from stac_gdal_mcp.processing.access import gdal_env

    with rasterio.Env(**{**gdal_env(core.settings), **ONE_THREAD_PER_READ}):
        layers, inside = odc_scl(items, aoi, resampling="nearest", pool=core.settings.limits.max_concurrency)
    rows = []
    for scl in layers:
        values = scl[inside]
        valid = values != 0
        n = int(valid.sum())
        rows.append(
            {
                "cloud_fraction": float(np.isin(values, (8, 9)).sum() / n) if n else None,
                "clear_fraction": float((valid & ~np.isin(values, (1, 3, 8, 9, 10))).sum() / n)
                if n
                else None,
                "valid_pixels": n,
            }
        )
    return rows


def main() -> None:
    from stac_gdal_mcp.operations.cloud import cloud_cover_stats
    from testbed import serve_directory

    parser = arguments(__doc__)
    parser.add_argument("--items", type=int, default=24)
    args = parser.parse_args()
    with data_folder(args.keep) as folder:
        scl = make_scl(folder / f"scl{SMALL}.tif", size=SMALL, seed=7)
        for delay in (0.0, 0.05):
            ours_s, odc_s = [], []
            with serve_directory(folder, delay_s=delay) as server:
                for run in range(ROUNDS + 1):  # round 0 warms both up (imports, GDAL, odc), not counted
                    ours, _ = make_items(server, scl, args.items, f"S2_OURS{run}_")
                    theirs, _ = make_items(server, scl, args.items, f"S2_ODC{run}_")
                    core = local_catalog(folder, ours + theirs)
                    start = time.perf_counter()
                    result = cloud_cover_stats(core, AOI, items=refs(ours), catalog="bench")
                    ours_s.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    baseline = odc_baseline(core, theirs, AOI)
                    odc_s.append(time.perf_counter() - start)
                    assert result.failed == 0
            a, b = result.items[0], baseline[0]
            ours_t, odc_t = statistics.median(ours_s[1:]), statistics.median(odc_s[1:])
            print(
                f"{args.items} items, {delay * 1000:.0f} ms added per request, median of {ROUNDS}: "
                f"cloud_cover_stats {ours_t:.2f} s, odc.stac.load + numpy {odc_t:.2f} s "
                f"(cloud {a.cloud_fraction:.4f} vs {b['cloud_fraction']:.4f}, "
                f"valid pixels {a.valid_pixels} vs {b['valid_pixels']})"
            )
            ratio = ours_t / odc_t
            print(
                f"  cloud_cover_stats / odc = {ratio:.2f}x (target <= 1.0x): {'OK' if ratio <= 1.0 else 'MISSED'}"
            )


if __name__ == "__main__":
    main()
