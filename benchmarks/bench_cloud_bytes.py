"""Cloud-cover figures (issue: cloud cover inside the AOI). Bytes fetched over HTTP by
cloud_cover_stats for a 5 km x 5 km AOI on one Sentinel-2 scene (10980 x 10980 at 10 m, so a
5490 x 5490 SCL at 20 m, 512 px tiles), against
  1. the bytes of the SCL tiles that intersect the AOI window (TIFF tile byte counts) - target <= 1.5x;
  2. the bytes fetched when reading the whole SCL over HTTP with plain rasterio - target >= 20x more.

The SCL COG is generated at run time (random cloud/shadow/water blobs plus 10 % speckle, so it
compresses about like a real SCL) and served by the test suite's Range server, which counts the
bytes it sends. The item sits in a local ItemCollection (no STAC API needed).

Run: python benchmarks/bench_cloud_bytes.py [--keep DIR]   (DIR: reuse/keep the generated COG there)
"""

from __future__ import annotations

import json
import math
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import arguments, data_folder, generated, print_bytes, write_cog  # noqa: E402

SIZE, TILE = 5490, 512  # the 20 m SCL of a 10980 x 10980 scene
ORIGIN, EPSG = (399960.0, 5000040.0), 32633  # a Sentinel-2 tile grid


def make_scl(path: Path, size: int = SIZE, seed: int = 42) -> Path:
    """A size x size uint8 SCL COG (DEFLATE, 512 px tiles, nearest overviews)."""
    import numpy as np
    from rasterio.transform import from_origin

    from stac_gdal_mcp.testing import synthetic

    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    classes = synthetic.scene_classes(
        rng, (size, size), cloud=0.3, shadow=0.05, cirrus=0.02, water=0.05, nodata=0.05
    )
    speckle = (rng.random(classes.shape) < 0.1) & (classes != 0)
    classes[speckle] = rng.choice(np.array([4, 5, 7], dtype="uint8"), size=int(speckle.sum()))
    transform = from_origin(*ORIGIN, 20.0, 20.0)
    return write_cog(
        path, classes, crs=f"EPSG:{EPSG}", transform=transform, tile=TILE, OVERVIEW_RESAMPLING="NEAREST"
    )


def fresh_href(server, path: Path) -> tuple[str, str]:
    """A new URL for the same file (GDAL caches /vsicurl/ reads per URL in a process)."""
    name = f"{path.stem}-{uuid.uuid4().hex[:16]}.tif"  # a --keep folder gathers thousands of them
    (server.directory / name).hardlink_to(path)
    return f"{server.url}/{name}", f"/{name}"


def scene_item(item_id: str, scl_href: str, size: int = SIZE, when: str = "2024-07-01T10:00:00Z") -> dict:
    """A Sentinel-2 L2A item for a (2 * size) px 10 m grid whose SCL asset is `scl_href`."""
    from stac_gdal_mcp.testing import synthetic

    transform = (10.0, 0.0, ORIGIN[0], 0.0, -10.0, ORIGIN[1])
    item = synthetic.item("sentinel-2-l2a", item_id, when, transform=transform, shape=(2 * size, 2 * size))
    item["assets"] = {"scl": dict(item["assets"]["scl"], href=scl_href)}
    return item


def local_catalog(folder: Path, items: list[dict]):
    """Settings + Core with a local ItemCollection holding `items` as catalog 'bench'."""
    from stac_gdal_mcp.core import Core
    from stac_gdal_mcp.settings import load_settings

    path = folder / f"items-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    settings = load_settings(
        workspace=folder / "workspace",
        network={"allow_private_hosts": True},
        catalogs=[{"id": "bench", "path": str(path)}],
        default_catalog="bench",
    )
    return Core(settings)


def aoi_5km(x0: float, y0: float) -> list[float]:
    """WGS84 bbox of a 5 km x 5 km square whose upper-left corner is (x0, y0) in the UTM CRS."""
    from pyproj import Transformer

    to_wgs84 = Transformer.from_crs(EPSG, 4326, always_xy=True)
    lons, lats = to_wgs84.transform([x0, x0 + 5000, x0, x0 + 5000], [y0, y0, y0 - 5000, y0 - 5000])
    return [min(lons), min(lats), max(lons), max(lats)]


def window_tiles(path: Path, aoi: list[float]) -> tuple[int, int, int, tuple]:
    """(bytes of the full-resolution tiles intersecting the AOI's window, their count, all tiles' bytes, window)."""
    import rasterio
    from rasterio.warp import transform_bounds
    from rasterio.windows import from_bounds

    with rasterio.open(path) as src:
        bounds = transform_bounds("EPSG:4326", src.crs, *aoi, densify_pts=64)
        win = from_bounds(*bounds, transform=src.transform)
        (r0, r1), (c0, c1) = win.toranges()
        rows = range(math.floor(r0) // TILE, math.ceil(r1 / TILE))
        cols = range(math.floor(c0) // TILE, math.ceil(c1 / TILE))
        touched = sum(src.block_size(1, r, c) for r in rows for c in cols)
        n = math.ceil(src.height / TILE), math.ceil(src.width / TILE)
        everything = sum(src.block_size(1, r, c) for r in range(n[0]) for c in range(n[1]))
    return touched, len(rows) * len(cols), everything, (math.ceil(r1 - r0), math.ceil(c1 - c0))


def main() -> None:
    import rasterio

    from stac_gdal_mcp.operations.cloud import cloud_cover_stats
    from stac_gdal_mcp.processing.access import gdal_env
    from testbed import serve_directory

    args = arguments(__doc__).parse_args()
    with data_folder(args.keep) as folder:
        scl = generated(
            make_scl, folder / "scl5490.tif", "SCL COG", f"{SIZE} x {SIZE} uint8, {TILE} px tiles"
        )
        # not aligned to the tiles: it crosses a tile corner (the usual, and the worst, case)
        aoi = aoi_5km(ORIGIN[0] + 2440 * 20, ORIGIN[1] - 924 * 20)  # around tile corner (row 1024, col 2560)
        touched, n_tiles, all_tiles, window = window_tiles(scl, aoi)
        with serve_directory(folder) as server:
            href, key = fresh_href(server, scl)
            core = local_catalog(folder, [scene_item("S2_BENCH", href)])
            server.reset_stats()
            start = time.perf_counter()
            result = cloud_cover_stats(
                core, aoi, items=[{"collection_id": "sentinel-2-l2a", "item_id": "S2_BENCH"}], catalog="bench"
            )
            seconds = time.perf_counter() - start
            row = result.items[0]
            assert row.error is None, row.error
            sent, requests = server.stats()["paths"][key]["bytes"], server.stats()["paths"][key]["requests"]

            href, key = fresh_href(server, scl)
            server.reset_stats()
            with rasterio.Env(**gdal_env(core.settings)), rasterio.open(f"/vsicurl/{href}") as src:
                src.read(1)
            whole, whole_requests = (
                server.stats()["paths"][key]["bytes"],
                server.stats()["paths"][key]["requests"],
            )
        print(
            f"AOI 5 km x 5 km: window {window[0]} x {window[1]} px of 20 m, {n_tiles} tiles intersect; "
            f"cloud {row.cloud_fraction:.3f}, clear {row.clear_fraction:.3f}, {row.aoi_pixels} AOI pixels"
        )
        fetched = (sent, requests, seconds)
        print_bytes("cloud_cover_stats", "SCL", (touched, all_tiles), fetched, (whole, whole_requests))


if __name__ == "__main__":
    main()
