"""One item of a zonal statistics call: its assets, its grid, the zones grouped into windows
by tile, and exactextract run per window (`measure_assets`).

How one item is measured (`measure_item`, items concurrently on the process's reader threads):
1. the zones whose outline meets the item's footprint (an STRtree built once per call);
2. the assets of the expression's bands (and the cloud mask when `mask_clouds`), each opened
   through `access.open_reader` (href policy, signing, GDAL options, retries, the job);
3. the grid: the finest of the bands' own grids (pixels are never resampled; coarser bands and
   the mask are sampled onto it by pixel centre, exact when grids nest as Sentinel-2's 10/20 m
   do), or a grid of `resolution` in the item's CRS when one is asked for;
4. the zones projected into the item's CRS (once per CRS and call, vertex by vertex as GeoPandas'
   `to_crs` does) and grouped by the tiles under their bounding boxes: each group is one window
   of those tiles and no others (read a tile at a time), shared by every zone of the group;
5. per window: each item's scale/offset applied, nodata and (with `mask_clouds`) every pixel that
   is not clear masked, the expression evaluated, and `exact_extract` run on the window with the
   group's zones: partial pixels count by the share of their area inside the zone.

The items of one day (`per="day"`) are measured the same way on one grid, the first item's
widened over all of them on its lattice (`group_grid`); per window each item's values are
computed as above and `mosaic` takes each pixel from the first item where it is usable.
"""

from __future__ import annotations

import ast
import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidArgument, LimitExceeded, NotSupported
from ...processing.bands import Band
from ...processing.bands import valid as stored_data
from ...processing.jobs import Job
from .coverage import CLASS_STATS, Coverages, check_classes
from .zones import shown_id

WINDOW_PIXELS = 2048 * 2048  # a group's window at most (larger zones are read one by one)
MAX_SIDE = 2**31 - 1  # pixels across a grid at most: a raster size is a 32-bit int (GDAL)


# --- what every item of a call shares -----------------------------------------------------------


@dataclass
class Call:
    """What every item of a call shares: the request, the catalog, the items, the zones' index
    and their projections (by CRS, worked out once)."""

    request: Any  # the checked arguments (zonal.ZonalRequest)
    catalog: Any
    items: list
    notes: list[str]
    collections: Any
    limits: Any = None
    tree: Any = None
    projected: dict = field(default_factory=dict)
    coverages: Any = field(default_factory=lambda: Coverages())  # coverage by grid window, reused
    under: dict = field(default_factory=dict)  # the zones under items' footprints, by footprint
    laid: dict = field(default_factory=dict)  # the windows of zones on a grid (`layout`)

    def zones_under(self, footprint) -> list[int]:
        """Indexes of the zones that meet `footprint` (a shapely geometry in WGS84)."""
        import shapely

        if self.tree is None:
            self.tree = shapely.STRtree(list(self.request.zones.geometries))
        return sorted(int(i) for i in self.tree.query(footprint, predicate="intersects"))

    def zones_of_items(self, items: list[dict]) -> list[int]:
        """Indexes of the zones the items' footprints meet; every zone when an item has no
        footprint (it may cover any)."""
        from shapely.geometry import shape

        footprints = [shape(i["geometry"]) for i in items if i.get("geometry")]
        if len(footprints) < len(items):
            return list(range(len(self.request.zones)))
        key = tuple(f.wkb for f in footprints)  # (the items of one tile share their footprint)
        found = self.under.get(key)
        if found is None:
            found = self.under[key] = sorted({z for f in footprints for z in self.zones_under(f)})
        return found

    def in_crs(self, crs) -> list:
        """Every zone in `crs`, vertex by vertex (as GeoPandas' `to_crs`: the polygons a user
        would hand exactextract for the raster)."""
        key = crs.to_wkt()
        found = self.projected.get(key)
        if found is None:
            found = self.projected[key] = project_zones(self.request.zones.geometries, crs)
        return found


def project_zones(geometries, crs) -> list:
    import shapely
    from pyproj import Transformer

    to_crs = Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    return list(shapely.transform(list(geometries), to_crs.transform, interleaved=False))


# --- one item: its assets and grid --------------------------------------------------------------


