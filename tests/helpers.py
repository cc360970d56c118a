"""Helpers shared by test modules (import with `from helpers import ...`; tests/ is on sys.path).

- `TIME_SCALE`, `scaled`: every time budget of a test, scaled for CI and loaded machines.
- `serve_http`: the server over streamable HTTP in a subprocess, for the tests of that transport.
- `DISCOVERY_TOOLS`: the names of the STAC discovery tools.
- `utm_aoi`: the WGS84 bbox around a box given in UTM metres.
- `write_cog`: a DEFLATE COG with overviews, written with rasterio + GDAL's COG driver (test truth).
- `read`, `aoi_on_grid`, `usable_pixels`, `expected_ndvi`: the independent computation of loads
  on synthetic Sentinel-2 scenes (rasterio + numpy on the generated files).
- `run_time_series`, `run_composite`: what the time_series and composite tools do (compute with
  the Session, save, shape the result), for tests that check those results without a client.
- `mask_only_scene`: a Sentinel-2 item whose only asset is its SCL.
- `write_days`, `fractions`: synthetic Sentinel-2 scenes, one per day, and their cover arguments.
- `bare_collection`: the least collection document pgstac loads (whole-world extent, no links).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import rasterio
from pyproj import Transformer
from rasterio.features import geometry_mask
from shapely import transform as shapely_transform
from shapely.geometry import box, mapping

# Every time budget of a test (HTTP timeouts of settings, waits, latency bounds) is multiplied by
# this: TEST_TIME_SCALE, else 3 when CI is set at all (shared runners; `make test` always sets it,
# to "false" when it was unset, so the README's command gets 3 everywhere), else 1 (plain pytest).
# Raise it on a loaded machine.
TIME_SCALE = float(os.environ.get("TEST_TIME_SCALE") or (3 if "CI" in os.environ else 1))


def scaled(seconds: float) -> float:
    """`seconds` times TIME_SCALE: a test's time budget on this machine."""
    return seconds * TIME_SCALE


# The STAC discovery tools (read-only, in every server).
DISCOVERY_TOOLS = (
    "list_catalogs",
    "list_collections",
    "get_collection",
    "get_queryables",
    "search_items",
    "get_item",
)

SCALE, OFFSET = 0.0001, -0.1  # synthetic Sentinel-2 raster:bands
NOT_CLEAR_SCL = (0, 1, 3, 8, 9, 10)  # nodata, defective, shadow, cloud x2, cirrus


def utm_aoi(x0, y0, x1, y1, epsg=32633) -> list[float]:
    """The WGS84 bbox [west, south, east, north] around a box given in UTM metres."""
    to_wgs84 = Transformer.from_crs(epsg, 4326, always_xy=True)
    lons, lats = to_wgs84.transform([x0, x1, x0, x1], [y0, y0, y1, y1])
    return [min(lons), min(lats), max(lons), max(lats)]


def write_cog(path, array, *, epsg=32633, transform=None, nodata=None, blocksize=256, **cog_options):
    """A DEFLATE COG with overviews, written with rasterio + GDAL's COG driver (test truth);
    `cog_options`: more of the driver's creation options (OVERVIEW_RESAMPLING="NEAREST")."""
    import rasterio
    import rasterio.shutil
    from rasterio.io import MemoryFile
    from rasterio.transform import from_origin

    array = array if array.ndim == 3 else array[None]
    count, rows, cols = array.shape
    transform = transform or from_origin(500000, 5000000, 10, 10)
    profile = dict(
        driver="GTiff",
        width=cols,
        height=rows,
        count=count,
        dtype=array.dtype.name,
        crs=f"EPSG:{epsg}",
        transform=transform,
        nodata=nodata,
    )
    with rasterio.Env(GDAL_PAM_ENABLED="NO"), MemoryFile() as memory:
        with memory.open(**profile) as dst:
            dst.write(array)
        with memory.open() as src:
            rasterio.shutil.copy(
                src, str(path), driver="COG", BLOCKSIZE=blocksize, COMPRESS="DEFLATE", **cog_options
            )
    return path


