"""What several benchmarks share (run from benchmarks/: `from common import ...`).

- `arguments`: the command line of a benchmark whose generated inputs `--keep DIR` keeps.
- `data_folder`: that folder, or a temporary one removed afterwards.
- `generated`: an input made (or reused) and reported with its size and time.
- `print_bytes`: the byte figures of an AOI read against its tiles and the whole band.
- `dated_copies`: items of one scene at 5-day steps, each file under its own URL.
- `write_cog`: an array as a tiled DEFLATE COG through a working GeoTIFF on disk (not in memory:
  the inputs go up to 10,980 px).
- `median_s`: median seconds and last result of functions run in turn, ROUNDS rounds.
- `in_child`, `child_arguments`: a measure run in a fresh process (`--child spec.json`).
- `MINIMAL_SERVER`: the smallest FastMCP server over stdio (one `ping` tool), the baseline of the
  start-up and round-trip figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROUNDS = 5  # rounds `median_s` runs by default


def arguments(doc: str) -> argparse.ArgumentParser:
    """A parser described by the first line of `doc`, with `--keep DIR`."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the generated COG in")
    return parser


def child_arguments(doc: str, **numbers: int) -> argparse.ArgumentParser:
    """A parser described by the first line of `doc`: an integer option a keyword (per_month=3:
    `--per-month`, default 3) and the hidden `--child SPEC`, a child process's entry point."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    for name, default in numbers.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    return parser


def in_child(script: str, spec: dict, folder: Path, label: str) -> dict:
    """Run `spec` in a fresh Python process (`script --child spec.json`, written in `folder`);
    the JSON of the last line it prints. A failure ends the benchmark with its stderr's end."""
    path = folder / f"spec-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, script, "--child", str(path)], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{label} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def data_folder(keep: Path | None) -> Iterator[Path]:
    """`keep` (made if missing, kept), else a temporary folder removed on the way out."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder


def generated(make, path: Path, label: str, facts: str) -> Path:
    """`make(path)` (an input generated, or reused from --keep), reported as `label` with its size,
    `facts` and how long it took."""
    start = time.perf_counter()
    path = make(path)
    print(
        f"{label}: {path.stat().st_size / 1e6:.1f} MB, {facts} (ready in {time.perf_counter() - start:.0f} s)"
    )
    return path


def print_bytes(fetcher: str, whole_what: str, tiles: tuple, fetched: tuple, whole_read: tuple) -> None:
    """The bytes `fetcher` fetched for an AOI against the bytes of the tiles it intersects (target
    <= 1.5x) and against reading the whole `whole_what` (target >= 20x fewer). `tiles`: (bytes of
    the intersecting tiles, of all full-resolution tiles); `fetched`: (bytes, requests, seconds);
    `whole_read`: (bytes, requests)."""
    (touched, all_tiles), (sent, requests, seconds), (whole, whole_requests) = tiles, fetched, whole_read
    rows = [
        ("bytes of the intersecting tiles:", f"{touched:>12,}"),
        (f"bytes fetched by {fetcher}:", f"{sent:>12,}  ({requests} requests, {seconds:.2f} s)"),
        (f"bytes fetched reading the whole {whole_what}:", f"{whole:>12,}  ({whole_requests} requests)"),
        ("(all full-resolution tiles:", f"{all_tiles:>12,})"),
    ]
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"  {label:<{width}}{value}")
    ratio_tiles, ratio_whole = sent / touched, whole / sent
    verdict = "OK" if ratio_tiles <= 1.5 else "MISSED"
    print(f"fetched / intersecting tiles = {ratio_tiles:.3f}x (target <= 1.5x): {verdict}")
    verdict = "OK" if ratio_whole >= 20 else "MISSED"
    print(f"whole {whole_what} / fetched = {ratio_whole:.1f}x fewer bytes (target >= 20x): {verdict}")


def dated_copies(server, base: dict, scene_dir: Path, count: int, prefix: str, keys) -> list[dict]:
    """`count` copies of the item `base` at 5-day steps from 2024-01-01 (ids `prefix` + 000, 001,
    ...), each asset of `keys` a link to the scene's file under its own URL of the Range `server`
    (GDAL caches per URL: every copy is read afresh)."""
    import copy
    import uuid
    from datetime import UTC, datetime, timedelta

    start = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    items = []
    for i in range(count):
        item = copy.deepcopy(base)
        item["id"] = f"{prefix}{i:03d}"
        item["properties"]["datetime"] = (start + timedelta(days=5 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        item["assets"] = {}
        for key in keys:
            name = f"{key}-{uuid.uuid4().hex[:8]}.tif"
            (server.directory / name).hardlink_to(scene_dir / f"{key}.tif")
            item["assets"][key] = dict(base["assets"][key], href=f"{server.url}/{name}")
        items.append(item)
    return items


def write_cog(path: Path, array, *, crs: str, transform, tile: int, nodata=0, **cog_options) -> Path:
    """`array` (2-D) as a COG at `path` with `tile` px blocks, DEFLATE and `cog_options` (GDAL
    COG creation options, e.g. OVERVIEW_RESAMPLING="NEAREST"); the working file is removed."""
    import rasterio
    import rasterio.shutil

    height, width = array.shape
    working = path.with_suffix(".work.tif")
    blocks = {"tiled": True, "blockxsize": tile, "blockysize": tile}
    grid = {"crs": crs, "transform": transform, "width": width, "height": height}
    with rasterio.open(
        working, "w", driver="GTiff", count=1, dtype=array.dtype.name, nodata=nodata, **grid, **blocks
    ) as dst:
        dst.write(array, 1)
    with rasterio.Env(GDAL_PAM_ENABLED="NO"):
        rasterio.shutil.copy(
            str(working), str(path), driver="COG", COMPRESS="DEFLATE", BLOCKSIZE=str(tile), **cog_options
        )
    working.unlink()
    return path


_WORKSPACE: list[str] = []


def bench_workspace() -> str:
    """A temporary workspace for this run's catalogs, one a process and removed at its end: what
    a benchmark's catalogs keep (the parts' footer facts, cache/parts/) neither lands in the
    user's default workspace nor carries into another run."""
    import atexit
    import shutil

    if not _WORKSPACE:
        _WORKSPACE.append(tempfile.mkdtemp(prefix="bench-workspace-"))
        atexit.register(shutil.rmtree, _WORKSPACE[0], True)
    return _WORKSPACE[0]


def median_s(*fns, rounds: int = ROUNDS) -> list[tuple[float, object]]:
    """Median seconds and last result of each function, run in turn round after round (so that
    the load of a shared machine falls on all of them alike)."""
    times: list[list[float]] = [[] for _ in fns]
    results: list[object] = [None] * len(fns)
    for _ in range(rounds):
        for index, fn in enumerate(fns):
            started = time.perf_counter()
            results[index] = fn()
            times[index].append(time.perf_counter() - started)
    return [(statistics.median(t), r) for t, r in zip(times, results, strict=True)]


MINIMAL_SERVER = textwrap.dedent(
    """
    from fastmcp import FastMCP
    mcp = FastMCP("minimal")
    @mcp.tool
    def ping() -> str:
        return "pong"
    mcp.run(transport="stdio", show_banner=False)
    """
)
