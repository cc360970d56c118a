"""The charts of a zonal statistics table (PNG bytes), as the zonal_stats tool sends them:

- `series_png(frame, column, expression)`: the first statistic of each zone against time (a line per zone, at most
  `CHART_ZONES`), titled with the expression's name (NDVI), the y axis with its unit; an
  observation left without a value because too little of the zone was valid
  (`min_valid_fraction`) is marked by a cross at the bottom, as the time series chart marks
  cloudy days.
- `fractions_png(frame, expression, classes, colors)`: the class fractions (`stats=["frac"]`) of each zone's latest
  observation as stacked bars, the classes named from the asset's classification extension (or
  the classes the server knows: SCL, ESA WorldCover, Landsat QA_PIXEL's flags), each in its
  colour; a light one (white cloud, snow) outlined dark so a white page does not hide it.

`chart_png(frame, facts, stat)` picks the one that fits the table (`facts`: its provenance's).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

from ..preview_classes import swatch_edge
from ..tables import index_name, new_figure, png_bytes

if TYPE_CHECKING:
    import pandas as pd

CHART_ZONES = 12  # lines (or bars) in one chart
FRACTION_COLUMNS = ("valid_fraction", "cloud_fraction")


def expression_name(formula: str) -> str:
    """The expression as a reader names it: the index ("NDVI"), else the formula or band."""
    return index_name(formula) or formula


def unit(column: str, name: str, is_index: bool) -> str:
    """The y axis's words for a statistic column of `name`'s values."""
    if column == "count":
        return "valid pixels (coverage-weighted)"
    if column.startswith("frac_") or column in FRACTION_COLUMNS:
        return "share of the zone"
    if column == "variety":
        return "classes"
    return f"{column.replace('_', ' ')} of {name}" + (" (unitless index)" if is_index else "")


def plain(text) -> str:
    """Text matplotlib shows as written (a `$` would start mathtext)."""
    return str(text).replace("$", r"\$")


def chart_png(frame: pd.DataFrame, facts: dict, stat: str, classes: dict | None = None) -> bytes:
    """The chart of the table (`facts`: its provenance's): class fractions when `stat` is frac,
    else the series (a table without the column, as when no item was measured, gives an empty
    chart, not an error)."""
    expression = facts["expression"]
    if stat.startswith("frac"):
        return fractions_png(frame, expression, classes or {}, facts.get("class_colors", {}))
    return series_png(frame if stat in frame else frame.assign(**{stat: float("nan")}), stat, expression)


def series_png(frame: pd.DataFrame, column: str, expression: str) -> bytes:
    """`series_figure` as PNG bytes."""
    return png_bytes(series_figure(frame, column, expression))


def series_figure(frame: pd.DataFrame, column: str, expression: str):
    """`column` of each zone against time (see the module docstring), a matplotlib Figure;
    `expression`: the values' formula (its index names them)."""
    import matplotlib.dates as mdates
    import numpy as np
    import pandas as pd

    name = expression_name(expression)
    is_index = index_name(expression) is not None
    figure, axes = new_figure(3.6)
    zones = list(dict.fromkeys(frame["zone_id"]))
    times = frame["datetime"].dt.tz_localize(None)
    # numbers only (`unique` holds lists of classes: nothing to draw against time)
    values = frame[column].map(lambda v: v if isinstance(v, numbers.Real) else np.nan).astype("float64")
    flagged = frame["too_little_valid"] if "too_little_valid" in frame else pd.Series(False, frame.index)
    dropped = flagged.fillna(False).astype(bool)  # under min_valid_fraction: no value, a cross
    bottom = np.nanmin(values) if values.notna().any() else 0.0
    for zone_id in zones[:CHART_ZONES]:
        mine = (frame["zone_id"] == zone_id).to_numpy()
        order = np.argsort(times[mine].to_numpy(), kind="stable")
        line = axes.plot(
            times[mine].to_numpy()[order],
            values[mine].to_numpy()[order],
            marker="o",
            linewidth=1,
            label=plain(zone_id),
        )
        low = mine & dropped.to_numpy()
        if low.any():
            axes.plot(times[low], np.full(low.sum(), bottom), "x", color=line[0].get_color(), markersize=7)
    if dropped.any():
        axes.plot([], [], "x", color="0.3", label=f"too little valid ({int(dropped.sum())})")
    more = f" (first {CHART_ZONES} of {len(zones)} zones)" if len(zones) > CHART_ZONES else ""
    axes.set_title(plain(f"{column} of {name} per zone{more}"), fontsize=10)
    axes.set_ylabel(plain(unit(column, name, is_index)))
    known = times.dropna()
    if len(known) and known.max() - known.min() < pd.Timedelta(days=2):  # one day: a week around it
        middle = known.min() + (known.max() - known.min()) / 2
        axes.set_xlim(middle - pd.Timedelta(days=3), middle + pd.Timedelta(days=3))
    locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    axes.set_xlabel("acquisition date (UTC)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return figure


def fractions_png(frame: pd.DataFrame, expression: str, classes: dict, colors: dict | None = None) -> bytes:
    """The class fractions of each zone's latest observation that has them, stacked bars, each
    class in its classification colour when the asset gives one."""
    import numpy as np

    columns = [c for c in frame.columns if c.startswith("frac_")]
    figure, axes = new_figure(3.6)
    if not columns:  # no zone measured
        frame = frame.assign(frac_none=float("nan"))
        columns = ["frac_none"]
    latest = (
        frame.dropna(subset=columns, how="all").sort_values("datetime").groupby("zone_id", sort=False).tail(1)
    )
    zones = list(dict.fromkeys(frame["zone_id"]))
    latest = latest.set_index("zone_id").reindex(
        [z for z in zones[:CHART_ZONES] if z in set(latest["zone_id"])]
    )
    left = np.zeros(len(latest))
    labels = [plain(z) for z in latest.index]
    for column in columns:
        values = latest[column].fillna(0.0).to_numpy(dtype="float64")
        value = column.removeprefix("frac_")
        color = (colors or {}).get(value)
        edge, width = swatch_edge(color)
        axes.barh(
            labels,
            values,
            left=left,
            label=plain(f"{value} {classes.get(value, '')}".strip()),
            edgecolor=edge if color else None,
            linewidth=width,
            **({"color": color} if color else {}),
        )
        left += values
    more = f" (first {CHART_ZONES} of {len(zones)} zones)" if len(zones) > CHART_ZONES else ""
    name = expression_name(expression)
    axes.set_title(plain(f"class fractions of {name} per zone, latest observation{more}"), fontsize=10)
    axes.set_xlabel("share of the zone")
    axes.set_xlim(0, 1)
    axes.invert_yaxis()
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return png_bytes(figure)
