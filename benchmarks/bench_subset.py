"""Subset figures (issue: processing). Bytes fetched over HTTP by convert_asset for a 10% x 10% AOI
of a 10980 x 10980 uint16 COG with 512 x 512 tiles, against
  1. the bytes of the full-resolution tiles that intersect the AOI (TIFF tile byte counts,
     read with rasterio) - target <= 1.5x;
  2. the bytes fetched when reading the whole band over HTTP with plain rasterio - target >= 20x more.

The COG is generated into a temporary folder at run time (about 30 s) and served by the test
suite's Range server, which counts the bytes it sends.

Run: python benchmarks/bench_subset.py [--keep DIR]   (DIR: reuse/keep the generated COG there)
"""

from __future__ import annotations

import asyncio
import math
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import arguments, data_folder, generated, print_bytes, write_cog  # noqa: E402

SIZE, TILE = 10980, 512
ORIGIN, PIXEL, EPSG = (399960.0, 5000040.0), 10.0, 32633  # a Sentinel-2 tile grid


def make_big_cog(path: Path) -> Path:
    """A 10980 x 10980 uint16 DEFLATE COG, 512 px tiles, overviews: smooth fields plus noise
    (compresses about like a real reflectance band)."""
    import numpy as np
    from rasterio.enums import Resampling
    from rasterio.transform import from_origin
    from rasterio.warp import reproject

    if path.exists():
        return path
    rng = np.random.default_rng(42)
    transform = from_origin(*ORIGIN, PIXEL, PIXEL)
    coarse = rng.uniform(300, 4000, (64, 64)).astype("float32")
    field = np.empty((SIZE, SIZE), dtype="float32")
    reproject(
        coarse,
        field,
        src_transform=from_origin(*ORIGIN, SIZE * PIXEL / 64, SIZE * PIXEL / 64),
        src_crs=f"EPSG:{EPSG}",
        dst_transform=transform,
        dst_crs=f"EPSG:{EPSG}",
        resampling=Resampling.bilinear,
    )
    field += rng.normal(0, 60, field.shape).astype("float32")
    data = np.clip(field, 1, 65535).astype("uint16")
    del field
    options = {"PREDICTOR": "YES", "NUM_THREADS": "ALL_CPUS", "OVERVIEW_RESAMPLING": "AVERAGE"}
    return write_cog(path, data, crs=f"EPSG:{EPSG}", transform=transform, tile=TILE, **options)


def fresh_url(server, path: Path) -> tuple[str, str]:
    """A new name for the same file (GDAL caches /vsicurl/ reads per URL in a process)."""
    name = f"{path.stem}-{uuid.uuid4().hex[:6]}.tif"
    (server.directory / name).hardlink_to(path)
    return f"{server.url}/{name}", f"/{name}"


def tile_bytes(path: Path, window) -> tuple[int, int, int]:
    """(bytes of the full-resolution tiles intersecting `window`, their count, bytes of all tiles)."""
    import rasterio

    with rasterio.open(path) as src:
        rows = range(window.row_off // TILE, math.ceil((window.row_off + window.height) / TILE))
        cols = range(window.col_off // TILE, math.ceil((window.col_off + window.width) / TILE))
        touched = sum(src.block_size(1, r, c) for r in rows for c in cols)
        n_rows, n_cols = math.ceil(src.height / TILE), math.ceil(src.width / TILE)
        everything = sum(src.block_size(1, r, c) for r in range(n_rows) for c in range(n_cols))
    return touched, len(rows) * len(cols), everything


async def subset_bytes(server, cog: Path, window) -> tuple[int, int, float]:
    """convert_asset over HTTP for `window` (given as a bbox in the COG's CRS): bytes, requests, seconds."""
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    left, top = ORIGIN[0] + window.col_off * PIXEL, ORIGIN[1] - window.row_off * PIXEL
    bbox = [left, top - window.height * PIXEL, left + window.width * PIXEL, top]
    url, key = fresh_url(server, cog)
    with tempfile.TemporaryDirectory() as ws:
        settings = load_settings(workspace=ws, network={"allow_private_hosts": True})
        async with Client(build_server(settings)) as client:
            server.reset_stats()
            start = time.perf_counter()
            result = await client.call_tool(
                "convert_asset",
                {"href": url, "output_format": "GTiff", "bbox": bbox, "bbox_crs": f"EPSG:{EPSG}"},
            )
            seconds = time.perf_counter() - start
        shape = result.structured_content["properties"]["proj:shape"]
        assert shape == [window.height, window.width], shape
    stats = server.stats()["paths"][key]
    return stats["bytes"], stats["requests"], seconds


def whole_band_bytes(server, cog: Path) -> tuple[int, int]:
    """Plain rasterio reading band 1 entirely over HTTP (same GDAL options): bytes, requests."""
    import rasterio

    from stac_gdal_mcp.processing.access import gdal_env
    from stac_gdal_mcp.settings import load_settings

    url, key = fresh_url(server, cog)
    server.reset_stats()
    with (
        rasterio.Env(**gdal_env(load_settings(network={"allow_private_hosts": True}))),
        rasterio.open(f"/vsicurl/{url}") as src,
    ):
        src.read(1)
    stats = server.stats()["paths"][key]
    return stats["bytes"], stats["requests"]


def main() -> None:
    from rasterio.windows import Window

    from testbed import serve_directory

    args = arguments(__doc__).parse_args()
    with data_folder(args.keep) as folder:
        cog = generated(
            make_big_cog, folder / "big10980.tif", "COG", f"{SIZE} x {SIZE} uint16, {TILE} px tiles"
        )
        side = SIZE // 10  # 10% x 10%: 1098 x 1098 px
        window = Window(4000, 3000, side, side)  # not aligned to the tiles, as an AOI usually is
        touched, n_tiles, all_tiles = tile_bytes(cog, window)
        with serve_directory(folder) as server:
            sent, requests, seconds = asyncio.run(subset_bytes(server, cog, window))
            whole, whole_requests = whole_band_bytes(server, cog)
        print(
            f"AOI: {side} x {side} px at col {window.col_off}, row {window.row_off}: {n_tiles} tiles intersect"
        )
        fetched = (sent, requests, seconds)
        print_bytes("convert_asset", "band", (touched, all_tiles), fetched, (whole, whole_requests))


if __name__ == "__main__":
    main()
