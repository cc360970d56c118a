"""Zonal statistics: exact, coverage-weighted statistics of a band, asset or formula per zone and
per item (or per solar day), straight from the items' COGs, with exactextract as the engine.

`ZonalStats` (stats.py: the operation's class, its parameters) makes the frozen `ZonalRequest`
(once, at the edge), `estimate` says what
a call would read and write (headers and tile indexes only), `run` computes the table, `save`
writes it (GeoParquet or CSV) with a record naming every asset read.

How one item is measured: see `pixels`; the items selected, fanned out (threads or dask.distributed)
and their failures kept in their rows by `processing.items`, the one item pipeline.
`per="day"` measures the items of one collection, solar day (`load.solar_days`, odc-stac's) and
CRS together, as one mosaic (`day_groups`, `pixels.mosaic`, `table.per_day`). A
zone-observation whose valid share is under `min_valid_fraction` keeps count and fractions and
gets a note instead of statistics (`table.too_little`).

A failed read is never data: the item's rows carry `error` and no statistic (every zone's, when it
failed before its footprint was known: it may cover any of them). Zones outside an item's raster
get a row with count 0 and a note; zones no item covers get one such row.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ...errors import AssetNotFound, InvalidArgument, LimitExceeded, NotSupported
from ...processing.items import fetch, none_read, one_item, reference
from ...processing.jobs import Job, timed
from ...stac import item_datetime
from ...words import counted
from .checks import Notes
from .pixels import (
    Call,
    class_bitfields,
    class_names,
    item_grid,
    item_inputs,
    measure_assets,
    source_window,
    windows,
)
from .remote import on_cluster
from .result import ZonalTable
from .table import finish, per_day
from .zones import Zones

if TYPE_CHECKING:
    import pandas as pd

    from ...processing.records import Provenance

DEFAULT_MAX_ITEMS = 50
# a zone-observation with less valid (clear, with data) area than this share of the zone gets no
# statistics, only a note (a minimum clear share: the usual first filter of an analyst)
DEFAULT_MIN_VALID_FRACTION = 0.5
# Items measured at once: each holds its decoded tiles (GDAL's block cache, until its files close)
# and its window's arrays, ~25 MB for NDVI on a 2048 px Sentinel-2 tile; the work is CPU-bound
# (exactextract), so more items in flight add memory, not speed. Measured, 10,000 fields x 20
# items: 16 at once 68 s / 1,044 MB peak, 4 at once 65 s / 623 MB (bench_zonal.py).
ITEMS_IN_FLIGHT = 4

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
MAX_STATS = 40  # statistics in one call: a column each
PER_PIXEL = ("values", "coverage", "cell_id", "center_x", "center_y", "weights")


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
    if len(stats) > MAX_STATS:
        raise InvalidArgument(f"stats names at most {MAX_STATS} statistics (got {len(stats):,})")
    parsed: list[Stat] = []
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
        stat = Stat(name, options, column)
        same = next((s for s in parsed if s.column == column and s != stat), None)
        if same is not None:  # one column would hold the last of them, silently
            raise InvalidArgument(
                f"stats {_shown(same)} and {_shown(stat)} would both fill column '{column}' "
                "(a quantile's column is its whole percent): give quantiles at least 0.01 apart"
            )
        parsed.append(stat)
    return tuple(dict.fromkeys(parsed))


def _shown(stat: Stat) -> str:
    options = ", ".join(f"{k}={v:g}" for k, v in stat.options)
    return f"'{stat.name}({options})'" if options else f"'{stat.name}'"


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
    """One zonal statistics call checked: the call (`stats.ZonalStats`, whose fields are its
    parameters; its `geometries` are read into `zones` and not kept twice) and what is worked out
    of it once - the zones, the expression parsed (an index name expanded: `expression`, `tree`,
    the band `names`) and the statistics named (`stats`; threshold_area names its own)."""

    call: Any  # stats.ZonalStats
    zones: Zones
    expression: str
    tree: Any = field(repr=False, compare=False)
    names: tuple[str, ...] = ()
    stats: tuple[Stat, ...] = ()

    def parameters(self) -> dict:
        """What an output record lists: the zones' count, the expression and the statistics'
        columns, then the call's other fields and its search (None left out)."""
        from ..params import recorded

        first = {
            "zones": len(self.zones),
            "expression": self.expression,
            "stats": [s.column for s in self.stats],
        }
        return recorded(self.call, first, leave_out=ZONES_FROM)


