"""The map page in a real headless Chromium (helpers and fixtures: map_pixels.py).

The page builds no view: it draws `build_map_view`'s. It is loaded with the views of tool results
recorded on the sample catalog (tests/ui_fixtures/): through the `#data=` fragment, embedded in a
standalone page (`map_page`), and as the server sends them (in the result's `_meta`, live from the
server on the sample catalog; the view the server sends is checked here too) through
`window.postMessage` and inside an iframe of a minimal MCP Apps host (ui/initialize, tool-input,
tool-result, and the resources/read the page makes for thumbnails).
Screenshots are checked pixel by pixel: where each footprint's bbox projects, the outline has the
colour the docs give it; each call's AOI is drawn; far from everything is land or sea, as the
Natural Earth polygons say, and known places (the northern Adriatic) are land or sea; the
coastline lies where its arcs project; the quicklook shows the PNG's own pixels; basemap tiles
served on 127.0.0.1 lie at their Web Mercator bounds.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import shutil

import map_pixels
import pytest
from helpers import found_items, layered
from map_pixels import (
    AOI,
    DOCS_IMAGE,
    DOCS_IMG,
    FOOTPRINT,
    HOST_CSP,
    LAND,
    SEA,
    Projection,
    check_coast,
    check_ground,
    check_outlines,
    check_quicklook,
    check_thumbnails,
    clear_color,
    color_near,
    drawn_order,
    fixture,
    item_bboxes,
    on_land,
    open_with_fragment,
    ranking_calls,
    screenshot,
    sent,
    solid_png,
    world,
)

from stac_gdal_mcp.maps import build_map_view, map_html, map_page
from stac_gdal_mcp.models import MAP_LAYER_META, MapLayer, map_area
from stac_gdal_mcp.server.map_app import VIEW_META

# The fixtures the page needs, found by pytest under these names in this module.
browser, served, page = map_pixels.browser, map_pixels.served, map_pixels.page


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> dict[str, dict]:
    """The ranking and preview fixtures' calls answered by the server on the sample catalog to a
    host that declares MCP Apps (`<tool>`; `cloud_cover_stats.plain`: to a client that does not),
    and the search of the ranking's footprints; made before a browser starts its own event loop."""
    from fastmcp import Client
    from fastmcp.apps import UI_EXTENSION_ID
    from mcp.client.extension import advertise

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    stats, footprints, preview = ranking_calls("preview")

    async def answers(session) -> dict[str, dict]:
        mcp = build_server(session=session)
        async with Client(mcp, extensions=[advertise(UI_EXTENSION_ID)]) as host, Client(mcp) as plain:
            asked = [("cloud_cover_stats", host, stats), ("cloud_cover_stats.plain", plain, stats)]
            asked += [("preview", host, preview)]
            out = {}
            for name, client, call in asked:
                result = await client.call_tool_mcp(call["tool"], call["arguments"])
                out[name] = {
                    **call,
                    "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
                }
            # the footprints' search as the server's tool answers it: with its map layer
            out["search_items"] = {
                **footprints,
                "result": await layered(mcp, "search_items", footprints["arguments"]),
            }
            return out

    workspace = tmp_path_factory.mktemp("live")
    with Session(load_settings(default_catalog="sample", workspace=workspace)) as session:
        return asyncio.run(answers(session))


def test_the_server_sends_the_view_to_mcp_apps_hosts(live):
    """A host that declares MCP Apps gets the view in the result's _meta (a ranking's with the
    footprints the server searched, a quicklook by its image block); the answer itself is the one
    any client gets, and a client without the extension gets no view."""
    stats, plain = live["cloud_cover_stats"], live["cloud_cover_stats.plain"]
    assert VIEW_META not in plain["result"].get("_meta", {})
    assert {k: v for k, v in stats["result"].items() if k != "_meta"} == {
        k: v for k, v in plain["result"].items() if k != "_meta"
    }
    view = stats["result"]["_meta"][VIEW_META]
    assert view == build_map_view([stats, live["search_items"]])
    rows = stats["result"]["structuredContent"]["items"]
    assert {fp["id"]: fp["rank"] for fp in view["footprints"]} == {
        r["item_id"]: i for i, r in enumerate(rows)
    }
    assert {fp["id"]: fp["bbox"] for fp in view["footprints"]} == item_bboxes(live["search_items"])

    preview = live["preview"]
    (out,) = preview["result"]["_meta"][VIEW_META]["outputs"]
    index = next(i for i, c in enumerate(preview["result"]["content"]) if c["type"] == "image")
    assert out["image"] == {"content": index}  # the quicklook travels once
    (built,) = build_map_view([preview])["outputs"]
    assert built["image"].endswith(preview["result"]["content"][index]["data"])
    assert {**out, "image": built["image"]} == built


