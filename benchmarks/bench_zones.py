"""Reading zonal statistics' zones from a file: wall time and peak RSS of `read_zones`
on a GeoParquet of N small fields (default 80,000, with a name and four other columns), the
current reader against a baseline `zones.py` taken from git (default: the one before the batched
reader, which read the whole file with geopandas and went through GeoJSON text), each in a
fresh process, side by side with their ratio.

Run: python benchmarks/bench_zones.py [--zones N] [--baseline COMMIT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE = "fd6985f~1"  # zones.py before the batched, vectorized reader

CHILD = """
import json, sys, time
sys.path.insert(0, {benchmarks!r})
from measure import peak_rss_mb, reset_peak
sys.path.insert(0, {package_root!r})
import importlib.util
import stac_gdal_mcp.processing
spec = importlib.util.spec_from_file_location("stac_gdal_mcp.processing.zones_under_test", {module!r})
zones = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = zones
spec.loader.exec_module(zones)
from pathlib import Path
import geopandas, shapely  # imported before the measure, as a server has them
reset_peak()
started = time.perf_counter()
found = zones.read_zones({path!r}, id_property="name", roots=[Path({folder!r})])
print(json.dumps({{"seconds": time.perf_counter() - started, "peak_mb": peak_rss_mb(), "zones": len(found)}}))
"""


def make_fields(path: Path, count: int) -> None:
    import geopandas
    import numpy as np
    import shapely

    k = np.arange(count)
    side = int(np.ceil(np.sqrt(count)))
    x, y = 13.0 + (k % side) * 0.001, 45.0 + (k // side) * 0.001
    frame = geopandas.GeoDataFrame(
        {
            "name": [f"field {i}" for i in k],
            "crop": np.where(k % 3 == 0, "maize", "wheat"),
            "area_ha": np.full(count, 0.5),
            "farm": k // 20,
            "note": "a parcel of the registry",
        },
        geometry=shapely.box(x, y, x + 0.0008, y + 0.0008),
        crs=4326,
    )
    frame.to_parquet(path)


def run(module: Path, path: Path) -> dict:
    code = CHILD.format(
        benchmarks=str(HERE),
        package_root=str(ROOT),
        module=str(module),
        path=path.name,
        folder=str(path.parent),
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zones", type=int, default=80_000)
    parser.add_argument("--baseline", default=BASELINE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "fields.parquet"
        started = time.perf_counter()
        make_fields(path, args.zones)
        print(f"{args.zones:,} fields written in {time.perf_counter() - started:.1f} s")
        old = folder / "zones_baseline.py"
        text = subprocess.run(
            ["git", "show", f"{args.baseline}:stac_gdal_mcp/processing/zones.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        old.write_text(text)
        before = run(old, path)
        after = run(ROOT / "stac_gdal_mcp/operations/zonal/zones.py", path)
    print(f"{'':12}{'baseline':>12}{'now':>12}{'ratio':>9}")
    for key, unit in (("seconds", "s"), ("peak_mb", "MiB")):
        print(
            f"{key + ' (' + unit + ')':12}{before[key]:12.2f}{after[key]:12.2f}{before[key] / after[key]:8.1f}x"
        )
    assert before["zones"] == after["zones"] == args.zones


if __name__ == "__main__":
    main()
