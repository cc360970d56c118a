"""Stacks of items through odc-stac: the lazy, cloud-masked load every analysis starts from.

The pipeline, in order (each step a small function):
1. items from a search over the AOI (`selection.select`, as every operation over many items);
2. per collection: band names (common names such as `red`, `nir`) -> asset keys
   (`access.find_asset`), the cloud mask (`selection.item_mask`), every href checked by the
   href policy;
3. one output grid (odc-geo GeoBox) over the AOI: the items' CRS and the first band's
   native resolution unless `crs` / `resolution` are given;
4. `odc.stac.load(..., groupby="solar_day", chunks=...)` under the GDAL environment of
   `access.gdal_env` (odc-stac captures it into the dask graph, so it reaches every worker);
5. lazily: nodata -> NaN, `raster:bands` scale/offset of each item, clouds masked with the
   scheme, pixels outside the AOI dropped (`prepare` returns this, `as_dataset` shows it as one
   xarray Dataset);
6. what is made of it: a time series (`series`) or a composite (`composite`), computed on
   dask (`dask_runtime`) and written as outputs only when saved.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..errors import InvalidArgument, MaskNotFound, NotFound, NotSupported, StacGdalMcpError
from ..models import Model
from ..stac import band_entries, proj_code
from ..words import counted
from . import access
from .bands import mask_nodata, scale_offset, valid
from .masks import MaskSource
from .requests import Load

if TYPE_CHECKING:
    from .selection import Selection

DEFAULT_MAX_ITEMS = 100
CHUNK = 2048  # pixels per side of a dask chunk, at most
SOFTWARE = ("odc-stac", "dask", "xarray")  # versions added to the records' processing:software
_READABLE_SUFFIXES = tuple(access.DRIVERS_BY_SUFFIX)


# --- results ---------------------------------------------------------------------------------------


class OutputRef(Model):
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


class GridInfo(Model):
    crs: str
    resolution: float
    shape: list[int] = Field(description="[rows, columns]")
    aoi_pixels: int


class FailedItem(Model):
    item_id: str
    error: str = Field(description="why its pixels could not be read (its solar day was left out)")


def failed_note(failed: list[FailedItem], what: str) -> str:
    """The note of a result some items of which could not be read."""
    ids = ", ".join(f.item_id for f in failed[:5]) + (", ..." if len(failed) > 5 else "")
    return f"{counted(len(failed), 'item')} could not be read ({ids}; see failed_items): {what}"


def failed_error(failed: list[FailedItem]):
    """The error when no item at all could be read (`items.none_read`)."""
    from .items import none_read

    return none_read([f.error for f in failed])


def sources_read(prep, failed: list[FailedItem]) -> list:
    """The prepared load's sources without those of items that could not be read."""
    bad = {f.item_id for f in failed}
    return [s for s in prep.sources if s.item_id not in bad]


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
    core, items: list[dict], names: list[str], *, mask_clouds: bool, chosen: Selection
) -> list[Stack]:
    """Group items by collection; resolve band names and the mask from each collection's first
    item (`chosen`: the selection the items came from, its catalog and collection documents)."""
    from .selection import item_mask

    cat, collections = chosen.catalog, chosen.collections
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
    for band in band_entries(asset):
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

    from .aoi import check_aoi_fits
    from .grids import check_output_size, parse_crs, too_fine

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
    check_aoi_fits(aoi_geom, dst_crs.to_wkt(), "crs")
    anchor = native_anchor(first.items[0], band_key, resolution) if crs is None else "default"
    try:
        gbox = GeoBox.from_geopolygon(
            Geometry(aoi_geom, "EPSG:4326"), resolution=resolution, crs=dst_crs.to_string(), anchor=anchor
        )
    except OverflowError:  # (a subnormal resolution: odc-geo's pixel count is inf)
        raise too_fine(resolution) from None
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


def load_stack(
    core, stack: Stack, gbox, inside, *, gdal_options: dict | None = None, chunk: int = CHUNK
) -> Loaded:
    """odc.stac.load of one stack in dask chunks of at most `chunk` px a side, then nodata/scale/
    offset/cloud/AOI masking, all lazy (`inside` None: the AOI is left to the caller)."""
    import numpy as np
    import pystac
    import rasterio
    import xarray as xr
    from odc.stac import load

    keys = list(dict.fromkeys([*stack.assets.values(), *([stack.mask.asset] if stack.mask else [])]))
    height, width = gbox.shape
    chunks = {"time": 1, "y": min(height, chunk), "x": min(width, chunk)}
    env = {
        **access.gdal_env(core.settings, requester_pays=stack.requester_pays),
        **access.ONE_THREAD_PER_READ,
        **(gdal_options or {}),
    }  # dask runs the reads in parallel
    items = [pystac.Item.from_dict(i, migrate=False) for i in stack.items]
    from .odc_reader import reader_driver

    driver = reader_driver(core.settings, stack.items)  # signs hrefs per read, says why one failed
    with rasterio.Env(**env):  # captured by odc-stac into the graph: applied on every worker
        ds = load(
            items,
            bands=keys,
            geobox=gbox,
            groupby="solar_day",
            chunks=chunks,
            resampling="nearest",
            driver=driver,
        )
    # a geographic grid comes back with latitude/longitude dimensions: one name for every grid
    ds = ds.rename({k: v for k, v in (("latitude", "y"), ("longitude", "x")) if k in ds.dims})
    lon = gbox.extent.centroid.to_crs("EPSG:4326").points[0][0]
    days = solar_days(stack.items, lon)
    times = [np.datetime64(t, "ns") for _, t, _ in days]
    if len(times) != ds.sizes["time"] or not np.array_equal(ds.time.values.astype("datetime64[ns]"), times):
        raise StacGdalMcpError("odc-stac grouped the items differently than expected; report this as a bug")
    usable = None if inside is None else xr.DataArray(inside, dims=("y", "x"), coords={"y": ds.y, "x": ds.x})
    if stack.mask is not None:
        raw = ds[stack.mask.asset]
        clear = stack.mask.scheme.decode(
            raw, nodata=mask_nodata(stack.mask.nodata, raw.attrs.get("nodata"))
        ).clear
        usable = clear if usable is None else usable & clear
    bands = {}
    for name, key in stack.assets.items():
        raw = ds[key]
        scale, offset = _per_day(days, key, ds.time)
        value = raw.astype("float32") * scale + offset
        data = valid(raw, raw.attrs.get("nodata"))
        bands[name] = value.where(data if usable is None else data & usable)
    return Loaded(stack, bands, days)