#: The fields of a call its zones are read from (a record lists their count instead).
ZONES_FROM = ("geometries", "aoi", "id_property")


# --- items --------------------------------------------------------------------------------------


def select(core, request: ZonalRequest) -> Call:
    """The items a request measures: the caller's, or a search over the zones (capped)."""
    from ...processing.selection import select as select_items
    from ..params import search_group

    catalog, items, search = search_group(request.call.search)
    chosen = select_items(
        core,
        request.zones.search_area(),
        catalog=catalog,
        items=items,
        search=search,
        max_items=request.call.max_items,
        default_max=DEFAULT_MAX_ITEMS,
        notes=Notes.of(request.zones.notes),
    )
    return Call(request, *chosen, core.settings.limits)


def full_item(call: Call, ref_or_item: dict) -> dict:
    return fetch(call.catalog, ref_or_item)


def measure_item(core, call: Call, unit, job: Job, measure=measure_assets) -> tuple[dict, Any]:
    """(facts of the item, its rows as a DataFrame or None when it covers no zone). `unit`: an
    item (or its reference), or the items of one solar day (`per="day"`: a list, mosaicked in
    its order). Never raises for a problem of this item (its rows carry `error`), only when the
    job stops. `measure`: where the pixels are read (`measure_assets` here, `on_cluster` on
    dask.distributed)."""
    import pandas as pd

    group = unit if isinstance(unit, list) else [unit]
    refs = [reference(r) for r in group]
    meta = {
        "item_id": " ".join(str(r["item_id"]) for r in refs),
        "collection_id": refs[0]["collection_id"],
        "datetime": None,
        "date": None,
        "sources": [],
        "classes": {},
        "error": None,
    }
    indexes: list[int] | None = None  # the item's zones: unknown until its footprint is read
    with one_item("zonal_stats", meta["item_id"], job) as outcome:
        items = [full_item(call, r) for r in group]
        meta["datetime"] = item_datetime(items[0])
        if call.request.call.per == "day":
            meta["date"] = solar_day(call, items)
        indexes = call.zones_of_items(items)
        if not indexes:
            return meta, None
        inputs = [item_inputs(core, call, item) for item in items]
        meta["classes"] = class_names(items[0], call.request)
        meta["bitfields"] = class_bitfields(items[0], call.request)
        frame = measure(core.settings, call, inputs, indexes, job)
        meta["sources"] = [s.source_ref() for one in inputs for s in one.sources]
        return meta, frame
    meta["error"] = outcome.error
    # a failure the call's arguments cause (a band no item has, a resolution no grid can have)
    meta["refused"] = isinstance(
        outcome.exception, (InvalidArgument, AssetNotFound, NotSupported, LimitExceeded)
    )
    if indexes is None:  # failed before its zones were matched: it may cover any of them
        indexes = list(range(len(call.request.zones)))
    frame = pd.DataFrame({"_zone": indexes, "_count": math.nan, "error": outcome.error})
    return meta, frame if indexes else None


def solar_day(call: Call, items: list[dict]) -> str:
    """The solar day of the items (odc-stac's, `load.solar_days`) at the zones' longitude."""
    from ...processing.load import solar_days

    return solar_days(items[:1], call.request.zones.search_area().centroid.x)[0][0]


def day_groups(call: Call) -> list:
    """The units `per="day"` measures: the items of one collection, solar day and CRS together,
    in acquisition order (the mosaic's order); an item that cannot be fetched on its own (its
    measure then fails in words)."""
    from ...processing.load import item_crs, solar_days

    lon = call.request.zones.search_area().centroid.x
    groups, together = [], {}
    for ref in call.items:
        try:
            item = full_item(call, ref)
        except Exception:
            groups.append(ref)
            continue
        together.setdefault((item.get("collection"), item_crs(item)), []).append(item)
    for members in together.values():
        groups += [day_items for _, _, day_items in solar_days(members, lon)]
    return groups


# --- many items ------------------------------------------------------------------------------------


def run(core, request: ZonalRequest, job: Job | None = None) -> ZonalTable:
    """The statistics table of a checked request (see the module docstring): a `ZonalTable` (a
    GeoDataFrame, one row per zone and item - `per="item"` - or per zone and solar day -
    `per="day"` -, with its provenance). `job` gets a progress step per item and stops the reads
    when cancelled."""
    job = timed(job, core)
    call = select(core, request)
    metas, frames = measure_items(core, call, job)
    none_measured(metas)
    return table(core, call, metas, frames)