@pytest.mark.testbed
def test_search_footprints_drawn_where_their_bboxes_project(page, tmp_path):
    search = fixture("search_items")
    open_with_fragment(page, [search])
    img = screenshot(page, tmp_path / "map-search.png")
    proj = Projection(page)
    items = found_items(search["result"]["structuredContent"])
    aoi = search["arguments"]["bbox"]
    proj.check([i["bbox"] for i in items] + [aoi])

    drawn = [(i["bbox"], FOOTPRINT) for i in reversed(items)]
    assert check_outlines(img, proj, drawn, others=[aoi]) >= 16
    assert check_outlines(img, proj, [(aoi, AOI)]) == 16
    assert check_ground(img, proj, [aoi] + [i["bbox"] for i in items]) >= 20
    assert page.evaluate("window.stacMap.view") == build_map_view([search])


@pytest.mark.testbed
def test_ranking_with_footprints_and_quicklook(page, tmp_path):
    calls = stats, footprints, preview = ranking_calls("preview")
    open_with_fragment(page, calls)
    img = screenshot(page, tmp_path / "map-ranking.png")
    if os.environ.get("UPDATE_DOCS_IMAGES"):  # the docs' screenshot, refreshed on request only
        DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tmp_path / "map-ranking.png", DOCS_IMAGE)
    assert page.evaluate("window.stacMap.view") == build_map_view(calls)

    proj = Projection(page)
    rows = stats["result"]["structuredContent"]["items"]
    clear = {r["item_id"]: r["clear_fraction"] for r in rows}
    items = [
        {"bbox": i["bbox"], "clear": clear[i["id"]], "id": i["id"]}
        for i in found_items(footprints["result"]["structuredContent"])
    ]
    aoi, record = stats["arguments"]["aoi"], preview["result"]["structuredContent"]
    proj.check([i["bbox"] for i in items] + [aoi, record["bbox"]])
    drawn = [(fp["bbox"], clear_color(fp["clear"])) for fp in drawn_order(items, ranked=True)]
    assert check_outlines(img, proj, drawn, others=[aoi, record["bbox"]]) >= 16
    assert check_outlines(img, proj, [(aoi, AOI)], others=[]) >= 8
    assert check_ground(img, proj, [aoi, record["bbox"]] + [i["bbox"] for i in items]) >= 20

    assert check_quicklook(img, proj, preview, others=[aoi, record["bbox"]]) >= 10

    # hovering a row brings that scene's outline on top, in its class colour
    for row in rows:
        page.hover(f"#list tr[data-id='{row['item_id']}']")
        img = screenshot(page, tmp_path / f"map-hover-{row['item_id']}.png")
        bbox = next(i["bbox"] for i in items if i["id"] == row["item_id"])
        hovered = [(bbox, clear_color(row["clear_fraction"]))]
        assert check_outlines(img, proj, hovered, others=[aoi, record["bbox"]]) >= 8, row["item_id"]

    # a click where only the Landsat footprints are: the best-ranked Landsat scene is selected
    landsat = [i for i in items if i["id"].startswith("LC0")]
    s2 = [i for i in items if i["id"].startswith("S2")]
    lon = (landsat[0]["bbox"][0] + min(i["bbox"][0] for i in s2)) / 2
    lat = (landsat[0]["bbox"][3] + max(i["bbox"][3] for i in s2)) / 2
    under = [
        r["item_id"]
        for r in rows
        if any(
            i["id"] == r["item_id"]
            and i["bbox"][0] <= lon <= i["bbox"][2]
            and i["bbox"][1] <= lat <= i["bbox"][3]
            for i in items
        )
    ]
    assert under and all(i.startswith("LC0") for i in under)
    page.mouse.click(*proj.px(lon, lat))
    assert page.get_attribute("#selected", "data-id") == under[0]
    assert page.is_visible("#tip") and under[0] in page.inner_text("#tip")


