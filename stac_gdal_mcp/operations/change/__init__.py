"""What changed between two periods, and how much: per zone (or over one AOI), the `reducer`
(median by default) over each period's clear pixels of `expression`, then after - before.

How (a pipeline of small steps, as a composite is made):
1. each period's items from its own search over the zones (`before`, `after`: datetime
   intervals; `after` starts once `before` has ended); an empty period is refused in one line;
2. both periods loaded with odc-stac on one grid (`processing.load`): the items' own CRS and
   native resolution, snapped to their pixel edges (items in several CRSs: the first's, or
   `crs`), clouds masked with each item's mask, one time step per solar day;
3. per solar day the expression, computed day by day on the session's scheduler (threads or
   the dask cluster): a day whose reads fail is left out and its items named in `failed_items`;
4. per period and pixel the reducer over its days (`composite.reduce_days`, as a composite
   reduces), then the change: after - before where both periods have a value;
5. per zone, exactextract on that grid (coverage-weighted, exact at zone edges): the mean of
   before, after and the change over the pixels valid in both periods, the hectares whose
   change is above +`threshold` (increase) or below -`threshold` (decrease) and, with `bins`,
   in each named class of change; `valid_fraction` is the share of the zone valid in both.

A `Change` holds the table (a GeoDataFrame, one row per zone, provenance kind
"compare_periods"), the change raster and both periods' rasters (xarray, on the grid); `save`
writes the table (GeoParquet, CSV) or with format="COG" the change; the tool keeps both and
answers the rows that fit, the zones coloured by delta_mean, a chart of before and after per
zone and a picture of the change on a diverging ramp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, WithJsonSchema

from ...errors import InvalidArgument, NotFound
from ...processing.jobs import Job, timed
from ...processing.load import FailedItem
from ..base import LIBRARY_ONLY, Operation
from ..params import MaskCloudsArg, MinValidArg, ResolutionArg, SearchArg, json_text, recorded, search_group
from ..threshold import AreaArg, IdPropertyArg, ZonesArg
from ..zonal import DEFAULT_MIN_VALID_FRACTION, ZONES_FROM
from . import table as tables
from .result import Change, CompareResult

Reducer = Literal["median", "mean", "min", "max"]
DEFAULT_THRESHOLD = 0.1  # a change of an index that counts (NDVI: a tenth of its range of 0..1)
DEFAULT_MAX_ITEMS = 50  # per period
MAX_BINS = 20  # classes of change, a column each
TILE = 1024


# --- the request ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bin:
    """A named class of change: lower <= change < upper (None: open)."""

    name: str
    lower: float | None
    upper: float | None


@dataclass(frozen=True)
class ChangeRequest:
    """One compare_periods call checked: the call (`ComparePeriods`, whose fields are its
    parameters) and what is worked out of it once - the zones read, the expression parsed (an
    index name expanded: `expression`, `tree`, the band `names`) and the classes of change."""

    call: Any  # ComparePeriods
    zones: Any  # zonal.zones.Zones
    expression: str
    tree: Any = field(repr=False, compare=False)
    names: tuple[str, ...] = ()
    bins: tuple[Bin, ...] = ()

    def period(self, name: str) -> tuple[str | None, dict]:
        """(catalog, search arguments) of the period `name`, "before" or "after"."""
        catalog, _, search = search_group(self.call.search)
        return catalog, {**search, "datetime": getattr(self.call, name)}

    def parameters(self) -> dict:
        """What an output record lists: the zones' count, the expression, the classes of change,
        then the call's other fields and its search (None left out)."""
        bins = {b.name: [b.lower, b.upper] for b in self.bins} or None
        first = {"zones": len(self.zones), "expression": self.expression, "bins": bins}
        return recorded(self.call, first, leave_out=ZONES_FROM)


