"""Stacks of items through odc-stac: time series over an AOI and cloud-masked composites.

The pipeline, in order (each step a small function):
1. items from a search over the AOI (`selection.select_items`);
2. per collection: band names (common names such as `red`, `nir`) -> asset keys
   (`access.find_asset`), the cloud mask (`selection.item_mask`), every href checked by the
   href policy;
3. one output grid (odc-geo GeoBox) over the AOI: the items' CRS and the first band's
   native resolution unless `crs` / `resolution` are given;
4. `odc.stac.load(..., groupby="solar_day", chunks=...)` under the GDAL environment of
   `access.gdal_env` (odc-stac captures it into the dask graph, so it reaches every worker);
5. lazily: nodata -> NaN, `raster:bands` scale/offset of each item, clouds masked with the
   scheme, pixels outside the AOI dropped; then the expression (`expressions`) or the composite;
6. compute (`dask_runtime`: dask's local threads, or the `dask.distributed` cluster at
   `settings.dask_scheduler`); write the outputs (CSV + PNG chart via `tables`, or a COG) with
   records.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InvalidArgument, MaskNotFound, NotSupported, StacGdalMcpError
from . import access
from .dask_runtime import compute, scheduler_name
from .expressions import evaluate, parse_expression
from .jobs import Job
from .masks import MaskSource

Reducer = Literal["mean", "median", "min", "max", "count"]
Method = Literal["median", "mean", "min", "max"]
DEFAULT_MAX_ITEMS = 100
CHUNK = 2048  # pixels per side of a dask chunk, at most
SOFTWARE = ("odc-stac", "dask", "xarray")  # versions added to the records' processing:software
_READABLE_SUFFIXES = tuple(access.DRIVERS_BY_SUFFIX)


# --- results ---------------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OutputRef(_Model):
    id: str
    uri: str = Field(description="resource with the output's record; the file is at <uri>/file")
    file: str
    media_type: str

    @classmethod
    def of(cls, record) -> OutputRef:
        """The reference to a committed output (an `OutputRecord`)."""
        return cls(
            id=record.id,
            uri=record.uri,
            file=record.file.href.rsplit("/", 1)[-1],
            media_type=record.file.type,
        )


class GridInfo(_Model):
    crs: str
    resolution: float
    shape: list[int] = Field(description="[rows, columns]")
    aoi_pixels: int


class TimeSeriesRow(_Model):
    date: str = Field(description="solar day")
    datetime: str = Field(description="acquisition time of the first item of the day (UTC)")
    value: float | None = Field(description="null when no valid pixel was left")
    valid_fraction: float = Field(description="share of the AOI pixels with a valid, unmasked value")
    valid_pixels: int
    collection_id: str | None = None
    item_ids: list[str]


class TimeSeriesResult(_Model):
    expression: str
    reducer: str
    mask_clouds: bool
    rows: list[TimeSeriesRow]
    csv: OutputRef
    chart: OutputRef
    grid: GridInfo
    items: int
    scheduler: str
    notes: list[str] = []


class CompositeResult(_Model):
    output: OutputRef
    bands: list[str]
    method: str
    mask_clouds: bool
    items: int = Field(description="items that went into the composite (all in derived_from)")
    valid_fraction: float = Field(description="share of the AOI pixels with a value in the composite")
    grid: GridInfo
    scheduler: str
    notes: list[str] = []


# --- planning: items, bands, masks, grid -----------------------------------------------------------


@dataclass
class Stack:
    """The items of one collection and how to read them."""

    collection_id: str | None
    items: list[dict]
    assets: dict[str, str]  # band name -> asset key
    mask: MaskSource | None
    sources: list = field(default_factory=list)  # SourceRef of every asset read
    requester_pays: bool = False


def _check_readable(source: access.AssetSource) -> None:
    path = source.href_unsigned.split("?", 1)[0].lower()
    media = (source.asset.get("type") or "").lower()
    if not (path.endswith(_READABLE_SUFFIXES) or media.startswith(("image/tiff", "image/jp2", "image/png"))):
        raise NotSupported(
            f"asset '{source.asset_key}' of item '{source.item_id}' is not a GeoTIFF/JP2 raster "
            f"({source.href_unsigned}); it cannot be loaded"
        )


def plan_stacks(
    core, items: list[dict], names: list[str], *, mask_clouds: bool, catalog: str | None
) -> list[Stack]:
    """Group items by collection; resolve band names and the mask from each collection's first item."""
    from .selection import Collections, item_mask

    cat = core.catalogs.get(catalog)
    collections = Collections(cat)
    groups: OrderedDict[str | None, list[dict]] = OrderedDict()
    for item in items:
        groups.setdefault(item.get("collection"), []).append(item)
    stacks = []
    for collection_id, members in groups.items():
        first = members[0]
        assets = {name: access.find_asset(first, name)[0] for name in names}
        mask = None
        if mask_clouds:
            try:
                mask = item_mask(first, collections)
            except MaskNotFound as exc:
                raise MaskNotFound(f"{exc}. Pass mask_clouds=false to use the pixels unmasked.") from None
        stack = Stack(collection_id, members, assets, mask)
        keys = list(dict.fromkeys([*assets.values(), *([mask.asset] if mask else [])]))
        for item in members:
            for key in keys:
                if key not in (item.get("assets") or {}):
                    raise InvalidArgument(
                        f"item '{item.get('id')}' of collection '{collection_id}' has no asset '{key}' "
                        f"(the collection's first item has it); narrow the search"
                    )
                source = access.asset_source(core, item, key, catalog=cat.id)
                _check_readable(source)
                stack.sources.append(source.source_ref())
                stack.requester_pays = stack.requester_pays or source.requester_pays
        stacks.append(stack)
    return stacks


