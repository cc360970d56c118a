"""operations/: every operation is one class in OPERATIONS, every result kind has one handler, and
Session.save, Session.map and the tools' answers dispatch through it (no chain naming operations)."""

import pytest

import stac_gdal_mcp
from stac_gdal_mcp import operations
from stac_gdal_mcp.errors import InvalidArgument
from stac_gdal_mcp.operations import registry


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


def test_every_result_kind_has_its_handler():
    """Each kind the package's operations put in a Provenance (found in their source) and each
    result class's kind has its handler in operations.RESULTS."""
    import re
    from pathlib import Path

    import stac_gdal_mcp
    from stac_gdal_mcp.outputs import OutputRecord
    from stac_gdal_mcp.results import CloudCover, Preview, SearchResults

    classes = (CloudCover, Preview, SearchResults, OutputRecord)
    made = {
        kind
        for path in Path(stac_gdal_mcp.__file__).parent.rglob("*.py")
        for kind in re.findall(r"Provenance\(\s*kind=\"(\w+)\"", path.read_text())
    }
    assert {"time_series", "composite", "zonal_stats"} <= made, made
    wanted = made | {c.result_kind for c in classes}
    assert wanted <= set(operations.RESULTS), wanted - set(operations.RESULTS)
    for kind in wanted:
        assert issubclass(operations.RESULTS[kind], registry.Results), kind


class Measured:
    """A result of a kind no module of the package declares (as a new operation's would be)."""

    result_kind = "measured"


class Handler(registry.Results):
    @classmethod
    def save(cls, core, result, *, format, output_name, job):
        return ("saved", format, output_name)

    @classmethod
    def map_call(cls, result):
        return registry.call("measure", {"aoi": [0, 0, 1, 1]}, {"value": 1})


def test_save_and_map_dispatch_through_the_registry(monkeypatch, tmp_path):
    """A kind declared once is saved by Session.save and drawn by Session.map, unchanged."""
    monkeypatch.setitem(operations.RESULTS, "measured", Handler)
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path) as session:
        assert session.save(Measured(), format="csv", output_name="m") == ("saved", "csv", "m")
        assert session.map(Measured()).calls == [Handler.map_call(None)]


def test_a_result_of_no_kind_is_refused_in_one_line(tmp_path):
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path) as session:
        for wrong in (42, {"tool": "x"}, Measured()):
            for attempt in (session.save, session.map, lambda r: registry.answer(session.core, r, None)):
                with pytest.raises(InvalidArgument) as caught:
                    attempt(wrong)
                message = str(caught.value)
                assert message.endswith(f"{type(wrong).__name__}") and "\n" not in message
