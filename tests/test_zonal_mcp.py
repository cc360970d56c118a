"""The zonal_stats tool, as a client calls it (fastmcp Client), on the bundled sample catalog.

What the tool answers is compared with what the library gives (`Session.zonal_stats`, whose
numbers tests/test_zonal.py checks against exactextract on local files), with the saved
GeoParquet read back by geopandas, and with the zones' values worked out here from the table
(the latest value of the first statistic per zone). The map app draws the zones: the view data
in Python, and in Chromium a zone's fill is the colour of the ramp the docs give (the test's own
copy of it) for its value.
"""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest
from fastmcp import Client
from helpers import layered

# the map app's browser fixtures and helpers (pytest takes the fixtures from this import)
from map_pixels import Projection, browser, color_near, open_with_fragment, page, screenshot, served  # noqa: F401

from stac_gdal_mcp import Session
from stac_gdal_mcp.maps import build_map_view
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.server.map_app import VIEW_META
from stac_gdal_mcp.settings import load_settings


def field(zone_id, west, south, east, north):
    ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
    return {"type": "Feature", "id": zone_id, "properties": {"name": f"field {zone_id}"},
            "geometry": {"type": "Polygon", "coordinates": [ring]}}  # fmt: skip


# fields west of Nova Gorica, inside every sample scene
FIELDS = {
    "type": "FeatureCollection",
    "features": [
        field("vineyard", 13.600, 45.927, 13.610, 45.935),
        field("meadow", 13.610, 45.920, 13.620, 45.927),
        field("orchard", 13.6035, 45.9205, 13.6085, 45.925),
    ],
}
SEARCH = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-09-30"}
RAMP = ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"]  # docs/analysis.md: the map's ramp


def dumped(result) -> dict:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def call(session: Session, arguments: dict) -> dict:
    """zonal_stats answered to a host that declares MCP Apps: the answer, and the map's view in
    its `_meta` (VIEW_META)."""
    from fastmcp.apps import UI_EXTENSION_ID
    from mcp.client.extension import advertise

    async with Client(build_server(session=session), extensions=[advertise(UI_EXTENSION_ID)]) as client:
        return dumped(await client.call_tool_mcp("zonal_stats", arguments))


@pytest.fixture
def session(tmp_path):
    with Session(load_settings(default_catalog="sample", workspace=tmp_path / "workspace")) as opened:
        yield opened


def latest_per_zone(frame, column: str) -> dict:
    """Per zone, the value of `column` in its latest row that has one (None when none has)."""
    found = {}
    for zone_id, rows in frame.groupby("zone_id", sort=False):
        known = rows.dropna(subset=[column]).sort_values("datetime")
        found[zone_id] = float(known[column].iloc[-1]) if len(known) else None
    return found


async def test_rows_equal_the_library_table_and_the_saved_geoparquet(session):
    import geopandas

    result = await call(session, {"geometries": FIELDS, "search": SEARCH})
    assert "isError" not in result or result["isError"] is False
    answer = result["structuredContent"]
    frame = session.zonal_stats(FIELDS, **SEARCH)
    assert answer["rows_total"] == len(frame) == len(answer["rows"]) == 3 * 5
    for row, (_, want) in zip(answer["rows"], frame.iterrows()):
        assert (row["zone_id"], row["item_ids"]) == (want["zone_id"], want["item_ids"])
        assert row["datetime"] == want["datetime"].strftime("%Y-%m-%dT%H:%M:%SZ")
        # rounded to the precision they carry: count to 0.1, fractions to 4 decimals, mean to 4 digits
        for column, places in (("count", 1), ("valid_fraction", 4), ("cloud_fraction", 4)):
            got = math.nan if row[column] is None else row[column]
            assert np.isclose(got, round(want[column], places), rtol=0, atol=1e-12, equal_nan=True), column
        if row["mean"] is not None:
            digits = 3 - math.floor(math.log10(abs(want["mean"])))
            assert row["mean"] == pytest.approx(round(want["mean"], digits), abs=1e-12)
        else:
            assert math.isnan(want["mean"])
    saved = geopandas.read_parquet(session.outputs.path(answer["table"]["id"]))
    assert list(saved.columns) == list(frame.columns) and saved.crs.to_epsg() == 4326
    for column in ("mean", "count", "valid_fraction"):
        assert np.allclose(saved[column], frame[column], equal_nan=True)
    assert list(saved["zone_id"]) == list(frame["zone_id"])
    assert saved.geometry.geom_equals_exact(frame.geometry, 1e-12).all()
    links = [c for c in result["content"] if c["type"] == "resource_link"]
    assert [link["uri"] for link in links] == [
        f"stac-gdal://outputs/{answer['table']['id']}/file",
        f"stac-gdal://outputs/{answer['table']['id']}",
    ]
    record = session.outputs.get(answer["table"]["id"])
    assert {link.href for link in record.links if link.rel == "derived_from"} >= {
        s.href for s in frame.provenance.sources
    }


