"""Estimate figures: for each operation, the bytes a dry run (dry_run=true) says it will
fetch, against the bytes the test suite's Range server really sent when the same call ran
(target: within +-25%), and the same for the number of HTTP requests. Through the MCP client.

Inputs, generated at run time (about 40 s; --keep DIR keeps and reuses them):
- the 10980 x 10980 uint16 COG of bench_subset.py (512 px tiles, DEFLATE + predictor, overviews),
  for a 10% x 10% subset (convert_asset with bbox), reprojections (a bbox at full resolution, the
  whole scene, a coarse one read from an overview) and a quicklook;
- five 2048 px Sentinel-2-like scenes (10 m bands, 20 m SCL, 512 px tiles) in a local catalog,
  for cloud_cover_stats (native and 60 m) and composites / a time series (native and 40 m).

The dry run and the real call read the same files under different names (GDAL caches per URL).

Run: python benchmarks/bench_estimates.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

ORIGIN = (500000.0, 5000000.0)
DAYS = [f"2024-06-{d:02d}T10:00:00Z" for d in (1, 6, 11, 16, 21)]


def scenes(folder: Path) -> list[dict]:
    from stac_gdal_mcp.testing import synthetic

    items = []
    for seed, when in enumerate(DAYS):
        item_id = f"S2B_{seed}"
        done = folder / item_id / f"{item_id}.json"
        if done.exists():
            items.append(json.loads(done.read_text()))
            continue
        item, _ = synthetic.write_scene(
            "sentinel-2-l2a",
            folder,
            item_id,
            when,
            collection_id="bench-s2",
            seed=seed,
            size_px=2048,
            blocksize=512,
            with_visual=False,
            cloud_fraction=0.2 + 0.1 * seed,
        )
        items.append(item)
    return items


def copy_of(server, path: Path) -> tuple[str, str]:
    """A new URL for a file (hard link), and its path on the server."""
    name = f"{path.stem}-{uuid.uuid4().hex[:6]}{path.suffix}"
    os.link(path, server.directory / name)
    return f"{server.url}/{name}", f"/{name}"


def catalog_copy(server, folder: Path, items: list[dict], where: Path) -> tuple[str, str]:
    """A local catalog of the scenes under a new folder name; (catalog path, folder prefix)."""
    name = f"{folder.name}-{uuid.uuid4().hex[:6]}"
    shutil.copytree(folder, server.directory / name, copy_function=os.link)
    features = []
    for item in items:
        item = json.loads(json.dumps(item))
        for key, asset in item["assets"].items():
            asset["href"] = f"{server.url}/{name}/{item['id']}/{key}.{'png' if key == 'thumbnail' else 'tif'}"
        features.append(item)
    path = where / f"{name}.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return str(path), f"/{name}/"


def fetched(server, prefix: str) -> tuple[int, int]:
    paths = server.stats()["paths"]
    hits = [s for p, s in paths.items() if p.startswith(prefix)]
    return sum(s["bytes"] for s in hits), sum(s["requests"] for s in hits)


async def one_file(server, cog: Path, workspace: Path) -> list[tuple]:
    from bench_subset import ORIGIN as S2_ORIGIN
    from bench_subset import PIXEL
    from fastmcp import Client
    from helpers import utm_aoi

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    left, top = S2_ORIGIN[0] + 4000 * PIXEL, S2_ORIGIN[1] - 3000 * PIXEL
    subset = [left, top - 1098 * PIXEL, left + 1098 * PIXEL, top]
    wgs84 = utm_aoi(*subset)
    cases = [
        ("subset (convert_asset, bbox, GTiff)", "convert_asset", {"output_format": "GTiff", "bbox": wgs84}),
        ("reproject, bbox, EPSG:4326", "reproject_asset", {"dst_crs": "EPSG:4326", "bbox": wgs84}),
        ("reproject, whole scene, EPSG:3857", "reproject_asset", {"dst_crs": "EPSG:3857"}),
        (
            "reproject, 0.001 deg (an overview)",
            "reproject_asset",
            {"dst_crs": "EPSG:4326", "resolution": 0.001},
        ),
        ("preview, 512 px", "preview", {}),
    ]
    cases, rows = wanted(cases), []
    settings = load_settings(
        workspace=workspace,
        network={"allow_private_hosts": True},
        limits={"max_output_pixels": 200_000_000},  # the whole scene in EPSG:3857 is 1.2e8 px
    )
    async with Client(build_server(settings)) as client:
        for label, tool, arguments in cases:
            first, _ = copy_of(server, cog)
            second, key = copy_of(server, cog)
            estimate = (
                await client.call_tool(tool, {**arguments, "href": first, "dry_run": True})
            ).structured_content
            start = time.perf_counter()
            await client.call_tool(tool, {**arguments, "href": second})
            seconds = time.perf_counter() - start
            stats = server.stats()["paths"][key]
            rows.append((label, estimate, stats["bytes"], stats["requests"], seconds))
    return rows


async def many_items(server, folder: Path, items: list[dict], workspace: Path) -> list[tuple]:
    from fastmcp import Client
    from helpers import utm_aoi

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    aoi = utm_aoi(ORIGIN[0] + 3000, ORIGIN[1] - 15000, ORIGIN[0] + 15000, ORIGIN[1] - 3000)

    def search(catalog: str) -> dict:  # the analysis tools take their items as one `search` object
        return {"aoi": aoi, "search": {"collections": ["bench-s2"], "catalog": catalog}}

    cases = [
        ("cloud_cover_stats, native 20 m", "cloud_cover_stats", {}),
        ("cloud_cover_stats, 60 m (overview)", "cloud_cover_stats", {"resolution": 60}),
        ("composite red/green/blue, 10 m", "composite", {"bands": ["red", "green", "blue"]}),
        ("composite red, 40 m (overviews)", "composite", {"bands": ["red"], "resolution": 40}),
        ("time_series ndvi, 10 m", "time_series", {"expression": "ndvi"}),
    ]
    cases, rows = wanted(cases), []
    for label, tool, arguments in cases:
        first, _ = catalog_copy(server, folder, items, workspace)
        second, prefix = catalog_copy(server, folder, items, workspace)
        catalogs = [{"id": "dry", "path": first}, {"id": "real", "path": second}]
        settings = load_settings(
            workspace=workspace / "ws", network={"allow_private_hosts": True}, catalogs=catalogs
        )
        async with Client(build_server(settings)) as client:
            estimate = (
                await client.call_tool(tool, {**search("dry"), **arguments, "dry_run": True})
            ).structured_content
            start = time.perf_counter()
            await client.call_tool(tool, {**search("real"), **arguments})
            seconds = time.perf_counter() - start
        sent, requests = fetched(server, prefix)
        rows.append((label, estimate, sent, requests, seconds))
    return rows


ONLY: list[str | None] = [None]  # --only


def wanted(cases: list[tuple]) -> list[tuple]:
    return [c for c in cases if ONLY[0] is None or ONLY[0] in c[0]]


def main() -> None:
    from bench_subset import make_big_cog

    from testbed import serve_directory

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the generated inputs in")
    parser.add_argument("--only", help="run only the operations whose label contains this text")
    args = parser.parse_args()
    ONLY[0] = args.only
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        cog = make_big_cog(folder / "big10980.tif")
        items = scenes(folder / "scenes")
        print(f"inputs ready in {time.perf_counter() - start:.0f} s")
        with tempfile.TemporaryDirectory() as served, serve_directory(served) as server:
            source = Path(served) / cog.name
            os.link(cog, source)
            shutil.copytree(folder / "scenes", Path(served) / "scenes", copy_function=os.link)
            work = Path(tmp) / "work"
            work.mkdir(exist_ok=True)
            rows = asyncio.run(one_file(server, source, work))
            rows += asyncio.run(many_items(server, Path(served) / "scenes", items, work))
    print()
    print(
        f"{'operation':40s} {'estimated':>12s} {'fetched':>12s} {'ratio':>6s}  {'requests est/got':>16s}  time"
    )
    worst = 0.0
    for label, estimate, sent, requests, seconds in rows:
        ratio = estimate["read_bytes"] / sent if sent else float("nan")
        worst = max(worst, abs(ratio - 1))
        print(
            f"{label:40s} {estimate['read_bytes']:>12,} {sent:>12,} {ratio:>6.3f}  "
            f"{estimate['read_requests']:>7} / {requests:<7}  {seconds:.2f} s"
        )
    print(f"\nlargest deviation: {worst:.1%} (target <= 25%): {'OK' if worst <= 0.25 else 'MISSED'}")


if __name__ == "__main__":
    main()