def item_crs(item: dict, asset_key: str | None = None) -> str | None:
    """The asset's CRS (proj:code / proj:epsg), else the item's."""
    from ..discovery.summaries import proj_code

    asset = (item.get("assets") or {}).get(asset_key or "", {})
    for where in (asset, item.get("properties") or {}):
        code = proj_code(where)
        if code:
            return code
    return None


def _proj_transform(item: dict, asset_key: str) -> list | None:
    asset = (item.get("assets") or {}).get(asset_key, {})
    return asset.get("proj:transform") or (item.get("properties") or {}).get("proj:transform")


def native_resolution(item: dict, asset_key: str) -> float | None:
    asset = (item.get("assets") or {}).get(asset_key, {})
    props = item.get("properties") or {}
    transform = _proj_transform(item, asset_key)
    if transform:
        return abs(float(transform[0]))
    for band in list(asset.get("raster:bands") or []) + list(asset.get("bands") or []):
        if band.get("spatial_resolution"):
            return float(band["spatial_resolution"])
    return asset.get("gsd") or props.get("gsd")


def native_anchor(item: dict, asset_key: str, resolution: float):
    """Snap the output grid to the asset's own pixel edges (e.g. Landsat's, at 15 m mod 30), so
    that a load at native resolution reads pixels as they are; "default" (edges at multiples of
    the resolution) when the asset's grid is unknown."""
    from odc.geo import xy_

    transform = _proj_transform(item, asset_key)
    if not transform:
        return "default"
    x0, y0 = float(transform[2]), float(transform[5])
    return xy_((x0 % resolution) / resolution, (y0 % resolution) / resolution)


