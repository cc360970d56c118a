"""Zones as hostile input: zonal statistics' `geometries` are measured before they are
parsed or read (size, depth, count from a file's metadata, vertices), read under the job's time
limit, and every refusal is one line that quotes no server path and no unbounded echo.
Tool-level cases are in tests/test_hostile_inputs.py."""

from __future__ import annotations

import json
import math

import geopandas
import numpy as np
import pytest
import shapely
from shapely.geometry import box, mapping

from stac_gdal_mcp.errors import AccessDenied, InvalidArgument, LimitExceeded, StacGdalMcpError
from stac_gdal_mcp.operations.zonal.zones import read_zones
from stac_gdal_mcp.settings import LimitSettings

SQUARE = mapping(box(13.60, 45.92, 13.61, 45.93))


def _fc(*features) -> dict:
    return {"type": "FeatureCollection", "features": list(features)}


def _feature(geometry=SQUARE, **fields) -> dict:
    return {"type": "Feature", "geometry": geometry, "properties": fields.pop("properties", {}), **fields}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return tmp_path_factory.mktemp("zones") / "workspace"


@pytest.fixture(scope="module")
def many_zones(workspace):
    """A GeoParquet of 80,000 small fields, written once."""
    workspace.mkdir(parents=True, exist_ok=True)
    k = np.arange(80_000)
    x, y = 13.0 + (k % 400) * 0.001, 45.0 + (k // 400) * 0.001
    fields = geopandas.GeoDataFrame(
        {"name": [f"field {i}" for i in k]}, geometry=shapely.box(x, y, x + 0.0008, y + 0.0008), crs=4326
    )
    fields.to_parquet(workspace / "fields.parquet")
    return fields


def test_json_text_100000_levels_deep_is_refused_before_parsing():
    for text in ("[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000):
        with pytest.raises(InvalidArgument, match="max_geometries_depth=20"):
            read_zones(text)


def test_nested_geometry_collections_are_refused_by_depth():
    nested = SQUARE
    for _ in range(70):
        nested = {"type": "GeometryCollection", "geometries": [nested]}
    with pytest.raises(InvalidArgument, match="max_geometries_depth"):
        read_zones(nested)
    with pytest.raises(InvalidArgument, match="max_geometries_depth"):
        read_zones(json.dumps(nested))
    one = {"type": "GeometryCollection", "geometries": [SQUARE]}  # one level is ordinary GeoJSON
    assert read_zones(one).geometries[0].equals(shapely.geometry.shape(SQUARE))


def test_inline_geojson_over_its_byte_limit_is_refused_before_parsing():
    squares = [
        _feature(mapping(box(13 + i * 1e-4, 45, 13 + i * 1e-4 + 5e-5, 45.0001))) for i in range(20_000)
    ]
    collection = _fc(*squares)
    size = len(json.dumps(collection, separators=(",", ":")))
    assert size > LimitSettings().max_geometries_bytes
    for given in (collection, json.dumps(collection)):
        with pytest.raises(LimitExceeded, match="limits.max_geometries_bytes=2,097,152") as error:
            read_zones(given)
        assert "file in the workspace" in str(error.value)
    assert len(read_zones(_fc(*squares[:1000]))) == 1000  # under the limit: read


def test_a_zone_over_the_vertex_limit_is_refused(workspace):
    ring = [
        (13.6 + 0.01 * math.cos(t), 45.93 + 0.01 * math.sin(t)) for t in np.linspace(0, 2 * math.pi, 300_000)
    ]
    zone = shapely.Polygon(ring)
    workspace.mkdir(parents=True, exist_ok=True)
    geopandas.GeoDataFrame({"name": ["round"]}, geometry=[zone], crs=4326).to_parquet(
        workspace / "round.parquet"
    )
    with pytest.raises(
        LimitExceeded, match=r"zone 0 has 300,000 vertices, more than limits.max_zone_vertices=100,000"
    ):
        read_zones("round.parquet", roots=[workspace])
    assert (
        len(read_zones("round.parquet", roots=[workspace], limits=LimitSettings(max_zone_vertices=300_000)))
        == 1
    )


def test_the_zone_count_of_a_file_is_checked_from_its_metadata_before_reading(workspace, many_zones):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(workspace / "fields.parquet")
    garbage = pa.array([b"not wkb"] * len(table), type=pa.binary())  # no geometry can be read
    broken = table.set_column(table.schema.get_field_index("geometry"), "geometry", garbage)
    pq.write_table(
        broken.replace_schema_metadata(table.schema.metadata), workspace / "broken-geometry.parquet"
    )
    with pytest.raises(LimitExceeded, match="has 80,000 features, more than limits.max_zones=50,000"):
        read_zones("broken-geometry.parquet", roots=[workspace], limits=LimitSettings(max_zones=50_000))


def test_reading_a_large_file_stops_at_the_job_time_limit(workspace, many_zones):
    with pytest.raises(LimitExceeded, match="job_timeout_s"):
        read_zones("fields.parquet", roots=[workspace], limits=LimitSettings(job_timeout_s=1e-6))
    zones = read_zones("fields.parquet", roots=[workspace], id_property="name")
    assert len(zones) == 80_000 and zones.ids[:2] == ("field 0", "field 1")
    assert zones.geometries[123].equals(many_zones.geometry.iloc[123])


@pytest.mark.parametrize(
    "given, words",
    [
        ('{"type":"Polygon","coordinates":[[[13.6,45.9],[NaN,45.9],[13.7,46],[13.6,45.9]]]}', "finite"),
        ('{"type":"Polygon","coordinates":[[[13.6,45.9],[Infinity,45.9],[13.7,46],[13.6,45.9]]]}', "finite"),
        (_fc(_feature(id=[1, 2])), "its id is 'list'"),
        (_fc(_feature(id={"a": 1})), "its id is 'dict'"),
    ],
)
def test_bad_vertices_and_ids_are_one_line(given, words):
    with pytest.raises(InvalidArgument, match=words) as error:
        read_zones(given)
    assert "\n" not in str(error.value)


def test_an_id_property_naming_an_object_is_one_line():
    with pytest.raises(InvalidArgument, match="property 'name' is 'dict'"):
        read_zones(_fc(_feature(properties={"name": {"a": 1}})), id_property="name")


def test_features_with_and_without_ids_give_text_ids():
    zones = read_zones(_fc(_feature(id="vineyard"), _feature(mapping(box(13.61, 45.92, 13.62, 45.93)))))
    assert zones.ids == ("vineyard", "1")
    assert read_zones(_fc(_feature(id=7), _feature())).ids == (7, 1)  # numbers alone stay numbers


def test_echoes_are_capped():
    long = "x" * 100_000
    with pytest.raises(InvalidArgument) as error:
        read_zones(_fc(_feature()), id_property=long)
    assert len(str(error.value)) < 300
    bowtie = {
        "type": "Polygon",
        "coordinates": [[[13, 45], [13.01, 45.01], [13.01, 45], [13, 45.01], [13, 45]]],
    }
    zones = read_zones(_fc(_feature(bowtie, id="i" * 99_000)))
    assert "repaired" in zones.notes[0] and len(zones.notes[0]) < 400


def test_paths_are_named_as_the_workspace_lists_them(workspace, tmp_path):
    workspace.mkdir(parents=True, exist_ok=True)
    secret = tmp_path / "secret.geojson"
    secret.write_text(json.dumps(_fc(_feature())))
    (workspace / "link.geojson").symlink_to(secret)
    (workspace / "broken.gpkg").write_bytes(b"not a geopackage")
    (workspace / "broken.parquet").write_bytes(b"PAR1 not parquet")
    cases = [
        ("../../etc/passwd.geojson", AccessDenied, "'../../etc/passwd.geojson' is outside"),
        ("link.geojson", AccessDenied, "'link.geojson' is outside"),
        ("a\x00b.geojson", InvalidArgument, "NUL"),
        ("~nosuchuser-h5/x.geojson", InvalidArgument, "no known home folder"),
        ("broken.gpkg", InvalidArgument, "'broken.gpkg' cannot be read"),
        ("broken.parquet", InvalidArgument, "'broken.parquet' cannot be read"),
    ]
    for given, error_type, words in cases:
        with pytest.raises(error_type, match=words) as error:
            read_zones(given, roots=[workspace])
        message = str(error.value)
        assert str(workspace) not in message and str(tmp_path) not in message and "\n" not in message, message


def test_only_paths_under_an_allowed_folder_lose_it():
    from stac_gdal_mcp.catalogs.security import scrubbed

    message = "cannot open /var/tmp/ws/a.gpkg nor /tmp/ws/b.gpkg in /tmp/ws"
    assert scrubbed(message, ["/tmp/ws"]) == "cannot open /var/tmp/ws/a.gpkg nor b.gpkg in ."


def test_a_file_in_a_crs_off_the_earth_is_one_line(workspace):
    workspace.mkdir(parents=True, exist_ok=True)
    frame = geopandas.GeoDataFrame({"name": ["crater"]}, geometry=[box(0, 0, 1, 1)], crs="IAU_2015:49900")
    frame.to_file(workspace / "mars.gpkg")
    with pytest.raises(
        InvalidArgument, match="'mars.gpkg' has a CRS that cannot be brought to WGS84"
    ) as error:
        read_zones("mars.gpkg", roots=[workspace])
    assert "Mars" in str(error.value)


def test_every_refusal_is_a_library_error(workspace):
    """Nothing escapes as a bare exception (the tool's 'Error calling tool')."""
    hostile = [
        {"type": "Polygon", "coordinates": "x"},
        {"type": "Feature"},
        [1],
        3,
        "{",
        {"type": "FeatureCollection", "features": 5},
    ]
    for given in hostile:
        with pytest.raises(StacGdalMcpError):
            read_zones(given, roots=[workspace])


async def test_a_dry_run_is_bounded_by_the_job_time_limit(tmp_path):
    """zonal_stats's dry run (headers and tile indexes of every item) stops at
    limits.job_timeout_s like the run (it had no limit)."""
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    settings = load_settings(
        workspace=tmp_path / "ws",
        builtin_catalogs=True,
        default_catalog="sample",
        limits={"job_timeout_s": 1e-6},
    )
    arguments = {"geometries": SQUARE, "search": {"collections": ["sentinel-2-l2a"]}, "dry_run": True}
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("zonal_stats", arguments, raise_on_error=False)
    text = result.content[0].text
    assert result.is_error and "limits.job_timeout_s" in text and "\n" not in text, text[:300]


@pytest.mark.parametrize("encoding", ["WKB", "geoarrow"])
def test_a_geoparquet_in_another_crs_and_encoding_reads_as_geopandas_does(workspace, encoding):
    workspace.mkdir(parents=True, exist_ok=True)
    fields = geopandas.GeoDataFrame(
        {"name": ["a", "b"]},
        geometry=[box(400_000, 5_000_000, 400_500, 5_000_400), box(401_000, 5_000_000, 401_300, 5_000_900)],
        crs=32633,
    )
    fields.to_parquet(workspace / f"utm-{encoding}.parquet", geometry_encoding=encoding)
    zones = read_zones(f"utm-{encoding}.parquet", roots=[workspace], id_property="name")
    want = fields.to_crs(4326)
    assert zones.ids == ("a", "b")
    for got, expected in zip(zones.geometries, want.geometry):
        assert got.equals_exact(expected, tolerance=1e-9)
