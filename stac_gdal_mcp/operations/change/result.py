"""A change as an answer: the rows that fit, both files linked, the zones coloured by delta_mean,
a chart of before and after per zone and a picture of the change on a diverging ramp; saving
the table or the change. What happens to the kind "compare_periods" (`ComparePeriods` binds them): `save`,
`outputs`, `answer`, `map_call`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ...errors import InvalidArgument
from ...models import Model
from ...processing.load import FailedItem, GridInfo, OutputRef
from ...processing.records import Provenance
from ..registry import Answer
from ..zonal.result import ZoneLayer, answer_fields, drawn_apart, zones_call
from .table import Change

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    from ...outputs import OutputRecord

# --- the answer -----------------------------------------------------------------------------------------

CHART_ZONES = 12
PICTURE_PX = 512  # the change picture's longest side, at most


class CompareResult(Model):
    expression: str
    before: str
    after: str
    reducer: str
    threshold: float
    mask_clouds: bool
    zones: int
    items: dict[str, int] = Field(description="items read per period (their ids: before_items, after_items)")
    rows: list[dict[str, Any]] = Field(description="the table's first rows; all of them are in `table`")
    table: OutputRef
    change: OutputRef = Field(
        description="COG of after - before on the items' grid (NaN: no value in a period)"
    )
    grid: GridInfo
    zone_layer: ZoneLayer = Field(description="each zone with its delta_mean")
    notes: list[str] = []
    failed_items: list[FailedItem] = []


def table_of(result) -> pd.DataFrame:
    """The table of a `Change` (or the table itself), made by compare_periods."""
    table = result.table if isinstance(result, Change) else result
    Provenance.required(table, "compare_periods", "compare_periods")
    return table


def chart_png(table: pd.DataFrame) -> bytes:
    """Before and after per zone (bars, the first CHART_ZONES zones), the change written above."""
    import numpy as np

    from ..tables import new_figure, png_bytes
    from ..zonal.chart import plain

    facts = Provenance.of(table).facts
    shown = table.iloc[:CHART_ZONES]
    figure, axes = new_figure(3.6)
    at = np.arange(len(shown))
    for offset, column, when in ((-0.2, "before_mean", facts["before"]), (0.2, "after_mean", facts["after"])):
        axes.bar(at + offset, shown[column].astype("float64").fillna(0.0), width=0.4, label=plain(when))
    for x, row in zip(at, shown.itertuples()):
        text = "no value" if row.delta_mean != row.delta_mean else f"{row.delta_mean:+.3g}"
        axes.annotate(text, (x, 0), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
    more = f" (first {CHART_ZONES} of {len(table)} zones)" if len(table) > CHART_ZONES else ""
    axes.set_title(
        plain(f"{facts['reducer']} {facts['expression_name']} per zone, before and after{more}"), fontsize=10
    )
    axes.set_xticks(at, [plain(z) for z in shown["zone_id"]], rotation=30, ha="right", fontsize=7)
    axes.set_ylabel(plain(facts["expression_name"]))
    axes.legend(fontsize=7, frameon=False)
    return png_bytes(figure)


def change_png(change: xr.DataArray) -> bytes:
    """The change as a picture on a diverging ramp (red: decrease, blue: increase, white: none;
    symmetric to the 98th percentile of its size), transparent where there is no value."""
    import io

    import numpy as np
    from matplotlib import colormaps
    from PIL import Image

    values = np.asarray(change.values, dtype="float64")
    step = max(1, math.ceil(max(values.shape) / PICTURE_PX))
    values = values[::step, ::step]
    known = np.isfinite(values)
    top = float(np.percentile(np.abs(values[known]), 98)) if known.any() else 1.0
    scaled = np.clip((np.where(known, values, 0.0) / (top or 1.0) + 1) / 2, 0, 1)
    rgba = (colormaps["RdBu"](scaled) * 255).astype("uint8")
    rgba[..., 3] = np.where(known, 255, 0)
    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, format="PNG")
    return out.getvalue()


def result(change: Change, records, max_bytes: int) -> CompareResult:
    """The tool's answer: the first rows and the zones within `max_bytes`, both files linked."""
    from ..threshold import fitted, zones_layer

    table_record, change_record = records
    facts = change.provenance.facts
    notes = list(facts["notes"])
    layer = zones_layer(change.table, "delta_mean", facts["expression"])
    rows, layer = fitted(change.table, layer, table_record, max_bytes, notes)
    return CompareResult(
        **answer_fields(facts, table_record, layer, notes, rows),
        before=facts["before"],
        after=facts["after"],
        reducer=facts["reducer"],
        threshold=facts["threshold"],
        change=OutputRef.of(change_record),
        grid=GridInfo.model_validate(facts["grid"]),
    )


def save(core, result, *, format: str | None = None, output_name=None, job=None) -> OutputRecord:
    """A `Change` (or its table) saved: the table as GeoParquet (default) or CSV; with
    format="COG" the change raster (a `Change` only)."""
    from .. import zonal
    from ..composite import save_array

    if (format or "").upper() == "COG":
        if not isinstance(result, Change):
            raise InvalidArgument(
                "the change raster is saved from the Change compare_periods gives, not its table"
            )
        return save_array(core, result.change, output_name=output_name, job=job)
    table = table_of(result)
    provenance = Provenance.of(table)
    return zonal.write_table(core, table, provenance, format=format, output_name=output_name, stem="change")


def outputs(core, change: Change, job) -> tuple[OutputRecord, OutputRecord]:
    """What the compare_periods tool keeps: the table (GeoParquet) and the change (COG)."""
    return save(core, change, job=job), save(core, change, format="COG", job=job)


def answer(core, change: Change, records, limits, **options) -> Answer:
    """The tool's answer within limits.max_result_bytes, with the chart and the change picture."""
    value, layer = drawn_apart(result(change, records, limits.max_result_bytes))
    drawn = layer.model_copy(update={"rasters": [change_raster(records[1], 1)]})
    return Answer(value, records, (chart_png(change.table), change_png(change.change)), layer=drawn)


def change_raster(record: OutputRecord, image: int) -> dict:
    """The change raster as the map draws it: at its bbox, its picture the answer's `image`-th."""
    return {"id": record.id, "title": record.properties.title, "bbox": record.bbox, "image": image}


def map_call(result) -> dict:
    """A change as the map draws it: its zones coloured by delta_mean."""
    from ..threshold import zones_layer

    table = table_of(result)
    facts = Provenance.of(table).facts
    return zones_call("compare_periods", facts, zones_layer(table, "delta_mean", facts["expression"]))
