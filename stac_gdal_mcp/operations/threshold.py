"""The area where an index passes a threshold: per zone and item (or solar day), the hectares of
the zone whose value of `expression` meets `condition` ("> 0.3", "<= -0.1", "between 0.2 0.5";
for a class raster "in [4, 5]"), and that area's share of the zone's valid (clear, with data) area.

It is zonal statistics with one more step per window: the zones, the items, their grids, the
windows read by tile, the masks, the mosaic of a day and the per-item errors are `zonal`'s
(`zonal.check`, `select`, `measure_item`, `table`); here each window's values become 1 where the
condition holds and 0 where it does not (masked where not valid), and exactextract's `sum` of
that is the passing area in pixels, coverage-weighted (exact at zone edges), `count` the valid
area. `area_ha` = sum x pixel area / 10,000; `fraction` = sum / count.

Its table is a `ThresholdTable`, a GeoDataFrame (zone_id, datetime, collection_id, item_ids,
area_ha, fraction, valid_fraction, cloud_fraction, note, error, geometry) with its request and
provenance, its notes those of the zonal table it was measured as (`Quality`), in its words;
`save` writes it as GeoParquet (or CSV); the tool's answer keeps the rows that fit, the zones
coloured by their latest `area_ha` for the map, and a chart of area over time per zone.
The zone layer (`zones_layer`) serves `change` too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr
from pydantic.json_schema import SkipJsonSchema

from ..errors import InvalidArgument, LimitExceeded, NotSupported
from ..processing.jobs import Job, timed
from .base import LIBRARY_ONLY, Operation
from .params import MaskCloudsArg, MinValidArg, ResolutionArg, SearchArg, json_text
from .result import Answer
from .zonal import DEFAULT_MIN_VALID_FRACTION, Stat, ZonalRequest
from .zonal.result import ZonalTable, ZoneLayer, ZoneTable, drawn_apart, zones_call

if TYPE_CHECKING:
    import pandas as pd

    from ..outputs import OutputRecord

CONDITION_FORMS = "'> 0.3', '<= -0.1', 'between 0.2 0.5' or, for classes, 'in [4, 5]'"
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_COMPARE = re.compile(rf"\s*(>=|<=|>|<)\s*({_NUMBER})\s*")
_BETWEEN = re.compile(rf"\s*between\s+({_NUMBER})\s*(?:and\s+|,\s*)?({_NUMBER})\s*", re.IGNORECASE)
_IN = re.compile(rf"\s*in\s*\[\s*({_NUMBER}(?:\s*,\s*{_NUMBER})*)\s*\]\s*", re.IGNORECASE)
M2_PER_HA = 10_000.0
# the table's statistic columns (finished by `zonal.table`, blanked under min_valid_fraction)
AREA_STATS = (Stat("sum", (), "area_ha"), Stat("mean", (), "fraction"))
_SUM = (Stat("sum"),)  # what exactextract computes of each window's 0/1 values (and its _count)


# --- the condition --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """A checked condition: its text, its operator (> >= < <= between in) and its numbers."""

    text: str
    op: str
    values: tuple[float, ...]

    def test(self, value):
        """Where `value` (a numpy array) meets the condition (NaN never does)."""
        import numpy as np

        with np.errstate(invalid="ignore"):
            if self.op == "between":
                return (value >= self.values[0]) & (value <= self.values[1])
            if self.op == "in":
                return np.isin(value, self.values)
            (low,) = self.values
            return {">": value > low, ">=": value >= low, "<": value < low, "<=": value <= low}[self.op]


def parse_condition(text: Any) -> Condition:
    """`text` as a `Condition`; anything else refused in one line naming it and the forms."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"condition is required: write {CONDITION_FORMS}")
    shown = text.strip()[:80]
    if found := _COMPARE.fullmatch(text):
        return Condition(shown, found.group(1), (float(found.group(2)),))
    if found := _BETWEEN.fullmatch(text):
        low, high = float(found.group(1)), float(found.group(2))
        if not low < high:
            raise InvalidArgument(
                f"condition '{shown}': the first number must be the lower (between 0.2 0.5)"
            )
        return Condition(shown, "between", (low, high))
    if found := _IN.fullmatch(text):
        return Condition(shown, "in", tuple(float(v) for v in found.group(1).split(",")))
    raise InvalidArgument(f"condition '{shown}' is not understood; write {CONDITION_FORMS}")


# --- the request ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThresholdRequest:
    """A checked call: the zonal statistics request it measures with, and the condition."""

    zonal: ZonalRequest
    condition: Condition

    def parameters(self) -> dict:
        """What an output record lists."""
        values = self.zonal.parameters()
        values.pop("stats", None)
        return {**values, "condition": self.condition.text}


