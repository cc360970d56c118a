"""What the zonal_stats tool answers an analyst, on the bundled sample catalog (local COGs):

- class fractions of the SCL asset with mask_clouds=false equal exactextract's `frac` on the
  local file (rasterio opens it), one `frac_<value>` column per class present, in the answer
  and the saved GeoParquet, the classes named from the asset's classification extension;
- a zone-observation under min_valid_fraction: no value and a note, in the rows, on the map
  (the zone's note) and marked in the chart; at 0 it keeps its value;
- the chart titled with the index's name, one day on a week's axis, zone ids with `$` drawn as
  written.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import rasterio
from exactextract import exact_extract
from pyproj import Transformer
from shapely import transform as shapely_transform
from shapely.geometry import mapping, shape
from test_zonal_mcp import FIELDS as SAMPLE_FIELDS
from test_zonal_mcp import SEARCH, call, session  # noqa: F401 (session: the sample catalog's fixture)

import stac_gdal_mcp
from stac_gdal_mcp.operations.zonal import chart as zonal_chart
from stac_gdal_mcp.server.map_app import VIEW_META

SAMPLE = Path(stac_gdal_mcp.__file__).parent / "data" / "sample" / "sentinel-2-l2a"
SCENE = "S2A_33TUL_20240619_0_L2A"


# the sample fields of test_zonal_mcp, the third with an id matplotlib would read as mathtext
FIELDS = {
    "type": "FeatureCollection",
    "features": [*SAMPLE_FIELDS["features"][:2], {**SAMPLE_FIELDS["features"][2], "id": "$x^2$ plot"}],
}


def local_frac(path) -> list[dict]:
    """exactextract's frac and unique per field on the local SCL file, zones in its CRS."""
    with rasterio.open(path) as src:
        project = Transformer.from_crs(4326, src.crs, always_xy=True).transform
        features = [
            {"type": "Feature", "properties": {}, "geometry": mapping(shapely_transform(shape(f["geometry"]), project, interleaved=False))}
            for f in FIELDS["features"]
        ]  # fmt: skip
        frame = exact_extract(src, features, ["unique", "frac"], output="pandas")
    return [
        {f"frac_{int(u)}": float(f) for u, f in zip(us, fs)} for us, fs in zip(frame["unique"], frame["frac"])
    ]


async def test_class_fractions_without_cloud_mask_equal_exactextract_frac(session):  # noqa: F811
    import geopandas

    items = [{"collection_id": "sentinel-2-l2a", "item_id": SCENE}]
    result = await call(session, {"geometries": FIELDS, "search": {"items": items}, "expression": "scl",
                                  "stats": ["frac", "majority"], "mask_clouds": False})  # fmt: skip
    assert result.get("isError") is not True
    answer = result["structuredContent"]
    want = local_frac(SAMPLE / SCENE / "scl.tif")
    columns = sorted({c for w in want for c in w}, key=lambda c: (len(c), c))
    assert [s for s in answer["stats"] if s.startswith("frac_")] == columns
    for row, fractions in zip(answer["rows"], want):
        for column in columns:  # a class absent from a zone: 0; the answer to 4 decimals
            assert row[column] == pytest.approx(round(fractions.get(column, 0.0), 4), abs=1e-12), column
    saved = geopandas.read_parquet(session.outputs.path(answer["table"]["id"]))
    for (_, row), fractions in zip(saved.iterrows(), want):
        assert [row[c] for c in columns] == pytest.approx([fractions.get(c, 0.0) for c in columns], rel=1e-9)
    with open(SAMPLE / SCENE / f"{SCENE}.json") as f:
        declared = {
            str(c["value"]): c["description"] for c in json.load(f)["assets"]["scl"]["classification:classes"]
        }
    assert answer["classes"] == {
        c.removeprefix("frac_"): declared[c.removeprefix("frac_")] for c in columns
    } | {str(int(r["majority"])): declared[str(int(r["majority"]))] for r in answer["rows"]}
    assert "Vegetation" in answer["classes"].values()
    frame = session.zonal_stats(FIELDS, items=items, expression="scl", stats=["frac"], mask_clouds=False)
    colors = frame.provenance.facts["class_colors"]  # the chart's bars
    with open(SAMPLE / SCENE / f"{SCENE}.json") as f:
        hints = {
            str(c["value"]): c["color_hint"] for c in json.load(f)["assets"]["scl"]["classification:classes"]
        }
    assert colors["4"] == f"#{hints['4'].lower()}" and set(colors) == set(hints) - {"0"}
    (image,) = [c for c in result["content"] if c["type"] == "image"]
    assert image["mimeType"] == "image/png"