def _per_day(days, key: str, time):
    """scale and offset along time from `raster:bands` of each day's first item."""
    import xarray as xr

    scales, offsets = [], []
    for _, _, members in days:
        scale, offset = scale_offset(members[0]["assets"][key])
        scales.append(scale)
        offsets.append(offset)
    coords = {"time": time}
    return (
        xr.DataArray(scales, dims="time", coords=coords).astype("float32"),
        xr.DataArray(offsets, dims="time", coords=coords).astype("float32"),
    )


# --- one load for an AOI: items, stacks, grid, lazy bands ------------------------------------------


@dataclass
class Prepared:
    """One load over an AOI: the items in stacks, the grid, the AOI pixels, the lazy bands."""

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


def prepare(core, load: Load, names: list[str], *, chunk: int = CHUNK, mask_aoi: bool = True) -> Prepared:
    """Steps 1-5 of `load` for bands `names`: nothing is read yet (the bands are dask arrays in
    chunks of at most `chunk` px a side). `mask_aoi=False` leaves the pixels outside the AOI in
    the bands (`Prepared.inside` says which they are), for a caller that applies it itself."""
    from .aoi import aoi_geometry
    from .selection import select

    aoi_geom = aoi_geometry(load.aoi)
    chosen = select(
        core,
        aoi_geom,
        catalog=load.catalog,
        items=None,
        search=load.search_args,
        max_items=load.max_items,
        default_max=DEFAULT_MAX_ITEMS,
    )
    items, notes = chosen.items, chosen.notes
    if not items:
        raise NotFound(
            "no items matched the search over the AOI; widen datetime, check collections or the AOI"
        )
    items = with_footprints(items, notes)
    stacks = plan_stacks(core, items, names, mask_clouds=load.mask_clouds, chosen=chosen)
    gbox = output_geobox(core, aoi_geom, stacks, crs=load.crs, resolution=load.resolution, count=len(names))
    inside = aoi_pixels(gbox, aoi_geom)
    if not inside.any():
        raise InvalidArgument(
            "the AOI covers no pixel of the output grid; use a larger AOI or a finer resolution"
        )
    loaded = [
        load_stack(core, s, gbox, inside if mask_aoi else None, gdal_options=load.gdal_options, chunk=chunk)
        for s in stacks
    ]
    if len(stacks) > 1:
        notes.append(
            f"items of {len(stacks)} collections were loaded on one grid: "
            + ", ".join(f"{s.collection_id} ({len(s.items)})" for s in stacks)
        )
    return Prepared(aoi_geom, stacks, gbox, inside, loaded, notes)


def with_footprints(items: list[dict], notes: list[str]) -> list[dict]:
    """The items with a footprint: odc-stac places an item on the grid by its geometry, or by its
    bands' proj:shape and proj:transform (without either it fails: "Can not process items without
    defined footprint"); the others left out with a note, one clear error when none has one."""
    kept = [i for i in items if _has_footprint(i)]
    if not kept:
        raise InvalidArgument(
            f"none of the {len(items)} items found has a geometry (or proj:shape and proj:transform), "
            "the footprint a load needs to place an item on the grid"
        )
    if len(kept) < len(items):
        left = [str(i.get("id"))[:100] for i in items if i not in kept]
        notes.append(
            f"{counted(len(left), 'item')} without a geometry (footprint) were left out: {', '.join(left[:5])}"
        )
    return kept


def _has_footprint(item: dict) -> bool:
    """A geometry, or the proj:shape and proj:transform odc-stac draws a footprint from."""
    geometry = item.get("geometry")
    if isinstance(geometry, dict) and geometry.get("coordinates"):
        return True
    holders = [
        item.get("properties") or {},
        *(a for a in (item.get("assets") or {}).values() if isinstance(a, dict)),
    ]
    return any(h.get("proj:shape") and h.get("proj:transform") for h in holders)


def as_dataset(prep: Prepared):
    """The load as one lazy xarray Dataset: a float32 variable per band name on (time, y, x),
    NaN where a pixel is nodata, masked as cloud or outside the AOI; time is the solar day's
    first acquisition, with `collection` and `items` (ids, space-separated) along it. Stacks of
    several collections are joined along time, in time order."""
    import numpy as np
    import xarray as xr

    parts = []
    for loaded in prep.loaded:
        ds = xr.Dataset(loaded.bands)
        ds = ds.assign_coords(
            collection=("time", [loaded.stack.collection_id or ""] * ds.sizes["time"]),
            items=("time", [" ".join(m["id"] for m in members) for _, _, members in loaded.days]),
        )
        parts.append(ds)
    ds = parts[0] if len(parts) == 1 else xr.concat(parts, dim="time").sortby("time")
    ds.attrs = {
        "crs": str(prep.gbox.crs),
        "resolution": float(abs(prep.gbox.resolution.x)),
        "aoi_bounds": [float(v) for v in np.round(prep.aoi_geom.bounds, 6)],
        "items": prep.item_count,
    }
    return ds
