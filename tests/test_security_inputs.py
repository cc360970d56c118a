"""Hostile structured arguments: CRSs that reference grids, files or
URLs, CRSs that cannot describe a raster grid, and arguments nested or sized to exhaust the
parser - each refused before any work, with one line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fastmcp import Client
from helpers import scaled

from stac_gdal_mcp.errors import InvalidArgument
from stac_gdal_mcp.processing.grids import parse_crs

SAMPLE_RED = (
    Path(__file__).parents[1] / "stac_gdal_mcp/data/sample/sentinel-2-l2a/S2A_33TUL_20240619_0_L2A/red.tif"
)

ACCEPTED = [
    "EPSG:4326",
    "epsg:32633",
    4326,
    "OGC:CRS84",
    "ESRI:102100",
    "urn:ogc:def:crs:EPSG::3857",
    "http://www.opengis.net/def/crs/EPSG/0/4326",
    "+proj=utm +zone=33 +datum=WGS84 +units=m +no_defs",
    "+proj=longlat +ellps=GRS80 +towgs84=1,2,3,0,0,0,0",  # a Helmert shift, no grid
]


@pytest.mark.parametrize("value", ACCEPTED)
def test_authority_codes_wkt_projjson_and_plain_proj_strings_are_accepted(value):
    from pyproj import CRS

    crs = parse_crs(value)
    assert crs is not None
    # their WKT and PROJJSON forms too
    pj = CRS.from_user_input(crs.to_wkt())
    assert parse_crs(pj.to_wkt()) is not None
    assert parse_crs(pj.to_json()) is not None


GRID_OR_FILE = [
    "+proj=longlat +datum=WGS84 +nadgrids=/etc/passwd",
    "+proj=longlat +datum=WGS84 +nadgrids=@http://example.com/grid.tif",
    "+proj=longlat +datum=WGS84 +nadgrids=@null",
    "+proj=longlat +datum=WGS84 +geoidgrids=egm96_15.gtx",
    "+init=epsg:4326",
    "+proj=utm +zone=33 +init=/etc/passwd",
    "https://example.com/crs.json",
    "file:///etc/passwd",
    'BOUNDCRS[SOURCECRS[GEOGCRS["x",DATUM["d",ELLIPSOID["GRS 1980",6378137,298.257222101]],'
    'CS[ellipsoidal,2],AXIS["lat",north],AXIS["lon",east],ANGLEUNIT["degree",0.0174532925199433]]],'
    'TARGETCRS[GEOGCRS["WGS 84",DATUM["World Geodetic System 1984",ELLIPSOID["WGS 84",6378137,298.257223563]],'
    'CS[ellipsoidal,2],AXIS["lat",north],AXIS["lon",east],ANGLEUNIT["degree",0.0174532925199433]]],'
    'ABRIDGEDTRANSFORMATION["t",METHOD["NTv2"],PARAMETERFILE["Latitude and longitude difference file","/etc/passwd"]]]',
    'GEOGCS["x",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],PRIMEM["Greenwich",0],'
    'UNIT["degree",0.0174532925199433],EXTENSION["PROJ4","+proj=longlat +nadgrids=/etc/passwd"]]',
]


@pytest.mark.parametrize("value", GRID_OR_FILE)
def test_crs_referring_to_grids_files_or_urls_is_refused(value):
    with pytest.raises(InvalidArgument) as info:
        parse_crs(value)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400
    assert message.count("/etc/passwd") <= 1  # quoted once at most


def test_bound_crs_with_a_grid_in_projjson_is_refused():
    from pyproj import CRS

    # PROJ builds this bound CRS without reading the grid; its PROJJSON names the file
    doc = CRS.from_user_input("+proj=longlat +datum=WGS84 +nadgrids=ntv2_0.gsb").to_json()
    with pytest.raises(InvalidArgument, match="grid, file or URL"):
        parse_crs(doc)


@pytest.mark.parametrize(
    "value, hint",
    [
        ("EPSG:4978", "Geocentric"),
        ("+proj=geocent +datum=WGS84", "Geocentric"),
        ("EPSG:5773", "Vertical"),
        ("EPSG:4979", "EPSG:4326"),
        ("EPSG:32633+5773", "EPSG:32633"),
        ('LOCAL_CS["site",LOCAL_DATUM["d",0],UNIT["metre",1],AXIS["x",EAST],AXIS["y",NORTH]]', "Engineering"),
    ],
)
def test_crs_that_cannot_describe_a_raster_grid_is_refused(value, hint):
    with pytest.raises(InvalidArgument) as info:
        parse_crs(value)
    assert hint in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("value", ["", "hello", "EPSG:999999", "x" * 60_000, "{not json", "[[[["])
def test_garbage_crs_is_refused_with_one_line(value):
    with pytest.raises(InvalidArgument) as info:
        parse_crs(value)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


async def test_reproject_refuses_bad_dst_crs_before_reading(make_settings, build, tmp_path):
    import shutil

    settings = make_settings()
    settings.workspace.mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE_RED, settings.workspace / "red.tif")
    href = str(settings.workspace / "red.tif")
    async with Client(build(settings)) as client:
        for dst_crs in ("+proj=longlat +nadgrids=@http://169.254.169.254/x", "EPSG:4978"):
            result = await client.call_tool(
                "reproject_asset", {"href": href, "dst_crs": dst_crs}, raise_on_error=False
            )
            assert result.is_error and "\n" not in result.content[0].text
        ok = await client.call_tool("reproject_asset", {"href": href, "dst_crs": "EPSG:4326"})
        assert ok.structured_content


def _timed(fn):
    started = time.monotonic()
    try:
        fn()
    finally:
        elapsed = time.monotonic() - started
    return elapsed


def _nested(op: str, depth: int) -> dict:
    node: dict = {"op": "=", "args": [{"property": "platform"}, "x"]}
    for _ in range(depth):
        node = {"op": op, "args": [node]}
    return node


def _json_checks():
    from stac_gdal_mcp.discovery import params as p

    return p


@pytest.mark.parametrize("depth", [40, 3000])
def test_deeply_nested_cql2_json_is_refused_at_once(depth):
    p = _json_checks()
    text = '{"op":"not","args":[' * depth + '{"op":"=","args":[{"property":"p"},1]}' + "]}" * depth
    for value in (_nested("not", depth), text):
        assert "nested" in refused_at_once(p.cql2_filter, value, "cql2-json")


def refused_at_once(check, *arguments) -> str:
    """The message of the InvalidArgument `check(*arguments)` raises: one line, within scaled(1) s."""
    started = time.monotonic()
    with pytest.raises(InvalidArgument) as info:
        check(*arguments)
    assert time.monotonic() - started < scaled(1) and "\n" not in str(info.value)
    return str(info.value)


def test_nested_cql2_text_is_refused_at_once():
    p = _json_checks()
    for text in ("NOT " * 3000 + "platform = 'x'", "(" * 3000 + "platform = 'x'" + ")" * 3000):
        refused_at_once(p.cql2_filter, text)


def test_nested_query_and_geometry_collections_are_refused():
    p = _json_checks()
    query: dict = {"lt": 1}
    for _ in range(500):
        query = {"x": query}
    with pytest.raises(InvalidArgument):
        p.query({"eo:cloud_cover": query})
    geometry: dict = {"type": "Point", "coordinates": [0, 0]}
    for _ in range(300):
        geometry = {"type": "GeometryCollection", "geometries": [geometry]}
    text = (
        '{"type":"GeometryCollection","geometries":[' * 3000
        + '{"type":"Point","coordinates":[0,0]}'
        + "]}" * 3000
    )
    for value in (geometry, text):
        refused_at_once(p.intersects, value)


def test_huge_arguments_are_refused():
    p = _json_checks()
    wide = {"op": "and", "args": [{"op": "=", "args": [{"property": "p"}, i]} for i in range(100_000)]}
    with pytest.raises(InvalidArgument, match="too large|too many"):
        p.cql2_filter(wide, "cql2-json")
    with pytest.raises(InvalidArgument, match="too large|too many"):
        p.json_text("[" + ",".join(["1"] * 2_000_000) + "]", "ids")
    polygon = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]] * 50_000]}
    with pytest.raises(InvalidArgument, match="too large|too many"):
        p.intersects(polygon)


async def test_nested_arguments_through_the_server_answer_quickly(make_settings, build):
    settings = make_settings(default_catalog="sample")
    deep = '{"op":"not","args":[' * 5000 + '{"op":"=","args":[{"property":"p"},1]}' + "]}" * 5000
    geometry: dict = {"type": "Point", "coordinates": [0, 0]}
    for _ in range(60):
        geometry = {"type": "GeometryCollection", "geometries": [geometry]}
    query: dict = {"lt": 1}
    for _ in range(60):
        query = {"x": query}
    async with Client(build(settings)) as client:
        for args in (
            {"filter": deep, "filter_lang": "cql2-json"},
            {"filter": "NOT " * 5000 + "platform = 'x'"},
            {"intersects": geometry},
            {"intersects": json.dumps(geometry)},
            {"query": {"eo:cloud_cover": query}},
            {"query": json.dumps({"eo:cloud_cover": query})},
        ):
            started = time.monotonic()
            result = await client.call_tool("search_items", args, raise_on_error=False)
            assert time.monotonic() - started < scaled(2), list(args)
            assert result.is_error and "\n" not in result.content[0].text, result.content[0].text
        ok = await client.call_tool("search_items", {"limit": 1})
        assert ok.structured_content["returned"] == 1
