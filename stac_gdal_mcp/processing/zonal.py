"""Zonal statistics: exact, coverage-weighted statistics of a band, asset or formula per zone and
per item (or per solar day), straight from the items' COGs, with exactextract as the engine.

`check` turns the arguments into a frozen `ZonalRequest` (once, at the edge), `estimate` says what
a call would read and write (headers and tile indexes only), `run` computes the table, `save`
writes it (GeoParquet or CSV) with a record naming every asset read.

How one item is measured (`measure_item`, items concurrently on the process's reader threads):
1. the zones whose outline meets the item's footprint (an STRtree built once per call);
2. the assets of the expression's bands (and the cloud mask when `mask_clouds`), each opened
   through `access.open_reader` (href policy, signing, GDAL options, retries, the job);
3. the grid: the finest of the bands' own grids (pixels are never resampled; coarser bands and
   the mask are sampled onto it by pixel centre, exact when grids nest as Sentinel-2's 10/20 m
   do), or a grid of `resolution` in the item's CRS when one is asked for;
4. the zones projected into the item's CRS (once per CRS and call, vertex by vertex as GeoPandas'
   `to_crs` does) and grouped by the tiles under their bounding boxes: each group is one window
   read of those tiles and no others, shared by every zone of the group;
5. per window: each item's scale/offset applied, nodata and (with `mask_clouds`) every pixel that
   is not clear masked, the expression evaluated, and `exact_extract` run on the window with the
   group's zones: partial pixels count by the share of their area inside the zone.

A failed read is never data: the item's rows carry `error` and no statistic (every zone's, when it
failed before its footprint was known: it may cover any of them). Zones outside an item's raster
get a row with count 0 and a note; zones no item covers get one such row.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidArgument, LimitExceeded, NotSupported, StacGdalMcpError
from ..stac import item_datetime, raster_band
from .jobs import Job
from .zones import Zones, read_zones

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

DEFAULT_MAX_ITEMS = 50
WINDOW_PIXELS = 2048 * 2048  # a group's window at most (larger zones are read one by one)
# Items measured at once: each holds its decoded tiles (GDAL's block cache, until its files close)
# and its window's arrays, ~25 MB for NDVI on a 2048 px Sentinel-2 tile; the work is CPU-bound
# (exactextract), so more items in flight add memory, not speed. Measured, 10,000 fields x 20
# items: 16 at once 68 s / 1,044 MB peak, 4 at once 65 s / 623 MB (bench_zonal.py).
ITEMS_IN_FLIGHT = 4
SOFTWARE = ("exactextract", "rasterio", "shapely", "pandas")

# exactextract's statistics with one value per zone (quantile takes q=..., frac one column per class)
STATS = (
    "count",
    "sum",
    "mean",
    "median",
    "min",
    "max",
    "stdev",
    "variance",
    "coefficient_of_variation",
    "majority",
    "minority",
    "mode",
    "variety",
    "quantile",
    "frac",
    "unique",
    "min_center_x",
    "min_center_y",
    "max_center_x",
    "max_center_y",
)
PER_PIXEL = ("values", "coverage", "cell_id", "center_x", "center_y", "weights")
Per = Literal["item", "day"]


# --- the request --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """One statistic: exactextract's name, its options, and the table column it fills."""

    name: str
    options: tuple = ()
    column: str = ""


def parse_stats(stats) -> tuple[Stat, ...]:
    """`["mean", "quantile(q=0.9)", ...]` as `Stat`s; an unknown name refused in one line."""
    if isinstance(stats, str):
        stats = [s for s in re.split(r",(?![^(]*\))", stats) if s.strip()]
    if not stats:
        raise InvalidArgument(f"stats is empty; give some of: {', '.join(STATS)}")
    parsed = []
    for text in stats:
        match = re.fullmatch(r"\s*([a-z_]+)\s*(?:\((.*)\))?\s*", str(text))
        name = match.group(1) if match else str(text)
        if name in PER_PIXEL or name.startswith("weighted_"):
            raise InvalidArgument(
                f"stat '{name}' gives per-pixel values or needs weights; use one of: {', '.join(STATS)}"
            )
        if not match or name not in STATS:
            raise InvalidArgument(f"unknown stat '{text}'; valid stats: {', '.join(STATS)}")
        options = _stat_options(text, match.group(2))
        if name == "quantile":
            q = dict(options).get("q")
            if q is None or not 0 <= float(q) <= 1:
                raise InvalidArgument(f"stat '{text}': give quantile(q=0.9), q between 0 and 1")
            column = f"quantile_{round(float(q) * 100):d}"
        else:
            column = name
        parsed.append(Stat(name, options, column))
    return tuple(dict.fromkeys(parsed))