def none_measured(metas: list[dict]) -> None:
    """Refuse, in one line, a call whose every item failed: for its arguments (a band no item
    has, a resolution no grid can have), a table of empty rows would only repeat the first item's
    reason on each; for their reads (an unreachable host), the call fails with the one reason
    when they share it (`items.none_read`). Failed reads stay rows with their error when another
    item was read."""
    if metas and all(meta.get("refused") for meta in metas):
        others = f" (and {len(metas) - 1} more)" if len(metas) > 1 else ""
        raise InvalidArgument(f"none of the {len(metas)} items can be measured: {metas[0]['error']}{others}")
    errors = [meta["error"] for meta in metas if meta]
    if errors and all(errors):
        raise none_read(errors)


def measure_items(
    core, call: Call, job: Job, *, report: bool = True, measure=None, worker=None, shared=None, start=None
) -> tuple[list, list]:
    """(facts, rows) of each of the call's items (`per="day"`: of each day's mosaic), on the
    reader threads, their pixels read there or on the dask cluster (`processing.items`);
    `report`: a progress step per item (`region` reports per group of zones instead). Another
    measure of the same windows (threshold_area's) comes as `measure(settings, call, inputs,
    indexes, job)`, its cluster form `worker(shared, key, settings, inputs, indexes)` with the
    `shared` request it needs, and its `start` line; by default, the statistics."""
    from ...processing.items import Cluster, each

    units = day_groups(call) if call.request.call.per == "day" else call.items
    total = len(units)
    workers = max(1, min(core.settings.limits.max_concurrency, ITEMS_IN_FLIGHT, total))
    start = start or f"zonal statistics of {len(call.request.zones)} zones on {counted(total, 'item')}"
    with contextlib.ExitStack() as stack:
        measure = measure or measure_assets
        if total and core.settings.dask_scheduler:  # a worker thread per item in flight
            cluster = Cluster(core, call.request if shared is None else shared, job)
            stack.enter_context(contextlib.closing(cluster))
            workers = max(1, min(2 * cluster.threads, total))  # (one waiting while one runs)
            measure = on_cluster(cluster, worker)
        results = each(
            job,
            units,
            lambda unit: measure_item(core, call, unit, job, measure),
            workers=workers,
            start=start if report else None,
            describe=_outcome,
        )
    return [meta for meta, _ in results], [frame for _, frame in results]


def _outcome(result: tuple) -> str:
    meta, frame = result
    rows = 0 if frame is None else len(frame)
    return f"{meta['item_id']}: {meta['error'] or f'{rows} zones measured'}"


def table(core, call: Call, metas: list[dict], frames: list) -> ZonalTable:
    """The items' rows as one table in the zones' order, then time; with its provenance. The
    items' facts (time, ids) are kept once per item and taken into the rows by item index.
    `frames` is emptied: each item's rows are let go once they are in the table (at region scale
    a group's table is made while the next group is measured)."""
    import numpy as np
    import pandas as pd

    request = call.request
    parts = [(k, frame) for k, frame in enumerate(frames) if frame is not None]
    del frames[:]
    covered = np.zeros(len(request.zones), dtype=bool)
    for _, frame in parts:
        covered[frame["_zone"].to_numpy()] = True
    missing = np.flatnonzero(~covered)
    if missing.size:  # (item -1: the facts' last entry, None)
        parts.append(
            (-1, pd.DataFrame({"_zone": missing, "_count": 0.0, "note": "no item covers this zone"}))
        )
    item = np.concatenate([np.full(len(frame), k, dtype="int64") for k, frame in parts])
    rows = pd.concat([frame for _, frame in parts], ignore_index=True)
    del parts
    # one row per item, and a last one of None for the zones no item covers (item -1)
    none = {"datetime": None, "collection_id": None, "item_id": None, "date": None}
    facts = pd.DataFrame([*metas, none])[["datetime", "collection_id", "item_id", "date"]]
    facts["datetime"] = pd.to_datetime(facts["datetime"], utc=True, format="ISO8601")
    for column, name in (
        ("datetime", "datetime"),
        ("collection_id", "collection_id"),
        ("item_ids", "item_id"),
        ("date", "date"),
    ):
        rows[column] = facts[name].array.take(item)
    if request.call.per == "day":
        rows = per_day(rows)
    rows = rows.sort_values(["_zone", "datetime"], kind="stable", na_position="first")
    return finish(core, call, rows, metas)