@pytest.mark.testbed
def test_output_and_quicklook_posted_as_the_server_sends_them(page, live, tmp_path):
    """A preview's result as the server sends it (its view in _meta, the quicklook named by its
    image block) posted as the host's notifications: drawn at its bbox with the PNG's pixels."""
    preview = live["preview"]
    page.goto(page.served.as_uri())
    page.evaluate(
        """(call) => {
            window.postMessage({jsonrpc: '2.0', method: 'ui/notifications/tool-input', params: {arguments: call.arguments}}, '*');
            window.postMessage({jsonrpc: '2.0', method: 'ui/notifications/tool-result', params: call.result}, '*');
        }""",
        preview,
    )
    page.wait_for_selector("body[data-state=rendered]")
    assert page.evaluate("window.stacMap.view") == build_map_view([preview])
    img = screenshot(page, tmp_path / "map-output.png")
    proj = Projection(page)
    record = preview["result"]["structuredContent"]
    proj.check([record["bbox"]])
    assert check_outlines(img, proj, [(preview["arguments"]["bbox"], AOI)]) >= 8
    assert record["id"] in page.inner_text("#status")
    assert check_quicklook(img, proj, preview, others=[preview["arguments"]["bbox"], record["bbox"]]) >= 10

    # a tool error (it carries no view) is shown as its text, instead of a map
    page.evaluate(
        """() => window.postMessage({jsonrpc: '2.0', method: 'ui/notifications/tool-result',
            params: {isError: true, content: [{type: 'text', text: "collection 'x' not found"}]}}, '*')"""
    )
    page.wait_for_selector("#status.error")
    assert page.inner_text("#status") == "collection 'x' not found" and page.is_hidden("#map")


# Two calls' AOIs at opposite corners of the northern Adriatic, and places there that are land or
# sea by any map (20 km or more from the coast, so the 1:110m generalisation cannot move them).
ADRIATIC = {"search_items": [11.3, 44.0, 11.45, 44.12], "time_series": [14.85, 46.08, 15.0, 46.2]}
KNOWN_LAND = [(12.1, 45.7), (14.75, 45.45), (11.65, 44.65)]  # Veneto, Croatia inland, Emilia
KNOWN_SEA = [(13.05, 44.95), (13.25, 44.45)]  # the Adriatic off Venice and off Rimini


@pytest.mark.testbed
def test_coastline_and_each_calls_aoi_where_they_belong(page, tmp_path):
    """The northern Adriatic: land and sea where every map has them, the coastline where its arcs
    project, and the AOIs of two calls (a search and a time series) both drawn, each at its place."""
    series = fixture("time_series")
    searched = MapLayer(area=map_area({"bbox": ADRIATIC["search_items"]}))  # found nothing
    layer = {**series["result"]["_meta"][MAP_LAYER_META], "area": map_area({"aoi": ADRIATIC["time_series"]})}
    calls = [
        {"tool": "search_items", "result": {"structuredContent": {"items": []}, "_meta": searched.as_meta()}},
        {**series, "result": {**series["result"], "_meta": {MAP_LAYER_META: layer}}},
    ]
    open_with_fragment(page, calls)
    img = screenshot(page.locator("#map-wrap"), tmp_path / "map-coast.png")
    shutil.copyfile(tmp_path / "map-coast.png", DOCS_IMG / "map-coastline.png")
    assert page.evaluate("window.stacMap.view") == build_map_view(calls)
    box = page.locator("#map-wrap").bounding_box()
    proj = Projection(page, offset=(-box["x"], -box["y"]))
    aois = list(ADRIATIC.values())
    proj.check(aois)

    land = world()[0]
    for lon, lat in KNOWN_LAND + KNOWN_SEA:
        expected = LAND if (lon, lat) in KNOWN_LAND else SEA
        assert on_land(land, lon, lat) == (expected == LAND), f"the bundled data misplaces ({lon}, {lat})"
        x, y = proj.px(lon, lat)
        assert color_near(img, x, y, expected, radius=0, tolerance=2), (
            lon,
            lat,
            img.getpixel((round(x), round(y))),
        )
    assert check_coast(img, proj, aois) >= 30
    assert check_ground(img, proj, aois) >= 60
    for bbox in aois:
        assert check_outlines(img, proj, [(bbox, AOI)]) == 16
    assert page.locator("#series img").evaluate("i => i.naturalWidth") > 0
    assert "time series" in page.inner_text("#series")