async def test_too_little_valid_gets_a_note_in_the_rows_the_map_and_the_chart(session):  # noqa: F811
    result = await call(session, {"geometries": FIELDS, "search": SEARCH, "per": "day"})
    answer = result["structuredContent"]
    frame = session.zonal_stats(FIELDS, per="day", min_valid_fraction=0, **SEARCH)
    low = frame[(frame["valid_fraction"] < 0.5) & frame["error"].isna()]
    assert (low["count"] > 0).any() and low.loc[low["count"] > 0, "mean"].notna().all()  # values at 0
    assert answer["min_valid_fraction"] == 0.5
    rows = {(r["zone_id"], r["date"]): r for r in answer["rows"]}
    for _, want in low.iterrows():
        row = rows[(want["zone_id"], want["date"])]
        assert row["mean"] is None and row["count"] == pytest.approx(round(want["count"], 1))
        assert f"only {want['valid_fraction'] * 100:.3g}% of the zone valid" in row["note"]
        assert "min_valid_fraction=0.5" in row["note"]
    # the map: a zone whose latest observation was dropped says why
    latest = frame.sort_values("datetime").groupby("zone_id").tail(1).set_index("zone_id")
    for feature in answer["zone_layer"]["features"]:
        dropped = latest.loc[feature["id"], "valid_fraction"] < 0.5
        assert ("min_valid_fraction" in feature["properties"].get("note", "")) == dropped
    view = result["_meta"][VIEW_META]
    notes = {z["id"]: z.get("note") for z in view["zones"][0]["zones"]}
    assert {k for k, v in notes.items() if v} == {
        f["id"] for f in answer["zone_layer"]["features"] if "note" in f["properties"]
    }
    # the rows are flagged (what the chart reads): exactly those under 0.5 with some pixels
    dropped_frame = session.zonal_stats(FIELDS, per="day", **SEARCH)
    flagged = dropped_frame[dropped_frame["too_little_valid"]]
    assert set(zip(flagged["zone_id"], flagged["date"])) == set(zip(low["zone_id"], low["date"]))
    assert "too_little_valid" not in answer["rows"][0]  # the answer's rows say it in their note
    # the chart: a cross per dropped observation (whatever the note says), the title the index's
    # name, y axis with unit
    figure = zonal_chart.series_figure(
        dropped_frame.assign(note=None), "mean", dropped_frame.provenance.facts["expression"]
    )
    axes = figure.axes[0]
    crosses = sum(len(line.get_xdata()) for line in axes.get_lines() if line.get_marker() == "x")
    assert crosses == len(
        low[low["zone_id"].isin(dropped_frame["zone_id"].unique()[: zonal_chart.CHART_ZONES])]
    )
    assert axes.get_title().startswith("mean of NDVI") and "unitless" in axes.get_ylabel()
    assert [t.get_text() for t in axes.get_legend().get_texts()][2] == r"\$x^2\$ plot"
    figure.savefig(io.BytesIO(), format="png")  # `$` in an id does not break drawing


def test_one_day_gets_a_week_axis_not_years(session):  # noqa: F811
    import matplotlib.dates as mdates

    frame = session.zonal_stats(FIELDS, collections=["sentinel-2-l2a"], datetime="2024-06-19")
    assert frame["datetime"].nunique() == 1
    axes = zonal_chart.series_figure(frame.frame, "mean", frame.provenance.facts["expression"]).axes[0]
    low, high = axes.get_xlim()
    assert 5 <= high - low <= 8  # days
    day = mdates.date2num(frame["datetime"].iloc[0].tz_localize(None))
    assert abs((low + high) / 2 - day) < 1


async def test_no_item_measured_still_answers_with_a_chart(session):  # noqa: F811
    """No scene in the dates: every zone 'no item covers this zone', and the charts (series and
    class fractions) are drawn empty rather than failing the call."""
    for stats in (["mean"], ["frac"]):
        arguments = {"geometries": FIELDS, "search": {"collections": ["sentinel-2-l2a"], "datetime": "2020-01"},
                     "expression": "scl", "stats": stats, "mask_clouds": False, "per": "day"}  # fmt: skip
        result = await call(session, arguments)
        assert result.get("isError") is not True, result["content"]
        rows = result["structuredContent"]["rows"]
        assert [r["note"] for r in rows] == ["no item covers this zone"] * 3
        assert [c["mimeType"] for c in result["content"] if c["type"] == "image"] == ["image/png"]


async def test_every_first_statistic_per_day_answers_with_a_chart(session):  # noqa: F811
    """The per-day chart of whatever statistic comes first: class lists (unique) and whole
    numbers (majority) too, never a failed call."""
    for stats in (["unique"], ["majority"], ["variety", "count"]):
        arguments = {"geometries": FIELDS, "search": {"collections": ["sentinel-2-l2a"], "datetime": "2024-06/2024-07"},
                     "expression": "scl", "stats": stats, "per": "day"}  # fmt: skip
        result = await call(session, arguments)
        assert result.get("isError") is not True, (stats, result["content"])
        assert [c["mimeType"] for c in result["content"] if c["type"] == "image"] == ["image/png"]
