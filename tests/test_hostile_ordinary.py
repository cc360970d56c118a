"""Ordinary inputs that broke a promise: each through the MCP client (an in-memory fastmcp Client
on the bundled sample catalog, as tests/test_hostile_inputs.py), each answered in one clear line
naming what is wrong (never fastmcp's bare "Error calling tool", never a library's exception),
or, for `fields`, with every item keeping its id and collection as the docs promise."""

from __future__ import annotations

import json

import pytest
from test_fuzz import Harness, _workspace_consistent
from test_hostile_inputs import _check

SQUARE = {"type": "Polygon", "coordinates": [[[13.6, 45.92], [13.61, 45.92], [13.61, 45.93], [13.6, 45.92]]]}
S2 = {"collections": ["sentinel-2-l2a"]}
S2_JUNE = {**S2, "datetime": "2024-06-01/2024-06-30"}

# (tool, arguments, the words the one-line answer must hold)
CORPUS = [
    ("save_search", {"fields": ["-geometry"]}, ("fields", "geometry")),
    ("save_search", {"fields": ["-properties"]}, ("fields", "properties")),
    ("save_search", {"fields": ["-properties.datetime"], "format": "ndjson"}, ("fields", "datetime")),
    (
        "zonal_stats",
        {"geometries": SQUARE, "search": S2_JUNE, "stats": ["quantile(q=0.501)", "quantile(q=0.502)"]},
        ("quantile_50", "0.501", "0.502"),
    ),
    (
        "zonal_stats",
        {
            "geometries": SQUARE,
            "search": S2_JUNE,
            "stats": [f"quantile(q={k / 5001:.6f})" for k in range(1, 5001)],
        },
        ("stats", "5,000"),
    ),
    ("zonal_stats", {"geometries": SQUARE, "search": S2_JUNE, "resolution": 1e-300}, "resolution 1e-300"),
    ("zonal_stats", {"geometries": SQUARE, "search": S2_JUNE, "expression": "nosuchband"}, "'nosuchband'"),
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = Harness(tmp_path_factory.mktemp("ordinary") / "workspace")
    yield h
    h.close()


def test_ordinary_inputs_answer_one_clear_line(harness):
    failures = _check(harness, CORPUS)
    assert not failures, "\n".join(failures)
    assert not _workspace_consistent(harness)


def test_an_unknown_band_is_one_error_not_a_table_of_empty_rows(harness):
    """Every item lacks the band: one error naming it, said once (not a row per item)."""
    result = harness.call(
        "zonal_stats", {"geometries": SQUARE, "search": S2_JUNE, "expression": "nosuchband"}
    )
    text = result.content[0].text
    assert result.is_error and text.count("'nosuchband'") == 1, text
    assert "none of the 2 items can" in text, text


def test_fields_never_strip_id_or_collection(harness):
    """The docs promise every item keeps its id and collection, whatever `fields` leaves out."""
    for fields in (["-id"], ["-collection"], ["-id", "-collection", "-links"], {"exclude": ["id"]}):
        result = harness.call("search_items", {**S2, "fields": fields, "detail": "full"})
        assert not result.is_error, result.content[0].text
        items = json.loads(result.content[0].text)["items"]
        assert len(items) == 5
        for item in items:
            assert item["id"].startswith("S2") and item["collection"] == "sentinel-2-l2a", (
                fields,
                item.keys(),
            )
            assert "links" not in item or "-links" not in fields
