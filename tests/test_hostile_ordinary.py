"""Ordinary inputs that broke a promise: each through the MCP client (an in-memory fastmcp Client
on the bundled sample catalog, as tests/test_hostile_inputs.py), each answered in one clear line
naming what is wrong (never fastmcp's bare "Error calling tool", never a library's exception),
or, for `fields`, with every item keeping its id and collection as the docs promise."""

from __future__ import annotations

import json

import geopandas
import numpy as np
import pytest
import shapely
from helpers import found_items
from test_fuzz import Harness, _workspace_consistent
from test_geoparquet_hostile import good  # noqa: F401 (a fixture: a stac-geoparquet file)
from test_hostile_inputs import _check

SQUARE = {"type": "Polygon", "coordinates": [[[13.6, 45.92], [13.61, 45.92], [13.61, 45.93], [13.6, 45.92]]]}
S2 = {"collections": ["sentinel-2-l2a"]}
S2_JUNE = {**S2, "datetime": "2024-06-01/2024-06-30"}
AOI = [13.6, 45.92, 13.62, 45.94]
ASSET = {"collection_id": "sentinel-2-l2a", "item_id": "S2A_33TUL_20240619_0_L2A", "asset": "red"}

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
    ("zonal_stats", {"geometries": SQUARE, "search": S2_JUNE, "resolution": 1e-6}, "resolution 1e-06"),
    ("zonal_stats", {"geometries": SQUARE, "search": S2_JUNE, "resolution": 5e-324}, "resolution"),
    *[
        (tool, {**arguments, "resolution": 5e-324, "dry_run": dry_run}, "resolution")
        for tool, arguments in (
            ("time_series", {"aoi": AOI, "search": S2}),
            ("composite", {"aoi": AOI, "search": S2, "bands": ["red"]}),
            ("reproject_asset", {**ASSET, "dst_crs": "EPSG:4326"}),
        )
        for dry_run in (False, True)
    ],
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
        items = found_items(json.loads(result.content[0].text))
        assert len(items) == 5
        for item in items:
            assert item["id"].startswith("S2") and item["collection"] == "sentinel-2-l2a", (
                fields,
                item.keys(),
            )
            assert "links" not in item or "-links" not in fields


ONE_ELEMENT = {
    "op": "t_intersects",
    "args": [{"property": "datetime"}, {"interval": ["2024-06-19T00:00:00Z"]}],
}
ONE_ELEMENT_TEXT = "T_INTERSECTS(datetime, INTERVAL('2024-06-19T00:00:00Z'))"
CQL2 = [
    ("search_items", {"filter": ONE_ELEMENT, "filter_lang": "cql2-json"}, ("filter", "interval")),
    ("search_items", {"filter": ONE_ELEMENT_TEXT}, ("filter", "interval")),
    ("search_items", {"filter": ONE_ELEMENT, "detail": "count"}, ("filter", "interval")),
    ("save_search", {"search": {"filter": ONE_ELEMENT, "filter_lang": "cql2-json"}}, ("filter", "interval")),
]


def test_an_interval_of_one_element_is_one_line(harness, good, tmp_path):  # noqa: F811
    """On the sample (a local catalog) and on a stac-geoparquet file (CQL2 made SQL for DuckDB:
    it failed bare there)."""
    geoparquet = Harness(tmp_path / "workspace", catalog=good)
    try:
        for where in (harness, geoparquet):
            failures = _check(where, CQL2)
            assert not failures, "\n".join(failures)
    finally:
        geoparquet.close()


def test_an_id_property_naming_the_geometry_column_is_one_line(tmp_path):
    """A GeoParquet zones file, small and at region scale (more zones than
    limits.zonal_region_zones), run and dry run."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    k = np.arange(50)
    x, y = 13.6 + (k % 10) * 0.002, 45.92 + (k // 10) * 0.002
    zones = geopandas.GeoDataFrame(
        {"name": [f"f{i}" for i in k]}, geometry=shapely.box(x, y, x + 0.0015, y + 0.0015), crs=4326
    )
    zones.to_parquet(workspace / "zones.parquet")
    arguments = {"geometries": "zones.parquet", "search": S2_JUNE, "id_property": "geometry"}
    corpus = [("zonal_stats", arguments, ("id_property", "geometry column"))]
    corpus.append(("zonal_stats", {**arguments, "dry_run": True}, ("id_property", "geometry column")))
    for region_zones in (1000, 10):  # (50 zones: an ordinary call; then region scale)
        harness = Harness(workspace, limits={"job_timeout_s": 60, "zonal_region_zones": region_zones})
        try:
            failures = _check(harness, corpus)
            assert not failures, "\n".join(failures)
        finally:
            harness.close()


REFUSED_FILES = r"""
import gc, shutil, sys
from pathlib import Path

