"""Cloud cover inside an area of interest, per item, from each item's own cloud mask.

Steps, for every item (concurrently, at most `limits.max_concurrency` at a time, on the process's
long-lived reader threads: the item pipeline, `processing.items`; with `settings.dask_scheduler`,
steps 2-4 run on a worker of that dask.distributed cluster, `count_on_worker`):
1. find the mask asset and its scheme (`masks.find_mask`);
2. open it (`access.open_raster`: href policy, GDAL options, one GDAL thread per read) and
   reproject the AOI into the mask's own CRS;
3. read only the AOI's window of the mask, at native resolution or, when a coarser
   `resolution` is asked, decimated by a whole factor with nearest (or mode) resampling, so
   GDAL reads from an overview; class values are never interpolated;
4. rasterize the AOI on that grid (pixel centres inside the AOI) and count the classes.
Steps 2 (the projection) and 4 (the rasterizing) are done once per mask grid and call
(`AoiGrids`): the items of a time stack of one tile share them.

Over HTTP each item costs three round trips one after the other (GDAL's HEAD, the header's
16 KB, then the AOI's tiles as parallel ranges), so a call of n items takes at least
ceil(n / max_concurrency) x 3 round trips.

Fractions of cloud, shadow, cirrus, snow, water and clear are of the valid AOI pixels;
`nodata_fraction` is of all AOI pixels, and the part of the AOI outside the mask's extent
counts as no data. One failing item is reported in its row (`error`) and does not fail
the call.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, model_serializer

from ..errors import InvalidArgument, LimitExceeded
from ..models import Model
from ..processing.access import ONE_THREAD_PER_READ, asset_source, open_reader
from ..processing.aoi import aoi_geometry, coordinates, decimation, project_aoi, rasterize_aoi
from ..processing.bands import GridWindow, mask_nodata, window_of
from ..processing.items import Cluster, each, fetch, kept, none_read, one_item, reference
from ..processing.jobs import Job, timed
from ..processing.masks import MaskSource, check_mask_format
from ..processing.selection import Collections, Selection, item_mask, select
from ..stac import item_datetime
from ..words import counted, plural
from .base import Operation, Tool
from .params import AoiArg, MaxItemsArg, ResolutionArg, SearchOrItemsArg, recorded, search_group
from .result import Answer, Wrapping, call

if TYPE_CHECKING:
    import pandas as pd

Sort = Literal["clear", "cloud", "datetime", "-datetime", "search"]
DEFAULT_MAX_ITEMS = 50


class ItemCloudCover(Model):
    """Cloud statistics of one item over the AOI (fractions are 0..1)."""

    collection_id: str | None = None
    item_id: str
    datetime: str | None = None
    cloud_fraction: float | None = None
    shadow_fraction: float | None = None
    cirrus_fraction: float | None = None
    snow_fraction: float | None = None
    water_fraction: float | None = None
    clear_fraction: float | None = None
    nodata_fraction: float | None = Field(
        None, description="of all AOI pixels (outside the item counts as no data)"
    )
    valid_pixels: int | None = None
    aoi_pixels: int | None = None
    scene_cloud_cover: float | None = Field(
        None, description="the item's eo:cloud_cover (whole scene, percent)"
    )
    mask_source: str | None = Field(None, description="mask asset and scheme used")
    resolution: float | None = Field(None, description="mask pixel size used, in the mask CRS units")
    crs: str | None = None
    error: str | None = Field(None, description="why this item could not be measured")


# row fields that describe how an item was read, not what was measured: in JSON, given once under
# `common` when every measured row has the same value
COMMON_FIELDS = ("collection_id", "mask_source", "crs", "resolution", "aoi_pixels")
# the minor classes' fractions, left out of a JSON row when 0 (most rows have no snow or cirrus)
ZERO_OMITTED = ("shadow_fraction", "cirrus_fraction", "snow_fraction", "water_fraction")
ZERO_NOTE = "a row without shadow_fraction, cirrus_fraction, snow_fraction or water_fraction has 0 of it"


class CloudCoverResult(Model):
    """The ranking. In JSON (what an agent reads: 50 rows by default) each row leaves out its
    null fields (no `error` when it was measured, no fractions without valid pixels) and its
    ZERO_OMITTED fractions that are 0 (a note says so), and the COMMON_FIELDS whose value is the
    same in every measured row are given once, in `common` (a row with an `error` keeps its
    own). The Python rows (`items`) keep every field."""

    aoi_bbox: list[float]
    sort: str
    items: list[ItemCloudCover]
    returned: int
    failed: int
    notes: list[str] = []

    @model_serializer(mode="wrap")
    def _lean(self, handler):
        out = handler(self)
        if "items" not in out:  # a dump of some fields only (include=...)
            return out
        rows = [
            {k: v for k, v in row.items() if v is not None and not (v == 0 and k in ZERO_OMITTED)}
            for row in out["items"]
        ]
        if any(len(row) < len(full) for row, full in zip(rows, out["items"]) if full.get("valid_pixels")):
            out["notes"] = [*out["notes"], ZERO_NOTE]
        measured = [row for row in rows if "error" not in row]
        common = {}
        for key in COMMON_FIELDS:
            values = [row.get(key) for row in measured]
            if values and values[0] is not None and values.count(values[0]) == len(values):
                common[key] = values[0]
        for row in measured:
            for key in common:
                del row[key]
        lean = {}
        for key, value in out.items():  # the fields in their order, `common` before the rows
            if key == "items" and common:
                lean["common"] = common
            lean[key] = rows if key == "items" else value
        return lean


# --- one item ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AoiGrid:
    """The AOI on one mask grid: what every item on that grid (same CRS, transform, size and
    decimation: a time stack of one tile) shares, so it is worked out once per call."""

    native: float  # native pixel size
    window: GridWindow  # the AOI's window on the decimated grid (may reach outside the raster)
    inside: Any  # pixels of the window inside the AOI (read-only)
    covered: Any  # pixels of the window inside the raster (read-only)
    crs: str | None


class AoiGrids:
    """`AoiGrid`s of one call, by grid; safe to share between the call's threads (a grid worked
    out twice at the same moment gives the same answer)."""

    def __init__(self, aoi_4326, resolution: float | None, max_pixels: int | None):
        self.aoi_4326, self.resolution, self.max_pixels = aoi_4326, resolution, max_pixels
        self._grids: dict[tuple, AoiGrid] = {}
        self._geoms: dict[str, dict] = {}

    def for_dataset(self, src) -> AoiGrid:
        wkt = src.crs.to_wkt() if src.crs else ""
        native = abs(src.transform.a)
        k = decimation(native, self.resolution)
        key = (wkt, tuple(src.transform)[:6], src.width, src.height, k)
        found = self._grids.get(key)
        if found is None:
            found = self._grids[key] = self._work_out(src, wkt, native, k)
        return found

    def _work_out(self, src, wkt: str, native: float, k: int) -> AoiGrid:
        import numpy as np
        from rasterio.transform import Affine

        geom = self._geoms.get(wkt)
        if geom is None:
            geom = self._geoms[wkt] = project_aoi(self.aoi_4326, src.crs)
        window = window_of(*coordinates(geom), src.transform, src.width, src.height, k)
        shape = window.shape
        if self.max_pixels and shape[0] * shape[1] > self.max_pixels:
            factor = math.ceil(math.sqrt(shape[0] * shape[1] / self.max_pixels)) * k
            raise LimitExceeded(
                f"the AOI covers {shape[0] * shape[1]:,} mask pixels at {native * k:g} m, more than "
                f"limits.max_output_pixels={self.max_pixels:,}; pass resolution={native * factor:g} or coarser"
            )
        grid = src.transform @ Affine.scale(k)
        inside = rasterize_aoi(geom, shape, grid @ Affine.translation(window.cols[0], window.rows[0]))
        covered = np.zeros(shape, dtype=bool)
        covered[window.placed] = True
        inside.flags.writeable = covered.flags.writeable = False
        crs = src.crs.to_string() if src.crs else None
        return AoiGrid(native, window, inside, covered, crs)


def aoi_window_counts(
    src,
    aoi_4326,
    source: MaskSource,
    *,
    resolution: float | None = None,
    resampling: str = "nearest",
    max_pixels: int | None = None,
    grids: AoiGrids | None = None,
) -> dict:
    """Count the mask's classes inside the AOI on the mask's own grid (see the module docstring).
    `grids`: the call's AOI grids, shared by its items (None: worked out for this item alone)."""
    import numpy as np
    from rasterio.enums import Resampling

    if resampling not in ("nearest", "mode"):
        raise InvalidArgument("class values can only be resampled with 'nearest' or 'mode'")
    grids = grids or AoiGrids(aoi_4326, resolution, max_pixels)
    g = grids.for_dataset(src)
    window = g.window
    data = np.zeros(g.inside.shape, dtype=src.dtypes[0])
    native_window = window.native
    if native_window is not None:
        from rasterio.windows import Window

        data[window.placed] = src.read(
            1, window=Window(*native_window), out_shape=window.inside_shape, resampling=Resampling[resampling]
        )

    classes = source.scheme.decode(data, nodata=mask_nodata(source.nodata, src.nodata))
    valid = g.inside & g.covered & ~classes.nodata
    n_aoi, n_valid = int(np.count_nonzero(g.inside)), int(np.count_nonzero(valid))

    def share(flags) -> float | None:
        return round(int(np.count_nonzero(flags & valid)) / n_valid, 6) if n_valid else None

    return {
        **{
            f"{name}_fraction": share(getattr(classes, name))
            for name in ("cloud", "shadow", "cirrus", "snow", "water", "clear")
        },
        "nodata_fraction": round(1 - n_valid / n_aoi, 6) if n_aoi else None,
        "valid_pixels": n_valid,
        "aoi_pixels": n_aoi,
        "resolution": g.native * window.k,
        "crs": g.crs,
    }


