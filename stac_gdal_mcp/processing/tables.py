"""A time series as files: a CSV table (for spreadsheets and code) and a PNG line chart (for people).

Rows are `load.TimeSeriesRow`s (date, datetime, value, valid_fraction, valid_pixels,
collection_id, item_ids); a null value (no usable pixel that day) is an empty CSV cell and a
gap in the chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CSV_COLUMNS = ("date", "datetime", "value", "valid_fraction", "valid_pixels", "collection_id", "item_ids")


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
