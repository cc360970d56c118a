"""A corpus of hostile inputs that libraries raise on (issue 23), sent to every tool that takes
them, through an in-memory client on the bundled sample catalog. Each must answer one clear line naming the argument (never fastmcp's bare "Error
calling tool"; a dry run may instead say WOULD BE REFUSED), and nothing is left half-written (the
checks of tests/test_fuzz.py). Items without geometry: tests/test_faults_geometry.py.

Also: a composite over the whole world is refused at once by its own limits, and creation options
are checked against the driver's own list (GDAL's DMD_CREATIONOPTIONLIST).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_fuzz import Harness, _workspace_consistent, problems_of

import stac_gdal_mcp

SAMPLE = Path(stac_gdal_mcp.__file__).parent / "data/sample"
ASSET = {"collection_id": "sentinel-2-l2a", "item_id": "S2A_33TUL_20240619_0_L2A", "asset": "red"}
AOI = [13.6, 45.92, 13.62, 45.94]
S2 = {"collections": ["sentinel-2-l2a"]}

# (tool, arguments, a word the answer must hold: the argument it names)
CORPUS = [
    ("search_items", {"filter": {"op": "nope", "args": [1]}}, "filter"),
    ("search_items", {"filter": {"op": "=", "args": [{"property": "eo:cloud_cover"}]}}, "filter"),
    ("search_items", {"filter": {"op": "=", "args": [{"property": "platform"}, 3]}}, "filter"),
    ("search_items", {"filter": "no_such_property < 20"}, "filter"),
    ("search_items", {"query": {"eo:cloud_cover": {"lt": "abc"}}}, "query"),
    ("search_items", {"query": {"platform": {"gt": 3}}}, "query"),
    ("inspect_asset", {"href": "http://[::1"}, "href"),
    ("inspect_asset", {"href": "https://[fe80::1%25eth0/x.tif"}, "href"),
    ("preview", {"href": "http://[::1"}, "href"),
    ("reproject_asset", {**ASSET, "dst_crs": "IAU_2015:30100"}, "dst_crs"),
    ("reproject_asset", {**ASSET, "dst_crs": "IAU_2015:30100", "dry_run": True}, "dst_crs"),
    ("reproject_asset", {**ASSET, "dst_crs": "EPSG:4326", "resolution": 1e-300}, "resolution"),
    (
        "reproject_asset",
        {**ASSET, "dst_crs": "EPSG:4326", "resolution": 1e-300, "dry_run": True},
        "resolution",
    ),
    ("time_series", {"aoi": AOI, "search": S2, "resolution": 1e-300}, "resolution"),
    ("time_series", {"aoi": AOI, "search": S2, "resolution": 1e-300, "dry_run": True}, "resolution"),
    ("composite", {"aoi": AOI, "search": S2, "bands": ["red"], "resolution": 1e-300}, "resolution"),
    (
        "composite",
        {"aoi": AOI, "search": S2, "bands": ["red"], "crs": "IAU_2015:30100", "resolution": 10},
        "crs",
    ),
    ("convert_asset", {**ASSET, "output_format": "COG", "creation_options": {"ZLEVEL": "1e30"}}, "ZLEVEL"),
    (
        "convert_asset",
        {**ASSET, "output_format": "COG", "creation_options": {"COMPRESS": "NOPE"}},
        "COMPRESS",
    ),
    (
        "convert_asset",
        {**ASSET, "output_format": "GTiff", "creation_options": {"NO_SUCH_OPTION": "1"}},
        "NO_SUCH",
    ),
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = Harness(tmp_path_factory.mktemp("hostile") / "workspace")
    yield h
    h.close()


def _check(harness: Harness, corpus) -> list[str]:
    failures = []
    for name, arguments, word in corpus:
        result = harness.call(name, arguments)
        text = result.content[0].text if result.content else ""
        problems = problems_of(harness, name, arguments, result)
        if not result.is_error and "WOULD BE REFUSED" not in text:  # a dry run says what it would refuse
            problems.append("accepted")
        elif word.lower() not in text.lower():
            problems.append(f"does not name {word!r}")
        if problems:
            failures.append(f"{name} {json.dumps(arguments)[:160]}: {'; '.join(problems)}: {text[:200]!r}")
    return failures


def test_hostile_inputs_answer_one_clear_line(harness):
    failures = _check(harness, CORPUS)
    assert not failures, "\n".join(failures)
    assert not _workspace_consistent(harness)


def test_whole_world_composite_is_refused_at_once(harness):
    world = {"aoi": [-180, -90, 180, 90], "search": S2, "bands": ["red"]}
    for arguments in (world, {**world, "dry_run": True}):
        started = time.monotonic()
        result = harness.call("composite", arguments)
        elapsed = time.monotonic() - started
        text = result.content[0].text
        refused = result.is_error or '"would_refuse":true' in text.replace(" ", "")
        assert refused, text[:300]
        assert "aoi" in text, text[:300]
        # "at once": well under the fuzzing's CALL_TIMEOUT_S (the call ran > 180 s before)
        assert elapsed < 60, f"refused after {elapsed:.0f} s"


def test_creation_options_checked_against_the_driver(harness):
    """GDAL only warns about an option its driver does not take, or a value outside its list, and
    writes the file without it; here they are refused (GTiff: ZLEVEL 1-12; COG has LEVEL)."""
    result = harness.call(
        "convert_asset", {**ASSET, "output_format": "GTiff", "creation_options": {"ZLEVEL": "9"}}
    )
    assert not result.is_error, result.content[0].text
    for fmt, value in (("GTiff", "1e30"), ("GTiff", "0"), ("GTiff", "99"), ("GTiff", "fast"), ("COG", "9")):
        result = harness.call(
            "convert_asset", {**ASSET, "output_format": fmt, "creation_options": {"ZLEVEL": value}}
        )
        assert result.is_error, value
        text = result.content[0].text
        assert "ZLEVEL" in text and "\n" not in text, text