@dataclass
class ItemInputs:
    bands: dict[str, Band]  # band name of the expression -> its asset
    mask: Any = None  # masks.MaskSource or None
    mask_band: Band | None = None

    @property
    def sources(self) -> list:
        found = {b.source.asset_key: b.source for b in self.bands.values()}
        if self.mask_band is not None:
            found.setdefault(self.mask_band.source.asset_key, self.mask_band.source)
        return list(found.values())


def item_inputs(core, call: Call, item: dict) -> ItemInputs:
    """The assets of the expression's bands (and the cloud mask) of one item, resolved."""
    from ...processing.access import asset_source, find_asset
    from ...processing.selection import item_mask

    bands = {}
    for name in call.request.names:
        key, meta = find_asset(item, name)
        bands[name] = Band.of(asset_source(core, item, key, catalog=call.catalog.id), meta)
    inputs = ItemInputs(bands)
    if call.request.call.mask_clouds:
        mask = item_mask(item, call.collections)
        inputs.mask = mask
        inputs.mask_band = Band(
            asset_source(core, item, mask.asset, catalog=call.catalog.id), nodata=mask.nodata
        )
    return inputs


def class_names(item: dict, request) -> dict[str, dict]:
    """Class value -> {"name": the classification extension's description, else its name;
    "color": its color_hint as #rrggbb, or None} of the asset a one-band expression reads (without
    the extension: the classes the server knows, `known_classes`: SCL, ESA WorldCover); {} for a
    formula, a bit field (`class_bitfields`) or an asset without classes."""
    from ...processing.known_classes import asset_classes, hex_color

    if len(request.names) != 1 or not isinstance(request.tree.body, ast.Name):
        return {}
    classes, _ = asset_classes(item, _asset_key(item, request.names[0]))
    return {
        str(_label(c["value"])): {
            "name": str(c.get("description") or c.get("name") or c["value"]),
            "color": hex_color(c.get("color_hint")),
        }
        for c in classes
        if "value" in c and not c.get("nodata")
    }


def class_bitfields(item: dict, request) -> list[dict]:
    """The bit fields (`classification:bitfields`, else Landsat QA_PIXEL's: `known_classes`) of
    the asset a one-band expression reads, whose values the table names by their flags; []
    otherwise."""
    from ...processing.known_classes import asset_classes

    if len(request.names) != 1 or not isinstance(request.tree.body, ast.Name):
        return []
    return asset_classes(item, _asset_key(item, request.names[0]))[1]


def _asset_key(item: dict, name: str) -> str:
    from ...processing.access import find_asset

    return find_asset(item, name)[0]


@dataclass(frozen=True)
class Grid:
    """The grid the statistics are computed on (north-up): an asset's own, or `resolution`'s."""

    transform: Any
    width: int
    height: int
    crs: Any
    block: tuple[int, int]  # (width, height) of the tiles zones are grouped by

    @property
    def pixel_area(self) -> float:
        return abs(self.transform.a * self.transform.e)


def item_grid(datasets: dict, inputs: ItemInputs, resolution: float | None) -> Grid:
    """The finest grid of the expression's bands, or one of `resolution` over the same extent."""
    from rasterio.transform import Affine

    band_sets = [datasets[b.source.asset_key] for b in inputs.bands.values()]
    for src in datasets.values():
        if src.crs != band_sets[0].crs:
            raise NotSupported(
                f"the assets of item '{inputs.bands[next(iter(inputs.bands))].source.item_id}' "
                "are in different CRSs; zonal statistics need one CRS per item"
            )
        if src.transform.b or src.transform.d or src.transform.e >= 0:
            raise NotSupported(f"{src.name.rsplit('/', 1)[-1]} is not a north-up grid")
    finest = min(band_sets, key=lambda s: abs(s.transform.a))
    block = tuple(reversed(finest.block_shapes[0]))
    if resolution is None:
        return Grid(finest.transform, finest.width, finest.height, finest.crs, block)
    t = finest.transform
    across = max(finest.width * abs(t.a), finest.height * abs(t.e)) / resolution  # (inf at 5e-324)
    if not across <= MAX_SIDE:  # (1e-300: its pixel area is 0, its grid not invertible)
        raise InvalidArgument(
            f"resolution {resolution:g} is too fine for the item's raster: its grid would be "
            f"{across:.3g} pixels across, more than a raster can have ({MAX_SIDE:,})"
        )
    width = math.ceil(finest.width * abs(t.a) / resolution)
    height = math.ceil(finest.height * abs(t.e) / resolution)
    scale = abs(t.a) / resolution
    block = (max(1, round(block[0] * scale)), max(1, round(block[1] * scale)))
    return Grid(Affine(resolution, 0, t.c, 0, -resolution, t.f), width, height, finest.crs, block)