def _stat_options(text: str, inside: str | None) -> tuple:
    options = []
    for part in filter(None, (p.strip() for p in (inside or "").split(","))):
        key, _, value = part.partition("=")
        try:
            options.append((key.strip(), float(value)))
        except ValueError:
            raise InvalidArgument(f"stat '{text}': options are key=number, e.g. quantile(q=0.9)") from None
    return tuple(options)


@dataclass(frozen=True)
class ZonalRequest:
    """The checked arguments of one zonal statistics call."""

    zones: Zones
    expression: str  # the formula (an index name expanded)
    tree: Any = field(repr=False, compare=False)
    names: tuple[str, ...] = ()
    stats: tuple[Stat, ...] = ()
    mask_clouds: bool = True
    per: Per = "item"
    resolution: float | None = None
    catalog: str | None = None
    items: tuple | None = None
    max_items: int | None = None
    search: tuple = ()  # (key, value) pairs of the search arguments

    @property
    def search_arguments(self) -> dict:
        return dict(self.search)

    def parameters(self) -> dict:
        """What an output record lists (None left out)."""
        values = {
            "zones": len(self.zones),
            "expression": self.expression,
            "stats": [s.column for s in self.stats],
            "mask_clouds": self.mask_clouds,
            "per": self.per,
            "resolution": self.resolution,
            "catalog": self.catalog,
            "max_items": self.max_items,
            **self.search_arguments,
        }
        return {k: v for k, v in values.items() if v is not None}


def check(
    core,
    geometries,
    *,
    expression: str = "ndvi",
    stats=("mean", "count"),
    mask_clouds: bool = True,
    per: Per = "item",
    id_property: str | None = None,
    resolution: float | None = None,
    catalog: str | None = None,
    items: list | None = None,
    max_items: int | None = None,
    **search,
) -> ZonalRequest:
    """The arguments of a call checked into a `ZonalRequest` (zones read, expression parsed,
    statistics named), before any item is searched or pixel read."""
    from .access import local_roots
    from .expressions import parse_expression

    if per not in ("item", "day"):
        raise InvalidArgument("per must be 'item' (a row per zone and item) or 'day' (per solar day)")
    if resolution is not None and not resolution > 0:
        raise InvalidArgument(f"resolution must be positive (got {resolution})")
    parsed_stats = parse_stats(stats)
    text, tree, names = parse_expression(expression)
    # (zones already read: zonal_region's groups of a large file)
    zones = (
        geometries
        if isinstance(geometries, Zones)
        else read_zones(geometries, id_property=id_property, roots=local_roots(core))
    )
    return ZonalRequest(
        zones=zones,
        expression=text,
        tree=tree,
        names=tuple(names),
        stats=parsed_stats,
        mask_clouds=bool(mask_clouds),
        per=per,
        resolution=resolution,
        catalog=catalog,
        items=None if items is None else tuple(items),
        max_items=max_items,
        search=tuple((k, v) for k, v in search.items() if v is not None),
    )


# --- items --------------------------------------------------------------------------------------


@dataclass
class Call:
    """What every item of a call shares: the request, the catalog, the items, the zones' index
    and their projections (by CRS, worked out once)."""

    request: ZonalRequest
    catalog: Any
    items: list
    notes: list[str]
    collections: Any
    limits: Any = None
    tree: Any = None
    projected: dict = field(default_factory=dict)

    def zones_under(self, footprint) -> list[int]:
        """Indexes of the zones that meet `footprint` (a shapely geometry in WGS84)."""
        import shapely

        if self.tree is None:
            self.tree = shapely.STRtree(list(self.request.zones.geometries))
        return sorted(int(i) for i in self.tree.query(footprint, predicate="intersects"))

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