def count_mask(settings, request: CloudCoverStats, grids: AoiGrids, mask_file, source: MaskSource) -> dict:
    """The mask's classes counted inside the request's AOI (`aoi_window_counts`), the file opened
    here with one GDAL thread (items are read concurrently, one thread each). A failed read
    raises: it is the item's error, never counted as clear or no data."""
    with open_reader(mask_file, settings, env=ONE_THREAD_PER_READ) as reader:
        return reader.run(
            lambda src: aoi_window_counts(
                src,
                request.geometry,
                source,
                resolution=request.resolution,
                resampling=request.resampling,
                max_pixels=settings.limits.max_output_pixels,
                grids=grids,
            )
        )


def counting(core, request: CloudCoverStats, job: Job, cluster: Cluster | None = None):
    """`count(mask_file, source)` of a call: `count_mask` on the calling thread, the call's AOI
    grids shared by its items - or on a worker of `cluster` (`processing.items.Cluster`)."""
    if cluster is not None:
        return lambda mask_file, source: cluster.run(job, count_on_worker, core.settings, mask_file, source)
    grids = AoiGrids(request.geometry, request.resolution, core.settings.limits.max_output_pixels)
    return lambda mask_file, source: count_mask(core.settings, request, grids, mask_file, source)


def count_on_worker(request: CloudCoverStats, key: str, settings, mask_file, source: MaskSource) -> dict:
    """`count_mask` on a dask worker, which keeps one call's AOI grids (`key`: the call)."""
    limit = settings.limits.max_output_pixels
    grids = kept(key, lambda: AoiGrids(request.geometry, request.resolution, limit))
    return count_mask(settings, request, grids, mask_file, source)


