"""operations/: every operation is one class in OPERATIONS, every result kind has one class, and
Session.save, Session.map and the tools' answers dispatch through it (no chain naming operations)."""

import pytest

import stac_gdal_mcp
from stac_gdal_mcp import operations
from stac_gdal_mcp.errors import InvalidArgument
from stac_gdal_mcp.operations import registry, result
from stac_gdal_mcp.operations.result import Result


def test_every_registered_operation_is_one_class():
    """OPERATIONS names each class by its tool name; the Session has its method."""
    from stac_gdal_mcp.operations import OPERATIONS
    from stac_gdal_mcp.operations.base import Operation

    assert {
        "inspect_asset",
        "reproject_asset",
        "convert_asset",
        "preview",
        "cloud_cover_stats",
        "time_series",
        "composite",
        "zonal_stats",
    } <= set(OPERATIONS)  # (and any operation added since: a new one is one line of OPERATIONS)
    for name, cls in OPERATIONS.items():
        assert issubclass(cls, Operation) and cls.name == name
        assert getattr(stac_gdal_mcp.Session, cls.library_name).__name__ == cls.library_name


def test_every_result_kind_has_its_class():
    """Each kind the package's operations put in a Provenance (found in their source) and each
    result class's kind has its class in operations.RESULTS - a typed `Result` of that kind -
    but the search page, a `Result` of its own in
    a layer above."""
    import re
    from pathlib import Path

    import stac_gdal_mcp
    from stac_gdal_mcp.operations.result import Result
    from stac_gdal_mcp.outputs import OutputRecord
    from stac_gdal_mcp.results import CloudCover, Preview, SearchResults

    classes = (CloudCover, Preview, OutputRecord)
    made = {
        kind
        for path in Path(stac_gdal_mcp.__file__).parent.rglob("*.py")
        for kind in re.findall(r"Provenance\(\s*kind=\"(\w+)\"", path.read_text())
    }
    assert {"time_series", "composite", "zonal_stats"} <= made, made
    wanted = made | {c.result_kind for c in classes}
    assert wanted <= set(operations.RESULTS), wanted - set(operations.RESULTS)
    for kind in wanted:
        assert issubclass(operations.RESULTS[kind], Result), kind
    from stac_gdal_mcp.operations.series import SeriesTable
    from stac_gdal_mcp.operations.threshold import ThresholdTable
    from stac_gdal_mcp.operations.zonal.result import ZonalTable

    for cls in (CloudCover, Preview, SeriesTable, ZonalTable, ThresholdTable):
        assert operations.RESULTS[cls.result_kind] is cls
    assert issubclass(SearchResults, Result) and SearchResults.result_kind not in operations.RESULTS


class Measured:
    """An object saying a kind no module of the package declares, with no class for it."""

    result_kind = "measured"


class Measure(Result):
    """A typed result of a kind no module of the package declares (as a new operation's would be)."""

    result_kind = "measured"

    def _save(self, core, format, output_name, job):
        return ("saved", format, output_name)

    def map_call(self):
        return result.call("measure", {"aoi": [0, 0, 1, 1]}, {"value": 1})


def test_save_and_map_dispatch_through_the_registry(tmp_path):
    """A typed result is saved by Session.save and drawn by Session.map as its class says."""
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path) as session:
        assert session.save(Measure(), format="csv", output_name="m") == ("saved", "csv", "m")
        assert session.map(Measure()).calls == [Measure().map_call()]


def test_a_result_of_no_kind_is_refused_in_one_line(tmp_path):
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path) as session:
        for wrong in (42, {"tool": "x"}, Measured()):
            for attempt in (session.save, session.map, lambda r: registry.answer(session.core, r, None)):
                with pytest.raises(InvalidArgument) as caught:
                    attempt(wrong)
                message = str(caught.value)
                assert message.endswith(f"{type(wrong).__name__}") and "\n" not in message