import geopandas, numpy as np, shapely
from test_fuzz import Harness

def rss_mb():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) / 1024

workspace = Path(sys.argv[1])
workspace.mkdir(parents=True)
t = np.linspace(0, 2 * np.pi, 1_000_000, endpoint=False)
big = shapely.Polygon(np.c_[13.6 + 0.01 * np.cos(t), 45.92 + 0.01 * np.sin(t)])
geopandas.GeoDataFrame({"name": ["big"]}, geometry=[big], crs=4326).to_parquet(workspace / "z0.parquet")
for k in range(1, 8):
    shutil.copy(workspace / "z0.parquet", workspace / f"z{k}.parquet")
del big, t
harness = Harness(workspace)
search = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-06-30"}
square = {"type": "Polygon", "coordinates": [[[13.6, 45.92], [13.61, 45.92], [13.61, 45.93], [13.6, 45.92]]]}
assert not harness.call("zonal_stats", {"geometries": square, "search": search}).is_error  # libraries loaded
gc.collect()
before = rss_mb()
for k in range(8):
    result = harness.call("zonal_stats", {"geometries": f"z{k}.parquet", "search": search})
    assert result.is_error and "max_zone_vertices" in result.content[0].text, result.content[0].text[:200]
gc.collect()
print(rss_mb() - before)
harness.close()
"""


def test_memory_is_returned_after_refused_zones_files(tmp_path):
    """Eight GeoParquet files of one 10^6-vertex zone, each refused (limits.max_zone_vertices):
    the server process (a fresh child, Arrow on the system allocator as the server runs it) is
    not left larger - it kept ~180 MB before (the reading's frames held by the error, and what
    glibc's heap kept of them)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests), os.environ.get("PYTHONPATH", "")]),
        "ARROW_DEFAULT_MEMORY_POOL": "system",
    }
    done = subprocess.run(
        [sys.executable, "-c", REFUSED_FILES, str(tmp_path / "workspace")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tests,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    grew_mb = float(done.stdout.strip().splitlines()[-1])
    assert grew_mb < 40, f"the process grew {grew_mb:.0f} MB over eight refused files"


def test_per_day_over_200_explicit_same_day_items(tmp_path):
    """200 items of one solar day given as an explicit list (copies of a sample item, one
    FeatureCollection catalog): one row per zone and day, the items capped with a note - one
    answer, never a bare error."""
    import copy
    import shutil
    from pathlib import Path

    import stac_gdal_mcp

    source = Path(stac_gdal_mcp.__file__).parent / "data/sample/sentinel-2-l2a/S2A_33TUL_20240619_0_L2A"
    folder = shutil.copytree(source, tmp_path / "catalog" / "scene")
    item = json.loads((folder / f"{source.name}.json").read_text())
    for asset in item["assets"].values():
        asset["href"] = str(folder / Path(asset["href"]).name)
    item["links"] = []
    items = [{**copy.deepcopy(item), "id": f"S2A_SAME_DAY_{k:03d}"} for k in range(200)]
    catalog = tmp_path / "catalog" / "items.json"
    catalog.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    harness = Harness(tmp_path / "workspace", catalog=catalog)
    try:
        refs = [{"collection_id": "sentinel-2-l2a", "item_id": i["id"]} for i in items]
        for dry_run in (True, False):
            arguments = {"geometries": SQUARE, "search": {"items": refs}, "per": "day", "dry_run": dry_run}
            result = harness.call("zonal_stats", arguments)
            text = next(c.text for c in result.content if getattr(c, "text", None))
            assert not result.is_error, text[:300]
        answer = result.structured_content
        assert [row["date"] for row in answer["rows"]] == ["2024-06-19"]
        assert answer["rows"][0]["count"] > 0 and any("max_items" in n for n in answer.get("notes", []))
    finally:
        harness.close()
