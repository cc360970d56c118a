"""Tables: result rows as pandas DataFrames (and back, exactly), and a time series as files.

- `to_frame(rows, columns)` / `from_frame(frame, Model)`: pydantic rows <-> a DataFrame whose
  cells are plain values (None -> NaN in numeric columns, and back to None).
- `cloud_cover_frame`: the cloud cover ranking as a DataFrame (the result's other fields in
  `attrs`; `results.CloudCover.to_dataframe`).
- `write_csv`, `write_chart`: a time series (rows of `series.TimeSeriesRow`: date, datetime,
  value, valid_fraction, valid_pixels, collection_id, item_ids) as a CSV table (for
  spreadsheets and code) and a PNG line chart (for people); a null value (no usable pixel that
  day) is an empty CSV cell and a gap in the chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument

if TYPE_CHECKING:
    import pandas as pd
    from pydantic import BaseModel

    from .cloud import CloudCoverResult

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


_CLOUD_ATTRS = ("aoi_bbox", "sort", "failed", "notes")


def cloud_cover_frame(result: CloudCoverResult) -> pd.DataFrame:
    """The ranking, one row per item in its order; `attrs` keep aoi_bbox, sort, failed, notes."""
    from .cloud import ItemCloudCover

    frame = to_frame(result.items, list(ItemCloudCover.model_fields))
    frame.attrs.update(result.model_dump(include=set(_CLOUD_ATTRS)))
    return frame


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


def write_chart(path: Path, rows: Sequence, *, title: str, ylabel: str) -> None:
    """Value against acquisition time, one marker per row."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 3.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    times = [np.datetime64(r.datetime.rstrip("Z")) for r in rows]
    values = [np.nan if r.value is None else r.value for r in rows]
    axes.plot(times, values, marker="o", linewidth=1)
    axes.set_title(title, fontsize=10)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path, format="png")