# --- windows: zones grouped by tile -------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """A pixel window of the grid (clipped to it) and the zones measured in it."""

    col0: int
    row0: int
    col1: int
    row1: int
    zones: tuple[int, ...]

    @property
    def pixels(self) -> int:
        return (self.col1 - self.col0) * (self.row1 - self.row0)


def windows(grid: Grid, bounds, indexes: list[int]) -> tuple[list[Window], list[int]]:
    """The windows that cover zones `indexes` (their `bounds` in the grid's CRS, N x 4), grouped
    by the tiles under their bounding boxes (a window reads those tiles and no other); and the
    zones that lie outside the grid."""
    import numpy as np

    inverse = ~grid.transform
    c0, r0 = inverse @ (bounds[:, 0], bounds[:, 3])
    c1, r1 = inverse @ (bounds[:, 2], bounds[:, 1])
    c0, r0 = np.clip(np.floor(c0), 0, grid.width), np.clip(np.floor(r0), 0, grid.height)
    c1, r1 = np.clip(np.ceil(c1), 0, grid.width), np.clip(np.ceil(r1), 0, grid.height)
    inside = (c1 > c0) & (r1 > r0)
    outside = [indexes[i] for i in np.flatnonzero(~inside)]
    groups: dict[tuple, list[int]] = {}
    bw, bh = grid.block
    for i in np.flatnonzero(inside):
        size = (c1[i] - c0[i]) * (r1[i] - r0[i])
        # the tiles under the zone's bounding box: zones under the same tiles share one read
        tiles = (int(c0[i]) // bw, int(r0[i]) // bh, (int(c1[i]) - 1) // bw, (int(r1[i]) - 1) // bh)
        key = ("alone", i) if size > WINDOW_PIXELS else tiles
        groups.setdefault(key, []).append(int(i))
    found = []
    for members in groups.values():
        m = np.array(members)
        found.append(
            Window(
                int(c0[m].min()),
                int(r0[m].min()),
                int(c1[m].max()),
                int(r1[m].max()),
                tuple(indexes[i] for i in members),
            )
        )
    return found, outside


def source_window(grid: Grid, window: Window, src):
    """Where the grid window's pixel centres fall in dataset `src`: (native window as (col0,
    row0, col1, row1) or None when it misses the raster, column indexes, row indexes), the
    indexes relative to the native window and -1 outside the raster."""
    import numpy as np

    t, s = grid.transform, src.transform
    xs = t.c + (np.arange(window.col0, window.col1) + 0.5) * t.a
    ys = t.f + (np.arange(window.row0, window.row1) + 0.5) * t.e
    cols = np.floor((xs - s.c) / s.a).astype("int64")
    rows = np.floor((ys - s.f) / s.e).astype("int64")
    cols[(cols < 0) | (cols >= src.width)] = -1
    rows[(rows < 0) | (rows >= src.height)] = -1
    good_c, good_r = cols[cols >= 0], rows[rows >= 0]
    if not good_c.size or not good_r.size:
        return None, cols, rows
    native = (int(good_c.min()), int(good_r.min()), int(good_c.max()) + 1, int(good_r.max()) + 1)
    cols = np.where(cols >= 0, cols - native[0], -1)
    rows = np.where(rows >= 0, rows - native[1], -1)
    return native, cols, rows


# --- one window: read, mask, evaluate, exactextract -----------------------------------------------


def sample(reader, grid: Grid, window: Window, tiles: dict | None = None):
    """The pixels of `reader`'s asset at the window's pixel centres (nearest: the asset's own
    pixels when it is the grid), and where the asset covers them; `tiles`: the asset's decoded
    tiles kept for the other windows of the call (`read_by_tile`)."""
    import numpy as np

    native, cols, rows = source_window(grid, window, reader.src)
    covered = (rows[:, None] >= 0) & (cols[None, :] >= 0)
    if native is None:
        return np.zeros(covered.shape, dtype=reader.src.dtypes[0]), covered
    block = reader.run(lambda src: read_by_tile(src, native, tiles))
    return block[np.ix_(np.maximum(rows, 0), np.maximum(cols, 0))], covered


def read_by_tile(src, native, tiles: dict | None = None):
    """Band 1 of `src` on window `native` (col0, row0, col1, row1), read one of its tiles at a time:
    a read within one tile goes through GDAL's /vsicurl/ cache, where a read over several tiles is
    one multi-range request that bypasses it (the next group of zones over the same tile edge
    fetched those tiles again: 1.36x the touched tiles' bytes at 100,000 zones). With `tiles` (a
    dict per asset and call) each tile is read whole and decoded once for every window of the call
    (windows of one group of zones share tiles: a tile was decoded again for each)."""
    import numpy as np
    from rasterio.windows import Window as RasterWindow

    c0, r0, c1, r1 = native
    if not src.profile.get("tiled"):  # (strips: one read)
        return src.read(1, window=RasterWindow(c0, r0, c1 - c0, r1 - r0))
    bh, bw = src.block_shapes[0]
    out = np.empty((r1 - r0, c1 - c0), dtype=src.dtypes[0])
    for top in range(r0 - r0 % bh, r1, bh):
        for left in range(c0 - c0 % bw, c1, bw):
            x0, y0 = max(left, c0), max(top, r0)
            x1, y1 = min(left + bw, c1), min(top + bh, r1)
            if tiles is None:
                part = src.read(1, window=RasterWindow(x0, y0, x1 - x0, y1 - y0))
            else:
                if (left, top) not in tiles:
                    size = (min(bw, src.width - left), min(bh, src.height - top))
                    tiles[left, top] = src.read(1, window=RasterWindow(left, top, *size))
                part = tiles[left, top][y0 - top : y1 - top, x0 - left : x1 - left]
            out[y0 - r0 : y1 - r0, x0 - c0 : x1 - c0] = part
    return out


def window_values(request, inputs: ItemInputs, read):
    """(value, cloud) masked arrays of one window: value masked where a band is nodata, outside
    its asset, not finite or (with mask_clouds) not clear; cloud 1/0 where the mask is valid, or
    None. `read(band)` gives (pixels, covered) of one asset on the window."""
    import numpy as np

    from ...processing.expressions import evaluate

    usable, cloud, arrays = None, None, {}
    for name, band in inputs.bands.items():
        data, covered = read(band)
        valid = covered & stored_data(data, band.nodata)
        usable = valid if usable is None else usable & valid
        arrays[name] = (data, band)
    if inputs.mask is not None:
        data, covered = read(inputs.mask_band)
        classes = inputs.mask.scheme.decode(data, nodata=inputs.mask_band.nodata)
        known = covered & ~classes.nodata
        usable &= known & classes.clear
        cloud = np.ma.masked_array(classes.cloud.astype("float64"), mask=~known)
    (name, (data, band)), *others = arrays.items()
    plain = not others and isinstance(request.tree.body, ast.Name) and band.plain
    if plain:
        value = data  # a band as stored (class values stay integers: majority, frac, ... exact)
    else:
        with np.errstate(all="ignore"):
            bands = {n: b.values(d) for n, (d, b) in arrays.items()}
            value = np.asarray(evaluate(request.tree, bands), dtype="float64")
        usable &= np.isfinite(value)
    return np.ma.masked_array(value, mask=~usable), cloud


def extract(request, grid: Grid, window: Window, geometries: list, value, cloud, max_classes=None):
    """exactextract's statistics of the window's zones (`geometries` in the grid's CRS); class
    statistics refused past `max_classes` distinct values (`coverage.check_classes`). The
    arrays go to exactextract with NaN where masked (nodata by value): exactextract 0.3 drops a
    masked array's mask for a multipolygon with a part off the raster, and counted those pixels."""
    import numpy as np
    import pandas as pd
    from exactextract import exact_extract
    from exactextract.operation import Operation
    from exactextract.raster import NumPyRasterSource
    from shapely.geometry import mapping

    x0, y0 = grid.transform @ (window.col0, window.row0)
    x1, y1 = grid.transform @ (window.col1, window.row1)
    extent = (x0, y1, x1, y0)
    source = NumPyRasterSource(_nan_filled(value), *extent, name="value")
    ops = [Operation(s.name, s.name, source, None, dict(s.options)) for s in request.stats]
    ops.append(Operation("count", "_count", source))
    if any(s.name in CLASS_STATS for s in request.stats):
        ops.append(Operation("unique", "_unique", source))
    # (the sources stay referenced here: the operations hold them only as C++ pointers)
    cloud_source = None if cloud is None else NumPyRasterSource(_nan_filled(cloud), *extent, name="cloud")
    if cloud_source is not None:
        ops.append(Operation("mean", "cloud_fraction", cloud_source))
    features = [{"type": "Feature", "properties": {}, "geometry": mapping(g)} for g in geometries]
    frame = exact_extract(source, features, ops, output="pandas")
    del cloud_source
    frame.insert(0, "_zone", list(window.zones))
    if "_unique" in frame:
        found = np.unique(np.concatenate([np.asarray(u, dtype="float64") for u in frame["_unique"]] or [[]]))
        check_classes(request, found.size, max_classes)
    if "frac" in frame:
        fractions = pd.DataFrame(
            [
                {f"frac_{_label(k)}": float(v) for k, v in zip(u, f)}
                for u, f in zip(frame["_unique"], frame["frac"])
            ],
            index=frame.index,
        )
        frame = pd.concat([frame.drop(columns=["frac"]), fractions], axis=1)
    if "unique" in frame:
        frame["unique"] = [sorted(map(_label, u)) for u in frame["unique"]]
    frame = frame.drop(columns=["_unique"], errors="ignore")
    if np.ma.getdata(value).dtype.kind in "iu":  # (as exactextract gives them on an integer raster)
        for s in request.stats:
            if s.name in ("median", "quantile") and s.column in frame:
                frame[s.column] = np.trunc(frame[s.column])
    return frame


def _nan_filled(masked):
    import numpy as np

    return np.ma.masked_array(masked, dtype="float64").filled(np.nan)


def measure_window(call: Call, grid: Grid, window: Window, projected: list, value, cloud):
    """The statistics of one window's zones: from the coverage stored for the window (built once
    per grid window and call, `coverage`), or exactextract's own for the statistics and windows
    that path does not compute."""
    from . import coverage

    def geometries():
        return [projected[i] for i in window.zones]

    max_classes = call.limits.max_classes if call.limits is not None else None
    if window.pixels > WINDOW_PIXELS or not coverage.cacheable(call.request):
        return extract(call.request, grid, window, geometries(), value, cloud, max_classes)
    matrix = call.coverages.get(
        coverage.window_key(grid, window), lambda: coverage.cells(grid, window, geometries())
    )
    return coverage.reduce(call.request, matrix, window.zones, value, cloud, _label, max_classes)


def _label(value):
    return int(value) if float(value).is_integer() else float(value)


# --- one item, or the items of one day mosaicked ------------------------------------------------


def group_grid(grids: list[Grid]) -> Grid:
    """The first item's grid widened over every item of the group, on the first grid's lattice
    (Sentinel-2's tiles of one UTM zone share it: each item's pixels are its own)."""
    from rasterio.transform import Affine

    first, t = grids[0], grids[0].transform
    if len(grids) == 1:
        return first
    if any(g.crs != first.crs for g in grids):
        raise NotSupported(
            "the items of one day are in different CRSs; zonal statistics need one CRS per mosaic"
        )
    corners = [(g.transform @ (0, 0), g.transform @ (g.width, g.height)) for g in grids]
    c0 = min(math.floor(round((a[0] - t.c) / t.a, 6)) for a, _ in corners)
    r0 = min(math.floor(round((a[1] - t.f) / t.e, 6)) for a, _ in corners)
    c1 = max(math.ceil(round((b[0] - t.c) / t.a, 6)) for _, b in corners)
    r1 = max(math.ceil(round((b[1] - t.f) / t.e, 6)) for _, b in corners)
    return Grid(t @ Affine.translation(c0, r0), c1 - c0, r1 - r0, first.crs, first.block)


def mosaic(parts: list[tuple]):
    """(value, cloud) of the items of one day on one window: each pixel from the first item (in
    acquisition order) where it is usable; cloud from the item the value came from, else from
    the first item whose mask is known there."""
    import numpy as np

    value, cloud = parts[0]
    for other, other_cloud in parts[1:]:
        take = value.mask & ~other.mask
        if cloud is not None:
            use = take | (cloud.mask & ~other_cloud.mask)
            cloud = np.ma.masked_array(
                np.where(use, other_cloud.data, cloud.data), mask=cloud.mask & other_cloud.mask
            )
        value = np.ma.masked_array(np.where(take, other.data, value.data), mask=value.mask & other.mask)
    return value, cloud


def measure_zones(call: Call, inputs: list[ItemInputs], readers: list[dict], indexes: list[int], job: Job):
    """The statistics of zones `indexes` on one item, or on the mosaic of one day's items (their
    assets open in `readers`, one dict per item), a window at a time; zones outside the
    raster(s) get count 0 and a note."""
    import pandas as pd
    import shapely

    grid, projected, found, outside = layout(call, inputs, readers, indexes)
    parts, tiles = [], {}  # (tiles: each asset's decoded tiles, for every window of the call)
    for window in found:
        job.check()
        if window.pixels > WINDOW_PIXELS and window.pixels > call.limits.max_output_pixels:
            raise LimitExceeded(
                f"zone {shown_id(call.request.zones.ids[window.zones[0]])} covers {window.pixels:,} pixels, more than "
                f"limits.max_output_pixels={call.limits.max_output_pixels:,}; pass a coarser resolution"
            )
        value, cloud = mosaic(
            [
                window_values(call.request, i, reading(rs, grid, window, tiles))
                for i, rs in zip(inputs, readers)
            ]
        )
        parts.append(measure_window(call, grid, window, projected, value, cloud))
    if outside:
        note = "outside the item's raster" if len(inputs) == 1 else "outside the day's rasters"
        parts.append(pd.DataFrame({"_zone": outside, "_count": 0.0, "note": note}))
    frame = pd.concat(parts, ignore_index=True)
    areas = shapely.area([projected[i] for i in frame["_zone"]])
    frame["valid_fraction"] = (frame["_count"] / (areas / grid.pixel_area)).clip(upper=1.0)
    return frame


def layout(call: Call, inputs: list[ItemInputs], readers: list[dict], indexes) -> tuple:
    """(grid, the zones in its CRS, windows, zones outside) of one item or day's items."""
    import shapely

    resolution = call.request.call.resolution
    grids = [item_grid({k: r.src for k, r in rs.items()}, i, resolution) for i, rs in zip(inputs, readers)]
    grid = group_grid(grids)
    projected = call.in_crs(grid.crs)
    key = (grid, tuple(indexes))  # (the items of one grid cover the same zones: windowed once)
    if key not in call.laid:
        call.laid[key] = windows(grid, shapely.bounds([projected[i] for i in indexes]), list(indexes))
    found, outside = call.laid[key]
    return grid, projected, found, outside


def reading(readers: dict, grid: Grid, window: Window, tiles: dict | None = None):
    """`read(band)` for `window_values`: an asset's pixels on the window, each asset read once;
    `tiles`: decoded tiles by asset, kept over the windows of one call."""
    cache: dict = {}

    def read(band: Band):
        key = band.source.asset_key
        if key not in cache:
            kept = None if tiles is None else tiles.setdefault((id(readers[key]), key), {})
            cache[key] = sample(readers[key], grid, window, kept)
            if band.nodata is None:
                band.nodata = readers[key].src.nodata
        return cache[key]

    return read


def measure_assets(settings, call: Call, inputs: list[ItemInputs], indexes: list[int], job: Job, then=None):
    """The rows of zones `indexes` on the assets of one item, or of one day's items mosaicked in
    the order given (opened here, closed after); `then`: another use of the open assets, of
    `measure_zones`' arguments."""
    from ...processing.access import ONE_THREAD_PER_READ, open_reader

    with contextlib.ExitStack() as stack:
        readers = [
            {
                s.asset_key: stack.enter_context(open_reader(s, settings, env=ONE_THREAD_PER_READ, job=job))
                for s in one.sources
            }
            for one in inputs
        ]
        return (then or measure_zones)(call, inputs, readers, indexes, job)