def test_a_time_series_is_a_table_that_knows_itself(tmp_path):
    """time_series returns a `SeriesTable`: it reads as its DataFrame, holds its request and
    provenance, and saves, answers and draws itself as the registry does; its DataFrame alone is
    of no kind."""
    import pandas as pd

    from stac_gdal_mcp.models import MAP_LAYER_META
    from stac_gdal_mcp.operations.series import SeriesTable

    aoi = [13.60, 45.92, 13.62, 45.935]
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path) as session:
        table = session.time_series(aoi, collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-07-31")
        frame = table.to_dataframe()
        assert isinstance(table, SeriesTable) and isinstance(frame, pd.DataFrame) and frame is not table.frame
        assert list(table["date"]) == list(frame["date"]) == ["2024-06-04", "2024-06-19", "2024-07-14"]
        assert len(table) == 3 and list(table) == list(frame.columns) and table.index.equals(frame.index)
        assert (
            table.request["aoi"] == aoi and table.provenance.kind == registry.kind_of(table) == "time_series"
        )

        own, again = table.save(), session.save(table)
        assert own.id != again.id
        assert session.outputs.path(own.id).read_bytes() == session.outputs.path(again.id).read_bytes()
        assert registry.kind_of(frame) is None  # its attrs say where it came from; its class no kind
        with pytest.raises(InvalidArgument, match="^save takes .*, not DataFrame$"):
            session.save(frame)
        chart = session.outputs.path(table.save("png").id).read_bytes()
        assert chart.startswith(b"\x89PNG")

        layer = table.map_layer()
        (call,) = session.map(table).calls
        assert layer.model_dump(mode="json", exclude_defaults=True) == call["result"]["_meta"][MAP_LAYER_META]
        assert layer.series == [
            {"expression": "(nir - red) / (nir + red)", "reducer": "mean", "days": 3, "image": 0}
        ]
        answer = table.answer(session.settings.limits)
        assert [r.date for r in answer.value.rows] == list(frame["date"]) and answer.layer == layer

        kept = table[table["value"] > table["value"].min()]  # pandas' filter: still a time series
        assert isinstance(kept, SeriesTable) and isinstance(kept.frame, pd.DataFrame)
        assert registry.kind_of(kept) == "time_series" and kept.provenance == table.provenance
        assert list(kept["date"]) == list(frame["date"][frame["value"] > frame["value"].min()])
        assert 0 < len(kept) < len(table) and kept.request == table.request
        lines = session.outputs.path(session.save(kept).id).read_text().splitlines()
        assert len(lines) == len(kept) + 1 and [line.split(",")[0] for line in lines[1:]] == list(
            kept["date"]
        )
    with pytest.raises(InvalidArgument, match="no session to save into"):
        SeriesTable(frame, table.provenance).save()


def fields() -> dict:
    """Two fields of the sample catalog's area as GeoJSON zones."""
    from shapely.geometry import box, mapping

    boxes = {"field-0": (13.601, 45.921, 13.609, 45.927), "field-1": (13.611, 45.928, 13.619, 45.934)}
    features = [
        {"type": "Feature", "id": k, "properties": {}, "geometry": mapping(box(*b))} for k, b in boxes.items()
    ]
    return {"type": "FeatureCollection", "features": features}


def test_a_zonal_table_knows_itself_by_its_class(tmp_path):
    """zonal_stats returns a `ZonalTable`: it reads as its GeoDataFrame, carries its request and
    provenance as attributes (none in the frame's `attrs`), is of its kind by its class, and
    saves, answers and draws itself; filtered with pandas it is one still, saved as it shows."""
    import geopandas

    from stac_gdal_mcp.operations.zonal.result import ZonalTable

    search = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-07-31"}
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path) as session:
        table = session.zonal_stats(fields(), **search)
        frame = table.frame
        assert isinstance(table, ZonalTable) and isinstance(frame, geopandas.GeoDataFrame)
        assert frame.attrs == {} and registry.kind_of(table) == table.provenance.kind == "zonal_stats"
        assert len(table) == len(frame) > 0 and list(table.columns) == list(frame.columns)
        assert table["mean"].equals(frame["mean"]) and table._repr_html_() == frame._repr_html_()
        assert {"mean", "iloc", "to_parquet", "save", "provenance"} <= set(dir(table))
        assert table.request["zones"] == 2 and table.request["stats"] == ["mean", "count"]

        record = table.save()
        back = geopandas.read_parquet(session.outputs.path(record.id))
        assert list(back["zone_id"]) == list(frame["zone_id"])
        assert back["mean"].equals(frame["mean"]) and record.properties.title == table.provenance.title
        csv = table.save("csv")
        assert csv.file.type == "text/csv"
        answer = table.answer(session.settings.limits)
        assert len(answer.value.rows) == len(frame) and answer.layer == table.map_layer()
        assert [f["id"] for f in table.map_layer().zones["features"]] == ["field-0", "field-1"]

        table["ha"] = table.frame.to_crs(32633).area / 10_000  # a column added to the table itself
        assert "ha" in frame and "ha" in geopandas.read_parquet(session.outputs.path(table.save().id))
        kept = table[table["zone_id"] == "field-1"]  # pandas' filter: a zonal table still
        assert isinstance(kept, ZonalTable) and isinstance(kept.frame, geopandas.GeoDataFrame)
        assert kept.provenance == table.provenance and kept.quality is table.quality
        assert 0 < len(kept) < len(table) and set(kept["zone_id"]) == {"field-1"}
        back = geopandas.read_parquet(session.outputs.path(session.save(kept).id))
        assert list(back["zone_id"]) == list(kept["zone_id"]) and back["mean"].equals(
            kept.frame["mean"].reset_index(drop=True)
        )
        assert [f["id"] for f in kept.map_layer().zones["features"]] == ["field-1"]
        assert isinstance(kept.head(1), ZonalTable) and isinstance(kept.iloc[:1], ZonalTable)
        assert not isinstance(kept["mean"], ZonalTable)  # a column: what pandas made
        plain = table.frame[table.frame["count"] > 0]  # the GeoDataFrame alone: of no kind
        assert registry.kind_of(plain) is None
        with pytest.raises(InvalidArgument, match="^save takes .*, not GeoDataFrame$"):
            session.save(plain)


def test_a_threshold_table_says_its_notes_in_its_words(tmp_path):
    """threshold_area returns a `ThresholdTable` of its own kind; its notes are the zonal table's,
    made from the same data (`quality`) in its words: a row under min_valid_fraction has no area."""
    from stac_gdal_mcp.operations.threshold import ThresholdTable

    search = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-07-31"}
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path) as session:
        table = session.threshold_area(fields(), condition="> 0.3", **search)
        assert isinstance(table, ThresholdTable) and table.frame.attrs == {}
        assert registry.kind_of(table) == table.provenance.kind == "threshold_area"
        too_little = int(table["too_little_valid"].sum())
        assert too_little > 0 and table.quality.too_little == too_little  # (the sample's cloudy day)
        said = f"{too_little} of {len(table)} rows had less valid area than min_valid_fraction=0.5"
        assert table.provenance.facts["notes"] == table.quality.notes("area")
        assert [n for n in table.provenance.facts["notes"] if n.startswith(said)] == [
            f"{said} of their zone: no area, a note (0 keeps them)"
        ]
        zonal = session.zonal_stats(fields(), **search)
        assert (
            f"{said} of their zone: no statistics, a note (0 keeps them)" in zonal.provenance.facts["notes"]
        )
        assert table.answer(session.settings.limits).value.notes == table.provenance.facts["notes"]