@pytest.mark.testbed
def test_a_ranking_keeps_its_aoi_beside_a_later_search(page, tmp_path):
    """Drawing a ranking and then a wider search: both AOIs stay (the search's bbox does not
    replace the ranking's AOI)."""
    calls = stats, _, search = ranking_calls("search_items")
    open_with_fragment(page, calls)
    img = screenshot(page, tmp_path / "map-two-aois.png")
    assert page.evaluate("window.stacMap.view") == build_map_view(calls)
    proj = Projection(page)
    field, wide = stats["arguments"]["aoi"], search["arguments"]["bbox"]
    proj.check([field, wide])
    assert check_outlines(img, proj, [(field, AOI)]) == 16
    assert check_outlines(img, proj, [(wide, AOI)]) == 16
    assert page.locator("#map path.aoi").count() == 2


HOST = """<!doctype html><html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;width:900px;height:700px;display:block}</style></head>
<body><iframe id="app" sandbox="allow-scripts"></iframe><script>
const CALL = __CALL__, PAGE = __PAGE__, THUMBS = __THUMBS__;
window.received = []; window.toolCalls = []; window.reads = [];
const frame = document.getElementById('app');
window.addEventListener('message', (event) => {
  if (event.source !== frame.contentWindow) return;
  const m = event.data, send = (msg) => frame.contentWindow.postMessage(msg, '*');
  window.received.push(m);
  if (m.method === 'ui/initialize') {
    send({jsonrpc: '2.0', id: m.id, result: {protocolVersion: '2026-01-26', hostInfo: {name: 'test-host', version: '0'},
          hostCapabilities: __CAPS__, hostContext: {theme: 'light', displayMode: 'inline',
          containerDimensions: {width: 900, maxHeight: 1200}, toolInfo: {tool: {name: CALL.tool}}}}});
  } else if (m.method === 'ui/notifications/initialized') {
    send({jsonrpc: '2.0', method: 'ui/notifications/tool-input', params: {arguments: CALL.arguments}});
    send({jsonrpc: '2.0', method: 'ui/notifications/tool-result', params: CALL.result});
  } else if (m.method === 'tools/call') {
    window.toolCalls.push(m.params);
    send({jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'this host calls no tool for the page'}});
  } else if (m.method === 'resources/read') {
    window.reads.push(m.params.uri);
    send({jsonrpc: '2.0', id: m.id, result: {contents: [{uri: m.params.uri, mimeType: 'image/png', blob: THUMBS[m.params.uri]}]}});
  } else if (m.method === 'ui/notifications/size-changed') {
    frame.style.height = m.params.height + 'px';
  }
});
frame.srcdoc = PAGE;
</script></body></html>"""


def _js(value) -> str:
    return json.dumps(value).replace("</", "<\\/")