def zones_of(aoi, geometries) -> Any:
    """The zones of a call: `geometries`, or the AOI as one zone named "aoi" (one of them)."""
    if (aoi is None) == (geometries is None):
        raise InvalidArgument("give either geometries (zones) or aoi (one area), not both or neither")
    if geometries is not None:
        return geometries
    from shapely.geometry import mapping

    from ..processing.aoi import aoi_geometry

    return {"type": "Feature", "id": "aoi", "properties": {}, "geometry": mapping(aoi_geometry(aoi))}


ZonesArg = json_text(
    dict[str, Any] | list[dict[str, Any]] | str | SkipJsonSchema[Path] | None,
    "zones: GeoJSON or a file",
    listed="object",
)
AreaArg = Annotated[
    Any, LIBRARY_ONLY, Field(description="or one area: a bbox or GeoJSON geometry (its row: aoi)")
]
IdPropertyArg = Annotated[str | None, LIBRARY_ONLY, Field(description="property naming each zone")]


class ThresholdResult(ZoneTable):
    condition: str


# --- one window -------------------------------------------------------------------------------


def measure_zones(condition: Condition, call, inputs, readers, indexes: list[int], job: Job):
    """The passing and valid area of zones `indexes` on one item (or one day's mosaic), a window
    of the zones' tiles at a time; zones outside the raster(s): count 0 and a note."""
    import numpy as np
    import pandas as pd
    import shapely

    from .zonal.pixels import WINDOW_PIXELS, extract, group_grid, item_grid, mosaic, reading, windows
    from .zonal.pixels import window_values as values_of

    request = call.request
    grid = group_grid(
        [
            item_grid({k: r.src for k, r in rs.items()}, i, request.call.resolution)
            for i, rs in zip(inputs, readers)
        ]
    )
    if grid.crs.is_geographic:
        raise NotSupported("the items' grid is in degrees; an area in hectares needs a projected grid")
    projected = call.in_crs(grid.crs)
    found, outside = windows(grid, shapely.bounds([projected[i] for i in indexes]), indexes)
    parts = (
        [pd.DataFrame({"_zone": outside, "_count": 0.0, "note": "outside the item's raster"})]
        if outside
        else []
    )
    for window in found:
        job.check()
        if window.pixels > max(WINDOW_PIXELS, call.limits.max_output_pixels):
            raise LimitExceeded(
                f"a zone covers {window.pixels:,} pixels, more than limits.max_output_pixels="
                f"{call.limits.max_output_pixels:,}; pass a coarser resolution"
            )
        value, cloud = mosaic(
            [values_of(request, i, reading(rs, grid, window)) for i, rs in zip(inputs, readers)]
        )
        passes = np.ma.masked_array(condition.test(value.data).astype("float64"), mask=value.mask)
        geometries = [projected[i] for i in window.zones]
        parts.append(extract(_Sums, grid, window, geometries, passes, cloud))
    frame = pd.concat(parts, ignore_index=True)
    passing = frame.pop("sum") if "sum" in frame else np.nan
    frame["area_ha"] = passing * grid.pixel_area / M2_PER_HA
    frame["fraction"] = passing / frame["_count"].where(frame["_count"] > 0)
    areas = shapely.area([projected[i] for i in frame["_zone"]])
    frame["valid_fraction"] = (frame["_count"] / (areas / grid.pixel_area)).clip(upper=1.0)
    return frame


class _Sums:
    """The statistics `extract` computes of a window's 0/1 values: their sum (and `_count`)."""

    stats = _SUM


def measure_assets(condition: Condition, settings, call, inputs, indexes: list[int], job: Job):
    """`measure_zones` on the assets of one item, or one day's items (opened here, closed after)."""
    from ..processing.access import ONE_THREAD_PER_READ, open_reader

    with contextlib.ExitStack() as stack:
        readers = [
            {
                s.asset_key: stack.enter_context(open_reader(s, settings, env=ONE_THREAD_PER_READ, job=job))
                for s in one.sources
            }
            for one in inputs
        ]
        return measure_zones(condition, call, inputs, readers, indexes, job)


def on_worker(request: ThresholdRequest, key: str, settings, inputs, indexes: list[int]):
    """The rows of one item on a dask worker (a worker keeps one call's zone projections)."""
    from ..processing.items import kept
    from .zonal.pixels import Call

    call = kept(key, lambda: Call(request.zonal, None, [], [], None, settings.limits))
    return measure_assets(request.condition, settings, call, inputs, indexes, Job())