def measure_item(
    core, cat, ref_or_item: dict, collections: Collections, asset: str | None, count, job: Job | None = None
) -> ItemCloudCover:
    """One row: never raises for a problem with this item, reports it in `error` (only when
    `job` stops). `count`: how the mask is counted (`counting`)."""
    ref = reference(ref_or_item)
    row = ItemCloudCover(**ref)
    with one_item("cloud_cover_stats", ref["item_id"], job) as outcome:
        item = fetch(cat, ref_or_item)
        props = item.get("properties") or {}
        row.datetime = item_datetime(item)
        row.scene_cloud_cover = props.get("eo:cloud_cover")
        source = item_mask(item, collections, asset)
        row.mask_source = source.describe()
        mask_file = asset_source(core, item, source.asset, catalog=cat.id)
        check_mask_format(mask_file)
        for key, value in count(mask_file, source).items():
            setattr(row, key, value)
    row.error = outcome.error
    return row


# --- many items -------------------------------------------------------------------------------


def _sort_key(sort: str):
    def missing_last(value, reverse=False):
        return (value is None, -value if (reverse and value is not None) else value)

    if sort == "clear":
        return lambda r: missing_last(r.clear_fraction, reverse=True)
    if sort == "cloud":
        return lambda r: missing_last(r.cloud_fraction)
    if sort in ("datetime", "-datetime"):
        return lambda r: (r.datetime is None, r.datetime or "")
    return None


def sort_rows(rows: list[ItemCloudCover], sort: str) -> list[ItemCloudCover]:
    """clear: clearest first; cloud: least cloud first; datetime/-datetime; search: as found.
    Items with no valid pixels and failed items go last."""
    if sort not in ("clear", "cloud", "datetime", "-datetime", "search"):
        raise InvalidArgument("sort must be one of clear, cloud, datetime, -datetime, search")
    key = _sort_key(sort)
    if key is None:
        return rows
    ordered = sorted(rows, key=key, reverse=(sort == "-datetime"))
    if sort == "-datetime":
        ordered = [r for r in ordered if r.datetime] + [r for r in ordered if not r.datetime]
    return ordered