@pytest.mark.testbed
def test_in_a_host_over_the_mcp_apps_protocol(page, live, tmp_path):
    """The page in a sandboxed iframe under the host's default CSP: handshake, tool-input and
    tool-result (the ranking as the server sent it: its view in _meta, with the footprints the
    server found) from the host, no tool called by the page, thumbnails named by resource URIs read
    with resources/read and shown in the table, size reported."""
    stats, footprints = live["cloud_cover_stats"], live["search_items"]
    scenes = build_map_view([footprints])["footprints"]  # (the search's page, in its order)
    assert {s["id"] for s in scenes} == {
        i["id"] for i in found_items(footprints["result"]["structuredContent"])
    }
    thumbs, colors = {}, {}
    for n, item in enumerate(scenes):  # the server names a local catalog's thumbnails by resource URIs
        assert item["thumbnail"].startswith("stac://sample/")
        colors[item["id"]] = (40 + 25 * n, 200 - 20 * n, 90)
        thumbs[item["thumbnail"]] = solid_png(colors[item["id"]])
    app = map_html().replace(
        "<head>", f'<head><meta http-equiv="Content-Security-Policy" content="{HOST_CSP}">', 1
    )
    host = (
        HOST.replace("__CALL__", _js(stats))
        .replace("__PAGE__", _js(app))
        .replace("__THUMBS__", _js(thumbs))
        .replace("__CAPS__", _js({"serverTools": {}, "serverResources": {}}))
    )
    host_file = tmp_path / "host.html"
    host_file.write_text(host)
    page.requests.clear()
    page.goto(host_file.as_uri())
    frame = page.frame_locator("#app")
    frame.locator("body[data-state=rendered] #map path.fp").first.wait_for()
    app_frame = next(f for f in page.frames if f != page.main_frame)
    assert app_frame.evaluate("document.querySelectorAll('#map path.fp').length") == len(scenes)
    page.wait_for_function(
        "window.received.some(m => m.method === 'ui/notifications/size-changed' && m.params.height > 500)"
    )
    page.requests[:] = [u for u in page.requests if u != host_file.as_uri()]

    received = page.evaluate("window.received")
    methods = [m.get("method") for m in received]
    assert methods[:2] == ["ui/initialize", "ui/notifications/initialized"]
    init = received[0]["params"]
    assert init["protocolVersion"] == "2026-01-26" and init["appInfo"]["name"] and "appCapabilities" in init
    assert page.evaluate("window.toolCalls") == []
    assert app_frame.evaluate("window.stacMap.view") == build_map_view([stats, footprints])
    app_frame.wait_for_function(f"document.querySelectorAll('#list img.thumb').length === {len(thumbs)}")
    assert sorted(page.evaluate("window.reads")) == sorted(thumbs)
    check_thumbnails(page.frame_locator("#app"), colors, tmp_path)

    box = page.locator("#app").bounding_box()
    img = screenshot(page, tmp_path / "map-in-host.png")
    proj = Projection(app_frame, offset=(box["x"], box["y"]))
    rows = stats["result"]["structuredContent"]["items"]
    clear = {r["item_id"]: r["clear_fraction"] for r in rows}
    items = [{"bbox": i["bbox"], "clear": clear[i["id"]]} for i in scenes]
    aoi = stats["arguments"]["aoi"]
    proj.check([i["bbox"] for i in items] + [aoi])
    drawn = [(fp["bbox"], clear_color(fp["clear"])) for fp in drawn_order(items, ranked=True)]
    assert check_outlines(img, proj, drawn, others=[aoi]) >= 16
    assert check_outlines(img, proj, [(aoi, AOI)]) >= 8
    assert check_ground(img, proj, [aoi] + [i["bbox"] for i in items]) >= 20