def output_geobox(
    core, aoi_geom, stacks: list[Stack], *, crs: str | None, resolution: float | None, count: int
):
    """The grid every stack is loaded on, checked against the size limits."""
    from odc.geo.geobox import GeoBox
    from odc.geo.geom import Geometry

    from .grids import check_output_size, parse_crs

    first = stacks[0]
    band_key = next(iter(first.assets.values()))
    crs_text = crs or item_crs(first.items[0], band_key)
    if crs_text is None:
        raise InvalidArgument(
            "the items do not say their CRS (proj:code / proj:epsg); pass crs, e.g. 'EPSG:32633'"
        )
    dst_crs = parse_crs(crs_text, "crs")
    if resolution is None:
        resolution = native_resolution(first.items[0], band_key) if crs is None else None
        if resolution is None:
            raise InvalidArgument("pass resolution (in the CRS units) for this CRS")
    if resolution <= 0:
        raise InvalidArgument(f"resolution must be positive (got {resolution})")
    anchor = native_anchor(first.items[0], band_key, resolution) if crs is None else "default"
    gbox = GeoBox.from_geopolygon(
        Geometry(aoi_geom, "EPSG:4326"), resolution=resolution, crs=dst_crs.to_string(), anchor=anchor
    )
    height, width = gbox.shape
    check_output_size(width, height, count, "float32", core.settings.limits, resolution=resolution)
    return gbox


def aoi_pixels(gbox, aoi_geom):
    """True for the grid pixels whose centre is in the AOI (as in cloud_cover_stats)."""
    from .aoi import project_aoi, rasterize_aoi

    return rasterize_aoi(project_aoi(aoi_geom, gbox.crs.to_wkt()), gbox.shape, gbox.affine)


def solar_days(items: list[dict], lon: float) -> list[tuple[str, Any, list[dict]]]:
    """(solar date, first acquisition time, items) per solar day, in time order: the groups
    odc-stac forms with groupby="solar_day" on a grid centred at longitude `lon`."""
    import pystac
    from odc.stac import parse_item

    days: dict[Any, list[tuple[Any, str, dict]]] = {}
    for item in items:
        parsed = parse_item(pystac.Item.from_dict(item, migrate=False))
        day = parsed.solar_date_at(lon).date()
        days.setdefault(day, []).append((parsed.nominal_datetime, item["id"], item))
    out = []
    for day in sorted(days):
        members = sorted(days[day], key=lambda m: (m[0], m[1]))
        out.append((day.isoformat(), members[0][0].replace(tzinfo=None), [m[2] for m in members]))
    return out


# --- loading ---------------------------------------------------------------------------------------


@dataclass
class Loaded:
    """One stack loaded lazily: band values (float, NaN where not usable) on (time, y, x)."""

    stack: Stack
    bands: dict[str, Any]
    days: list[tuple[str, Any, list[dict]]]


def load_stack(core, stack: Stack, gbox, inside, *, gdal_options: dict | None = None) -> Loaded:
    """odc.stac.load of one stack, then nodata/scale/offset/cloud/AOI masking, all lazy."""
    import numpy as np
    import pystac
    import rasterio
    import xarray as xr
    from odc.stac import load

    keys = list(dict.fromkeys([*stack.assets.values(), *([stack.mask.asset] if stack.mask else [])]))
    height, width = gbox.shape
    chunks = {"time": 1, "y": min(height, CHUNK), "x": min(width, CHUNK)}
    env = {
        **access.gdal_env(core.settings, requester_pays=stack.requester_pays),
        **access.ONE_THREAD_PER_READ,
        **(gdal_options or {}),
    }  # dask runs the reads in parallel
    items = [pystac.Item.from_dict(i, migrate=False) for i in stack.items]
    with rasterio.Env(**env):  # captured by odc-stac into the graph: applied on every worker
        ds = load(items, bands=keys, geobox=gbox, groupby="solar_day", chunks=chunks, resampling="nearest")
    lon = gbox.extent.centroid.to_crs("EPSG:4326").points[0][0]
    days = solar_days(stack.items, lon)
    times = [np.datetime64(t, "ns") for _, t, _ in days]
    if len(times) != ds.sizes["time"] or not np.array_equal(ds.time.values.astype("datetime64[ns]"), times):
        raise StacGdalMcpError("odc-stac grouped the items differently than expected; report this as a bug")
    inside_xr = xr.DataArray(inside, dims=("y", "x"), coords={"y": ds.y, "x": ds.x})
    usable = inside_xr
    if stack.mask is not None:
        raw = ds[stack.mask.asset]
        nodata = stack.mask.nodata if stack.mask.nodata is not None else raw.attrs.get("nodata")
        usable = usable & stack.mask.scheme.decode(raw, nodata=nodata).clear
    bands = {}
    for name, key in stack.assets.items():
        raw = ds[key]
        scale, offset = _per_day(days, key, ds.time)
        value = raw.astype("float32") * scale + offset
        nodata = raw.attrs.get("nodata")
        valid = (
            raw.notnull()
            if nodata is None or (isinstance(nodata, float) and np.isnan(nodata))
            else raw != nodata
        )
        bands[name] = value.where(valid & usable)
    return Loaded(stack, bands, days)


