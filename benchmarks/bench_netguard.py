"""Cost of the network guard proxy (security.md): the same GDAL reads of a COG served over HTTP on
127.0.0.1, directly (the baseline, measured in the same run) and through netguard's proxy (every
connection checked; the server allowed by network.allowed_private_hosts). Also the catalog
client: the same STAC request, directly and through the proxy.

Run: python benchmarks/bench_netguard.py [--reads N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))


def make_cog(path: Path, size: int = 4096) -> Path:
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(7)
    data = (rng.random((size, size)) * 1000).astype("uint16")
    profile = dict(
        driver="COG", width=size, height=size, count=1, dtype="uint16", crs="EPSG:32633",
        transform=from_origin(399960, 5000040, 10, 10), compress="DEFLATE", blocksize=512,
    )  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)
    return path


def time_reads(url: str, env: dict, reads: int) -> list[float]:
    """Seconds per full read of the COG (a fresh dataset and no cache each time)."""
    import rasterio

    times = []
    for i in range(reads):
        with rasterio.Env(**env, GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR", VSI_CACHE="FALSE"):
            started = time.perf_counter()
            with rasterio.open(f"/vsicurl/{url}?run={i}-{env.get('GDAL_HTTP_PROXY', 'direct')}") as src:
                src.read(1)
            times.append(time.perf_counter() - started)
    return times


def time_catalog(settings, url: str, calls: int) -> list[float]:
    from stac_gdal_mcp.catalogs import RemoteCatalog
    from stac_gdal_mcp.settings import CatalogConfig

    catalog = RemoteCatalog(CatalogConfig(id="bench", url=url), settings)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        catalog.request(url)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()

    from stac_gdal_mcp.catalogs.netguard import gdal_proxy_env
    from stac_gdal_mcp.settings import load_settings
    from testbed.faults import serve_faults

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cog = make_cog(folder / "scene.tif")
        (folder / "landing.json").write_text(json.dumps({"type": "Catalog", "id": "x", "links": []}))
        with serve_faults(folder) as server:
            # no 40 ms Nagle/delayed-ACK stalls on kept-alive connections: a fair baseline
            server._httpd.RequestHandlerClass.disable_nagle_algorithm = True
            common = dict(workspace=folder / "ws", default_catalog="sample")
            direct = load_settings(network={"allow_private_hosts": True}, **common)
            guarded = load_settings(
                network={"allow_private_hosts": False, "allowed_private_hosts": [f"127.0.0.1:{server.port}"]},
                **common,
            )
            env = gdal_proxy_env(guarded)
            assert env, "the guard proxy did not start"
            url = f"{server.url}/scene.tif"
            time_reads(url, {}, 1)  # warm up
            base = statistics.median(time_reads(url, {}, args.reads))
            proxied = statistics.median(time_reads(url, env, args.reads))
            size_mb = cog.stat().st_size / 1024**2
            print(f"COG {size_mb:.1f} MB, full read, median of {args.reads}:")
            print(f"  direct        {base * 1000:8.1f} ms  ({size_mb / base:6.1f} MB/s)")
            print(
                f"  through guard {proxied * 1000:8.1f} ms  ({size_mb / proxied:6.1f} MB/s)  ratio {proxied / base:.2f}"
            )
            landing = f"{server.url}/landing.json"
            base = statistics.median(time_catalog(direct, landing, 50))
            proxied = statistics.median(time_catalog(guarded, landing, 50))
            print("catalog request (small JSON), median of 50:")
            print(f"  direct        {base * 1000:8.2f} ms")
            print(f"  through guard {proxied * 1000:8.2f} ms  ratio {proxied / base:.2f}")


if __name__ == "__main__":
    main()
