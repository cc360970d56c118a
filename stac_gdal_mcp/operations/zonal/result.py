"""A zonal statistics table as a result - `ZonalTable`, the GeoDataFrame with its request,
provenance and `Quality` (what its notes say, as data) - and as an answer a person or an agent
reads: the rows that fit a byte budget (the whole table is the saved file), the zones coloured by
the first statistic for a map, and a chart of the per-zone series (`per="day"`).

- `result(table, record, max_bytes)`: the zonal_stats tool's `ZonalResult`.
- `zone_layer(table)`: per zone its geometry and the first statistic's latest value (the most
  recent row that has one), as GeoJSON Features.
- `rounded(column, value)`: a number at the precision it carries (the answer's rows and zones;
  the saved table keeps full precision).

The charts are `chart`'s. What happens to a `ZonalTable` (its hooks call these): `save`,
`answer`, `map_call`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_serializer

from ...models import Model
from ...processing.load import OutputRef
from ...words import counted
from ..result import Answer, call
from ..table import Table
from .chart import FRACTION_COLUMNS, chart_png, expression_name

if TYPE_CHECKING:
    import pandas as pd

    from ...outputs import OutputRecord
    from ...processing.records import Provenance

DECIMALS = 6  # coordinates of the zones sent back (about 0.1 m)


@dataclass(frozen=True)
class Quality:
    """What a table of zones' notes say, as data: the item selection's notes, the rows, how many
    had too little valid area (`too_little`, under `least` = min_valid_fraction: flagged in the
    `too_little_valid` column), the items that could not be read (`failed`: item id, error) and
    whether there was any item to measure."""

    selection: tuple[str, ...]
    rows: int
    too_little: int
    least: float
    failed: tuple[tuple[str, str], ...]
    no_items: bool

    def notes(self, lacking: str = "statistics") -> list[str]:
        """The notes in order; `lacking`: what a row under min_valid_fraction has none of."""
        notes = list(self.selection)
        if self.too_little:
            notes.append(
                f"{self.too_little} of {self.rows} rows had less valid area than min_valid_fraction="
                f"{self.least:g} of their zone: no {lacking}, a note (0 keeps them)"
            )
        if self.failed:
            ids = ", ".join(i for i, _ in self.failed[:5]) + (", ..." if len(self.failed) > 5 else "")
            notes.append(
                f"{counted(len(self.failed), 'item')} could not be read ({ids}): their rows carry `error` "
                "and no statistic"
            )
        if self.no_items:
            notes.append("no items to measure: widen the search (datetime, collections) or check the zones")
        return notes


class ZonalTable(Table):
    """A zonal statistics table: the GeoDataFrame in long form (it reads as it: `table["mean"]`,
    `table.plot(column="mean")`, `len(table)`), its request and provenance, and `quality` (what
    its notes say, as data); `save(format)` (GeoParquet, or "csv"), `answer(limits)` (the tool
    keeps its GeoParquet), `map_layer()`: its zones coloured by a statistic."""

    result_kind: ClassVar[str] = "zonal_stats"

    def __init__(self, frame: pd.DataFrame, provenance: Provenance, core=None, *, quality: Quality):
        super().__init__(frame, provenance, core)
        self.quality = quality

    def _save(self, core, format, output_name, job):
        return save(core, self, format=format, output_name=output_name, job=job)

    def _outputs(self, core, job) -> tuple:
        return (self._save(core, None, None, job),)

    def _answer(self, core, records, limits, quicklook: bool):
        return answer(core, self, records, limits)

    def map_call(self) -> dict:
        return map_call(self)


class ZoneLayer(Model):
    """The zones on a map: GeoJSON Features (id: the zone id; properties: value, datetime)."""

    stat: str = Field(description="the statistic the zones are coloured by")
    expression: str = Field(description="the index's name (NDVI), else the formula or band")
    features: list[dict[str, Any]] = Field(
        description="id: zone id; properties: value, datetime, and note when the latest row has no value"
    )
    label: str | None = Field(None, description="a class fraction's class: 'share of Vegetation'")

    @model_serializer(mode="wrap")
    def _without_empty_label(self, handler):
        out = handler(self)
        if out.get("label") is None:
            out.pop("label", None)
        return out


class ZoneTable(Model):
    """A table of zones as a tool answers it: its first rows, the saved file, the zones' map."""

    expression: str
    per: str
    mask_clouds: bool
    zones: int
    items: int
    rows_total: int
    rows: list[dict[str, Any]] = Field(description="the table's first rows; all of them are in `table`")
    table: OutputRef
    zone_layer: ZoneLayer = Field(description="each zone with its latest value of zone_layer.stat")
    notes: list[str] = []
    failed_items: list[dict[str, Any]] = []

    @classmethod
    def of(
        cls, facts: dict, record: OutputRecord, layer: ZoneLayer, notes: list[str], rows, total: int, **more
    ):
        """The answer from the table's facts (provenance), its saved `record` and what fitted."""
        common = answer_fields(facts, record, layer, notes, rows)
        return cls(**common, per=facts["per"], rows_total=total, **more)