def _per_day(days, key: str, time):
    """scale and offset along time from `raster:bands` of each day's first item."""
    import xarray as xr

    scales, offsets = [], []
    for _, _, members in days:
        band = ((members[0]["assets"][key].get("raster:bands") or [{}])[0]) or {}
        scales.append(float(band.get("scale", 1.0)))
        offsets.append(float(band.get("offset", 0.0)))
    coords = {"time": time}
    return (
        xr.DataArray(scales, dims="time", coords=coords).astype("float32"),
        xr.DataArray(offsets, dims="time", coords=coords).astype("float32"),
    )


# --- one load for an AOI: items, stacks, grid, lazy bands ------------------------------------------


@dataclass
class _Prepared:
    aoi_geom: Any
    stacks: list[Stack]
    gbox: Any
    inside: Any
    loaded: list[Loaded]
    notes: list[str]

    @property
    def sources(self) -> list:
        return [s for stack in self.stacks for s in stack.sources]

    @property
    def item_count(self) -> int:
        return sum(len(stack.items) for stack in self.stacks)

    @property
    def grid(self) -> GridInfo:
        return GridInfo(
            crs=str(self.gbox.crs),
            resolution=abs(self.gbox.resolution.x),
            shape=list(self.gbox.shape),
            aoi_pixels=int(self.inside.sum()),
        )


def _prepare(
    core, aoi, names, *, mask_clouds, resolution, crs, catalog, max_items, search, gdal_options
) -> _Prepared:
    from ..errors import NotFound
    from .aoi import aoi_geometry
    from .selection import select_items

    aoi_geom = aoi_geometry(aoi)
    items, notes = select_items(
        core.catalogs,
        aoi_geom,
        catalog=catalog,
        items=None,
        search=search,
        max_items=max_items,
        default_max=DEFAULT_MAX_ITEMS,
    )
    if not items:
        raise NotFound(
            "no items matched the search over the AOI; widen datetime, check collections or the AOI"
        )
    stacks = plan_stacks(core, items, names, mask_clouds=mask_clouds, catalog=catalog)
    gbox = output_geobox(core, aoi_geom, stacks, crs=crs, resolution=resolution, count=len(names))
    inside = aoi_pixels(gbox, aoi_geom)
    if not inside.any():
        raise InvalidArgument(
            "the AOI covers no pixel of the output grid; use a larger AOI or a finer resolution"
        )
    loaded = [load_stack(core, s, gbox, inside, gdal_options=gdal_options) for s in stacks]
    if len(stacks) > 1:
        notes.append(
            f"items of {len(stacks)} collections were loaded on one grid: "
            + ", ".join(f"{s.collection_id} ({len(s.items)})" for s in stacks)
        )
    return _Prepared(aoi_geom, stacks, gbox, inside, loaded, notes)


# --- records of the outputs --------------------------------------------------------------------


def _parameters(**values) -> dict:
    return {k: v for k, v in values.items() if v is not None}


def _commit(core, out, prep: _Prepared, **record) -> OutputRef:
    """Commit a written output with the load's sources (every asset read) and software."""
    from ..outputs import package_versions

    committed = core.outputs.commit(out, sources=prep.sources, software=package_versions(*SOFTWARE), **record)
    return OutputRef.of(committed)


# --- time series -----------------------------------------------------------------------------------

REDUCERS = ("mean", "median", "min", "max", "count")