def parse_periods(before: str, after: str) -> None:
    """Both intervals parsed; `after` starting before `before` ends refused in one line."""
    from ...catalogs.security import shown
    from ...discovery.params import datetime_interval
    from ...errors import InvalidDatetime

    found = {}
    for name, text in (("before", before), ("after", after)):
        try:
            found[name] = datetime_interval(text)
        except InvalidDatetime:
            raise InvalidArgument(
                f"{name} must be a month, a day or an interval such as 2024-06-01/2024-06-20 (got {shown(text, 60)})"
            ) from None
    (_, end), (start, _) = found["before"], found["after"]
    if end is None or start is None:
        raise InvalidArgument(
            "before needs an end and after a start (e.g. before='2024-06', after='2024-08')"
        )
    if start <= end:
        raise InvalidArgument(
            f"after ({after}) starts before before ({before}) ends; give after a later period"
        )


def parse_bins(bins) -> tuple[Bin, ...]:
    """{"name": [lower, upper], ...} (null: open) as `Bin`s, in order; a bad class in one line."""
    from ...catalogs.security import shown

    if bins is None:
        return ()
    if not isinstance(bins, dict) or not bins or len(bins) > MAX_BINS:
        raise InvalidArgument(
            f'bins must name 1 to {MAX_BINS} classes of change: {{"loss": [null, -0.1], "gain": [0.1, null]}}'
        )
    parsed = []
    for name, bounds in bins.items():
        if not isinstance(name, str) or not name.replace("_", "").isalnum() or not name.isascii():
            raise InvalidArgument(f"bin name {shown(name, 40)} must be letters, digits and _ (a column name)")
        if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
            raise InvalidArgument(f"bin '{name}' must be [lower, upper] (null for an open end)")
        try:
            low, high = (None if v is None else float(v) for v in bounds)
        except (TypeError, ValueError):
            raise InvalidArgument(
                f"bin '{name}' must be two numbers [lower, upper] (null for an open end)"
            ) from None
        if (
            any(v is not None and not math.isfinite(v) for v in (low, high))
            or (low is None and high is None)
            or (low is not None and high is not None and not low < high)
        ):
            raise InvalidArgument(f"bin '{name}': lower must be below upper, finite, and one of them given")
        parsed.append(Bin(name, low, high))
    return tuple(parsed)


def check(core, call: ComparePeriods) -> ChangeRequest:
    """The call checked into a `ChangeRequest` (periods, bins, expression, zones read), before
    any item is searched or pixel read."""
    from ...processing.access import local_roots
    from ...processing.expressions import parse_expression
    from ..threshold import zones_of
    from ..zonal.zones import read_zones

    if (call.search or {}).get("datetime") is not None:
        raise InvalidArgument("give the two periods as before and after, not datetime")
    if not call.threshold < math.inf:
        raise InvalidArgument(f"threshold must be a change of 0 or more (got {call.threshold!r})")
    parse_periods(call.before, call.after)
    bins = parse_bins(call.bins)
    text, tree, names = parse_expression(call.expression)
    zones = read_zones(
        zones_of(call.aoi, call.geometries),
        id_property=call.id_property,
        roots=local_roots(core),
        limits=core.settings.limits,
    )
    return ChangeRequest(call, zones, text, tree, tuple(names), bins)


BINS = '{"loss": [null, -0.2]}'
# (one object type listed: a null inside a schema's array items is not portable)
BinsArg = Annotated[json_text(dict | None, BINS), WithJsonSchema({"type": "object", "description": BINS})]