def select(core, request: ZonalRequest) -> Call:
    """The items a request measures: the caller's, or a search over the zones (capped)."""
    from .selection import Collections, select_items

    cat = core.catalogs.get(request.catalog)
    found, notes = select_items(
        core,
        request.zones.search_area(),
        catalog=request.catalog,
        items=None if request.items is None else list(request.items),
        search=request.search_arguments,
        max_items=request.max_items,
        default_max=DEFAULT_MAX_ITEMS,
    )
    notes = [*_capped(request.zones.notes), *notes]
    return Call(request, cat, found, notes, Collections(cat), core.settings.limits)


def _capped(notes, most: int = 5) -> list[str]:
    notes = list(notes)
    return notes if len(notes) <= most else [*notes[:most], f"... and {len(notes) - most} more such notes"]


def full_item(call: Call, ref_or_item: dict) -> dict:
    if "assets" in ref_or_item:
        return ref_or_item
    return call.catalog.item(ref_or_item["collection_id"], ref_or_item["item_id"])


# --- one item: its assets and grid --------------------------------------------------------------


@dataclass
class Band:
    """One asset read for an item: its source, and how its values become numbers."""

    source: Any  # access.AssetSource
    scale: float = 1.0
    offset: float = 0.0
    nodata: float | None = None


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
    from .access import asset_source, find_asset
    from .masks import asset_nodata
    from .selection import item_mask

    bands = {}
    for name in call.request.names:
        key, meta = find_asset(item, name)
        band = raster_band(meta)
        bands[name] = Band(
            asset_source(core, item, key, catalog=call.catalog.id),
            float(band.get("scale", 1.0)),
            float(band.get("offset", 0.0)),
            asset_nodata(meta),
        )
    inputs = ItemInputs(bands)
    if call.request.mask_clouds:
        mask = item_mask(item, call.collections)
        inputs.mask = mask
        inputs.mask_band = Band(
            asset_source(core, item, mask.asset, catalog=call.catalog.id), nodata=mask.nodata
        )
    return inputs


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


def sample(reader, grid: Grid, window: Window):
    """The pixels of `reader`'s asset at the window's pixel centres (nearest: the asset's own
    pixels when it is the grid), and where the asset covers them."""
    import numpy as np
    from rasterio.windows import Window as RasterWindow

    native, cols, rows = source_window(grid, window, reader.src)
    covered = (rows[:, None] >= 0) & (cols[None, :] >= 0)
    if native is None:
        return np.zeros(covered.shape, dtype=reader.src.dtypes[0]), covered
    c0, r0, c1, r1 = native
    block = reader.run(lambda src: src.read(1, window=RasterWindow(c0, r0, c1 - c0, r1 - r0)))
    return block[np.ix_(np.maximum(rows, 0), np.maximum(cols, 0))], covered


def _valid(data, covered, nodata):
    valid = covered & (data == data)  # NaN is never valid
    return valid if nodata is None else valid & (data != nodata)


def window_values(request: ZonalRequest, inputs: ItemInputs, read):
    """(value, cloud) masked arrays of one window: value masked where a band is nodata, outside
    its asset, not finite or (with mask_clouds) not clear; cloud 1/0 where the mask is valid, or
    None. `read(band)` gives (pixels, covered) of one asset on the window."""
    import numpy as np

    from .expressions import evaluate

    usable, cloud, arrays = None, None, {}
    for name, band in inputs.bands.items():
        data, covered = read(band)
        valid = _valid(data, covered, band.nodata)
        usable = valid if usable is None else usable & valid
        arrays[name] = (data, band)
    if inputs.mask is not None:
        data, covered = read(inputs.mask_band)
        classes = inputs.mask.scheme.decode(data, nodata=inputs.mask_band.nodata)
        known = covered & ~classes.nodata
        usable &= known & classes.clear
        cloud = np.ma.masked_array(classes.cloud.astype("float64"), mask=~known)
    (name, (data, band)), *others = arrays.items()
    plain = not others and isinstance(request.tree.body, ast.Name) and (band.scale, band.offset) == (1, 0)
    if plain:
        value = data  # a band as stored (class values stay integers: majority, frac, ... exact)
    else:
        with np.errstate(all="ignore"):
            bands = {n: d.astype("float64") * b.scale + b.offset for n, (d, b) in arrays.items()}
            value = np.asarray(evaluate(request.tree, bands), dtype="float64")
        usable &= np.isfinite(value)
    return np.ma.masked_array(value, mask=~usable), cloud