def read(path):
    with rasterio.open(path) as src:
        return src.read(1), src.transform, src.crs


def aoi_on_grid(aoi, transform, crs, shape):
    project = Transformer.from_crs(4326, crs, always_xy=True).transform
    local = shapely_transform(box(*aoi).segmentize(0.0005), project, interleaved=False)
    return geometry_mask([mapping(local)], out_shape=shape, transform=transform, invert=True)


def usable_pixels(scene, bands, aoi, mask_clouds=True):
    """{band: reflectance of usable AOI pixels} plus their (row, col) on the item grid."""
    folder = scene["dir"]
    arrays = {b: read(folder / f"{b}.tif") for b in bands}
    first, transform, crs = arrays[bands[0]]
    keep = aoi_on_grid(aoi, transform, crs, first.shape)
    for b in bands:
        keep &= arrays[b][0] != 0
    if mask_clouds:
        scl = read(folder / "scl.tif")[0]
        scl10 = np.repeat(np.repeat(scl, 2, 0), 2, 1)[: first.shape[0], : first.shape[1]]
        keep &= ~np.isin(scl10, NOT_CLEAR_SCL)
    values = {b: arrays[b][0].astype("float64") * SCALE + OFFSET for b in bands}
    return values, keep, transform


def expected_ndvi(day_scenes, aoi, reducer="mean", mask_clouds=True):
    picked = []
    for scene in day_scenes:
        values, keep, _ = usable_pixels(scene, ["red", "nir"], aoi, mask_clouds)
        ndvi = (values["nir"] - values["red"]) / (values["nir"] + values["red"])
        picked.append(ndvi[keep & np.isfinite(ndvi)])
    v = np.concatenate(picked)
    if reducer == "count":
        return float(v.size), v.size
    return (float(getattr(np, reducer)(v)) if v.size else None), v.size


def run_time_series(session, aoi, **arguments):
    """The time_series tool's result, made as the tool makes it (Session, save CSV and chart)."""
    from stac_gdal_mcp.operations import series

    frame = session.time_series(aoi, **arguments)
    return series.result(frame, session.save(frame), session.save(frame, format="png"))


def run_composite(session, aoi, **arguments):
    """The composite tool's result, made as the tool makes it (Session, save the COG)."""
    from stac_gdal_mcp.operations import composite

    array = session.composite(aoi, **arguments)
    return composite.result(array, session.save(array))


def write_days(folder, days: dict[str, str], *, seed: int, **scene) -> list[dict]:
    """One Sentinel-2-like scene (no visual asset) per `item id: datetime` of `days` into
    `folder`, seeds `seed`, `seed + 1`, ...; the items. `scene` goes to synthetic.write_scene,
    a callable value called with the scene's number (0, 1, ...)."""
    from stac_gdal_mcp.testing import synthetic

    items = []
    for number, (item_id, when) in enumerate(days.items()):
        arguments = {key: value(number) if callable(value) else value for key, value in scene.items()}
        arguments.setdefault("with_visual", False)
        item, _ = synthetic.write_scene(
            "sentinel-2-l2a", folder, item_id, when, seed=seed + number, **arguments
        )
        items.append(item)
    return items


def fractions(**cover: float) -> dict[str, float]:
    """synthetic.write_scene's cover arguments by short name: fractions(cloud=0.3, nodata=0.1)
    is {"cloud_fraction": 0.3, "nodata_fraction": 0.1}."""
    return {f"{name}_fraction": value for name, value in cover.items()}