def _outcome(row: ItemCloudCover) -> str:
    if row.error:
        return f"error: {row.error}"
    if row.clear_fraction is None:
        return "no valid pixels in the AOI"
    return f"{row.clear_fraction:.1%} clear"


def cloud_cover_stats(core, aoi, *, job: Job | None = None, **arguments) -> CloudCoverResult:
    """The ranking (`CloudCoverResult`) of `aoi` over the items `arguments` name."""
    return CloudCoverStats.of(aoi, **arguments).run(core, job).result


def measure(core, request: CloudCoverStats, job: Job | None = None) -> CloudCoverResult:
    """Cloud statistics over the AOI for the request's items. `job` receives one progress step
    per item measured and can cancel the call between items."""
    cat, selected, notes, collections = request.select(core)
    total = len(selected)
    job = timed(job, core)
    with contextlib.ExitStack() as stack:
        cluster = None
        if total and core.settings.dask_scheduler:  # each mask counted on a worker
            cluster = stack.enter_context(contextlib.closing(Cluster(core, request, job)))
        count = counting(core, request, job, cluster)
        rows = each(
            job,
            selected,
            lambda it: measure_item(core, cat, it, collections, request.asset, count, job),
            workers=max(1, min(core.settings.limits.max_concurrency, total)),
            start=f"measuring cloud cover of {counted(total, 'item')}",
            describe=lambda row: f"{row.item_id}: {_outcome(row)}",
        )
    measured = [r for r in rows if r is not None]
    failed = sum(1 for r in measured if r.error)
    if measured and failed == len(measured):
        raise none_read([r.error for r in measured])
    if not measured:
        notes.append("no items to measure: widen the search (datetime, collections) or check the AOI")
    if failed:
        notes.append(f"{failed} of {counted(total, 'item')} could not be measured; see `error` in their rows")
    empty = sum(1 for r in measured if not r.error and not r.valid_pixels)
    if empty:
        notes.append(
            f"{counted(empty, 'item')} {plural(empty, 'has')} no valid pixels in the AOI (outside the item or all no data)"
        )
    return CloudCoverResult(
        aoi_bbox=[round(v, 6) for v in request.geometry.bounds],
        sort=request.sort,
        items=sort_rows(measured, request.sort),
        returned=len(measured),
        failed=failed,
        notes=notes,
    )


class CloudCover(Wrapping):
    """Cloud cover inside an AOI, one row per item (clearest first by default): `result` is the
    same `CloudCoverResult` the server's cloud_cover_stats tool returns; `to_dataframe()` makes
    the ranking table (its `attrs`: aoi_bbox, sort, failed, notes); `request`: the parameters of
    the call. A ranking is answered as itself and drawn as its rows; it is not saved.

    It reads as that table too - `ranking["clear_fraction"]`, `ranking.iloc[0]`, `len(ranking)`,
    `ranking.attrs` and the other DataFrame attributes go to `to_dataframe()` - so code written
    for the table keeps working; in Jupyter it shows as the table.
    """

    result_kind = "cloud_cover_stats"
    _own = ("result", "_frame", "_request")

    def __init__(self, result: CloudCoverResult, *, request: dict | None = None, core=None):
        self.result, self._request, self._core = result, dict(request or {}), core
        self._frame: pd.DataFrame | None = None

    @property
    def items(self) -> list[ItemCloudCover]:
        """The rows: per item, the cloud, shadow, cirrus, snow, water, clear and no-data fractions."""
        return self.result.items

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    @property
    def request(self) -> dict[str, Any]:
        return dict(self._request)

    def to_dataframe(self) -> pd.DataFrame:
        """The ranking as a DataFrame, one row per item in its order (a copy each call)."""
        return self._held().copy()

    def _held(self) -> pd.DataFrame:
        from .tables import to_frame

        if self._frame is None:  # its other fields in `attrs`
            self._frame = to_frame(self.result.items, list(ItemCloudCover.model_fields))
            self._frame.attrs.update(self.result.model_dump(include={"aoi_bbox", "sort", "failed", "notes"}))
        return self._frame

    def __len__(self) -> int:
        return len(self.result.items)

    def __repr__(self) -> str:
        return f"<CloudCover {len(self)} items, {self.result.failed} failed, sort={self.result.sort!r}>"

    def _answer(self, core, records, limits, quicklook: bool) -> Answer:
        """The cloud_cover_stats tool's answer: the ranking (nothing is saved), drawn as its rows."""
        return Answer(self.result, layer=ranking_layer(self.result, self._request.get("catalog")))

    def map_call(self) -> dict:
        """A ranking as the map draws it: the ranking and its AOI."""
        structured = self.result.model_dump(mode="json")
        layer = ranking_layer(self.result, self._request.get("catalog"))
        return call("cloud_cover_stats", {}, structured, layer=layer)