def extract(request: ZonalRequest, grid: Grid, window: Window, geometries: list, value, cloud):
    """exactextract's statistics of the window's zones (`geometries` in the grid's CRS)."""
    import pandas as pd
    from exactextract import exact_extract
    from exactextract.operation import Operation
    from exactextract.raster import NumPyRasterSource
    from shapely.geometry import mapping

    x0, y0 = grid.transform @ (window.col0, window.row0)
    x1, y1 = grid.transform @ (window.col1, window.row1)
    extent = (x0, y1, x1, y0)
    source = NumPyRasterSource(value, *extent, name="value")
    ops = [Operation(s.name, s.name, source, None, dict(s.options)) for s in request.stats]
    ops.append(Operation("count", "_count", source))
    if any(s.name == "frac" for s in request.stats):
        ops.append(Operation("unique", "_unique", source))
    # (the sources stay referenced here: the operations hold them only as C++ pointers)
    cloud_source = None if cloud is None else NumPyRasterSource(cloud, *extent, name="cloud")
    if cloud_source is not None:
        ops.append(Operation("mean", "cloud_fraction", cloud_source))
    features = [{"type": "Feature", "properties": {}, "geometry": mapping(g)} for g in geometries]
    frame = exact_extract(source, features, ops, output="pandas")
    del cloud_source
    frame.insert(0, "_zone", list(window.zones))
    if "frac" in frame:
        fractions = pd.DataFrame(
            [
                {f"frac_{_label(k)}": float(v) for k, v in zip(u, f)}
                for u, f in zip(frame["_unique"], frame["frac"])
            ],
            index=frame.index,
        )
        frame = pd.concat([frame.drop(columns=["frac", "_unique"]), fractions], axis=1)
    if "unique" in frame:
        frame["unique"] = [list(map(_label, u)) for u in frame["unique"]]
    return frame


def _label(value):
    return int(value) if float(value).is_integer() else float(value)


# --- one item -------------------------------------------------------------------------------------


def measure_zones(call: Call, inputs: ItemInputs, readers: dict, indexes: list[int], job: Job):
    """The statistics of zones `indexes` on one item (its assets open in `readers`), a window at a
    time; zones outside the item's raster get count 0 and a note."""
    import pandas as pd
    import shapely

    grid = item_grid({k: r.src for k, r in readers.items()}, inputs, call.request.resolution)
    projected = call.in_crs(grid.crs)
    geometries = [projected[i] for i in indexes]
    found, outside = windows(grid, shapely.bounds(geometries), indexes)
    cache: dict = {}

    def read(band: Band):
        key = band.source.asset_key
        if key not in cache:
            cache[key] = sample(readers[key], grid, window)
            if band.nodata is None:
                band.nodata = readers[key].src.nodata
        return cache[key]

    parts = []
    for window in found:
        job.check()
        cache.clear()
        big = window.pixels > WINDOW_PIXELS
        if big and window.pixels > call.limits.max_output_pixels:
            raise LimitExceeded(
                f"zone {call.request.zones.ids[window.zones[0]]!r} covers {window.pixels:,} pixels, more than "
                f"limits.max_output_pixels={call.limits.max_output_pixels:,}; pass a coarser resolution"
            )
        value, cloud = window_values(call.request, inputs, read)
        parts.append(extract(call.request, grid, window, [projected[i] for i in window.zones], value, cloud))
    if outside:
        parts.append(pd.DataFrame({"_zone": outside, "_count": 0.0, "note": "outside the item's raster"}))
    frame = pd.concat(parts, ignore_index=True)
    areas = shapely.area([projected[i] for i in frame["_zone"]])
    frame["valid_fraction"] = (frame["_count"] / (areas / grid.pixel_area)).clip(upper=1.0)
    return frame