class ComparePeriods(Operation):
    """What changed between two periods, and how much: per zone (or over one `aoi`), the
    `reducer` (median) over each period's clear pixels of `expression`, the change (after -
    before) and the hectares beyond +-`threshold` (`bins`: in named classes of change), exact
    at zone edges, on the items' own grid. A `Change`: `.table` (a GeoDataFrame, one row per
    zone: before_mean, after_mean, delta_mean, increase_ha, decrease_ha, area_ha_<bin>,
    valid_fraction, before_items, after_items, note), `.change`, `.before`, `.after` (arrays).
    `save(change)` writes the table, `save(change, format="COG")` the change. `dry_run=True`:
    an `Estimate` (headers only).

    >>> change = session.compare_periods(aoi=aoi, before="2024-06", after="2024-08",
    ...                                  collections=["sentinel-2-l2a"])
    >>> change.table[["zone_id", "before_mean", "after_mean", "decrease_ha"]].round(2).to_dict("records")
    [{'zone_id': 'aoi', 'before_mean': 0.62, 'after_mean': 0.46, 'decrease_ha': 133.12}]
    """

    name: ClassVar[str] = "compare_periods"
    library_name: ClassVar[str] = "compare_periods"
    positional: ClassVar[tuple[str, ...]] = ("geometries",)
    description: ClassVar[str] = """Per zone: an index's median in two periods, its change, hectares
    up/down by over `threshold` or per bin."""
    answer_model: ClassVar[type] = CompareResult

    geometries: ZonesArg = None
    search: SearchArg = None
    before: Annotated[str, Field(description="e.g. 2024-06")]
    after: Annotated[str, Field(description="a later period")]
    expression: Annotated[str, Field(description="index, band or formula")] = "ndvi"
    threshold: Annotated[float, Field(ge=0, description="change that counts")] = DEFAULT_THRESHOLD
    bins: BinsArg = None
    reducer: Annotated[Reducer, LIBRARY_ONLY, Field(description="per pixel over a period")] = "median"
    aoi: AreaArg = None
    id_property: IdPropertyArg = None
    mask_clouds: MaskCloudsArg = True
    min_valid_fraction: MinValidArg = DEFAULT_MIN_VALID_FRACTION
    resolution: ResolutionArg = None
    crs: Annotated[str | None, LIBRARY_ONLY, Field(description="the grid's CRS (items in several)")] = None
    max_items: Annotated[int | None, LIBRARY_ONLY, Field(ge=1, description="items per period at most")] = None
    _plan: Any = PrivateAttr(None)

    def plan(self, core) -> ChangeRequest:
        """The call checked (periods, bins, expression, zones read) before any item is searched."""
        if self._plan is None:
            self._plan = check(core, self)
        return self._plan

    def estimate(self, core):
        """What `run` would read and write (headers only)."""
        return estimate(core, self.plan(core))

    def run(self, core, job: Job | None = None) -> Change:
        """The change (see the module docstring)."""
        return run(core, self.plan(core), job)


# --- the plan: each period's items, one grid ---------------------------------------------------------


@dataclass
class Plan:
    """Both periods' items (full dicts), the stacks loaded lazily on one grid, the notes."""

    periods: dict[str, list[dict]]
    prep: Any  # processing.load.Prepared over both periods
    notes: list[str]

    def period_of(self, members: list[dict]) -> str:
        return next(
            name for name, items in self.periods.items() if members[0]["id"] in {i["id"] for i in items}
        )


def plan(core, request: ChangeRequest) -> Plan:
    """Each period's items (refused in one line when one has none) and both loaded on one grid."""
    from ...processing.load import (
        Prepared,
        aoi_pixels,
        load_stack,
        output_geobox,
        plan_stacks,
        with_footprints,
    )
    from ...processing.selection import select

    area, notes, periods, chosen = request.zones.search_area(), list(request.zones.notes), {}, None
    for name in ("before", "after"):
        catalog, search = request.period(name)
        interval = search["datetime"]
        chosen = select(core, area, catalog=catalog, items=None, search=search,
                        max_items=request.call.max_items, default_max=DEFAULT_MAX_ITEMS)  # fmt: skip
        if not chosen.items:
            raise NotFound(
                f"no items in the {name} period ({interval}) over the zones; widen it or check collections"
            )
        notes += [f"{name}: {n}" for n in chosen.notes]
        periods[name] = with_footprints(chosen.items, notes)
    items = periods["before"] + periods["after"]
    call = request.call
    stacks = plan_stacks(core, items, list(request.names), mask_clouds=call.mask_clouds, chosen=chosen)
    gbox = output_geobox(core, area, stacks, crs=call.crs, resolution=call.resolution, count=3)
    loaded = [load_stack(core, s, gbox, None, chunk=TILE) for s in stacks]
    crss = {c for c in (_crs(i) for i in items) if c}
    if len(crss) > 1:
        notes.append(
            f"the items are in {len(crss)} CRSs; the change is on {gbox.crs} ({'crs' if call.crs else 'the first item'}'s)"
        )
    return Plan(periods, Prepared(area, stacks, gbox, aoi_pixels(gbox, area), loaded, []), notes)


