"""The map MCP App without a browser: its ui:// resource and the tools' _meta (the UI extension,
the CSP of a basemap), the page's own safety (no network fetch, a view carried safely), and the
view `build_map_view` makes of tool results recorded on the sample catalog (tests/ui_fixtures/,
written by scripts/record_ui_fixtures.py; a test checks they are what the tools return today).

The page in a real headless Chromium: test_map_page.py; Session.map in a notebook:
test_map_notebook.py; their shared helpers: map_pixels.py.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from helpers import found_items, layered
from map_pixels import (
    PAGE,
    ROOT,
    WORLD,
    _slot,
    fixture,
    item_bboxes,
    ranking_calls,
)

from stac_gdal_mcp.maps import build_map_view, map_html, map_page
from stac_gdal_mcp.maps.view import footprint_search
from stac_gdal_mcp.models import MapLayer, map_area
from stac_gdal_mcp.server.map_app import MAP_URI, VIEW_META, map_app_config, register_map_app


class _Attributes(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "action", "srcset", "poster", "data", "xlink:href") and value:
                self.urls.append((tag, name, value))


def test_page_makes_no_network_fetches():
    html = map_html()
    parser = _Attributes()
    parser.feed(html)
    assert parser.urls == [], f"the page must not reference any URL: {parser.urls}"
    assert not {"link", "iframe", "object", "embed", "base"} & set(parser.tags)
    assert "<script src" not in html.lower()
    for api in (
        "fetch(",
        "XMLHttpRequest",
        "WebSocket",
        "EventSource",
        "sendBeacon",
        "import(",
        "@import",
    ):
        assert api not in html, f"the page must not use {api}"
    assert re.findall(r"url\(\s*['\"]?(?!#)", html) == [], "CSS url() only for in-page references (#id)"
    urls = set(re.findall(r"[a-z]+://[^\s\"'<>)]*", html))
    assert urls == {"http://www.w3.org/2000/svg"}, f"only the SVG namespace may look like a URL: {urls}"
    # the served page is the source with the bundled Natural Earth TopoJSON inlined, and no config
    assert json.loads(_slot(html, "world-110m")) == json.loads(WORLD.read_text())
    assert _slot(html, "map-config") == "{}" and _slot(html, "map-view") == ""
    assert _slot(PAGE.read_text(), "world-110m") == ""
    assert len(html.encode()) < 300_000


def test_basemap_is_declared_in_the_csp_and_checked():
    tiles = "https://tile.example.org/{z}/{x}/{y}.png"
    config = json.loads(_slot(map_html(tiles, "© example"), "map-config"))
    assert config == {
        "basemap": {"url": tiles, "attribution": "© example"},
        "resource_domains": ["https://tile.example.org"],
    }
    for bad in ("file:///tmp/{z}/{x}/{y}.png", "https://tile.example.org/tiles.png", "tiles/{z}/{x}/{y}"):
        with pytest.raises(ValueError, match="^basemap: "):
            map_html(bad)


def test_standalone_page_carries_its_view_safely():
    hostile = {"result": {"_meta": MapLayer(notes=["</script><script>alert(1)</script>"]).as_meta()}}
    html = map_page([hostile])
    assert "</script><script>alert(1)" not in html
    assert json.loads(_slot(html, "map-view"))["notes"] == ["</script><script>alert(1)</script>"]


async def test_resource_and_tool_meta_follow_the_ui_extension():
    from fastmcp import Client, FastMCP

    mcp = FastMCP("map-app-test")
    assert register_map_app(mcp) == MAP_URI

    @mcp.tool(app=map_app_config())
    def shown_on_the_map() -> dict:
        return {"items": []}

    async with Client(mcp) as client:
        listed = {str(r.uri): r for r in await client.list_resources()}
        assert listed[MAP_URI].mime_type == "text/html;profile=mcp-app"
        (content,) = await client.read_resource(MAP_URI)
        assert content.mime_type == "text/html;profile=mcp-app"
        assert content.text == map_html()
        meta = listed[MAP_URI].meta or {}
        assert meta.get("ui") == {"prefersBorder": True}  # no domains: the host's default CSP
        (tool,) = [t for t in await client.list_tools() if t.name == "shown_on_the_map"]
        assert tool.meta["ui"] == {"resourceUri": MAP_URI}

    with_tiles = FastMCP("map-app-basemap")
    register_map_app(with_tiles, basemap="https://tile.example.org/{z}/{x}/{y}.png")
    async with Client(with_tiles) as client:
        (listed,) = await client.list_resources()
        assert listed.meta["ui"] == {
            "prefersBorder": True,
            "csp": {"resourceDomains": ["https://tile.example.org"]},
        }


async def test_a_ranking_keeps_its_view_when_its_footprints_cannot_be_found():
    """A tool on the map whose ranking's footprints search fails: the answer is unchanged and its
    view says why in a note; a tool off the map and a tool error carry no view."""
    from fastmcp import Client, FastMCP
    from fastmcp.apps import UI_EXTENSION_ID
    from fastmcp.exceptions import ToolError
    from fastmcp.tools.base import ToolResult
    from mcp.client.extension import advertise

    mcp = FastMCP("map-view-test")
    register_map_app(mcp)
    ranking = {"aoi_bbox": [1.0, 2.0, 3.0, 4.0], "items": [{"item_id": "a", "collection_id": "c"}]}
    area = map_area({}, ranking["aoi_bbox"])
    layer = MapLayer(ranking=[{"id": "a", "collection": "c"}], area=area)  # what the map draws of it

    @mcp.tool(app=map_app_config())
    def ranked(catalog: str):  # a ToolResult: its layer, with the catalog it searched, in `_meta`
        return ToolResult(
            structured_content=ranking, meta=layer.model_copy(update={"catalog": catalog}).as_meta()
        )

    @mcp.tool(app=map_app_config())
    def failing() -> dict:
        raise ToolError("no such scene")

    @mcp.tool
    def search_items(ids: list[str], limit: int, catalog: str, collections: list[str]) -> dict:
        raise ToolError(f"catalog {catalog!r} is offline")

    async with Client(mcp, extensions=[advertise(UI_EXTENSION_ID)]) as client:
        result = await client.call_tool_mcp("ranked", {"catalog": "x"})
        assert result.structured_content == ranking
        view = result.meta[VIEW_META]
        assert [r["id"] for r in view["ranking"]] == ["a"] and view["footprints"] == []
        assert view["notes"] == ["Footprints could not be fetched: catalog 'x' is offline"]
        assert view["aois"] == [{"bbox": [1.0, 2.0, 3.0, 4.0], "geometry": None, "tool": "ranked"}]
        off_the_map = await client.call_tool_mcp(
            "search_items", {"ids": ["a"], "limit": 1, "catalog": "x", "collections": ["c"]}
        )
        failed = await client.call_tool_mcp("failing", {})
        for answer in (off_the_map, failed):
            assert answer.is_error and VIEW_META not in (answer.meta or {})


def test_view_of_a_search():
    search = fixture("search_items")
    view = build_map_view([search])
    items = {i["id"]: i for i in found_items(search["result"]["structuredContent"])}  # the answer's table
    assert sorted(f["id"] for f in view["footprints"]) == sorted(items) and len(items) == 8
    for f in view["footprints"]:
        item = items[f["id"]]
        assert (f["bbox"], f["cloud_cover"], f["collection"]) == (
            item["bbox"],
            item["cloud_cover"],
            item["collection"],
        )
        assert f["thumbnail"] == item.get("thumbnail")
    assert view["aois"] == [{"bbox": search["arguments"]["bbox"], "geometry": None, "tool": "search_items"}]
    assert view["ranking"] == [] and view["outputs"] == [] and view["errors"] == []


def test_view_of_a_ranking_with_its_footprints_and_a_quicklook():
    stats, footprints, preview = ranking_calls("preview")
    rows = stats["result"]["structuredContent"]["items"]

    alone = build_map_view([stats])
    assert [r["id"] for r in alone["ranking"]] == [r["item_id"] for r in rows]
    assert alone["footprints"] == []  # the rows carry no footprint: the server searches them
    assert footprint_search(alone, stats["result"]) == footprints["arguments"]
    assert alone["aois"] == [
        {"bbox": stats["arguments"]["aoi"], "geometry": None, "tool": "cloud_cover_stats"}
    ]

    view = build_map_view([stats, footprints, preview])
    bboxes = item_bboxes(footprints)
    clear = {r["item_id"]: r["clear_fraction"] for r in rows}
    assert {f["id"]: f["bbox"] for f in view["footprints"]} == bboxes
    assert {f["id"]: f["clear_fraction"] for f in view["footprints"]} == clear
    assert {f["id"]: f["rank"] for f in view["footprints"]} == {r["item_id"]: i for i, r in enumerate(rows)}
    (out,) = view["outputs"]
    record = preview["result"]["structuredContent"]
    assert out["id"] == record["id"] and out["bbox"] == record["bbox"]
    (image,) = [c for c in preview["result"]["content"] if c["type"] == "image"]
    assert out["image"] == f"data:image/png;base64,{image['data']}"
    assert [a["bbox"] for a in view["aois"]] == [stats["arguments"]["aoi"]]  # the preview's bbox is the same
    boxes = [*bboxes.values(), stats["arguments"]["aoi"], record["bbox"]]
    assert view["bounds"] == [
        *(min(b[i] for b in boxes) for i in (0, 1)),
        *(max(b[i] for b in boxes) for i in (2, 3)),
    ]
    assert alone["bounds"] == stats["arguments"]["aoi"] and build_map_view([])["bounds"] is None


def test_each_call_keeps_its_own_aoi_and_time_series_has_one():
    stats, search, series = fixture("cloud_cover_stats"), fixture("search_items"), fixture("time_series")
    view = build_map_view([stats, search, series])
    assert [(a["bbox"], a["tool"]) for a in view["aois"]] == [
        (stats["arguments"]["aoi"], "cloud_cover_stats"),
        (search["arguments"]["bbox"], "search_items"),
    ]  # the time series' AOI is the ranking's: drawn once
    (drawn,) = view["series"]
    rows = series["result"]["structuredContent"]["rows"]
    assert drawn["days"] == len(rows) and drawn["aoi"] == series["arguments"]["aoi"]
    (chart,) = [c for c in series["result"]["content"] if c["type"] == "image"]
    assert drawn["image"] == f"data:image/png;base64,{chart['data']}"


def test_area_of_a_call_given_as_geometry_or_json_text_and_of_errors():
    """A call's area (`map_area`: what its layer carries) from its AOI, a search's intersects or a
    bbox in WGS84, a measured AOI's bounds first; the view draws the layer's area and notes, and
    reads neither the call's arguments nor its structured content."""
    polygon = {"type": "Polygon", "coordinates": [[[1, 2], [3, 2], [3, 5], [1, 5], [1, 2]]]}
    drawn = {"bbox": [1, 2, 3, 5], "geometry": polygon}
    assert map_area({"aoi": json.dumps(polygon)}, [1, 2, 3, 5]) == drawn == map_area({"intersects": polygon})
    assert map_area({"aoi": [0, 0, 9, 9]}, [1, 2, 3, 5]) == {"bbox": [1, 2, 3, 5], "geometry": None}
    assert map_area({"aoi": "[1, 2, 0, 3, 5, 0]", "bbox": [7, 7, 8, 8]}) == {
        "bbox": [1, 2, 3, 5],
        "geometry": None,
    }
    assert map_area({"bbox": [1, 2, 3, 5], "bbox_crs": "ogc:crs84"}) == {
        "bbox": [1, 2, 3, 5],
        "geometry": None,
    }
    assert map_area({"bbox": [500000, 5000000, 510000, 5010000], "bbox_crs": "EPSG:32633"}) is None
    assert map_area({"aoi": {"type": "Point", "coordinates": [1, 2]}}) is None
    placed = {"result": {"_meta": MapLayer(area=drawn, notes=["a note"]).as_meta()}}
    view = build_map_view([placed])
    assert view["aois"] == [{**drawn, "tool": None}] and view["notes"] == ["a note"]
    unlayered = {"arguments": {"aoi": [1, 2, 3, 5]}, "result": {"structuredContent": {"notes": ["x"]}}}
    assert build_map_view([unlayered]) == build_map_view([])
    failed = {"result": {"isError": True, "content": [{"type": "text", "text": "collection 'x' not found"}]}}
    assert build_map_view([failed])["errors"] == ["collection 'x' not found"]