class ThresholdTable(ZonalTable):
    """The area where a condition holds per zone and item (or day): a zonal table (it reads as
    its GeoDataFrame) of the kind "threshold_area", its statistics `area_ha` and `fraction`;
    saved, kept, answered and drawn as below (`save`, `answer`, `map_call`)."""

    result_kind: ClassVar[str] = "threshold_area"

    def _save(self, core, format, output_name, job):
        return save(core, self, format=format, output_name=output_name, job=job)

    def _answer(self, core, records, limits, quicklook: bool):
        return answer(core, self, records, limits)

    def map_call(self) -> dict:
        return map_call(self)


def measure(core, request: ThresholdRequest, job: Job | None = None) -> ThresholdTable:
    """The table of a checked request (see the module docstring), with its provenance."""
    from . import zonal

    job = timed(job, core)
    found = zonal.select(core, request.zonal)
    metas, frames = zonal.measure_items(
        core,
        found,
        job,
        measure=functools.partial(measure_assets, request.condition),
        worker=on_worker,
        shared=request,
        start=f"area where {request.condition.text} in {len(request.zonal.zones)} zones on {len(found.items)} items",
    )
    zonal.none_measured(metas)
    table = zonal.table(core, found, metas, frames)
    made = table.provenance
    # (zonal's notes in this table's words: a row under min_valid_fraction has no area)
    facts = {**made.facts, "condition": request.condition.text, "notes": table.quality.notes("area")}
    provenance = made.model_copy(
        update={
            "kind": "threshold_area",
            "operation": "threshold_area",
            "parameters": request.parameters(),
            "title": f"area where {made.facts['expression']} {request.condition.text} per zone",
            "facts": facts,
        }
    )
    return ThresholdTable(table.frame, provenance, core, quality=table.quality)


# --- the answer -----------------------------------------------------------------------------------


def zones_layer(frame: pd.DataFrame, column: str, expression: str) -> ZoneLayer:
    """Each zone (in the table's order) with the latest known value of `column` (and why its
    latest row has none, when it has none), as the map draws zones."""
    import shapely
    from shapely.geometry import mapping

    from .zonal.chart import expression_name
    from .zonal.result import DECIMALS, rounded

    features = []
    for zone_id, rows in frame.groupby("zone_id", sort=False):
        rows = rows.sort_values("datetime", na_position="first") if "datetime" in rows else rows
        known = rows.dropna(subset=[column])
        last, latest = (known.iloc[-1] if len(known) else None), rows.iloc[-1]
        why = (
            None
            if last is not None and last.name == latest.name
            else (latest.get("note") or latest.get("error"))
        )
        zone_id = zone_id.item() if hasattr(zone_id, "item") else zone_id
        properties = {"value": None if last is None else rounded(column, float(last[column]))}
        if "datetime" in rows and last is not None:
            properties["datetime"] = last["datetime"].strftime("%Y-%m-%dT%H:%M:%SZ")
        if isinstance(why, str) and why:
            properties["note"] = why[:300]
        geometry = mapping(shapely.set_precision(rows.geometry.iloc[0], 10**-DECIMALS))
        features.append(
            {
                "type": "Feature",
                "id": zone_id if isinstance(zone_id, (int, str)) else str(zone_id),
                "geometry": geometry,
                "properties": properties,
            }
        )
    return ZoneLayer(stat=column, expression=expression_name(expression), features=features)


