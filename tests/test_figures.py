"""Figures that explain themselves: the time series chart is titled with the index's
name, shows each day's valid fraction on a second axis and marks the days dropped as cloudy -
checked on the matplotlib figure against the rows drawn."""

from types import SimpleNamespace

import numpy as np
from matplotlib.dates import date2num

from stac_gdal_mcp.operations.tables import chart_figure, index_name, write_chart

DAYS = [(4, 0.41, 0.8), (9, None, 0.0), (14, 0.52, 0.95), (19, 0.55, 0.6), (24, None, 0.0)]
ROWS = [SimpleNamespace(datetime=f"2024-06-{d:02d}T10:06:00Z", value=v, valid_fraction=f) for d, v, f in DAYS]
TITLE = "mean of (nir - red) / (nir + red) over the AOI"


def test_index_names():
    assert index_name(TITLE) == "NDVI" and index_name("(green - nir) / (green + nir)") == "NDWI"
    assert index_name("nir * 2") is None


def test_chart_names_the_index_shows_valid_fraction_and_marks_cloudy_days(tmp_path):
    figure = chart_figure(ROWS, title=TITLE, ylabel="mean((nir - red) / (nir + red))")
    values_axes, fraction_axes = figure.axes
    assert values_axes.get_title().splitlines() == ["NDVI", TITLE]
    assert values_axes.get_ylabel() == "NDVI" and fraction_axes.get_ylim() == (0, 1)
    assert [bar.get_height() for bar in fraction_axes.patches] == [f for _, _, f in DAYS]
    line, crosses = values_axes.get_lines()
    assert np.allclose(line.get_ydata(), [np.nan if v is None else v for _, v, _ in DAYS], equal_nan=True)
    when = [date2num(np.datetime64(f"2024-06-{d:02d}T10:06:00")) for d, v, _ in DAYS if v is None]
    assert crosses.get_marker() == "x" and np.allclose(date2num(crosses.get_xdata()), when)
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == ["NDVI", "no usable pixel (2 days, cloudy or no data)", "valid fraction"]
    write_chart(tmp_path / "chart.png", ROWS, title=TITLE, ylabel="x")
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