async def test_recorded_fixtures_match_the_tools_today(tmp_path):
    """The fixtures are what the tools return now (else: scripts/record_ui_fixtures.py), and the
    page's resource sits beside the real tools without clashing with their resources."""
    from fastmcp import Client

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    session = Session(load_settings(default_catalog="sample", workspace=tmp_path))
    mcp = build_server(session=session)
    try:
        async with Client(mcp) as client:
            if MAP_URI not in {str(r.uri) for r in await client.list_resources()}:
                register_map_app(mcp)  # until build_server registers it
            assert MAP_URI in {str(r.uri) for r in await client.list_resources()}
            for name in ("search_items", "cloud_cover_stats", "cloud_cover_stats.footprints"):
                recorded = fixture(name)
                live = await layered(mcp, recorded["tool"], recorded["arguments"])  # with its map layer
                text = json.dumps(live).replace(str(tmp_path), "<workspace>").replace(str(ROOT), "<repo>")
                call = {
                    "tool": recorded["tool"],
                    "arguments": recorded["arguments"],
                    "result": json.loads(text),
                }
                assert build_map_view([call]) == build_map_view([recorded]), name
    finally:
        session.close()


def test_ranking_rows_take_the_fields_every_row_shares():
    """cloud_cover_stats sends the fields its rows share once, in `common` (a ranking of one
    collection: collection_id there); its map layer is made of the rows themselves, so the map's
    ranking rows still name their collection, in the ranking's order."""
    from stac_gdal_mcp.operations.cloud import CloudCover, CloudCoverResult, ItemCloudCover
    from stac_gdal_mcp.operations.registry import map_call

    rows = [
        ItemCloudCover(collection_id="s2", item_id=name, clear_fraction=clear, crs="EPSG:32633")
        for name, clear in (("b", 0.9), ("a", 0.4))
    ]
    result = CloudCoverResult(aoi_bbox=[1.0, 2.0, 3.0, 4.0], sort="clear", items=rows, returned=2, failed=0)
    assert result.model_dump(mode="json")["common"] == {"collection_id": "s2", "crs": "EPSG:32633"}
    ranking = build_map_view([map_call(CloudCover(result))])["ranking"]
    assert [(r["id"], r["collection"], r["clear_fraction"]) for r in ranking] == [
        ("b", "s2", 0.9),
        ("a", "s2", 0.4),
    ]