def ranking_layer(result: CloudCoverResult, catalog: str | None = None):
    """The `MapLayer` of a ranking: its rows in order, what the map shows of each, and the
    catalog its call named (where the map finds the rows' footprints)."""
    from ..models import MapLayer, map_area

    keys = ("datetime", "clear_fraction", "cloud_fraction", "nodata_fraction", "scene_cloud_cover", "error")
    rows = [
        {"id": row.item_id, "collection": row.collection_id, **{k: getattr(row, k) for k in keys}}
        for row in result.items
    ]
    notes = result.model_dump(mode="json")["notes"]  # as answered: with the lean rows' note
    return MapLayer(ranking=rows, area=map_area({}, result.aoi_bbox), notes=notes, catalog=catalog)


class CloudCoverStats(Operation):
    """How cloudy was *this area* in each scene: per item, the cloud, shadow, cirrus, snow,
    water and clear fractions of the valid pixels inside `aoi` (a WGS84 bbox or GeoJSON
    geometry), its no-data fraction, and the scene-wide eo:cloud_cover for comparison, from
    each item's own mask read only in the AOI's window. Items: `items` (search results or
    [{"collection_id": ..., "item_id": ...}]) or the search arguments (catalog, collections,
    datetime, ids, query, filter, filter_lang, sortby, max_cloud_cover). Clearest first by
    default. A `CloudCover`: `to_dataframe()` is the table, one row per item (`attrs` hold
    aoi_bbox, sort, failed and notes), and it reads as that table too; `.result` is the model.
    `dry_run=True`: an `Estimate` of what it would read (only headers are read).

    >>> ranking = session.cloud_cover(aoi, collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-07-31")
    >>> ranking[["item_id", "cloud_fraction", "scene_cloud_cover"]].tail(1).to_dict("records")
    [{'item_id': 'S2B_33TUL_20240604_0_L2A', 'cloud_fraction': ..., 'scene_cloud_cover': 62.0}]
    """

    name: ClassVar[str] = "cloud_cover_stats"
    library_name: ClassVar[str] = "cloud_cover"
    positional: ClassVar[tuple[str, ...]] = ("aoi",)
    tool: ClassVar[Tool] = Tool(read_only=True)
    answer_model: ClassVar[type] = CloudCoverResult
    description: ClassVar[str] = """Per scene, the AOI's own cloud, shadow, cirrus, snow, water, clear
    and no-data fractions, from the item's mask (SCL, QA_PIXEL, Fmask...).

    Example: cloud_cover_stats(aoi=[13.55, 45.85, 13.75, 45.98], search={"catalog": "sample",
    "collections": ["sentinel-2-l2a"], "datetime": "2024-06"})."""
    asset: ClassVar[str | None] = None  # the mask: found in each item
    resampling: ClassVar[str] = "nearest"  # how the mask is read at a coarser resolution

    aoi: AoiArg
    search: SearchOrItemsArg = None
    resolution: ResolutionArg = None
    max_items: MaxItemsArg = None
    sort: Annotated[
        Sort, Field(description="clear: clearest first; cloud: least cloud; search: as found")
    ] = "clear"

    @cached_property
    def geometry(self):
        """The AOI as a shapely geometry (WGS84)."""
        return aoi_geometry(self.aoi)

    def select(self, core) -> Selection:
        """The items to measure - for the call and for its dry run alike."""
        catalog, items, search = search_group(self.search)
        return select(
            core,
            self.geometry,
            catalog=catalog,
            items=items,
            search=search,
            max_items=self.max_items,
            default_max=DEFAULT_MAX_ITEMS,
        )

    def estimate(self, core):
        """What `run` would read (the masks' headers only)."""
        from ..processing.estimate import estimate_cloud_cover

        return estimate_cloud_cover(core, self)

    def run(self, core, job: Job | None = None) -> CloudCover:
        """Cloud statistics over the AOI for the items (`measure`), as a ranking."""
        return CloudCover(measure(core, self, job), request=recorded(self, {}), core=core)