def _reduce(value, reducer: str):
    dims = ("y", "x")
    if reducer == "count":
        return value.notnull().sum(dims)
    if reducer == "median":
        return value.chunk({"y": -1, "x": -1}).median(dims, skipna=True)
    return getattr(value, reducer)(dims, skipna=True)


def time_series(
    core,
    aoi,
    *,
    expression: str = "ndvi",
    reducer: Reducer = "mean",
    mask_clouds: bool = True,
    resolution: float | None = None,
    crs: str | None = None,
    catalog: str | None = None,
    max_items: int | None = None,
    job: Job | None = None,
    gdal_options: dict | None = None,
    **search,
) -> TimeSeriesResult:
    """One value per solar day: `reducer` of `expression` over the usable AOI pixels.

    `search` takes search_items' arguments (collections, datetime, ids, query, filter,
    filter_lang, sortby, max_cloud_cover). Writes a CSV table and a PNG chart as outputs.
    `gdal_options` adds GDAL settings to the load (they reach dask workers too).
    """
    import numpy as np

    from .tables import write_chart, write_csv

    job = job or Job()
    text, tree, names = parse_expression(expression)
    if reducer not in REDUCERS:
        raise InvalidArgument(f"reducer must be one of {', '.join(REDUCERS)}")
    prep = _prepare(
        core,
        aoi,
        names,
        mask_clouds=mask_clouds,
        resolution=resolution,
        crs=crs,
        catalog=catalog,
        max_items=max_items,
        search=search,
        gdal_options=gdal_options,
    )
    lazy = []
    for loaded in prep.loaded:
        value = evaluate(tree, loaded.bands)
        value = value.where(np.isfinite(value))
        lazy += [_reduce(value, reducer), value.notnull().sum(("y", "x"))]
    computed = compute(core, job, *lazy)
    n_aoi = int(prep.inside.sum())
    rows = []
    for index, loaded in enumerate(prep.loaded):
        values, counts = computed[2 * index], computed[2 * index + 1]
        for (day, first_time, members), v, n in zip(loaded.days, values.values, counts.values):
            rows.append(
                TimeSeriesRow(
                    date=day,
                    datetime=np.datetime_as_string(np.datetime64(first_time, "s")) + "Z",
                    value=int(n)
                    if reducer == "count"
                    else (None if int(n) == 0 or not np.isfinite(v) else round(float(v), 6)),
                    valid_fraction=round(int(n) / n_aoi, 6),
                    valid_pixels=int(n),
                    collection_id=loaded.stack.collection_id,
                    item_ids=[m["id"] for m in members],
                )
            )
    rows.sort(key=lambda r: r.datetime)
    job.progress(1, 1, "writing the table and the chart")
    parameters = _parameters(
        aoi=aoi,
        expression=text,
        reducer=reducer,
        mask_clouds=mask_clouds,
        resolution=resolution,
        crs=crs,
        catalog=catalog,
        max_items=max_items,
        **search,
    )
    title = f"{reducer} of {text} over the AOI"
    with core.outputs.writing(".csv", stem="time-series") as out:
        write_csv(out.path, rows)
        csv_ref = _commit(
            core,
            out,
            prep,
            operation="time_series",
            parameters=parameters,
            media_type="text/csv",
            title=title,
            properties={"aoi_bbox": [round(v, 6) for v in prep.aoi_geom.bounds]},
            lineage=f"{title}, one row per solar day, from {len(prep.sources)} assets loaded with odc-stac",
        )
    with core.outputs.writing(".png", stem="time-series-chart") as out:
        write_chart(out.path, rows, title=title, ylabel=f"{reducer}({text})" if len(text) < 30 else reducer)
        chart_ref = _commit(
            core,
            out,
            prep,
            operation="time_series",
            parameters=parameters,
            media_type="image/png",
            title=f"chart: {title}",
            lineage=f"chart of {title}",
        )
    empty = sum(1 for r in rows if r.valid_pixels == 0)
    notes = list(prep.notes)
    if empty:
        notes.append(
            f"{empty} of {len(rows)} days have no usable pixel in the AOI (clouds or no data): value null"
        )
    return TimeSeriesResult(
        expression=text,
        reducer=reducer,
        mask_clouds=mask_clouds,
        rows=rows,
        csv=csv_ref,
        chart=chart_ref,
        grid=prep.grid,
        items=prep.item_count,
        scheduler=scheduler_name(core),
        notes=notes,
    )