async def test_answers_without_a_drawing_of_their_own_still_place_their_area_and_notes(tmp_path):
    """A dry run's estimate, a job not run for want of a confirmation and a search that found
    nothing draw no footprint, zone or raster: their view still has the call's area and the
    answer's notes (their layer carries them); a ranking over a polygon draws the polygon at the
    bounds it measured."""
    from fastmcp import Client
    from fastmcp.apps import UI_EXTENSION_ID
    from mcp.client.extension import advertise

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    aoi = [13.6, 45.92, 13.62, 45.935]
    polygon = {
        "type": "Polygon",
        "coordinates": [[[13.6, 45.92], [13.62, 45.92], [13.62, 45.935], [13.6, 45.92]]],
    }
    search = {"catalog": "sample", "collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-07-31"}
    settings = load_settings(default_catalog="sample", workspace=tmp_path, limits={"confirm_bytes": 1})
    async with Client(build_server(settings), extensions=[advertise(UI_EXTENSION_ID)]) as client:

        async def view(tool, arguments):
            result = await client.call_tool_mcp(tool, arguments)
            assert not result.is_error, result.content
            return result.structured_content, result.meta[VIEW_META]

        estimate, dry = await view("time_series", {"aoi": aoi, "search": search, "dry_run": True})
        held, unconfirmed = await view("composite", {"aoi": aoi, "bands": ["red"], "search": search})
        empty, nothing = await view(
            "search_items", {**search, "bbox": aoi, "datetime": "1990-01-01/1990-12-31"}
        )
        ranking, ranked = await view(
            "cloud_cover_stats", {"aoi": polygon, "search": search, "max_items": 2, "confirm": True}
        )
    assert held["notes"][-1].startswith("not run: ") and estimate["notes"]
    for (value, drawn), tool in zip(
        ((estimate, dry), (held, unconfirmed), (empty, nothing)), ("time_series", "composite", "search_items")
    ):
        assert drawn["aois"] == [{"bbox": aoi, "geometry": None, "tool": tool}]
        assert drawn["notes"] == value.get("notes", []) and drawn["footprints"] == drawn["outputs"] == []
    assert empty["returned"] == 0
    assert ranked["aois"] == [{"bbox": ranking["aoi_bbox"], "geometry": polygon, "tool": "cloud_cover_stats"}]
    assert ranking["aoi_bbox"] == [13.6, 45.92, 13.62, 45.935] and ranked["notes"] == ranking["notes"]
