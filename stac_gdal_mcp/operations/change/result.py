"""`Change`, what compare_periods gives, and what happens to it: saved (the table, or the change
raster), kept by the tool (both), answered (the rows that fit, both files linked, the zones
coloured by delta_mean, a chart of before and after per zone and a picture of the change on a
diverging ramp) and drawn (its zones)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ...errors import InvalidArgument
from ...models import Model
from ...processing.load import FailedItem, GridInfo, OutputRef
from ...processing.records import Provenance
from ..result import Answer, Result
from ..table import Table
from ..zonal.result import ZoneLayer, answer_fields, drawn_apart, zones_call

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
    layer = zones_layer(change.table.frame, "delta_mean", facts["expression"])
    rows, layer = fitted(change.table.frame, layer, table_record, max_bytes, notes)
    return CompareResult(
        **answer_fields(facts, table_record, layer, notes, rows),
        before=facts["before"],
        after=facts["after"],
        reducer=facts["reducer"],
        threshold=facts["threshold"],
        change=OutputRef.of(change_record),
        grid=GridInfo.model_validate(facts["grid"]),
    )


def change_raster(record: OutputRecord, image: int) -> dict:
    """The change raster as the map draws it: at its bbox, its picture the answer's `image`-th."""
    return {"id": record.id, "title": record.properties.title, "bbox": record.bbox, "image": image}


class Change(Result):
    """What compare_periods gives: `table` (a `ChangeTable`: it reads as its GeoDataFrame, one row
    per zone), `change` (after - before on the grid, an xarray DataArray), `before` and `after`
    (each period's reduced values); `provenance` says how they were made, `request` the call's
    parameters. `save()` writes the table (GeoParquet, or format="csv"), `save("COG")` the change
    raster; the tool keeps both and answers the rows that fit; the map draws its zones coloured
    by delta_mean."""

    result_kind = "compare_periods"

    def __init__(self, table, change, before, after, provenance: Provenance, core=None):
        self.table = ChangeTable(table, provenance, core)
        self.change, self.before, self.after = change, before, after
        self._provenance, self._core = provenance, core

    @property
    def provenance(self) -> Provenance:
        return self._provenance

    def __repr__(self) -> str:
        facts = self.provenance.facts
        return f"<Change {facts['expression_name']} {facts['before']} -> {facts['after']}: {len(self.table)} zones>"

    def _repr_html_(self) -> str:
        return self.table.frame.drop(columns="geometry")._repr_html_()

    def _save(self, core, format, output_name, job) -> OutputRecord:
        """The table as GeoParquet (default) or CSV; with format="COG" the change raster."""
        from ..composite import save_array

        if (format or "").upper() == "COG":
            return save_array(core, self.change, output_name=output_name, job=job)
        return self.table._save(core, format, output_name, job)

    def _outputs(self, core, job) -> tuple[OutputRecord, OutputRecord]:
        """What the compare_periods tool keeps: the table (GeoParquet) and the change (COG)."""
        return self._save(core, None, None, job), self._save(core, "COG", None, job)

    def _answer(self, core, records, limits, quicklook: bool) -> Answer:
        """The tool's answer within limits.max_result_bytes, with the chart and the change picture."""
        value, layer = drawn_apart(result(self, records, limits.max_result_bytes))
        drawn = layer.model_copy(update={"rasters": [change_raster(records[1], 1)]})
        return Answer(value, records, (chart_png(self.table.frame), change_png(self.change)), layer=drawn)

    def map_call(self) -> dict:
        """A change as the map draws it: its zones coloured by delta_mean."""
        return self.table.map_call()


class ChangeTable(Table):
    """A change's table, one row per zone (it reads as its GeoDataFrame; filtered with pandas it
    is one still): saved as GeoParquet or format="csv" - the change raster is saved from the
    `Change` -, drawn as its zones coloured by delta_mean."""

    result_kind = "compare_periods"

    def _save(self, core, format, output_name, job) -> OutputRecord:
        from .. import zonal

        if (format or "").upper() == "COG":
            raise InvalidArgument(
                "the change raster is saved from the Change compare_periods gives, not its table"
            )
        return zonal.write_table(
            core, self.frame, self.provenance, format=format, output_name=output_name, stem="change"
        )

    def map_call(self) -> dict:
        from ..threshold import zones_layer

        facts = self.provenance.facts
        return zones_call(
            "compare_periods", facts, zones_layer(self.frame, "delta_mean", facts["expression"])
        )
