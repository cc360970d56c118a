"""A corpus of hostile inputs that libraries raise on, sent to every tool that takes
them, through an in-memory client on the bundled sample catalog. Each must answer one clear line naming the argument (never fastmcp's bare "Error
calling tool"; a dry run may instead say WOULD BE REFUSED), and nothing is left half-written (the
checks of tests/test_fuzz.py). Items without geometry: tests/test_faults_geometry.py.

stac-geoparquet catalogs: CQL2 operators with too few or too many arguments, and files
with the wrong schema (built by tests/test_geoparquet_hostile.py's fixtures), through search_items
and save_search.

Also: a composite over the whole world is refused at once by its own limits, and creation options
are checked against the driver's own list (GDAL's DMD_CREATIONOPTIONLIST).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_fuzz import Harness, _workspace_consistent, problems_of
from test_geoparquet_hostile import TOO_FEW_OR_MANY, good, wrong  # noqa: F401 (its files: fixtures)

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


# zonal_stats's zones: one line each, no workspace path, no unbounded echo
SQUARE = {"type": "Polygon", "coordinates": [[[13.6, 45.92], [13.61, 45.92], [13.61, 45.93], [13.6, 45.92]]]}
S2_JUNE = {**S2, "datetime": "2024-06-01/2024-06-30"}


def _nested(levels: int) -> dict:
    geometry = SQUARE
    for _ in range(levels):
        geometry = {"type": "GeometryCollection", "geometries": [geometry]}
    return geometry


ZONAL = [
    (
        "zonal_stats",
        {"geometries": '{"type":"Polygon","coordinates":[[[13.6,45.9],[NaN,45.9],[13.7,46],[13.6,45.9]]]}'},
        "finite",
    ),
    (
        "zonal_stats",
        {"geometries": {"type": "Feature", "id": [1, 2], "properties": {}, "geometry": SQUARE}},
        "id",
    ),
    (
        "zonal_stats",
        {
            "geometries": {"type": "Feature", "properties": {"n": {"a": 1}}, "geometry": SQUARE},
            "id_property": "n",
        },
        "id_property",
    ),
    ("zonal_stats", {"geometries": _nested(70)}, "max_geometries_depth"),
    ("zonal_stats", {"geometries": "[" * 100_000 + "]" * 100_000}, "max_geometries_depth"),
    (
        "zonal_stats",
        {
            "geometries": {"type": "Feature", "properties": {}, "geometry": SQUARE},
            "id_property": "x" * 100_000,
        },
        "id_property",
    ),
    ("zonal_stats", {"geometries": "stac-gdal://outputs/" + "x" * 5000}, "no output"),
    ("zonal_stats", {"geometries": "~nosuchuser-h5/x.geojson"}, "geometries"),
    ("zonal_stats", {"geometries": "a\x00b.geojson"}, "NUL"),
    ("zonal_stats", {"geometries": "../../etc/passwd.geojson"}, "outside"),
    ("zonal_stats", {"geometries": "link.geojson"}, "outside"),
    ("zonal_stats", {"geometries": "mars.gpkg"}, "WGS84"),
    ("zonal_stats", {"geometries": "broken.parquet"}, "broken.parquet"),
    ("zonal_stats", {"geometries": "broken.gpkg"}, "broken.gpkg"),
    ("zonal_stats", {"geometries": "mars.gpkg", "dry_run": True}, "WGS84"),
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = Harness(tmp_path_factory.mktemp("hostile") / "workspace")
    yield h
    h.close()


def _check(harness: Harness, corpus) -> list[str]:
    """The failures of a corpus; its word may be several (a tuple), each to be named."""
    failures = []
    for name, arguments, word in corpus:
        result = harness.call(name, arguments)
        text = result.content[0].text if result.content else ""
        problems = problems_of(harness, name, arguments, result)
        words = (word,) if isinstance(word, str) else word
        if not result.is_error and "WOULD BE REFUSED" not in text:  # a dry run says what it would refuse
            problems.append("accepted")
        else:
            problems += [f"does not name {w!r}" for w in words if w.lower() not in text.lower()]
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


def test_hostile_zones_answer_one_clear_line(harness, tmp_path):
    import geopandas
    from shapely.geometry import box

    workspace = harness.workspace
    workspace.mkdir(parents=True, exist_ok=True)
    secret = tmp_path / "secret.geojson"
    secret.write_text(json.dumps({"type": "Feature", "properties": {}, "geometry": SQUARE}))
    (workspace / "link.geojson").unlink(missing_ok=True)
    (workspace / "link.geojson").symlink_to(secret)
    (workspace / "broken.parquet").write_bytes(b"PAR1 not parquet")
    (workspace / "broken.gpkg").write_bytes(b"not a geopackage")
    mars = geopandas.GeoDataFrame({"name": ["crater"]}, geometry=[box(0, 0, 1, 1)], crs="IAU_2015:49900")
    mars.to_file(workspace / "mars.gpkg")
    corpus = [(n, {**a, "search": S2_JUNE}, w) for n, a, w in ZONAL]
    (workspace / "broken.tif").write_bytes(b"II*\x00 not a tiff")  # GDAL quotes the path it opened
    broken = str(workspace / "broken.tif")
    corpus += [
        ("inspect_asset", {"href": broken}, "broken.tif"),
        ("preview", {"href": broken}, "broken.tif"),
        ("convert_asset", {"href": broken, "output_format": "COG"}, "broken.tif"),
    ]
    failures = _check(harness, corpus)
    for name, arguments, _ in corpus:  # no echo of the long arguments
        text = harness.call(name, arguments).content[0].text
        assert len(text) < 1000, (json.dumps(arguments)[:100], len(text))
    assert not failures, "\n".join(failures)


def test_zones_with_and_without_ids_are_measured_and_saved(harness):
    """An ordinary input: one field named, one not; the ids become text (one column type)."""
    second = {
        "type": "Polygon",
        "coordinates": [[[13.61, 45.92], [13.62, 45.92], [13.62, 45.93], [13.61, 45.92]]],
    }
    features = [
        {"type": "Feature", "id": "vineyard", "properties": {}, "geometry": SQUARE},
        {"type": "Feature", "properties": {}, "geometry": second},
    ]
    result = harness.call(
        "zonal_stats", {"geometries": {"type": "FeatureCollection", "features": features}, "search": S2_JUNE}
    )
    assert not result.is_error, result.content[0].text[:300]
    answer = result.structured_content
    assert {row["zone_id"] for row in answer["rows"]} == {"vineyard", "1"}
    assert answer["table"]["id"]


def test_notes_about_long_zone_ids_are_capped(harness):
    """Zones whose ids are 99,000 characters and whose rings need repair: the notes quote each id
    shortened (they quoted it whole: a 1.5 MB answer)."""
    features = [
        {
            "type": "Feature",
            "id": f"{k}" + "i" * 99_000,
            "properties": {},
            "geometry": {  # a bow tie: repaired with make_valid, with a note naming the zone
                "type": "Polygon",
                "coordinates": [
                    [
                        [13.6, 45.92 + k * 0.01],
                        [13.61, 45.93 + k * 0.01],
                        [13.61, 45.92 + k * 0.01],
                        [13.6, 45.93 + k * 0.01],
                        [13.6, 45.92 + k * 0.01],
                    ]
                ],
            },
        }
        for k in range(3)
    ]
    result = harness.call(
        "zonal_stats", {"geometries": {"type": "FeatureCollection", "features": features}, "search": S2_JUNE}
    )
    assert not result.is_error, result.content[0].text[:300]
    notes = result.structured_content.get("notes", [])
    assert sum("repaired" in n for n in notes) == 3 and len(json.dumps(notes)) < 3000, len(json.dumps(notes))


# stac-geoparquet catalogs: each file of tests/test_geoparquet_hostile.py is the
# catalog of its own server (the files are built once for this module)
WORLD = [-180, -90, 180, 90]


@pytest.fixture(scope="module")
def geoparquet_harnesses(good, wrong, tmp_path_factory):  # noqa: F811 (the imported fixtures)
    root = tmp_path_factory.mktemp("geoparquet")
    made = {}
    try:
        for name, path in {"good": good, **wrong}.items():
            made[name] = Harness(root / f"workspace-{name}", catalog=path)
        yield made
    finally:
        for h in made.values():
            h.close()


def test_cql2_operators_with_the_wrong_number_of_arguments_answer_one_clear_line(geoparquet_harnesses):
    harness = geoparquet_harnesses["good"]
    corpus = []
    for op, cql2 in TOO_FEW_OR_MANY.items():
        words = ("filter", f"'{op}' takes")
        corpus += [
            ("search_items", {"filter": cql2, "filter_lang": "cql2-json"}, words),
            ("search_items", {"filter": cql2}, words),
            ("save_search", {"search": {"filter": cql2, "filter_lang": "cql2-json"}}, words),
        ]
    failures = _check(harness, corpus)
    assert not failures, "\n".join(failures)
    assert not _workspace_consistent(harness)


CUTTING = {"bbox": [15, 30, 20, 40]}  # crosses the footprints of the Sentinel-2 items of `good`
TRIANGLE = {
    "intersects": {"type": "Polygon", "coordinates": [[[-180, -90], [180, -90], [180, 90], [-180, -90]]]}
}


def _count_reads_no_footprint(harness: Harness, path: Path) -> list[str]:
    """A count with no spatial filter reads no geometry: garbage WKB does not make it fail, and
    it is the file's number of rows."""
    import pyarrow.parquet as pq

    result = harness.call("search_items", {"detail": "count"})
    text = result.content[0].text if result.content else ""
    rows = pq.read_metadata(path).num_rows
    if result.is_error or not text.startswith(f"{rows} items (exact)"):
        return [f"search_items {{'detail': 'count'}}: not the file's {rows} rows: {text[:200]!r}"]
    return []