# --- dry run ----------------------------------------------------------------------------------------


def estimate(core, request: ZonalRequest, *, call: Call | None = None):
    """What `run` would read and write: per item, the very windows it would read of each asset,
    looked up in the COGs' tile indexes (headers only). Items that would fail are noted. `call`:
    the items already selected (region scale selects them once for every group of zones)."""
    import shapely

    from ...processing.estimate.reads import Planner
    from ...processing.estimate.result import Estimate, OutputSize
    from ...processing.items import plan_each

    deadline = timed(None, core)  # a dry run is bounded by limits.job_timeout_s too
    call = call or select(core, request)
    planner = Planner(core)
    result = Estimate(operation="zonal_stats", notes=list(call.notes))

    def one(ref_or_item) -> tuple[str, int]:
        item = full_item(call, ref_or_item)
        indexes = call.zones_of_items([item])
        if not indexes:
            return item["id"], 0
        inputs = item_inputs(core, call, item)
        with contextlib.ExitStack() as stack:
            opened = {s.asset_key: stack.enter_context(planner.open(s)) for s in inputs.sources}
            grid = item_grid({k: src for k, (_, src, _) in opened.items()}, inputs, request.call.resolution)
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

    workers = min(core.settings.limits.max_concurrency, len(call.items) or 1)
    planned = plan_each(deadline, call.items, one, result.notes, workers)
    ids = [item_id for item_id, _ in planned]
    rows = sum(count for _, count in planned)
    result.item_ids = ids
    result.output = OutputSize(rows=rows, format="GeoParquet or CSV")
    return planner.fill(result)


# --- saving -----------------------------------------------------------------------------------------

MEDIA_TYPES = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv"}


def save(
    core,
    table: ZonalTable,
    *,
    format: Literal["parquet", "csv"] = "parquet",
    output_name: str | None = None,
    job=None,
):
    """Write a zonal statistics table as GeoParquet (the zones' geometry included) or CSV (the
    geometry as WKT), with a record naming every asset it was computed from; return the record."""
    provenance = table.provenance
    if format not in MEDIA_TYPES:
        raise InvalidArgument("format must be 'parquet' (GeoParquet) or 'csv' for a zonal statistics table")
    if saved := provenance.facts.get("saved_as"):  # a region's: written while computed (`region`)
        if format != "parquet" or output_name is not None:
            raise InvalidArgument(
                f"this table of {provenance.facts['zones']:,} zones was saved as it was computed, as the "
                f"partitioned GeoParquet output '{saved}'; it is not written again"
            )
        return core.outputs.get(saved)
    if job is not None:
        job.progress(1, 1, "writing the table")
    facts = provenance.facts
    extra = {"zonal:stats": facts["stats"], "zonal:expression": facts["expression"]}
    return write_table(
        core, table.frame, provenance, format=format, output_name=output_name, stem="zonal-stats", extra=extra
    )


def write_table(
    core,
    frame: pd.DataFrame,
    provenance: Provenance,
    *,
    format: str | None,
    output_name,
    stem: str,
    extra=None,
):
    """A table of zones written as GeoParquet (the default; the zones' geometry included) or CSV
    (the geometry as WKT), with the record its provenance says (its properties and `extra`)."""
    format = (format or "parquet").lower()
    if format not in MEDIA_TYPES:
        raise InvalidArgument(
            f"format must be 'parquet' (GeoParquet) or 'csv' for a {provenance.operation} table"
        )
    store = core.outputs
    with store.writing(f".{format}", output_name, stem=stem) as out:
        if format == "parquet":
            frame.to_parquet(out.path, index=False)
        else:
            frame.to_wkt().to_csv(out.path, index=False, date_format="%Y-%m-%dT%H:%M:%SZ")
        return store.commit(
            out,
            operation=provenance.operation,
            parameters=provenance.parameters,
            sources=provenance.sources,
            software=provenance.software,
            media_type=MEDIA_TYPES[format],
            title=provenance.title,
            lineage=provenance.lineage,
            properties={**provenance.properties, **(extra or {})},
        )