# --- composite -------------------------------------------------------------------------------------

METHODS = ("median", "mean", "min", "max")


def composite(
    core,
    aoi,
    *,
    bands,
    method: Method = "median",
    mask_clouds: bool = True,
    resolution: float | None = None,
    crs: str | None = None,
    catalog: str | None = None,
    max_items: int | None = None,
    job: Job | None = None,
    gdal_options: dict | None = None,
    **search,
):
    """Per pixel, `method` over time of each band's usable values; written as a float32 COG
    (NaN = no usable value) with a record naming every item in `derived_from`."""
    import numpy as np
    import xarray as xr
    from rasterio.crs import CRS
    from rasterio.windows import Window

    from .formats import COG_TYPE, FORMATS, creation_options, finish, write_chunks
    from .records import describe_raster

    job = job or Job()
    names = [b.strip() for b in bands.split(",")] if isinstance(bands, str) else list(bands or [])
    if not names or not all(isinstance(b, str) and b for b in names):
        raise InvalidArgument('bands must name at least one band, e.g. ["red", "green", "blue"]')
    if method not in METHODS:
        raise InvalidArgument(f"method must be one of {', '.join(METHODS)}")
    prep = _prepare(
        core,
        aoi,
        names,
        mask_clouds=mask_clouds,
        resolution=resolution,
        crs=crs,
        catalog=catalog,
        max_items=max_items,
        search=search,
        gdal_options=gdal_options,
    )
    lazy = []
    for name in names:
        series = xr.concat([loaded.bands[name] for loaded in prep.loaded], dim="time")
        lazy.append(getattr(series.chunk({"time": -1}), method)("time", skipna=True))
    arrays = compute(core, job, *lazy)
    data = np.stack([a.values for a in arrays]).astype("float32")
    data[:, ~prep.inside] = np.nan
    valid = np.isfinite(data[0])[prep.inside]
    height, width = prep.gbox.shape
    parameters = _parameters(
        aoi=aoi,
        bands=names,
        method=method,
        mask_clouds=mask_clouds,
        resolution=resolution,
        crs=crs,
        catalog=catalog,
        max_items=max_items,
        **search,
    )
    item_count = prep.item_count
    title = f"{method} composite of {', '.join(names)} from {item_count} items"
    job.progress(1, 1, "writing the composite")
    with core.outputs.writing(".tif", stem=f"composite-{method}") as out:
        working = out.scratch(".tif")
        write_chunks(
            working,
            crs=CRS.from_user_input(str(prep.gbox.crs)),
            transform=prep.gbox.affine,
            width=width,
            height=height,
            count=len(names),
            dtype="float32",
            nodata=float("nan"),
            chunks=[(Window(0, 0, width, height), data)],
            on_chunk=lambda n: None,
            descriptions=names,
        )
        fmt = FORMATS["COG"]
        finish(fmt, working, out.path, creation_options(fmt, OVERVIEW_RESAMPLING="AVERAGE", PREDICTOR="YES"))
        output = _commit(
            core,
            out,
            prep,
            operation="composite",
            parameters=parameters,
            media_type=COG_TYPE,
            raster=describe_raster(out.path),
            title=title,
            lineage=(
                f"{method} over time of {', '.join(names)} "
                f"({'clouds masked with each item mask' if mask_clouds else 'no cloud mask'}), "
                f"{item_count} items loaded with odc-stac (groupby solar_day)"
            ),
        )
    return CompositeResult(
        output=output,
        bands=names,
        method=method,
        mask_clouds=mask_clouds,
        items=item_count,
        valid_fraction=round(float(valid.mean()) if valid.size else 0.0, 6),
        grid=prep.grid,
        scheduler=scheduler_name(core),
        notes=prep.notes,
    )