async def test_per_day_returns_the_chart_and_the_zones_for_the_map(session):
    arguments = {
        "geometries": json.dumps(FIELDS),
        "search": SEARCH,
        "per": "day",
        "stats": ["median", "count"],
    }
    result = await call(session, arguments)
    (image,) = [c for c in result["content"] if c["type"] == "image"]
    assert image["mimeType"] == "image/png" and image["data"].startswith("iVBORw0KGgo")
    frame = session.zonal_stats(FIELDS, per="day", stats=["median", "count"], **SEARCH)
    assert [r["date"] for r in result["structuredContent"]["rows"]] == list(frame["date"])
    # the zones the client sent are not echoed in the answer: the map's view has them
    assert '"coordinates"' not in json.dumps(result["content"]) + json.dumps(result["structuredContent"])
    assert str(FIELDS["features"][0]["geometry"]["coordinates"][0][1][0]) not in result["content"][1]["text"]
    view = result["_meta"][VIEW_META]
    (layer,) = view["zones"]
    want = latest_per_zone(frame, "median")
    assert layer["stat"] == "median" and [z["id"] for z in layer["zones"]] == list(want)
    # (the map's values at the 4 significant digits the answer carries)
    assert {z["id"]: z["value"] for z in layer["zones"]} == pytest.approx(want, rel=5e-4)
    assert (layer["min"], layer["max"]) == pytest.approx((min(want.values()), max(want.values())), rel=5e-4)
    for zone, feature in zip(layer["zones"], FIELDS["features"]):
        ring = feature["geometry"]["coordinates"][0]
        assert zone["bbox"] == pytest.approx([ring[0][0], ring[0][1], ring[2][0], ring[2][1]], abs=1e-6)
    assert view["series"] == []  # a zonal table is not a time series of an AOI


async def test_no_client_gets_the_zones_back_not_even_from_a_task(session):
    """The zones' geometries travel only into the map's view: a client without MCP Apps, and a
    zonal_stats run as an MCP task, get neither them nor the map layer they came in."""
    import fastmcp_tasks  # noqa: F401  (before the Client: it declares the tasks extension)
    from fastmcp_tasks import call_tool_task

    from stac_gdal_mcp.models import MAP_LAYER_META

    arguments = {"geometries": FIELDS, "search": SEARCH}
    async with Client(build_server(session=session)) as client:
        plain = await client.call_tool_mcp("zonal_stats", arguments)
        task = await (await call_tool_task(client, "zonal_stats", arguments)).result()
    for result in (plain, task):
        meta = result.meta or {}
        assert MAP_LAYER_META not in meta and VIEW_META not in meta
        sent = json.dumps([b.model_dump(mode="json") for b in result.content] + [result.structured_content])
        assert '"coordinates"' not in sent, "a zone's geometry came back"
    assert task.structured_content["zone_layer"]["features"]  # the zones, by id and value


async def test_dry_run_estimates_and_writes_nothing(session):
    result = await call(session, {"geometries": FIELDS, "search": SEARCH, "dry_run": True})
    estimate = result["structuredContent"]
    assert estimate["operation"] == "zonal_stats"
    assert sorted(estimate["item_ids"]) == sorted(session.zonal_stats(FIELDS, **SEARCH)["item_ids"].unique())
    assert estimate["read_bytes"] > 0 and estimate["output"]["rows"] == 15
    assert session.outputs.list() == []