def measure_assets(settings, call: Call, inputs: ItemInputs, indexes: list[int], job: Job):
    """The rows of zones `indexes` on one item's assets (opened here, closed after)."""
    from .access import ONE_THREAD_PER_READ, open_reader

    with contextlib.ExitStack() as stack:
        readers = {
            s.asset_key: stack.enter_context(open_reader(s, settings, env=ONE_THREAD_PER_READ, job=job))
            for s in inputs.sources
        }
        return measure_zones(call, inputs, readers, indexes, job)


def failure(exc: BaseException) -> str:
    """An item's failure in one line (our errors say it in words)."""
    return str(exc) if isinstance(exc, StacGdalMcpError) else f"{type(exc).__name__}: {exc}"


def measure_item(core, call: Call, ref_or_item: dict, job: Job, measure=measure_assets) -> tuple[dict, Any]:
    """(facts of the item, its rows as a DataFrame or None when it covers no zone). Never raises
    for a problem of this item (its rows carry `error`), only when the job stops. `measure`:
    where the pixels are read (`measure_assets` here, `Cluster.measure` on dask.distributed)."""
    import pandas as pd
    from shapely.geometry import shape

    meta = {
        "item_id": ref_or_item.get("item_id") or ref_or_item.get("id"),
        "collection_id": ref_or_item.get("collection_id") or ref_or_item.get("collection"),
        "datetime": None,
        "lon": None,
        "sources": [],
        "error": None,
    }
    indexes: list[int] | None = None  # the item's zones: unknown until its footprint is read
    try:
        item = full_item(call, ref_or_item)
        footprint = shape(item["geometry"]) if item.get("geometry") else None
        meta.update(datetime=item_datetime(item), lon=footprint.centroid.x if footprint else None)
        indexes = call.zones_under(footprint) if footprint else list(range(len(call.request.zones)))
        if not indexes:
            return meta, None
        inputs = item_inputs(core, call, item)
        frame = measure(core.settings, call, inputs, indexes, job)
        meta["sources"] = [s.source_ref() for s in inputs.sources]
        return meta, frame
    except Exception as exc:  # this item only (a broken file, a failed read), unless the job stops
        if job.should_stop:
            raise
        message = failure(exc)
        log.warning("zonal_stats: item %s failed: %s", meta["item_id"], message)
        meta["error"] = message
        if indexes is None:  # failed before its zones were matched: it may cover any of them
            indexes = list(range(len(call.request.zones)))
        return meta, pd.DataFrame({"_zone": indexes, "error": message}) if indexes else None


# --- items on dask.distributed ---------------------------------------------------------------------


class ItemFailed(StacGdalMcpError):
    """An item's failure on a dask worker, in the words the worker gave (see `failure`)."""


class Cluster:
    """Items measured on the dask.distributed cluster at `settings.dask_scheduler`: the client
    resolves each item (catalog, footprint, assets) as here, a worker reads and measures it. The
    zones travel once (scattered to every worker); a worker keeps their projections per call."""

    def __init__(self, core, call: Call):
        import uuid

        from .dask_runtime import dask_client

        self.client = dask_client(core.settings.dask_scheduler)
        self.key = uuid.uuid4().hex
        self.request = self.client.scatter(call.request, broadcast=True, hash=False)

    def measure(self, settings, call: Call, inputs: ItemInputs, indexes: list[int], job: Job):
        """`measure_assets` on a worker; waits for it, checking the job (a stop cancels it)."""
        future = self.client.submit(
            measure_on_worker, settings, self.request, self.key, inputs, indexes, pure=False
        )
        try:
            while True:
                try:
                    frame, error = future.result(timeout=0.2)
                    break
                except TimeoutError:
                    job.check()
        except BaseException:
            future.cancel()
            raise
        if error is not None:
            raise ItemFailed(error)
        return frame

    def close(self) -> None:
        """Let the workers drop the zones."""
        self.request.release()


_WORKER_CALLS: dict[str, Call] = {}


