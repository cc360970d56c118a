"""Tables: result rows as pandas DataFrames (and back, exactly), and a time series as files.

- `to_frame(rows, columns)` / `from_frame(frame, Model)`: pydantic rows <-> a DataFrame whose
  cells are plain values (None -> NaN in numeric columns, and back to None).
- `write_csv`, `write_chart`: a time series (rows of `series.TimeSeriesRow`: date, datetime,
  value, valid_fraction, valid_pixels, collection_id, item_ids) as a CSV table (for
  spreadsheets and code) and a PNG line chart (for people: titled by the index's name, the valid
  fraction on a second axis); a null value (no usable pixel that day) is an empty CSV cell, and
  a gap marked by a cross in the chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..words import counted

if TYPE_CHECKING:
    import pandas as pd
    from pydantic import BaseModel

CSV_COLUMNS = ("date", "datetime", "value", "valid_fraction", "valid_pixels", "collection_id", "item_ids")


def to_frame(rows: Sequence[BaseModel], columns: Sequence[str]) -> pd.DataFrame:
    """One DataFrame row per model, the given columns in order."""
    import pandas as pd

    return pd.DataFrame([r.model_dump() for r in rows], columns=list(columns))


def plain(value: Any) -> Any:
    """A DataFrame cell as plain Python: NaN -> None, numpy scalars -> int/float/str/bool."""
    if not isinstance(value, (list, tuple, dict, str)) and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def from_frame(frame: pd.DataFrame, model: type[BaseModel], columns: Sequence[str] | None = None) -> list:
    """The rows of `frame` as `model`s (the inverse of `to_frame`)."""
    columns = list(columns or model.model_fields)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidArgument(f"the table has no column {', '.join(missing)}")
    return [
        model.model_validate({k: plain(v) for k, v in record.items()})
        for record in frame[columns].to_dict("records")
    ]


def write_csv(path: Path, rows: Sequence) -> None:
    """One line per row; item ids separated by spaces."""
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for r in rows:
            writer.writerow(
                [
                    r.date,
                    r.datetime,
                    "" if r.value is None else r.value,
                    r.valid_fraction,
                    r.valid_pixels,
                    r.collection_id or "",
                    " ".join(r.item_ids),
                ]
            )


def index_name(formula: str) -> str | None:
    """The index a formula is ("NDVI" for '(nir - red) / (nir + red)'), or None."""
    from ..processing.expressions import INDICES

    return next((name.upper() for name, text in INDICES.items() if text in formula), None)


def new_figure(height: float):
    """A chart's matplotlib Figure, 8 in wide and `height` high at 100 dpi, drawn by Agg (no
    display), and its axes: what every chart of the package (time series, zonal) starts from."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def png_bytes(figure) -> bytes:
    """A chart laid out tight, as PNG bytes."""
    import io

    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def write_chart(path: Path, rows: Sequence, *, title: str, ylabel: str, name: str | None = None) -> None:
    """The time series chart (`chart_figure`) as a PNG file."""
    chart_figure(rows, title=title, ylabel=ylabel, name=name).savefig(path, format="png")


def chart_figure(rows: Sequence, *, title: str, ylabel: str, name: str | None = None):
    """Value against acquisition time, one marker per row, titled by the index's `name` (default:
    the index the title's formula is, else the title) above the `title` itself; the valid
    fraction of each day as bars on a second axis; days without a usable pixel (dropped as
    cloudy or no data: value null) marked by a red cross at the bottom, days with too little
    valid area (under min_valid_fraction: value null) by a grey one. A matplotlib Figure."""
    import numpy as np

    name = name or index_name(title)
    figure, axes = new_figure(3.8)
    times = np.array([np.datetime64(r.datetime.rstrip("Z")) for r in rows])
    values = np.array([np.nan if r.value is None else r.value for r in rows], dtype="float64")
    valid = np.array([r.valid_fraction or 0.0 for r in rows], dtype="float64")
    fraction = axes.twinx()
    fraction.bar(times, valid, width=np.timedelta64(2, "D"), color="0.6", alpha=0.35, label="valid fraction")
    fraction.set_ylim(0, 1)
    fraction.set_ylabel("valid fraction of the AOI", color="0.35")
    axes.set_zorder(fraction.get_zorder() + 1)
    axes.patch.set_visible(False)
    axes.plot(times, values, marker="o", linewidth=1, label=name or ylabel)
    dropped = np.isnan(values)
    thin = dropped & np.array([(getattr(r, "valid_pixels", 0) or 0) > 0 for r in rows], dtype=bool)
    empty = dropped & ~thin
    bottom = np.nanmin(values) if (~dropped).any() else 0.0
    if empty.any():
        axes.plot(times[empty], np.full(empty.sum(), bottom), "x", color="tab:red", markersize=8,
                  label=f"no usable pixel ({counted(int(empty.sum()), 'day')}, cloudy or no data)")  # fmt: skip
    if thin.any():  # as zonal_stats' chart marks zone-observations under min_valid_fraction
        axes.plot(times[thin], np.full(thin.sum(), bottom), "x", color="0.3", markersize=8,
                  label=f"too little valid ({counted(int(thin.sum()), 'day')}, min_valid_fraction)")  # fmt: skip
    axes.set_title(f"{name}\n{title}" if name else title, fontsize=10)
    axes.set_ylabel(name or ylabel)
    axes.grid(alpha=0.3)
    handles = [*axes.get_legend_handles_labels()[0], *fraction.get_legend_handles_labels()[0]]
    labels = [*axes.get_legend_handles_labels()[1], *fraction.get_legend_handles_labels()[1]]
    figure.legend(
        handles, labels, loc="upper center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.995)
    )
    figure.autofmt_xdate()
    figure.tight_layout(rect=(0, 0, 1, 0.93))
    return figure