async def test_unknown_stat_is_one_line_listing_the_valid_ones(session):
    result = await call(session, {"geometries": FIELDS, "search": SEARCH, "stats": ["mean", "avg"]})
    assert result["isError"] is True
    (text,) = [c["text"] for c in result["content"] if c["type"] == "text"]
    assert "\n" not in text and "'avg'" in text and "majority" in text and "quantile" in text
    assert session.outputs.list() == []


async def test_zones_from_a_workspace_file_or_an_output_uri(session):
    path = session.workspace / "fields.geojson"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(FIELDS))
    by_name = await call(session, {"geometries": "fields.geojson", "search": SEARCH, "id_property": "name"})
    rows = by_name["structuredContent"]["rows"]
    assert [r["zone_id"] for r in rows[::5]] == ["field vineyard", "field meadow", "field orchard"]
    one_item = {**SEARCH, "ids": ["S2A_33TUL_20240619_0_L2A"]}
    table = (await call(session, {"geometries": FIELDS, "search": one_item}))["structuredContent"]["table"]
    by_uri = await call(
        session, {"geometries": f"{table['uri']}/file", "search": one_item, "id_property": "zone_id"}
    )
    got = by_uri["structuredContent"]["rows"]
    assert [r["zone_id"] for r in got] == ["vineyard", "meadow", "orchard"]
    want = session.zonal_stats(FIELDS, **one_item)
    assert np.allclose([r["mean"] for r in got], want["mean"], rtol=5e-4)  # 4 significant digits
    outside = await call(session, {"geometries": "../../etc/passwd.geojson", "search": SEARCH})
    assert outside["isError"] is True


def test_rows_past_max_result_bytes_are_in_the_saved_table(session):
    """The tool's answer within limits.max_result_bytes (here 2 KB: a few rows; the search
    itself is not bounded by it here, since searches answer by the same limit)."""
    import geopandas

    from stac_gdal_mcp.operations.zonal import result as zonal_result

    frame = session.zonal_stats(FIELDS, **SEARCH)
    record = session.save(frame)
    answer = zonal_result.result(frame, record, 2048).model_dump(mode="json")
    assert 0 < len(answer["rows"]) < answer["rows_total"] == 15
    whole = json.loads(  # (the too_little_valid flag: in the rows' note)
        frame.drop(columns=["geometry", "too_little_valid"]).to_json(
            orient="records", date_format="iso", date_unit="s"
        )
    )
    for row, want in zip(answer["rows"], whole):  # the first rows, numbers at their precision
        assert row.keys() == want.keys()
        for key, value in row.items():
            if isinstance(value, float):
                assert value == pytest.approx(want[key], rel=5e-4, abs=5e-5), key
            else:
                assert value == want[key], key
    assert any(
        f"{len(answer['rows'])} of 15 rows shown" in n and record.file.href.rsplit("/", 1)[-1] in n
        for n in answer["notes"]
    )
    assert (
        len(
            json.dumps(answer["rows"], separators=(",", ":"))
            + json.dumps(answer["zone_layer"]["features"], separators=(",", ":"))
        )
        <= 2048
    )
    assert len(geopandas.read_parquet(session.outputs.path(record.id))) == 15


# --- the map, in Chromium -----------------------------------------------------------------------


def hex_rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))


@pytest.fixture(scope="module")
def zonal_call(tmp_path_factory) -> dict:
    """A live per-day zonal_stats call (made before the browser starts its own event loop)."""
    arguments = {"geometries": FIELDS, "search": SEARCH, "per": "day"}
    workspace = tmp_path_factory.mktemp("zonal-map")
    with Session(load_settings(default_catalog="sample", workspace=workspace)) as opened:
        result = asyncio.run(layered(build_server(session=opened), "zonal_stats", arguments))
    return {"tool": "zonal_stats", "arguments": arguments, "result": result}