def measure_on_worker(settings, request: ZonalRequest, key: str, inputs: ItemInputs, indexes: list[int]):
    """(rows, None) or (None, the failure in one line) of one item, on a dask worker."""
    call = _WORKER_CALLS.get(key)
    if call is None:  # (one call's zone projections kept per worker process)
        _WORKER_CALLS.clear()
        call = _WORKER_CALLS[key] = Call(request, None, [], [], None, settings.limits)
    try:
        return measure_assets(settings, call, inputs, indexes, Job()), None
    except Exception as exc:
        log.warning(
            "zonal_stats: item %s failed on a dask worker: %s", inputs.sources[0].item_id, failure(exc)
        )
        return None, failure(exc)


# --- many items ------------------------------------------------------------------------------------


def run(core, request: ZonalRequest, job: Job | None = None) -> pd.DataFrame:
    """The statistics table of a checked request (see the module docstring): a GeoDataFrame, one
    row per zone and item (`per="item"`) or per zone and solar day (`per="day"`), its provenance
    in `attrs`. `job` gets a progress step per item and stops the reads when cancelled."""
    job = job or Job()
    job.limit_time(core.settings.limits.job_timeout_s)
    call = select(core, request)
    return table(core, call, *measure_items(core, call, job))


def measure_items(core, call: Call, job: Job, *, report: bool = True) -> tuple[list, list]:
    """(facts, rows) of each of the call's items, on the reader threads or the dask cluster;
    `report`: a progress step per item (zonal_region reports per group of zones instead)."""
    total = len(call.items)
    metas: list = [None] * total
    frames: list = [None] * total
    workers = max(1, min(core.settings.limits.max_concurrency, ITEMS_IN_FLIGHT, total))
    if total and report:
        job.progress(0, total, f"zonal statistics of {len(call.request.zones)} zones on {total} items")
    from .access import read_each

    with contextlib.ExitStack() as stack:
        measure = measure_assets
        if total and core.settings.dask_scheduler:  # a worker thread per item in flight
            cluster = stack.enter_context(contextlib.closing(Cluster(core, call)))
            workers = max(1, min(sum(cluster.client.nthreads().values()), total))
            measure = cluster.measure
        args = [(core, call, it, job, measure) for it in call.items]
        results = stack.enter_context(contextlib.closing(read_each(measure_item, args, workers)))
        for done, (index, (meta, frame)) in enumerate(results, start=1):
            metas[index], frames[index] = meta, frame
            rows = 0 if frame is None else len(frame)
            if report:
                job.progress(done, total, f"{meta['item_id']}: {meta['error'] or f'{rows} zones measured'}")
    return metas, frames


def table(core, call: Call, metas: list[dict], frames: list) -> pd.DataFrame:
    """The items' rows as one table in the zones' order, then time; with its provenance. The
    items' facts (time, ids) are kept once per item and taken into the rows by item index."""
    import numpy as np
    import pandas as pd

    request = call.request
    parts = [frame.assign(_item=k) for k, frame in enumerate(frames) if frame is not None]
    covered = np.zeros(len(request.zones), dtype=bool)
    for frame in parts:
        covered[frame["_zone"].to_numpy()] = True
    missing = np.flatnonzero(~covered)
    if missing.size:  # (item -1: the facts' last entry, None)
        parts.append(
            pd.DataFrame({"_zone": missing, "_count": 0.0, "note": "no item covers this zone", "_item": -1})
        )
    rows = pd.concat(parts, ignore_index=True)
    del parts
    item = rows.pop("_item").to_numpy()
    # one row per item, and a last one of None for the zones no item covers (item -1)
    none = {"datetime": None, "collection_id": None, "item_id": None, "lon": None}
    facts = pd.DataFrame([*metas, none])[["datetime", "collection_id", "item_id", "lon"]]
    facts["datetime"] = pd.to_datetime(facts["datetime"], utc=True, format="ISO8601")
    for column, name in (
        ("datetime", "datetime"),
        ("collection_id", "collection_id"),
        ("item_ids", "item_id"),
        ("_lon", "lon"),
    ):
        rows[column] = facts[name].array.take(item)
    if request.per == "day":
        rows = per_day(rows)
    rows = rows.sort_values(["_zone", "datetime"], kind="stable", na_position="first")
    return finish(core, call, rows, metas)