def test_geoparquet_files_of_the_wrong_schema_answer_one_clear_line(geoparquet_harnesses, wrong):  # noqa: F811
    """Named by the file's name and its column, never by the server's path to it."""
    failures = []
    for name, path in wrong.items():
        harness = geoparquet_harnesses[name]
        words = (path.name, "not WKB" if name == "bad-wkb" else f"column '{name}'")
        corpus = [
            ("search_items", {}, words),
            ("search_items", {"bbox": WORLD}, words),  # the footprints
            ("save_search", {}, words),
            ("save_search", {"bbox": WORLD}, words),
        ]
        if name == "bad-wkb":  # a count whose footprints are read: a bbox cutting them, a polygon
            corpus += [("search_items", {"detail": "count", **s}, words) for s in (CUTTING, TRIANGLE)]
            failures += [f"{name}: {f}" for f in _count_reads_no_footprint(harness, path)]
        else:
            corpus.append(("search_items", {"detail": "count"}, words))
        failures += [f"{name}: {f}" for f in _check(harness, corpus)]
        for tool, arguments, _ in corpus:
            text = harness.call(tool, arguments).content[0].text
            if str(path.parent) in text or str(path.parent.resolve()) in text:
                failures.append(f"{name}: {tool} {arguments} shows the server's path: {text[:200]!r}")
        failures += [f"{name}: {p}" for p in _workspace_consistent(harness)]
    assert not failures, "\n".join(failures)
