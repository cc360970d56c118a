"""A time series over an AOI: one value per solar day of an index, band or formula.

`time_series` computes the table (a `SeriesTable` holding a pandas DataFrame, one row per solar
day and collection, its provenance in `attrs`); `save` writes it as an output, a CSV table or a PNG chart, with a
record naming every asset read. `result` is the shape the server's tool returns.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field

from ..errors import InvalidArgument
from ..models import Model
from ..processing.dask_runtime import compute_each, scheduler_name
from ..processing.expressions import evaluate, parse_expression
from ..processing.jobs import Job, timed
from ..processing.load import (
    SOFTWARE,
    FailedItem,
    GridInfo,
    OutputRef,
    Prepared,
    failed_error,
    failed_note,
    prepare,
    sources_read,
)
from ..processing.records import Provenance
from ..words import counted, plural
from . import tables
from .params import OverArea
from .result import Answer, call, image
from .table import Table
from .tables import CSV_COLUMNS, write_chart, write_csv

if TYPE_CHECKING:
    import pandas as pd

    from ..outputs import OutputRecord


class TimeSeriesRow(Model):
    date: str = Field(description="solar day")
    datetime: str = Field(description="acquisition time of the first item of the day (UTC)")
    value: float | None = Field(
        description="null when no valid pixel, or too few (min_valid_fraction), was left"
    )
    valid_fraction: float = Field(description="share of the AOI pixels with a valid, unmasked value")
    valid_pixels: int
    collection_id: str | None = None
    item_ids: list[str]


class TimeSeriesResult(Model):
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
    failed_items: list[FailedItem] = Field(
        default=[], description="items that could not be read: their days are left out, not counted as empty"
    )


def _reduce(value, reducer: str):
    dims = ("y", "x")
    if reducer == "count":
        return value.notnull().sum(dims)
    if reducer == "median":
        return value.chunk({"y": -1, "x": -1}).median(dims, skipna=True)
    return getattr(value, reducer)(dims, skipna=True)


def compute_rows(
    core, prep: Prepared, tree, reducer: str, job: Job
) -> tuple[list[TimeSeriesRow], list[FailedItem]]:
    """`reducer` of the expression `tree` over the usable AOI pixels, per solar day (computed
    day by day: a day whose reads fail is left out and its items are returned as failed)."""
    import numpy as np

    parts = {}
    for index, loaded in enumerate(prep.loaded):
        value = evaluate(tree, loaded.bands)
        value = value.where(np.isfinite(value))
        reduced, counts = _reduce(value, reducer), value.notnull().sum(("y", "x"))
        for t in range(len(loaded.days)):
            parts[(index, t)] = (reduced.isel(time=t), counts.isel(time=t))
    computed, errors = compute_each(core, job, parts)
    n_aoi = int(prep.inside.sum())
    rows, failed = [], []
    for index, loaded in enumerate(prep.loaded):
        for t, (day, first_time, members) in enumerate(loaded.days):
            if (index, t) in errors:
                failed += [FailedItem(item_id=m["id"], error=errors[(index, t)]) for m in members]
                continue
            v, n = (np.asarray(a.values).item() for a in computed[(index, t)])
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
    return rows, failed


def time_series(core, aoi, *, job: Job | None = None, **arguments) -> pd.DataFrame:
    """The table of `aoi` over the load, search and series `arguments` name."""
    return TimeSeries.of(aoi, **arguments).run(core, job)


#: A day whose valid share of the AOI is smaller gets no value, as zonal_stats' zone-observations.
MIN_VALID_FRACTION = 0.5


def thin_days(rows: list[TimeSeriesRow], min_valid_fraction: float, reducer: str) -> int:
    """Rows with some valid pixels but a valid share of the AOI under `min_valid_fraction` lose
    their value (a mean of 4 pixels of a field is no reading of the field; a count is kept);
    how many."""
    thin = [r for r in rows if r.valid_pixels > 0 and r.valid_fraction < min_valid_fraction]
    if reducer == "count":
        return 0
    for row in thin:
        row.value = None
    return len(thin)


def series(core, request: TimeSeries, job: Job | None = None) -> pd.DataFrame:
    """One row per solar day: `reducer` of the expression over the usable AOI pixels (computed on
    the session's dask scheduler)."""
    job = timed(job, core)
    (text, tree, names), reducer, load = request.parsed, request.reducer, request.load
    prep = prepare(core, load, list(names))
    rows, failed = compute_rows(core, prep, tree, reducer, job)
    notes = list(prep.notes)
    if failed:
        if not rows:
            raise failed_error(failed)
        notes.append(failed_note(failed, "their days are left out of the series"))
    thin = thin_days(rows, request.min_valid_fraction, reducer)
    if thin:
        notes.append(
            f"{thin} of {counted(len(rows), 'day')} had less valid area than min_valid_fraction="
            f"{request.min_valid_fraction:g} of the AOI: value null, marked in the chart (0 keeps them)"
        )
    empty = sum(1 for r in rows if r.valid_pixels == 0)
    if empty:
        notes.append(
            f"{empty} of {counted(len(rows), 'day')} {plural(empty, 'has')} no usable pixel in the AOI (clouds or no data): value null"
        )
    from ..outputs import package_versions

    title = f"{reducer} of {text} over the AOI"
    sources = sources_read(prep, failed)
    provenance = Provenance(
        kind="time_series",
        operation="time_series",
        parameters=load.record_parameters(
            expression=text, reducer=reducer, min_valid_fraction=request.min_valid_fraction
        ),
        sources=sources,
        title=title,
        lineage=f"{title}, one row per solar day, from {len(sources)} assets loaded with odc-stac",
        software=package_versions(*SOFTWARE),
        properties={"aoi_bbox": [round(v, 6) for v in prep.aoi_geom.bounds]},
        facts={
            "expression": text,
            "reducer": reducer,
            "mask_clouds": load.mask_clouds,
            "ylabel": f"{reducer}({text})" if len(text) < 30 else reducer,
            "grid": prep.grid.model_dump(),
            "items": prep.item_count - len(failed),
            "scheduler": scheduler_name(core),
            "notes": notes,
            "failed_items": [f.model_dump() for f in failed],
        },
    )
    return to_frame(rows, provenance)


# --- the table as a DataFrame, and back --------------------------------------------------------


def to_frame(rows: list[TimeSeriesRow], provenance: Provenance) -> pd.DataFrame:
    """The rows as a DataFrame (the CSV's columns, indexed by acquisition time, UTC)."""
    import pandas as pd

    frame = tables.to_frame(rows, CSV_COLUMNS)
    frame.index = pd.DatetimeIndex(pd.to_datetime(frame["datetime"], utc=True), name="time")
    frame.attrs.update(provenance.to_attrs())
    return frame


def rows_of(frame: pd.DataFrame) -> list[TimeSeriesRow]:
    """The rows of a time series DataFrame (as `to_frame` made it, possibly filtered)."""
    return tables.from_frame(frame, TimeSeriesRow, CSV_COLUMNS)


def provenance_of(frame) -> Provenance:
    """A time series' provenance: its own, or the one a DataFrame of one keeps in `attrs`."""
    if isinstance(frame, SeriesTable):
        return frame.provenance
    return Provenance.required(frame, "time_series", "time series")


# --- outputs -------------------------------------------------------------------------------------


def save(
    core,
    frame: pd.DataFrame,
    *,
    format: Literal["csv", "png"] | None = None,
    output_name: str | None = None,
    job: Job | None = None,
) -> OutputRecord:
    """Write a time series table as a CSV file ("csv", the default) or a PNG line chart ("png"),
    with a record naming every asset it was computed from; return the record."""
    provenance = provenance_of(frame)
    format = (format or "csv").lower()
    if format not in ("csv", "png"):
        raise InvalidArgument("format must be 'csv' or 'png' for a time series")
    rows = rows_of(frame)
    if job is not None:
        job.progress(1, 1, f"writing the {'table' if format == 'csv' else 'chart'}")
    store = core.outputs
    common = dict(
        operation=provenance.operation,
        parameters=provenance.parameters,
        sources=provenance.sources,
        software=provenance.software,
    )
    if format == "csv":
        with store.writing(".csv", output_name, stem="time-series") as out:
            write_csv(out.path, rows)
            return store.commit(
                out,
                media_type="text/csv",
                title=provenance.title,
                properties=provenance.properties,
                lineage=provenance.lineage,
                **common,
            )
    with store.writing(".png", output_name, stem="time-series-chart") as out:
        write_chart(out.path, rows, title=provenance.title, ylabel=provenance.facts["ylabel"])
        return store.commit(
            out,
            media_type="image/png",
            title=f"chart: {provenance.title}",
            lineage=f"chart of {provenance.title}",
            **common,
        )


def result(frame: pd.DataFrame, csv: OutputRecord, chart: OutputRecord) -> TimeSeriesResult:
    """The time_series tool's result: the rows, the two outputs, and the load's facts."""
    facts = provenance_of(frame).facts
    return TimeSeriesResult(
        expression=facts["expression"],
        reducer=facts["reducer"],
        mask_clouds=facts["mask_clouds"],
        rows=rows_of(frame),
        csv=OutputRef.of(csv),
        chart=OutputRef.of(chart),
        grid=GridInfo.model_validate(facts["grid"]),
        items=facts["items"],
        scheduler=facts["scheduler"],
        notes=facts["notes"],
        failed_items=facts.get("failed_items", []),
    )


def outputs(core, frame: pd.DataFrame, job: Job | None) -> tuple[OutputRecord, OutputRecord]:
    """What the time_series tool keeps of a table: its CSV and its chart."""
    return save(core, frame, job=job), save(core, frame, format="png", job=job)


def answer(core, frame: pd.DataFrame, records, limits, **options) -> Answer:
    """The tool's answer: the rows and both outputs, and the chart as an image."""
    csv, chart = records
    value = result(frame, csv, chart)
    aoi = provenance_of(frame).parameters.get("aoi")
    layer = series_layer(value.expression, value.reducer, len(value.rows), value.notes, aoi)
    return Answer(value, records, (core.outputs.path(chart.id).read_bytes(),), layer=layer)


def series_layer(expression: str, reducer, days: int, notes: list[str], aoi=None):
    """The `MapLayer` of a time series: drawn at its call's AOI, with its chart (the first image)."""
    from ..models import MapLayer, map_area

    series = [{"expression": expression, "reducer": reducer, "days": days, "image": 0}]
    return MapLayer(series=series, notes=notes, area=map_area({"aoi": aoi}))


def map_call(frame: pd.DataFrame) -> dict:
    """A table as the map draws it: its rows and notes (no saved files), its chart drawn here as
    the tool saves it."""
    import io

    provenance = provenance_of(frame)
    facts, rows = provenance.facts, rows_of(frame)
    chart = io.BytesIO()
    write_chart(chart, rows, title=provenance.title, ylabel=facts["ylabel"])
    structured = {
        "expression": facts["expression"],
        "reducer": facts["reducer"],
        "mask_clouds": facts["mask_clouds"],
        "rows": [r.model_dump(mode="json") for r in rows],
        "items": facts["items"],
        "notes": facts["notes"],
    }
    arguments = {"aoi": provenance.parameters.get("aoi"), "expression": facts["expression"]}
    layer = series_layer(facts["expression"], facts["reducer"], len(rows), facts["notes"], arguments["aoi"])
    return call("time_series", arguments, structured, [image(chart.getvalue())], layer=layer)


class SeriesTable(Table):
    """A time series: its DataFrame (`to_dataframe()`; it reads as that table too), its request
    and provenance; `save(format)` (CSV, or "png": its chart), `answer(limits)` (the tool keeps
    both), `map_layer()`. What its indexing and methods make of it (`table[rows]`, `head()`) is a
    time series again."""

    result_kind: ClassVar[str] = "time_series"

    def _save(self, core, format, output_name, job):
        return save(core, self, format=format, output_name=output_name, job=job)

    def _outputs(self, core, job) -> tuple:
        return outputs(core, self, job)

    def _answer(self, core, records, limits, quicklook: bool):
        return answer(core, self, records, limits)

    def map_call(self) -> dict:
        return map_call(self)


class TimeSeries(OverArea):
    """One value per solar day over `aoi`: `reducer` of `expression` (an index - ndvi, ndwi,
    nbr, ndbi -, a band, or a formula of band names such as "(nir-red)/(nir+red)") over the
    pixels left after cloud masking. A `SeriesTable`, which reads as its DataFrame indexed by
    acquisition time (UTC) with columns date, datetime, value, valid_fraction, valid_pixels,
    collection_id, item_ids (`to_dataframe()`; `request` and `provenance` say where it came
    from); nothing is written until you `save` it (CSV, or format="png" for a chart). `dry_run=True`:
    an `Estimate` of what it would read (only headers are read).

    A day with less valid area than `min_valid_fraction` (default 0.5) of the AOI gets no value
    (NaN) and a note; `min_valid_fraction=0` keeps every day's value.

    >>> table = session.time_series(aoi, "ndvi", collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-07-31")
    >>> list(table["date"]), [round(v, 3) for v in table["value"]]
    (['2024-06-04', '2024-06-19', '2024-07-14'], [nan, 0.648, 0.52])
    """

    name: ClassVar[str] = "time_series"
    library_name: ClassVar[str] = "time_series"
    positional: ClassVar[tuple[str, ...]] = ("aoi", "expression")
    description: ClassVar[str] = """One value per solar day: `reducer` of `expression` over the
    AOI's cloud-free pixels, with the valid fraction and item ids; saves a CSV and a chart (also returned).

    Example: time_series(aoi=[13.6, 45.92, 13.62, 45.935], search={"catalog": "sample",
    "collections": ["sentinel-2-l2a"], "datetime": "2024-06/2024-08"})."""
    answer_model: ClassVar[type] = TimeSeriesResult

    expression: Annotated[
        str,
        Field(description="ndvi, ndwi, nbr, ndbi, a band or a formula: (nir-red)/(nir+red)"),
    ] = "ndvi"
    reducer: Annotated[
        Literal["mean", "median", "min", "max", "count"],
        Field(description="how a day's AOI pixels become one value"),
    ] = "mean"
    min_valid_fraction: Annotated[float, Field(ge=0, le=1, description="less valid: null")] = (
        MIN_VALID_FRACTION
    )

    @cached_property
    def parsed(self) -> tuple[str, Any, tuple[str, ...]]:
        """The expression's text, its parsed tree and the band names it reads."""
        text, tree, names = parse_expression(self.expression)
        return text, tree, tuple(names)

    def plan(self, core) -> TimeSeries:
        """The expression parsed before anything is read."""
        self.parsed  # noqa: B018
        return self

    def estimate(self, core):
        """What `run` would read (headers only)."""
        from ..processing.estimate.loads import estimate_load

        names = list(self.plan(core).parsed[2])
        return estimate_load(core, self.load, names, operation="time_series")

    def run(self, core, job: Job | None = None) -> SeriesTable:
        """The table (`series`)."""
        frame = series(core, self.plan(core), job)
        return SeriesTable(frame, provenance_of(frame), core)