def per_day(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per zone, collection and solar day: the day's item that saw most of the zone
    (its statistics, exact on its own grid), with the ids of every item of the day over it."""
    import pandas as pd

    hours = pd.to_timedelta(rows["_lon"].fillna(0) / 15, unit="h")
    rows = rows.assign(date=(rows["datetime"] + hours).dt.strftime("%Y-%m-%d"))
    keys = ["_zone", "collection_id", "date"]
    rows = rows.assign(_rank=rows["_count"].fillna(-1.0))
    best = rows.sort_values("_rank", ascending=False, kind="stable").drop_duplicates(keys)
    ids = (
        rows.dropna(subset=["item_ids"])
        .groupby(keys, dropna=False)["item_ids"]
        .agg(lambda v: " ".join(sorted(v)))
    )
    best = best.drop(columns=["item_ids", "_rank"]).join(ids, on=keys)
    return best.sort_values(["_zone", "datetime"], kind="stable")


def finish(core, call: Call, rows: pd.DataFrame, metas: list[dict]) -> pd.DataFrame:
    """The public columns, the zones' geometry, and the provenance in `attrs`."""
    import geopandas
    import numpy as np
    import pandas as pd

    from ..outputs import package_versions
    from .records import Provenance

    request = call.request
    zones = request.zones
    stats = [s.column for s in request.stats if s.name != "frac"]
    fracs = sorted((c for c in rows if c.startswith("frac_")), key=lambda c: (len(c), c))
    if fracs:
        rows[fracs] = rows[fracs].where(rows[fracs].notna() | ~(rows["_count"] > 0), 0.0)
    for column in [*stats, "valid_fraction", "cloud_fraction", "note", "error", "item_ids", "collection_id"]:
        if column not in rows:
            rows[column] = None
    for column in [*stats, "valid_fraction", "cloud_fraction"]:
        if column != "unique":
            rows[column] = pd.to_numeric(rows[column], errors="coerce")
    if "count" in stats:  # zones outside the rasters: count 0 (a failed read stays unknown)
        rows["count"] = rows["count"].fillna(rows["_count"])
    head = ["zone_id", "datetime"] + (["date"] if request.per == "day" else [])
    columns = [
        *head,
        "collection_id",
        "item_ids",
        *stats,
        *fracs,
        "valid_fraction",
        "cloud_fraction",
        "note",
        "error",
    ]
    zone = rows["_zone"].to_numpy()
    rows["zone_id"] = pd.Series(list(zones.ids)).to_numpy()[zone]
    shapes = np.empty(len(zones), dtype=object)
    shapes[:] = zones.geometries
    frame = geopandas.GeoDataFrame(
        {c: rows[c].array for c in columns},
        geometry=geopandas.array.from_shapely(shapes[zone], crs="EPSG:4326"),
    )
    del rows
    failed = [m for m in metas if m and m["error"]]
    notes = list(call.notes)
    if failed:
        ids = ", ".join(m["item_id"] for m in failed[:5]) + (", ..." if len(failed) > 5 else "")
        notes.append(
            f"{len(failed)} items could not be read ({ids}): their rows carry `error` and no statistic"
        )
    if not call.items:
        notes.append("no items to measure: widen the search (datetime, collections) or check the zones")
    sources = [s for m in metas if m and not m["error"] for s in m["sources"]]
    title = f"{', '.join(stats + (['frac'] if fracs else []))} of {request.expression} per zone"
    frame.attrs.update(
        Provenance(
            kind="zonal_stats",
            operation="zonal_stats",
            parameters=request.parameters(),
            sources=sources,
            title=title,
            lineage=f"{title} and {request.per}, exact (coverage-weighted) statistics with exactextract "
            f"on the native grids of {len(sources)} assets",
            software=package_versions(*SOFTWARE),
            properties={"zones_bbox": [round(v, 6) for v in zones.search_area().bounds]},
            facts={
                "expression": request.expression,
                "stats": [s.column for s in request.stats],
                "per": request.per,
                "mask_clouds": request.mask_clouds,
                "zones": len(zones),
                "items": len(call.items) - len(failed),
                "notes": notes,
                "failed_items": [{"item_id": m["item_id"], "error": m["error"]} for m in failed],
            },
        ).to_attrs()
    )
    return frame


# --- dry run ----------------------------------------------------------------------------------------


def estimate(core, request: ZonalRequest):
    """What `run` would read and write: per item, the very windows it would read of each asset,
    looked up in the COGs' tile indexes (headers only). Items that would fail are noted."""
    from concurrent.futures import ThreadPoolExecutor

    import shapely

    from .estimate.reads import Planner
    from .estimate.result import Estimate, OutputSize

    call = select(core, request)
    planner = Planner(core)
    result = Estimate(operation="zonal_stats", notes=list(call.notes))

    def one(ref_or_item) -> tuple[str, int]:
        from shapely.geometry import shape

        item = full_item(call, ref_or_item)
        indexes = (
            call.zones_under(shape(item["geometry"]))
            if item.get("geometry")
            else list(range(len(request.zones)))
        )
        if not indexes:
            return item["id"], 0
        inputs = item_inputs(core, call, item)
        with contextlib.ExitStack() as stack:
            opened = {s.asset_key: stack.enter_context(planner.open(s)) for s in inputs.sources}
            grid = item_grid({k: src for k, (_, src, _) in opened.items()}, inputs, request.resolution)
            projected = call.in_crs(grid.crs)
            found, _ = windows(grid, shapely.bounds([projected[i] for i in indexes]), indexes)
            for window in found:
                for plan, src, open_level in opened.values():
                    native = source_window(grid, window, src)[0]
                    if native is not None and plan.indexed:
                        level = plan.level(None, open_level)
                        plan.read(
                            level,
                            level.tiles(native[0], native[1], native[2] - native[0], native[3] - native[1]),
                            [1],
                        )
        return item["id"], len(indexes)

    rows, ids = 0, []
    workers = max(1, min(core.settings.limits.max_concurrency, len(call.items) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="estimate") as pool:
        futures = [pool.submit(one, it) for it in call.items]
        for it, future in zip(call.items, futures):
            try:
                item_id, count = future.result()
            except StacGdalMcpError as exc:
                result.notes.append(f"item '{it.get('item_id') or it.get('id')}' would fail: {exc}")
                continue
            ids.append(item_id)
            rows += count
    result.item_ids = ids
    result.output = OutputSize(rows=rows, format="GeoParquet or CSV")
    return planner.fill(result)


# --- saving -----------------------------------------------------------------------------------------

MEDIA_TYPES = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv"}


def provenance_of(frame):
    from .records import Provenance

    return Provenance.required(frame, "zonal_stats", "zonal statistics")


def save(
    core, frame, *, format: Literal["parquet", "csv"] = "parquet", output_name: str | None = None, job=None
):
    """Write a zonal statistics table as GeoParquet (the zones' geometry included) or CSV (the
    geometry as WKT), with a record naming every asset it was computed from; return the record."""
    provenance = provenance_of(frame)
    if format not in MEDIA_TYPES:
        raise InvalidArgument("format must be 'parquet' (GeoParquet) or 'csv' for a zonal statistics table")
    if saved := provenance.facts.get("saved_as"):  # a region's: written while computed (zonal_region)
        if format != "parquet" or output_name is not None:
            raise InvalidArgument(
                f"this table of {provenance.facts['zones']:,} zones was saved as it was computed, as the "
                f"partitioned GeoParquet output '{saved}'; it is not written again"
            )
        return core.outputs.get(saved)
    if job is not None:
        job.progress(1, 1, "writing the table")
    store = core.outputs
    with store.writing(f".{format}", output_name, stem="zonal-stats") as out:
        if format == "parquet":
            frame.to_parquet(out.path, index=False)
        else:
            table = frame.to_wkt()
            table.to_csv(out.path, index=False, date_format="%Y-%m-%dT%H:%M:%SZ")
        return store.commit(
            out,
            operation=provenance.operation,
            parameters=provenance.parameters,
            sources=provenance.sources,
            software=provenance.software,
            media_type=MEDIA_TYPES[format],
            title=provenance.title,
            lineage=provenance.lineage,
            properties={
                **provenance.properties,
                "zonal:stats": provenance.facts["stats"],
                "zonal:expression": provenance.facts["expression"],
            },
        )