def answer_fields(facts: dict, record: OutputRecord, layer: ZoneLayer, notes: list[str], rows) -> dict:
    """What every answer with a table of zones holds, from the table's facts (its provenance),
    its saved `record`, and the zones and rows that fitted."""
    return {
        "expression": facts["expression"],
        "mask_clouds": facts["mask_clouds"],
        "zones": facts["zones"],
        "items": facts["items"],
        "rows": rows,
        "table": OutputRef.of(record),
        "zone_layer": layer,
        "notes": notes,
        "failed_items": facts["failed_items"],
    }


class ZonalResult(ZoneTable):
    stats: list[str] = Field(description="the statistic columns of the rows")
    min_valid_fraction: float | None = Field(
        None, description="rows of a zone less valid (clear, with data) than this have no statistics, a note"
    )
    classes: dict[str, str] = Field(
        {}, description="class value -> name (the asset's classification) of frac_<value>, majority, unique"
    )


def rounded(column: str, value):
    """`value` of `column` at the precision it carries: a coverage-weighted pixel count to 0.1,
    a fraction to 4 decimals (0.9999999971 -> 1.0), any other number to 4 significant digits
    (its whole part never rounded: class values and counts stay exact); not numbers as given."""
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    if column == "count":
        value = round(value, 1)
    elif column in FRACTION_COLUMNS or column.startswith("frac_"):
        value = round(value, 4)
    elif value:
        value = round(value, max(0, 3 - math.floor(math.log10(abs(value)))))
    return value


def _records(frame: pd.DataFrame) -> list[dict]:
    """The rows as JSON values (NaN -> null, times ISO 8601, numbers `rounded`), without the
    geometry and the `too_little_valid` flag (their note says it)."""
    dropped = [frame.geometry.name] if hasattr(frame, "geometry") else []
    table = frame.drop(columns=[*dropped, *(["too_little_valid"] if "too_little_valid" in frame else [])])
    rows = json.loads(table.to_json(orient="records", date_format="iso", date_unit="s"))
    return [{k: rounded(k, v) for k, v in row.items()} for row in rows]


def _fitting(values: list, budget: int) -> list:
    """The first of `values` whose JSON (a list's, commas counted) fits in `budget` bytes (the
    first one always)."""
    from itertools import takewhile

    from ...catalogs import ResultBudget

    return list(takewhile(ResultBudget(budget, room=budget, separator=1).take, values))


def zone_layer(table: ZonalTable) -> ZoneLayer:
    """Each zone (in the table's order) with the latest value of the first statistic."""
    import shapely
    from shapely.geometry import mapping

    frame, facts = table.frame, table.provenance.facts
    column, label = coloured_by(frame, facts)
    features = []
    for zone_id, rows in frame.groupby("zone_id", sort=False):
        known = rows.dropna(subset=[column]) if column in rows else rows.iloc[:0]
        last = known.sort_values("datetime").iloc[-1] if len(known) else None
        latest = rows.sort_values("datetime", na_position="first").iloc[-1]
        geometry = shapely.set_precision(rows.geometry.iloc[0], 10**-DECIMALS)
        zone_id = zone_id.item() if hasattr(zone_id, "item") else zone_id
        features.append(
            {
                "type": "Feature",
                "id": zone_id if isinstance(zone_id, (int, str)) else str(zone_id),
                "geometry": mapping(geometry),
                "properties": {
                    "value": None if last is None else rounded(column, _number(last[column])),
                    "datetime": None if last is None else last["datetime"].strftime("%Y-%m-%dT%H:%M:%SZ"),
                    **_why_not(latest, last),
                },
            }
        )
    return ZoneLayer(
        stat=column, expression=expression_name(facts["expression"]), features=features, label=label
    )


#: Statistics whose values are class values or counts of classes: no colour ramp reads them.
CLASS_STATS = ("frac", "majority", "minority", "mode", "unique", "variety")
#: Classes that say nothing of the ground (SCL's no data, defects, clouds, shadows).
NOT_GROUND = ("no data", "nodata", "saturated", "defective", "cloud", "shadow", "cirrus", "unclassified")


def first_column(frame: pd.DataFrame, facts: dict) -> str:
    """The column of the first statistic asked (frac: the first class fraction)."""
    stat = facts["stats"][0]
    return stat if stat in frame else next((c for c in frame if c.startswith(f"{stat}_")), stat)


def coloured_by(frame: pd.DataFrame, facts: dict) -> tuple[str, str | None]:
    """(the column the map colours the zones by, its words when a class fraction): the first
    statistic asked that is no class statistic (mean, median, count...); else the fraction of
    the class with the largest share among the classes that show the ground (not clouds, no data),
    named by its class; else the first statistic's column."""
    readable = [s for s in facts["stats"] if s not in CLASS_STATS and s in frame]
    if readable:
        return readable[0], None
    fractions = [c for c in frame.columns if c.startswith("frac_")]
    if not fractions:
        return first_column(frame, facts), None
    classes = facts.get("classes", {})

    def ground(column: str) -> bool:
        name = str(classes.get(column.removeprefix("frac_"), "")).lower()
        return bool(name) and not any(word in name for word in NOT_GROUND)

    shares = frame[[c for c in fractions if ground(c)] or fractions].mean(skipna=True).fillna(0.0)
    column = str(shares.idxmax())
    name = classes.get(column.removeprefix("frac_"))
    return column, f"share of {name}" if name else None