@pytest.fixture
def tile_server():
    """Tiles on 127.0.0.1: each a PNG of one colour made from its z/x/y; records the paths asked."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked: list[str] = []

    class Tiles(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            z, x, y = (int(v) for v in self.path.strip("/").removesuffix(".png").split("/"))
            body = base64.b64decode(solid_png(tile_color(z, x, y), size=(256, 256)))
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Tiles)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()
    server.server_close()


def tile_color(z, x, y) -> tuple[int, int, int]:
    return (40 + (x * 37) % 160, 40 + (y * 53) % 160, 60 + z * 9)


def expected_tiles(proj) -> tuple[int, set[tuple[int, int, int]]]:
    """The zoom whose tiles are about 256 px at this scale, and the Web Mercator tiles covering the view."""
    z = round(math.log2(proj.kx * 360 / 256))
    n = 2**z

    def tx(lon):
        return int((lon + 180) / 360 * n)

    def ty(lat):
        r = math.radians(lat)
        return int((1 - math.asinh(math.tan(r)) / math.pi) / 2 * n)

    return z, {
        (z, x, y)
        for x in range(tx(proj.west), tx(proj.east) + 1)
        for y in range(ty(proj.north), ty(proj.south) + 1)
    }


def tile_bounds(z, x, y):
    n = 2**z
    lat = lambda t: math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * t / n))))  # noqa: E731
    return x / n * 360 - 180, lat(y + 1), (x + 1) / n * 360 - 180, lat(y)


@pytest.mark.testbed
def test_basemap_tiles_at_their_web_mercator_place_when_allowed(page, tmp_path, tile_server):
    """A standalone page with a basemap (its origin allowed by the page's configuration): the tiles
    covering the view are asked for, at the zoom whose tiles are ~256 px, and each shows at its
    Web Mercator bounds; the attribution is drawn."""
    origin, asked = tile_server
    search = fixture("search_items")
    path = tmp_path / "map.html"
    path.write_text(map_page([search], basemap=origin + "/{z}/{x}/{y}.png", attribution="test tiles"))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-state=rendered]")
    page.wait_for_function("[...document.querySelectorAll('#map g.basemap image')].length > 0")
    page.wait_for_load_state("networkidle")
    proj = Projection(page)
    z, tiles = expected_tiles(proj)
    assert sorted(asked) == sorted(f"/{z}/{x}/{y}.png" for z, x, y in tiles)
    img = screenshot(page, tmp_path / "map-basemap.png")
    aoi = search["arguments"]["bbox"]
    bboxes = [aoi] + [i["bbox"] for i in found_items(search["result"]["structuredContent"])]
    checked = 0
    for tile in tiles:
        w, s, e, n = tile_bounds(*tile)
        for fx, fy in ((0.25, 0.25), (0.75, 0.75), (0.25, 0.75), (0.75, 0.25)):
            lon, lat = w + fx * (e - w), s + fy * (n - s)
            x, y = proj.px(lon, lat)
            inside_plot = proj.ox + proj.left + 4 < x < proj.ox + proj.left + proj.width - 4
            inside_plot = inside_plot and proj.oy + proj.top + 4 < y < proj.oy + proj.top + proj.height - 20
            covered = any(
                b[0] - 0.01 <= lon <= b[2] + 0.01 and b[1] - 0.01 <= lat <= b[3] + 0.01 for b in bboxes
            )
            if not inside_plot or covered:
                continue
            grid = [proj.px(g * proj.step_lon, 0)[0] for g in range(-1800, 1801)]
            grid_y = [proj.px(0, g * proj.step_lat)[1] for g in range(-900, 901)]
            if min(abs(x - g) for g in grid) < 3 or min(abs(y - g) for g in grid_y) < 3:
                continue
            want = "#{:02x}{:02x}{:02x}".format(*tile_color(*tile))
            assert color_near(img, x, y, want, radius=0, tolerance=3), (
                tile,
                img.getpixel((round(x), round(y))),
            )
            checked += 1
    assert checked >= 4
    assert "test tiles" in page.text_content("#map")
    page.requests[:] = [u for u in page.requests if not u.startswith(origin)]


@pytest.mark.testbed
def test_basemap_off_when_the_host_does_not_allow_its_origin(page, tmp_path, tile_server):
    """In a host whose sandbox CSP (reported in ui/initialize) does not list the tile origin, the
    page asks for no tile and draws the map without it."""
    origin, asked = tile_server
    search = fixture("search_items")
    app = map_html(origin + "/{z}/{x}/{y}.png", "test tiles")
    host = (
        HOST.replace("__CALL__", _js(sent(search)))
        .replace("__PAGE__", _js(app))
        .replace("__THUMBS__", _js({}))
        .replace("__CAPS__", _js({"serverTools": {}, "sandbox": {"csp": {"resourceDomains": []}}}))
    )
    host_file = tmp_path / "host.html"
    host_file.write_text(host)
    page.goto(host_file.as_uri())
    page.frame_locator("#app").locator("body[data-state=rendered] #map path.fp").first.wait_for()
    app_frame = next(f for f in page.frames if f != page.main_frame)
    assert app_frame.evaluate("document.querySelectorAll('#map g.basemap').length") == 0
    assert asked == [] and "test tiles" not in app_frame.inner_text("#map-wrap")


@pytest.mark.testbed
def test_standalone_page_with_inlined_thumbnails(page, tmp_path):
    """map_page (what `make demo` writes): the view is in the page, no fragment, no host; each
    scene's thumbnail, given as a data: URI for the item's own thumbnail reference, is in its row."""
    search = fixture("search_items")
    items = found_items(search["result"]["structuredContent"])
    colors = {i["id"]: (30 + 20 * n, 150, 220 - 20 * n) for n, i in enumerate(items)}
    thumbnails = {i["thumbnail"]: "data:image/png;base64," + solid_png(colors[i["id"]]) for i in items}
    path = tmp_path / "map.html"
    path.write_text(map_page([search], thumbnails=thumbnails))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-state=rendered]")
    assert page.evaluate("window.stacMap.view") == build_map_view([search])
    check_thumbnails(page, colors, tmp_path)