@contextlib.contextmanager
def serve_http(env: dict) -> Iterator[int]:
    """`stac-gdal-mcp serve --transport http` in a subprocess with `env`, on a free port: the port,
    once the server accepts connections (within 30 s); the server is stopped afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "stac_gdal_mcp", "serve", "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def mask_only_scene(
    out_dir,
    href_base,
    item_id,
    *,
    size_px,
    blocksize,
    seed=0,
    collection_id="sentinel-2-l2a",
    origin=(500000.0, 5000000.0),
):
    """A Sentinel-2 item whose only file is its SCL (size_px / 2 pixels of 20 m from the
    upper-left `origin` in EPSG:32633), as a COG `out_dir/<item_id>-scl.tif`: (item, path)."""
    from rasterio.transform import from_origin

    from stac_gdal_mcp.testing import synthetic

    rng = np.random.default_rng(seed)
    classes = synthetic.scene_classes(rng, (size_px // 2, size_px // 2), cloud=0.3, shadow=0.05, water=0.05)
    speckle = (rng.random(classes.shape) < 0.2) & (classes != 0)  # as in real SCL: compresses less
    classes[speckle] = rng.choice(np.array([4, 5, 7], dtype="uint8"), size=int(speckle.sum()))
    transform = (10.0, 0.0, origin[0], 0.0, -10.0, origin[1])
    item = synthetic.item(
        "sentinel-2-l2a",
        item_id,
        "2024-07-01T10:00:00Z",
        collection_id=collection_id,
        transform=transform,
        shape=(size_px, size_px),
        href_base=href_base,
    )
    path = out_dir / f"{item_id}-scl.tif"
    out_dir.mkdir(parents=True, exist_ok=True)
    grid = from_origin(*origin, 20, 20)
    write_cog(path, classes, transform=grid, nodata=0, blocksize=blocksize, OVERVIEW_RESAMPLING="NEAREST")
    item["assets"] = {"scl": dict(item["assets"]["scl"], href=f"{href_base}/{path.name}")}
    return item, path


def bare_collection(collection_id: str) -> dict:
    """The least collection document pgstac loads: `collection_id`, whole-world extent, no links."""
    return {
        "type": "Collection", "stac_version": "1.0.0", "id": collection_id, "description": collection_id,
        "license": "proprietary", "links": [],
        "extent": {"spatial": {"bbox": [[-180, -90, 180, 90]]}, "temporal": {"interval": [[None, None]]}},
    }  # fmt: skip


def found_items(answer: dict) -> list[dict]:
    """The items of a search_items answer (its structured content: the compact table the text
    holds) as one dict each, the keys an item summary has: a row's columns, and what its
    collection's block says once for all of its items (collection, gsd, assets, ...). Full items
    (detail="full") as they are. Rows under their collections come collection by collection."""
    if "items" in answer:
        return answer["items"]
    columns = answer.get("columns", [])
    if "rows" in answer:
        return [dict(zip(columns, row)) for row in answer["rows"]]
    items = []
    for collection, block in (answer.get("collections") or {}).items():
        shared = {k: v for k, v in block.items() if k not in ("rows", "items_with_other_assets")}
        others = block.get("items_with_other_assets", {})  # item id -> its assets unlike the block's
        for row in block.get("rows", []):
            item = {"collection": collection, **shared, **dict(zip(columns, row))}
            if item["id"] in others:
                assets = {**item.get("assets", {}), **others[item["id"]]}
                item["assets"] = {k: v for k, v in assets.items() if v is not None}
            if item.get("thumbnail") is True and "{" in answer.get("thumbnail", ""):  # a URI template
                item["thumbnail"] = answer["thumbnail"].format(collection=collection, id=item["id"])
            items.append(item)
    return items


async def layered(mcp, tool: str, arguments: dict) -> dict:
    """`tool`'s answer as the server's tool gives it, before the map's middleware: the result as
    JSON (content, structuredContent, isError) with its map layer in `_meta` - what the map's
    view is built of (`build_map_view`), which a client gets only as the view, and only when it
    declares MCP Apps."""
    from stac_gdal_mcp.server.map_app import result_json

    return result_json(await mcp.call_tool(tool, arguments, run_middleware=False))
