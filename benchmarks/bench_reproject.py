"""Reproject figures (issue: processing). Wall time of reproject_asset (MCP client in memory) vs
`rio warp` (rasterio's CLI, same GDAL, in a subprocess) on the same input over HTTP and the same
target grid, alternating, same run. Target: <= 1.2x, with a valid COG (rio warp's GeoTIFF need
not be one). Both read the 10980 x 10980 uint16 COG of bench_subset.py from the Range server;
each run gets a fresh URL so that no run profits from GDAL's per-process cache.

Run: python benchmarks/bench_reproject.py [--keep DIR] [--rounds 3] [--dst-crs EPSG:4326]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from bench_subset import fresh_url, make_big_cog  # noqa: E402


def target_grid(cog: Path, dst_crs: str) -> tuple[float, list[float]]:
    """The resolution and bounds GDAL would choose for the whole scene in dst_crs."""
    import rasterio
    from rasterio.warp import calculate_default_transform

    with rasterio.open(cog) as src:
        transform, width, height = calculate_default_transform(
            src.crs, dst_crs, src.width, src.height, *src.bounds
        )
    res = transform.a
    return res, [transform.c, transform.f - height * res, transform.c + width * res, transform.f]


async def ours(
    server, cog: Path, dst_crs: str, res: float, bounds: list[float], ws: str
) -> tuple[float, str]:
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    url, _ = fresh_url(server, cog)
    settings = load_settings(
        workspace=ws,
        network={"allow_private_hosts": True},
        limits={"max_output_pixels": 400_000_000, "max_output_bytes": 4 * 1024**3},
    )
    async with Client(build_server(settings)) as client:
        start = time.perf_counter()
        result = await client.call_tool(
            "reproject_asset",
            {
                "href": url,
                "dst_crs": dst_crs,
                "resolution": res,
                "bbox": bounds,
                "bbox_crs": dst_crs,
                "resampling": "nearest",
            },
        )
        seconds = time.perf_counter() - start
    return seconds, result.structured_content["assets"]["data"]["href"]


def rio_warp(
    server, cog: Path, dst_crs: str, res: float, bounds: list[float], out: Path, threads: bool
) -> float:
    """rio warp with our GDAL options for cloud reads; `threads`: with GDAL_NUM_THREADS=ALL_CPUS as
    we use it, else without (GDAL's default, one thread)."""
    from stac_gdal_mcp.processing.access import gdal_env
    from stac_gdal_mcp.settings import load_settings

    url, _ = fresh_url(server, cog)
    options = gdal_env(load_settings(network={"allow_private_hosts": True}))
    if not threads:
        options.pop("GDAL_NUM_THREADS")
    env = {**os.environ, **options}
    command = [
        str(Path(sys.executable).with_name("rio")),  # the venv's, also when its bin/ is not on PATH (make)
        "warp",
        f"/vsicurl/{url}",
        str(out),
        "--dst-crs",
        dst_crs,
        "--res",
        repr(res),
        "--bounds",
        *map(repr, bounds),
        "--resampling",
        "nearest",
        "--overwrite",
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    import rasterio
    from rio_cogeo.cogeo import cog_validate

    from testbed import serve_directory

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the generated COG in")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dst-crs", default="EPSG:4326")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "cogs"
        folder.mkdir(parents=True, exist_ok=True)
        cog = make_big_cog(folder / "big10980.tif")
        res, bounds = target_grid(cog, args.dst_crs)
        print(
            f"input: {cog.name} over HTTP ({cog.stat().st_size / 1e6:.0f} MB); target {args.dst_crs}, "
            f"res {res:.6g}, bounds {[round(b, 5) for b in bounds]}, nearest"
        )
        times_ours, times_rio, times_rio_threads = [], [], []
        with serve_directory(folder) as server:
            for round_ in range(args.rounds):
                ws = Path(tmp) / f"ws{round_}"
                rio_out = Path(tmp) / f"rio{round_}.tif"
                times_rio.append(rio_warp(server, cog, args.dst_crs, res, bounds, rio_out, threads=False))
                times_rio_threads.append(
                    rio_warp(server, cog, args.dst_crs, res, bounds, rio_out, threads=True)
                )
                t_ours, ours_out = asyncio.run(ours(server, cog, args.dst_crs, res, bounds, str(ws)))
                times_ours.append(t_ours)
                print(
                    f"round {round_ + 1}: reproject_asset {t_ours:.2f} s, rio warp {times_rio[-1]:.2f} s, "
                    f"rio warp with GDAL_NUM_THREADS=ALL_CPUS {times_rio_threads[-1]:.2f} s"
                )
        # The baseline is the faster of the two rio warp variants.
        baseline = min(statistics.median(times_rio), statistics.median(times_rio_threads))
        ratio = statistics.median(times_ours) / baseline
        with rasterio.open(ours_out) as a, rasterio.open(rio_out) as b:
            print(
                f"outputs: reproject_asset {a.shape} px, overviews {a.overviews(1)}; rio warp {b.shape} px, "
                f"overviews {b.overviews(1)} (rio warp rounds the float width/height up)"
            )
        print(
            f"COG valid: reproject_asset {cog_validate(ours_out, quiet=True)[0]}, "
            f"rio warp {cog_validate(str(rio_out), quiet=True)[0]}"
        )
        print(
            f"median wall time ratio reproject_asset / fastest rio warp = {ratio:.2f}x (target <= 1.2x): "
            f"{'OK' if ratio <= 1.2 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