@pytest.mark.testbed
def test_map_fills_each_zone_with_the_colour_of_its_value(page, zonal_call, tmp_path):  # noqa: F811
    from shapely.geometry import shape

    open_with_fragment(page, [zonal_call])
    assert page.evaluate("window.stacMap.view") == build_map_view([zonal_call])
    img = screenshot(page, tmp_path / "map-zones.png")
    proj = Projection(page)
    (layer,) = build_map_view([zonal_call])["zones"]
    proj.check([z["bbox"] for z in layer["zones"]])
    ends = {layer["min"]: RAMP[0], layer["max"]: RAMP[-1]}
    checked = 0
    for zone, feature in zip(layer["zones"], FIELDS["features"]):
        if zone["value"] not in ends:
            continue
        inside = shape(feature["geometry"]).representative_point()
        x, y = proj.px(inside.x, inside.y)
        assert color_near(img, x, y, ends[zone["value"]], radius=0, tolerance=3), (
            f"zone {zone['id']}: {img.getpixel((round(x), round(y)))} is not {hex_rgb(ends[zone['value']])}"
        )
        checked += 1
    assert checked == 2
    legend = page.inner_text("#legend")
    assert "mean of" in legend and f"{layer['min']:.3g}" in legend and f"{layer['max']:.3g}" in legend
    assert "3 zones coloured by mean" in page.inner_text("#status")


async def test_a_large_job_waits_for_confirmation(tmp_path):
    """Past limits.confirm_bytes, a client that cannot be asked gets the estimate and a note to
    call again with confirm=true; nothing is written; with confirm=true the table is made."""
    settings = load_settings(default_catalog="sample", workspace=tmp_path / "w", limits={"confirm_bytes": 1})
    with Session(settings) as small:
        result = await call(small, {"geometries": FIELDS, "search": SEARCH})
        assert not result.get("isError"), result
        notes = result["structuredContent"]["notes"]
        assert any("confirm=true" in n for n in notes), notes
        assert small.outputs.list() == []
        confirmed = await call(small, {"geometries": FIELDS, "search": SEARCH, "confirm": True})
        assert confirmed["structuredContent"]["table"]
        assert len(small.outputs.list()) == 1


def _haversine(lon1, lat1, lon2, lat2) -> float:
    r = math.pi / 180
    a = (
        math.sin((lat2 - lat1) * r / 2) ** 2
        + math.cos(lat1 * r) * math.cos(lat2 * r) * math.sin((lon2 - lon1) * r / 2) ** 2
    )
    return 2 * 6371008.8 * math.asin(math.sqrt(a))


@pytest.mark.testbed
def test_map_labels_the_zones_with_a_scale_bar_and_the_nearest_place(page, zonal_call):  # noqa: F811
    """Each zone's id drawn (as text), a scale bar whose length in pixels is its metres at the
    projection's scale, and at field scale the nearest Natural Earth place named with its distance."""
    from importlib import resources

    open_with_fragment(page, [zonal_call])
    labels = page.eval_on_selector_all("svg .zone-label", "els => els.map(e => e.textContent)")
    assert labels == [f["id"] for f in FIELDS["features"]]
    proj = Projection(page)
    bar = page.eval_on_selector("svg .scalebar", "g => [Number(g.dataset.metres), Number(g.dataset.px)]")
    metres, px = bar
    lat = 45.93
    # pixels for `metres` northwards, from the page's own projection (its data-* attributes)
    y0, y1 = proj.px(13.6, lat)[1], proj.px(13.6, lat + metres / 111_195.0)[1]
    assert px == pytest.approx(y0 - y1, rel=0.01)
    assert str(metres)[0] in "125" and set(str(int(metres))[1:]) <= {"0"}
    places = json.loads(
        resources.files("stac_gdal_mcp")
        .joinpath("data", "naturalearth", "populated-places-110m.json")
        .read_text()
    )["places"]
    view = page.eval_on_selector(
        "svg",
        "s => [Number(s.dataset.west), Number(s.dataset.east), Number(s.dataset.south), Number(s.dataset.north)]",
    )
    cx, cy = (view[0] + view[1]) / 2, (view[2] + view[3]) / 2
    name, lon, lat = min(places, key=lambda p: _haversine(cx, cy, p[1], p[2]))
    nearest = page.eval_on_selector(
        "svg .place-nearest", "t => [t.dataset.name, Number(t.dataset.metres), t.textContent]"
    )
    assert nearest[0] == name == "Ljubljana"
    assert nearest[1] == pytest.approx(_haversine(cx, cy, lon, lat), abs=1)
    assert nearest[2].startswith(f"{name} {round(nearest[1] / 1000)} km ")