def fitted(frame: pd.DataFrame, layer: ZoneLayer, record, max_bytes: int, notes: list[str]) -> tuple:
    """(the rows, the layer) within `max_bytes` together (the zones at most half), a note in
    `notes` for what was left out and where the rest is."""
    import json

    from .zonal.result import _fitting, _records

    features = _fitting(layer.features, max_bytes // 2)
    if len(features) < len(layer.features):
        notes.append(
            f"the map shows {len(features)} of {len(layer.features)} zones (limits.max_result_bytes); every zone is in the saved table"
        )
    records = _records(frame)
    rows = _fitting(records, max_bytes - len(json.dumps(features, separators=(",", ":"))))
    if len(rows) < len(records):
        notes.append(
            f"{len(rows)} of {len(records)} rows shown (limits.max_result_bytes); every row is in the saved table {record.file.href.rsplit('/', 1)[-1]}"
        )
    return rows, layer.model_copy(update={"features": features})


def result(table: ThresholdTable, record: OutputRecord, max_bytes: int) -> ThresholdResult:
    """The tool's answer: the first rows and the zones within `max_bytes`."""
    frame, facts = table.frame, table.provenance.facts
    notes = list(facts["notes"])
    rows, layer = fitted(frame, zones_layer(frame, "area_ha", facts["expression"]), record, max_bytes, notes)
    return ThresholdResult.of(facts, record, layer, notes, rows, len(frame), condition=facts["condition"])


def chart_png(table: ThresholdTable) -> bytes:
    """The passing area of each zone against time (a line per zone, the first 12), in hectares."""
    from .tables import png_bytes
    from .zonal.chart import expression_name, plain, series_figure

    facts = table.provenance.facts
    figure = series_figure(table.frame, "area_ha", facts["expression"])
    axes = figure.axes[0]
    axes.set_title(
        plain(f"area where {expression_name(facts['expression'])} {facts['condition']}, per zone"),
        fontsize=10,
    )
    axes.set_ylabel("hectares (coverage-weighted)")
    return png_bytes(figure)


def save(
    core, table: ThresholdTable, *, format: str | None = None, output_name=None, job=None
) -> OutputRecord:
    """The table saved as GeoParquet (the default) or CSV, with a record naming every asset read."""
    from .zonal import write_table

    return write_table(
        core, table.frame, table.provenance, format=format, output_name=output_name, stem="threshold-area"
    )


def answer(core, table: ThresholdTable, records, limits, **options) -> Answer:
    """The tool's answer within limits.max_result_bytes, with the chart of area over time."""
    (record,) = records
    value, layer = drawn_apart(result(table, record, limits.max_result_bytes))
    return Answer(value, records, (chart_png(table),), layer=layer)


def map_call(table: ThresholdTable) -> dict:
    """A table as the map draws it: its zones with their latest passing area."""
    facts = table.provenance.facts
    layer = zones_layer(table.frame, "area_ha", facts["expression"])
    drawn = zones_call("threshold_area", facts, layer)
    return {**drawn, "arguments": {**drawn["arguments"], "condition": facts["condition"]}}


class ThresholdArea(Operation):
    """The area where `expression` meets `condition`, per zone and item (`per="day"`: per solar
    day): a `ThresholdTable`, which reads as its GeoDataFrame (zone_id, datetime, collection_id,
    item_ids, area_ha, fraction of the zone's clear area, valid_fraction, cloud_fraction, note,
    error, geometry), coverage-weighted on each item's native grid, with its `request` and
    `provenance`; `save` writes it (GeoParquet, or format="csv"). Zones as
    `zonal_stats` takes them, or `aoi` (one area). `dry_run=True`: an `Estimate` (headers only).

    >>> table = session.threshold_area(aoi=aoi, condition="> 0.5", collections=["sentinel-2-l2a"],
    ...                                datetime="2024-06/2024-08")
    >>> table[["item_ids", "area_ha", "fraction"]].round(2).to_dict("records")[1:3]
    [{'item_ids': 'S2A_33TUL_20240619_0_L2A', 'area_ha': 196.42, 'fraction': 0.76},
     {'item_ids': 'S2B_33TUL_20240714_0_L2A', 'area_ha': 136.19, 'fraction': 0.53}]
    """

    name: ClassVar[str] = "threshold_area"
    library_name: ClassVar[str] = "threshold_area"
    positional: ClassVar[tuple[str, ...]] = ("geometries",)
    description: ClassVar[str] = """Hectares per zone and scene/day where an index meets a condition."""
    answer_model: ClassVar[type] = ThresholdResult

    geometries: ZonesArg = None
    search: SearchArg = None
    condition: Annotated[str, Field(description="> 0.3, < -0.1, between 0.2 0.5, in [4, 5]")]
    expression: Annotated[str, Field(description="index, band or formula")] = "ndvi"
    per: Annotated[Literal["item", "day"], Field(description="scene or day")] = "item"
    aoi: AreaArg = None
    id_property: IdPropertyArg = None
    mask_clouds: MaskCloudsArg = True
    resolution: ResolutionArg = None
    min_valid_fraction: MinValidArg = DEFAULT_MIN_VALID_FRACTION
    max_items: Annotated[int | None, LIBRARY_ONLY, Field(ge=1, description="items at most")] = None
    _plan: Any = PrivateAttr(None)

    def plan(self, core) -> ThresholdRequest:
        """The condition and the zonal statistics request it measures with (zones read)."""
        if self._plan is None:
            from .zonal.stats import ZonalStats

            condition = parse_condition(self.condition)
            # the zonal statistics call of this one: the fields both take, its zones, a sum
            shared = {k: v for k, v in self if k in ZonalStats.model_fields and k != "geometries"}
            zones = zones_of(self.aoi, self.geometries)
            zonal = ZonalStats.of(zones, **shared, stats=["sum"]).request(core)
            self._plan = ThresholdRequest(dataclasses.replace(zonal, stats=AREA_STATS), condition)
        return self._plan

    def estimate(self, core):
        """What `run` would read (zonal statistics' windows, from the COGs' tile indexes)."""
        from . import zonal

        found = zonal.estimate(core, self.plan(core).zonal)
        found.operation = "threshold_area"
        return found

    def run(self, core, job: Job | None = None) -> ThresholdTable:
        """The table (see the module docstring)."""
        return measure(core, self.plan(core), job)