def _why_not(latest, last) -> dict:
    """{"note": ...} when the zone's latest row has no value (too little valid, not covered, an
    error): the map says why; {} otherwise."""
    if last is not None and latest.name == last.name:
        return {}
    why = latest.get("note") or latest.get("error")
    return {"note": str(why)[:300]} if isinstance(why, str) and why else {}


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):  # a list of classes (unique)
        return None


def result(table: ZonalTable, record: OutputRecord, max_bytes: int) -> ZonalResult:
    """The tool's answer: the zones for the map and the first rows, within `max_bytes` together
    (the zones get at most half); a note says what was left out and where the rest is."""
    frame, facts = table.frame, table.provenance.facts
    notes = list(facts["notes"])
    layer = zone_layer(table)
    features = _fitting(layer.features, max_bytes // 2)
    if len(features) < len(layer.features):
        notes.append(
            f"the map shows {len(features)} of {len(layer.features)} zones (limits.max_result_bytes); "
            "every zone is in the saved table"
        )
    used = len(json.dumps(features, separators=(",", ":")))
    records = _records(frame)
    rows = _fitting(records, max_bytes - used)
    total = facts.get("rows", len(records))  # (a region's table holds its first group's rows)
    if len(rows) < total:
        notes.append(
            f"{len(rows)} of {total} rows shown (limits.max_result_bytes); "
            f"every row is in the saved table {record.file.href.rsplit('/', 1)[-1]}"
        )
    return ZonalResult.of(
        facts,
        record,
        layer.model_copy(update={"features": features}),
        notes,
        rows,
        total,
        stats=[c for c in frame.columns if c in facts["stats"] or c.startswith("frac_")],
        min_valid_fraction=table.provenance.parameters.get("min_valid_fraction"),
        classes=_classes_shown(frame, facts.get("classes", {})),
    )


def _classes_shown(frame: pd.DataFrame, classes: dict) -> dict:
    """The names of the classes the table has (frac_<value> columns, majority, unique...)."""
    values = {c.removeprefix("frac_") for c in frame.columns if c.startswith("frac_")}
    for column in ("majority", "minority", "mode", "min", "max"):
        if column in frame and classes:
            values |= {str(int(v)) for v in frame[column].dropna() if float(v).is_integer()}
    if "unique" in frame and classes:
        values |= {str(v) for u in frame["unique"].dropna() for v in u}
    return {v: classes[v] for v in sorted(values, key=lambda v: (len(v), v)) if v in classes}


def save(core, table: ZonalTable, *, format: str | None = None, output_name=None, job=None) -> OutputRecord:
    """A table saved as GeoParquet (the default) or CSV (`zonal.save`)."""
    from . import save as write

    return write(core, table, format=(format or "parquet").lower(), output_name=output_name, job=job)


def answer(core, table: ZonalTable, records, limits, **options) -> Answer:
    """The tool's answer within limits.max_result_bytes, with a chart of a per-day run (or of
    class fractions) as an image."""
    (record,) = records
    value, layer = drawn_apart(result(table, record, limits.max_result_bytes))
    facts = table.provenance.facts
    stat = first_column(table.frame, facts)  # (the chart shows the first asked)
    charted = facts["per"] == "day" or stat.startswith("frac_")
    images = (chart_png(table.frame, facts, stat, value.classes),) if charted else ()
    return Answer(value, records, images, layer=layer)


def drawn_apart(value):
    """(`value` whose zone layer holds no geometry - the client sent the zones -, the `MapLayer` of
    its zones with their geometry: what the map draws, sent beside the answer)."""
    from ...models import MapLayer

    layer = value.zone_layer
    features = [{k: v for k, v in f.items() if k != "geometry"} for f in layer.features]
    bare = layer.model_copy(update={"features": features})
    return value.model_copy(update={"zone_layer": bare}), MapLayer(
        zones=layer.model_dump(mode="json"), notes=value.notes
    )


def zones_call(tool: str, facts: dict, layer: ZoneLayer, **more) -> dict:
    """A table of zones as the map draws it (`result.call`): its zones, with their geometry,
    as its map layer."""
    from ...models import MapLayer

    structured = {"expression": facts["expression"], **more, "notes": facts["notes"]}
    zones = MapLayer(zones=layer.model_dump(mode="json"), notes=facts["notes"])
    return call(tool, {"expression": facts["expression"]}, structured, layer=zones)


def map_call(table: ZonalTable) -> dict:
    """A table as the map draws it: its zones coloured by `coloured_by`'s statistic."""
    facts = table.provenance.facts
    return zones_call("zonal_stats", facts, zone_layer(table), per=facts["per"])
