"""A zonal statistics table as an answer a person or an agent reads: the rows that fit a byte
budget (the whole table is the saved file), the zones coloured by the first statistic for a map,
and a chart of the per-zone series (`per="day"`).

- `result(frame, record, max_bytes)`: the zonal_stats tool's `ZonalResult`.
- `zone_layer(frame)`: per zone its geometry and the first statistic's latest value (the most
  recent row that has one), as GeoJSON Features.
- `chart_png(frame)`: the first statistic against time, a line per zone (at most `CHART_ZONES`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..models import Model
from .load import OutputRef
from .zonal import provenance_of

if TYPE_CHECKING:
    import pandas as pd

    from ..outputs import OutputRecord

CHART_ZONES = 12  # lines in one chart
DECIMALS = 6  # coordinates of the zones sent back (about 0.1 m)


class ZoneLayer(Model):
    """The zones on a map: GeoJSON Features (id: the zone id; properties: value, datetime)."""

    stat: str = Field(description="the statistic the zones are coloured by (the first one asked)")
    expression: str
    features: list[dict[str, Any]]


class ZonalResult(Model):
    expression: str
    stats: list[str] = Field(description="the statistic columns of the rows")
    per: str
    mask_clouds: bool
    zones: int
    items: int
    rows_total: int
    rows: list[dict[str, Any]] = Field(description="the table's first rows; all of them are in `table`")
    table: OutputRef
    zone_layer: ZoneLayer = Field(description="each zone with the first statistic's latest value")
    notes: list[str] = []
    failed_items: list[dict[str, Any]] = []


def _records(frame: pd.DataFrame) -> list[dict]:
    """The rows as JSON values (NaN -> null, times ISO 8601), without the geometry."""
    table = frame.drop(columns=[frame.geometry.name]) if hasattr(frame, "geometry") else frame
    return json.loads(table.to_json(orient="records", date_format="iso", date_unit="s"))


def _fitting(values: list, budget: int) -> list:
    """The first of `values` whose JSON fits in `budget` bytes (the first one always)."""
    kept, used = [], 0
    for value in values:
        used += len(json.dumps(value, separators=(",", ":"))) + 1
        if kept and used > budget:
            break
        kept.append(value)
    return kept


def zone_layer(frame: pd.DataFrame) -> ZoneLayer:
    """Each zone (in the table's order) with the latest value of the first statistic."""
    import shapely
    from shapely.geometry import mapping

    facts = provenance_of(frame).facts
    stat = facts["stats"][0]
    column = stat if stat in frame else next((c for c in frame if c.startswith(f"{stat}_")), stat)
    features = []
    for zone_id, rows in frame.groupby("zone_id", sort=False):
        known = rows.dropna(subset=[column]) if column in rows else rows.iloc[:0]
        last = known.sort_values("datetime").iloc[-1] if len(known) else None
        geometry = shapely.set_precision(rows.geometry.iloc[0], 10**-DECIMALS)
        zone_id = zone_id.item() if hasattr(zone_id, "item") else zone_id
        features.append(
            {
                "type": "Feature",
                "id": zone_id if isinstance(zone_id, (int, str)) else str(zone_id),
                "geometry": mapping(geometry),
                "properties": {
                    "value": None if last is None else _number(last[column]),
                    "datetime": None if last is None else last["datetime"].strftime("%Y-%m-%dT%H:%M:%SZ"),
                },
            }
        )
    return ZoneLayer(stat=column, expression=facts["expression"], features=features)


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):  # a list of classes (unique)
        return None


def result(frame: pd.DataFrame, record: OutputRecord, max_bytes: int) -> ZonalResult:
    """The tool's answer: the zones for the map and the first rows, within `max_bytes` together
    (the zones get at most half); a note says what was left out and where the rest is."""
    facts = provenance_of(frame).facts
    notes = list(facts["notes"])
    layer = zone_layer(frame)
    features = _fitting(layer.features, max_bytes // 2)
    if len(features) < len(layer.features):
        notes.append(
            f"the map shows {len(features)} of {len(layer.features)} zones (limits.max_result_bytes); "
            "every zone is in the saved table"
        )
    used = len(json.dumps(features, separators=(",", ":")))
    records = _records(frame)
    rows = _fitting(records, max_bytes - used)
    if len(rows) < len(records):
        notes.append(
            f"{len(rows)} of {len(records)} rows shown (limits.max_result_bytes); "
            f"every row is in the saved table {record.file.href.rsplit('/', 1)[-1]}"
        )
    return ZonalResult(
        expression=facts["expression"],
        stats=[c for c in frame.columns if c in facts["stats"] or c.startswith("frac_")],
        per=facts["per"],
        mask_clouds=facts["mask_clouds"],
        zones=facts["zones"],
        items=facts["items"],
        rows_total=len(records),
        rows=rows,
        table=OutputRef.of(record),
        zone_layer=layer.model_copy(update={"features": features}),
        notes=notes,
        failed_items=facts["failed_items"],
    )


def chart_png(frame: pd.DataFrame) -> bytes:
    """The first statistic of each zone against time (a line per zone, a gap where a day had
    no usable pixel), as PNG bytes; at most CHART_ZONES zones, the title says when more."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    layer = zone_layer(frame)
    column = layer.stat
    figure = Figure(figsize=(8, 3.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    zones = list(dict.fromkeys(frame["zone_id"]))
    for zone_id in zones[:CHART_ZONES]:
        rows = frame[frame["zone_id"] == zone_id].sort_values("datetime")
        axes.plot(
            rows["datetime"].dt.tz_localize(None), rows[column], marker="o", linewidth=1, label=str(zone_id)
        )
    more = f" (first {CHART_ZONES} of {len(zones)} zones)" if len(zones) > CHART_ZONES else ""
    axes.set_title(f"{column} of {layer.expression} per zone{more}", fontsize=10)
    axes.set_ylabel(column)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    figure.autofmt_xdate()
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()