def _crs(item: dict) -> str | None:
    from ...processing.load import item_crs

    return item_crs(item)


def estimate(core, request: ChangeRequest):
    """What `run` would read and write, from headers: each period's load on its grid."""
    from ...processing.estimate.loads import estimate_load
    from ...processing.estimate.result import OutputSize
    from ...processing.requests import Load

    parts = []
    for name in ("before", "after"):
        catalog, search = request.period(name)
        call = request.call
        load = Load.model_construct(aoi=request.zones.search_area(), search={"catalog": catalog, **search},
                                    mask_clouds=call.mask_clouds, resolution=call.resolution, crs=call.crs,
                                    max_items=call.max_items or DEFAULT_MAX_ITEMS)  # fmt: skip
        try:
            parts.append(
                estimate_load(core, load, list(request.names), operation="compare_periods", chunk=TILE)
            )
        except NotFound:
            raise NotFound(
                f"no items in the {name} period ({load.search_args['datetime']}) over the zones"
            ) from None
    first, second = parts
    first.files, first.item_ids = [*first.files, *second.files], [*first.item_ids, *second.item_ids]
    first.notes = [*first.notes, *second.notes]
    for key in ("read_bytes", "read_requests", "read_tiles", "read_pixels"):
        if getattr(first, key) is not None and getattr(second, key) is not None:
            setattr(first, key, getattr(first, key) + getattr(second, key))
    if first.output is not None:
        size = first.output
        first.output = OutputSize(width=size.width, height=size.height, bands=1, dtype="float32",
                                  pixels=(size.width or 0) * (size.height or 0), crs=size.crs,
                                  bytes=(size.width or 0) * (size.height or 0) * 4,
                                  resolution=size.resolution, rows=len(request.zones),
                                  format="COG (the change) + GeoParquet (a row per zone)")  # fmt: skip
    return first


# --- the rasters ------------------------------------------------------------------------------------


def period_rasters(core, request: ChangeRequest, found: Plan, job: Job) -> tuple[dict, list[FailedItem]]:
    """{period: reducer over its solar days of the expression (float32 y, x, NaN: no value)} and
    the items of the days whose reads failed (left out)."""
    import dask.array as da
    import numpy as np

    from ...processing.dask_runtime import compute_each
    from ...processing.expressions import evaluate
    from ..composite import reduce_days

    parts = {}
    for index, loaded in enumerate(found.prep.loaded):
        value = evaluate(request.tree, loaded.bands)
        value = value.where(np.isfinite(value)).astype("float32")
        for t in range(len(loaded.days)):
            parts[(index, t)] = (value.isel(time=t).data,)
    computed, errors = compute_each(core, job, parts)
    days: dict[str, list] = {"before": [], "after": []}
    failed = []
    for (index, t), (array,) in computed.items():
        days[found.period_of(found.prep.loaded[index].days[t][2])].append(array)
    for (index, t), error in errors.items():
        failed += [FailedItem(item_id=m["id"], error=error) for m in found.prep.loaded[index].days[t][2]]
    rasters = {}
    for name, arrays in days.items():
        if not arrays:
            raise NotFound(f"no item of the {name} period could be read: {failed[0].error if failed else ''}")
        job.check()
        cube = da.from_array(np.stack(arrays)[None], chunks=(1, -1, TILE, TILE))
        rasters[name] = np.asarray(reduce_days(cube, request.call.reducer)[0].compute(scheduler="sync"))
    return rasters, failed


def run(core, request: ChangeRequest, job: Job | None = None) -> Change:
    """The change of a checked request (see the module docstring)."""
    job = timed(job, core)
    found = plan(core, request)
    job.progress(
        0, 1, f"{request.call.reducer} of {request.expression} in two periods on {found.prep.gbox.shape} px"
    )
    rasters, failed = period_rasters(core, request, found, job)
    job.check()
    table = tables.finish(request, found, tables.zone_statistics(request, found.prep.gbox, rasters), failed)
    made = tables.provenance(core, request, found, failed, table)
    table.attrs.update(made.to_attrs())
    return Change(table, *tables.arrays(found.prep.gbox, rasters, made), made, core)
