"""The map MCP App: its ui:// resource, its view data, and the page in a real headless Chromium.

The page builds no view: it draws `build_map_view`'s. It is loaded with the views of tool results
recorded on the sample catalog (tests/ui_fixtures/, written by scripts/record_ui_fixtures.py):
through the `#data=` fragment, embedded in a standalone page (`map_page`), and as the server
sends them (in the result's `_meta`, live from the server on the sample catalog) through
`window.postMessage` and inside an iframe of a minimal MCP Apps host (ui/initialize, tool-input,
tool-result, and the resources/read the page makes for thumbnails).
Screenshots are checked pixel by pixel: where each footprint's bbox projects, the outline has the
colour the docs give it; each call's AOI is drawn; far from everything is land or sea, as the
Natural Earth polygons (decoded here, in Python, with shapely) say, and known places (the
northern Adriatic) are land or sea; the coastline lies where its arcs project; the quicklook
shows the PNG's own pixels; basemap tiles served on 127.0.0.1 lie at their Web Mercator bounds.
Expected pixel positions are computed here from the items' bboxes and the projection the <svg>
declares (data-west/north/kx/ky/left/top), whose own sanity (aspect = cos(latitude), extent
covers every bbox) is checked too.

Chromium is Debian's (`apt-get install chromium`, done by scripts/install-test-deps.sh), driven
by playwright; when either is missing the browser tests skip locally and fail under CI=true.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import math
import os
import re
import shutil
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest

from stac_gdal_mcp.maps import build_map_view, map_html, map_page
from stac_gdal_mcp.maps.view import footprint_search
from stac_gdal_mcp.server.map_app import MAP_URI, VIEW_META, map_app_config, register_map_app, view_as_sent

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "ui_fixtures"
PAGE = ROOT / "stac_gdal_mcp" / "maps" / "map.html"
WORLD = ROOT / "stac_gdal_mcp" / "data" / "naturalearth" / "countries-110m.json"
DOCS_IMG = ROOT / "docs" / "img"
DOCS_IMAGE = DOCS_IMG / "map-app.png"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The colours docs/map-app.md gives (the page's legend): the test's own copy of the spec.
LAND = "#f7f5ef"
SEA = "#dde8f0"
COAST = "#7d8e9b"
FOOTPRINT = "#2b6cb0"
AOI = "#c026d3"
CLEAR_CLASSES = [(0.9, "#1a9850"), (0.7, "#66bd63"), (0.5, "#d9a400"), (0.3, "#f46d43"), (0.0, "#d73027")]
UNMEASURED = "#8a8a8a"
# The restrictive default CSP an MCP Apps host applies when a resource declares no domains.
HOST_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; "
    "object-src 'none'; base-uri 'self'"
)


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))


def clear_color(fraction) -> str:
    if fraction is None:
        return UNMEASURED
    return next(color for minimum, color in CLEAR_CLASSES if fraction >= minimum)


def ranking_calls(*then: str) -> list[dict]:
    """The recorded ranking, the search of its scenes' footprints, then the fixtures `then`."""
    return [fixture(name) for name in ("cloud_cover_stats", "cloud_cover_stats.footprints", *then)]


def sent(call: dict) -> dict:
    """`call` with its result as the server sends it to an MCP Apps host (the view in `_meta`)."""
    result = {**call["result"], "_meta": {**call["result"].get("_meta", {}), VIEW_META: view_as_sent([call])}}
    return {**call, "result": result}


def item_bboxes(search_fixture: dict) -> dict[str, list[float]]:
    return {item["id"]: item["bbox"] for item in search_fixture["result"]["structuredContent"]["items"]}


# --- without a browser -----------------------------------------------------------------------------


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


def _slot(html: str, name: str) -> str:
    return re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', html, re.S).group(1)


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
    hostile = {
        "arguments": {},
        "result": {"structuredContent": {"notes": ["</script><script>alert(1)</script>"]}},
    }
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
    from mcp.client.extension import advertise

    mcp = FastMCP("map-view-test")
    register_map_app(mcp)
    ranking = {"aoi_bbox": [1.0, 2.0, 3.0, 4.0], "items": [{"item_id": "a", "collection_id": "c"}]}

    @mcp.tool(app=map_app_config())
    def ranked(catalog: str) -> dict:
        return ranking

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
    items = search["result"]["structuredContent"]["items"]
    assert [f["id"] for f in view["footprints"]] == [i["id"] for i in items]
    assert [f["bbox"] for f in view["footprints"]] == [i["bbox"] for i in items]
    assert [f["cloud_cover"] for f in view["footprints"]] == [i["cloud_cover"] for i in items]
    assert [f["thumbnail"] for f in view["footprints"]] == [i.get("thumbnail") for i in items]
    assert view["aois"] == [{"bbox": search["arguments"]["bbox"], "geometry": None, "tool": "search_items"}]
    assert view["ranking"] == [] and view["outputs"] == [] and view["errors"] == []


def test_view_of_a_ranking_with_its_footprints_and_a_quicklook():
    stats, footprints, preview = ranking_calls("preview")
    rows = stats["result"]["structuredContent"]["items"]

    alone = build_map_view([stats])
    assert [r["id"] for r in alone["ranking"]] == [r["item_id"] for r in rows]
    assert alone["footprints"] == []  # the rows carry no footprint: the server searches them
    assert footprint_search(alone, stats["arguments"]) == footprints["arguments"]
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


def test_view_of_aoi_given_as_geometry_or_json_text_and_of_errors():
    polygon = {"type": "Polygon", "coordinates": [[[1, 2], [3, 2], [3, 5], [1, 5], [1, 2]]]}
    ranked = {"result": {"structuredContent": {"aoi_bbox": [1, 2, 3, 5], "items": []}}}
    assert build_map_view([{**ranked, "arguments": {"aoi": json.dumps(polygon)}}])["aois"] == [
        {"bbox": [1, 2, 3, 5], "geometry": polygon, "tool": None}
    ]
    searched = {"arguments": {"intersects": polygon}, "result": {"structuredContent": {"items": []}}}
    assert build_map_view([searched])["aois"] == [{"bbox": [1, 2, 3, 5], "geometry": polygon, "tool": None}]
    utm = {"arguments": {"bbox": [500000, 5000000, 510000, 5010000], "bbox_crs": "EPSG:32633"}, "result": {}}
    assert build_map_view([utm])["aois"] == []
    failed = {"result": {"isError": True, "content": [{"type": "text", "text": "collection 'x' not found"}]}}
    assert build_map_view([failed])["errors"] == ["collection 'x' not found"]


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
            asked += [("preview", host, preview), ("search_items", plain, footprints)]
            out = {}
            for name, client, call in asked:
                result = await client.call_tool_mcp(call["tool"], call["arguments"])
                out[name] = {
                    **call,
                    "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
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


# --- in Chromium -----------------------------------------------------------------------------------


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"headless Chromium unavailable (CI=true makes this a failure): {reason}")
    pytest.skip(f"headless Chromium unavailable: {reason}")


@pytest.fixture
def browser():
    """Per test: sync playwright keeps an event loop running while it is open, which async tests
    of the same module must not see."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}); pip install -e '.[test]'")
    executable = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).exists():
        _unavailable(f"{executable} not found; bash scripts/install-test-deps.sh installs Debian's chromium")
    with sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
        except Exception as exc:
            _unavailable(f"{executable} did not start: {exc}")
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    """The page as the server serves it (the world map inlined), as a file."""
    path = tmp_path_factory.mktemp("served") / "map.html"
    path.write_text(map_html())
    return path


@pytest.fixture
def page(browser, served):
    """A page at 900 x 1000 CSS px (scale 1), recording every request, console error and page error."""
    context = browser.new_context(viewport={"width": 900, "height": 1000}, device_scale_factor=1)
    pg = context.new_page()
    pg.served = served
    pg.requests, pg.problems = [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("console", lambda m: pg.problems.append(m.text) if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: pg.problems.append(str(e)))
    yield pg
    context.close()
    assert pg.problems == [], f"console errors or CSP violations: {pg.problems}"
    fetched = [u for u in pg.requests if not u.startswith(("data:", "about:", "file://"))]
    assert fetched == [], f"the page fetched something at view time: {fetched}"


def open_with_fragment(pg, calls: list[dict]) -> None:
    """The served page drawing the view of `calls`, given in the fragment."""
    pg.goto(pg.served.as_uri() + "#data=" + urllib.parse.quote(json.dumps(build_map_view(calls))))
    pg.wait_for_selector("body[data-state=rendered]")


def screenshot(target, path: Path):
    from PIL import Image

    path.write_bytes(target.screenshot())
    return Image.open(path).convert("RGB")


class Projection:
    """The page's declared projection, as screenshot pixels (origin: the svg's top-left corner)."""

    def __init__(self, frame, offset=(0.0, 0.0)):
        data = frame.evaluate(
            """() => { const svg = document.getElementById('map'); const r = svg.getBoundingClientRect();
                       return { ...svg.dataset, x: r.left, y: r.top }; }"""
        )
        self.west, self.south, self.east, self.north = (
            float(data[k]) for k in ("west", "south", "east", "north")
        )
        self.kx, self.ky = float(data["kx"]), float(data["ky"])
        self.left, self.top = float(data["left"]), float(data["top"])
        self.width, self.height = float(data["width"]), float(data["height"])
        self.step_lon, self.step_lat = float(data["stepLon"]), float(data["stepLat"])
        self.ox, self.oy = data["x"] + offset[0], data["y"] + offset[1]
        # what is drawn over the ground besides footprints: place names and dots, the scale bar
        rects = frame.evaluate(
            """() => [...document.querySelectorAll('#map .places > *, #map .scalebar')].map(e => {
                       const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })"""
        )
        self.overlays = [
            (x0 + offset[0], y0 + offset[1], x1 + offset[0], y1 + offset[1]) for x0, y0, x1, y1 in rects
        ]

    def over_overlay(self, x: float, y: float, margin: float = 3) -> bool:
        return any(
            x0 - margin <= x <= x1 + margin and y0 - margin <= y <= y1 + margin
            for x0, y0, x1, y1 in self.overlays
        )

    def px(self, lon: float, lat: float) -> tuple[float, float]:
        return (
            self.ox + self.left + (lon - self.west) * self.kx,
            self.oy + self.top + (self.north - lat) * self.ky,
        )

    def check(self, bboxes) -> None:
        """Equirectangular with x scaled by cos(mid latitude), and every bbox inside the view."""
        mid = math.radians((self.south + self.north) / 2)
        assert self.kx / self.ky == pytest.approx(math.cos(mid), rel=1e-6)
        assert (self.east - self.west) * self.kx == pytest.approx(self.width, rel=1e-6)
        assert (self.north - self.south) * self.ky == pytest.approx(self.height, rel=1e-6)
        for w, s, e, n in bboxes:
            assert self.west < w < e < self.east and self.south < s < n < self.north


def edge_points(bbox, fractions=(0.2, 0.4, 0.6, 0.8)):
    """Points on the four edges of a bbox, in lon/lat."""
    w, s, e, n = bbox
    for t in fractions:
        yield (w + t * (e - w), n)
        yield (w + t * (e - w), s)
        yield (w, s + t * (n - s))
        yield (e, s + t * (n - s))


def distance_to_outline(proj, bbox, x, y) -> float:
    """Pixels from (x, y) to the nearest edge of bbox's projected rectangle."""
    (x0, y0), (x1, y1) = proj.px(bbox[0], bbox[3]), proj.px(bbox[2], bbox[1])
    dx = 0 if x0 <= x <= x1 else min(abs(x - x0), abs(x - x1))
    dy = 0 if y0 <= y <= y1 else min(abs(y - y0), abs(y - y1))
    if dx == 0 and dy == 0:
        return min(abs(x - x0), abs(x - x1), abs(y - y0), abs(y - y1))
    on_x = x0 <= x <= x1
    on_y = y0 <= y <= y1
    if on_x:
        return min(abs(y - y0), abs(y - y1))
    if on_y:
        return min(abs(x - x0), abs(x - x1))
    return math.hypot(dx, dy)


def color_near(img, x, y, color, radius=2, tolerance=12) -> bool:
    want = rgb(color)
    for i in range(round(x) - radius, round(x) + radius + 1):
        for j in range(round(y) - radius, round(y) + radius + 1):
            inside = 0 <= i < img.width and 0 <= j < img.height
            if inside and all(abs(a - b) <= tolerance for a, b in zip(img.getpixel((i, j)), want)):
                return True
    return False


def check_outlines(img, proj, drawn: list[tuple[list[float], str]], others=()) -> int:
    """Each bbox in `drawn` ([(bbox, colour)], bottom to top) shows its colour on its outline, or
    the colour of the topmost outline passing within 3 px. Returns how many points were checked."""
    checked = 0
    for bbox, color in drawn:
        for lon, lat in edge_points(bbox):
            x, y = proj.px(lon, lat)
            if any(distance_to_outline(proj, other, x, y) < 6 for other in others):
                continue  # the AOI or an output outline is drawn over here
            near = [c for b, c in drawn if distance_to_outline(proj, b, x, y) <= 3]
            expected = near[-1] if near else color
            assert color_near(img, x, y, expected), (
                f"no {expected} at ({x:.1f}, {y:.1f}) on the outline of {bbox}; "
                f"found {img.getpixel((round(x), round(y)))}"
            )
            checked += 1
    return checked


def decode_world() -> tuple:
    """The bundled TopoJSON decoded here, independently of the page: (land as shapely polygons,
    the coastline and the borders (arcs two countries share) as line lists)."""
    from shapely.geometry import LineString, Polygon

    topo = json.loads(WORLD.read_text())
    (sx, sy), (tx, ty) = topo["transform"]["scale"], topo["transform"]["translate"]
    arcs = []
    for arc in topo["arcs"]:
        xy = [0, 0]
        points = []
        for dx, dy in arc:
            xy = [xy[0] + dx, xy[1] + dy]
            points.append((xy[0] * sx + tx, xy[1] * sy + ty))
        arcs.append(points)

    def ring(ids):
        out = []
        for k, i in enumerate(ids):
            part = arcs[i] if i >= 0 else arcs[~i][::-1]
            out.extend(part if k == 0 else part[1:])
        return out

    def polygons(g):
        return [g["arcs"]] if g["type"] == "Polygon" else g["arcs"] if g["type"] == "MultiPolygon" else []

    land = [
        Polygon(ring(p[0]), [ring(h) for h in p[1:]])
        for g in topo["objects"]["land"]["geometries"]
        for p in polygons(g)
    ]
    coast = [
        LineString(ring(r)) for g in topo["objects"]["land"]["geometries"] for p in polygons(g) for r in p
    ]
    owners: dict[int, set] = {}
    for n, g in enumerate(topo["objects"]["countries"]["geometries"]):
        for p in polygons(g):
            for r in p:
                for i in r:
                    owners.setdefault(i if i >= 0 else ~i, set()).add(n)
    borders = [LineString(arcs[i]) for i, who in owners.items() if len(who) > 1]
    return land, coast, borders


_WORLD_CACHE: list = []


def world():
    if not _WORLD_CACHE:
        _WORLD_CACHE.append(decode_world())
    return _WORLD_CACHE[0]


def on_land(land, lon, lat) -> bool:
    from shapely.geometry import Point

    return any(p.contains(Point(lon, lat)) for p in land)


def pixel_lines(proj, lines):
    """Lines (lon/lat) in screenshot pixels, as one shapely geometry."""
    from shapely.geometry import LineString, MultiLineString

    return MultiLineString([LineString([proj.px(x, y) for x, y in line.coords]) for line in lines])


def check_ground(img, proj, bboxes) -> int:
    """Points of the plot 12 px or more from every drawn bbox, 3 px from the graticule, the
    coastline, the borders, the place names and the scale bar show land or sea as the Natural Earth polygons say. Returns how
    many were checked."""
    from shapely.geometry import Point, box

    land, coast, borders = world()
    view = box(proj.west, proj.south, proj.east, proj.north)
    lines = pixel_lines(proj, [line for line in coast + borders if line.intersects(view)])
    checked = 0
    step = 23
    for i in range(1, int(proj.width // step)):
        for j in range(1, int(proj.height // step)):
            x, y = proj.ox + proj.left + i * step, proj.oy + proj.top + j * step
            lon = proj.west + (x - proj.ox - proj.left) / proj.kx
            lat = proj.north - (y - proj.oy - proj.top) / proj.ky
            inside = any(b[0] <= lon <= b[2] and b[1] <= lat <= b[3] for b in bboxes)
            if inside or any(distance_to_outline(proj, b, x, y) < 12 for b in bboxes):
                continue
            grid_x = [
                proj.px(k * proj.step_lon, 0)[0]
                for k in range(round(lon / proj.step_lon) - 1, round(lon / proj.step_lon) + 2)
            ]
            grid_y = [
                proj.px(0, k * proj.step_lat)[1]
                for k in range(round(lat / proj.step_lat) - 1, round(lat / proj.step_lat) + 2)
            ]
            if min(abs(x - g) for g in grid_x) < 3 or min(abs(y - g) for g in grid_y) < 3:
                continue
            if not lines.is_empty and lines.distance(Point(x, y)) < 3:
                continue
            if proj.over_overlay(x, y):
                continue
            expected = LAND if on_land(land, lon, lat) else SEA
            assert color_near(img, x, y, expected, radius=0, tolerance=2), (
                f"({x}, {y}) = ({lon:.3f}, {lat:.3f}) far from everything is {img.getpixel((x, y))}, not {expected}"
            )
            checked += 1
    return checked


def drawn_order(view_footprints: list[dict], ranked: bool) -> list[dict]:
    """Bottom to top, as docs/map-app.md says: in a ranking the clearest scene of a stack is on
    top (cloudiest first; ties: the earlier item on top); otherwise the first result on top."""
    indexed = list(enumerate(view_footprints))
    if ranked:
        indexed.sort(key=lambda p: (p[1]["clear"] if p[1]["clear"] is not None else -1, -p[0]))
    else:
        indexed.reverse()
    return [fp for _, fp in indexed]


def check_quicklook(img, proj, call, others) -> int:
    """The PNG's own pixels where the output's bbox projects (uniform spots, off the outlines of
    `others`); returns how many were compared (90 % must match)."""
    from PIL import Image

    (content,) = [c for c in call["result"]["content"] if c["type"] == "image"]
    png = Image.open(io.BytesIO(base64.b64decode(content["data"]))).convert("RGBA")
    w, s, e, n = call["result"]["structuredContent"]["bbox"]
    compared = matched = 0
    for fx in [k / 10 for k in range(1, 10)]:
        for fy in [k / 10 for k in range(1, 10)]:
            px, py = int(fx * png.width), int(fy * png.height)
            spot = [png.getpixel((i, j)) for i in range(px - 2, px + 3) for j in range(py - 2, py + 3)]
            if any(p[3] < 255 for p in spot) or max(max(c) - min(c) for c in zip(*[p[:3] for p in spot])) > 8:
                continue
            x, y = proj.px(w + fx * (e - w), n - fy * (n - s))
            if any(distance_to_outline(proj, b, x, y) < 6 for b in others):
                continue
            compared += 1
            matched += color_near(
                img, x, y, "#{:02x}{:02x}{:02x}".format(*png.getpixel((px, py))[:3]), radius=1, tolerance=24
            )
    assert matched >= 0.9 * compared, f"{matched} of {compared} quicklook pixels found"
    return compared


@pytest.mark.testbed
def test_search_footprints_drawn_where_their_bboxes_project(page, tmp_path):
    search = fixture("search_items")
    open_with_fragment(page, [search])
    img = screenshot(page, tmp_path / "map-search.png")
    proj = Projection(page)
    items = search["result"]["structuredContent"]["items"]
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
    DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "map-ranking.png", DOCS_IMAGE)
    assert page.evaluate("window.stacMap.view") == build_map_view(calls)

    proj = Projection(page)
    rows = stats["result"]["structuredContent"]["items"]
    clear = {r["item_id"]: r["clear_fraction"] for r in rows}
    items = [
        {"bbox": i["bbox"], "clear": clear[i["id"]], "id": i["id"]}
        for i in footprints["result"]["structuredContent"]["items"]
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


def check_coast(img, proj, others) -> int:
    """Points every ~15 px along the coastline in view show the coast colour (1.5 px stroke),
    except near the graticule, the borders and `others` (bboxes). Returns how many were checked."""
    from shapely.geometry import Point, box

    land, coast, borders = world()
    view = box(proj.west, proj.south, proj.east, proj.north)
    near_borders = pixel_lines(proj, [b for b in borders if b.intersects(view)])
    checked = 0
    for line in coast:
        part = line.intersection(view)
        for piece in getattr(part, "geoms", [part]):
            if piece.is_empty or piece.geom_type != "LineString":
                continue
            pixels = [proj.px(x, y) for x, y in piece.coords]
            length = sum(math.dist(a, b) for a, b in itertools.pairwise(pixels))
            for k in range(1, int(length // 15)):
                lon, lat = piece.interpolate(k / (length // 15), normalized=True).coords[0]
                x, y = proj.px(lon, lat)
                grid = [proj.px(g * proj.step_lon, 0)[0] for g in range(-180, 181)]
                grid_y = [proj.px(0, g * proj.step_lat)[1] for g in range(-90, 91)]
                if min(abs(x - g) for g in grid) < 3 or min(abs(y - g) for g in grid_y) < 3:
                    continue
                if near_borders.distance(Point(x, y)) < 4 or any(
                    distance_to_outline(proj, b, x, y) < 5 for b in others
                ):
                    continue
                frame = (proj.ox + proj.left, proj.oy + proj.top)
                if not (
                    frame[0] + 3 < x < frame[0] + proj.width - 3
                    and frame[1] + 3 < y < frame[1] + proj.height - 3
                ):
                    continue
                assert color_near(img, x, y, COAST, radius=1, tolerance=40), (
                    f"no coastline at ({lon:.3f}, {lat:.3f}) -> ({x:.1f}, {y:.1f}): {img.getpixel((round(x), round(y)))}"
                )
                checked += 1
    return checked


@pytest.mark.testbed
def test_coastline_and_each_calls_aoi_where_they_belong(page, tmp_path):
    """The northern Adriatic: land and sea where every map has them, the coastline where its arcs
    project, and the AOIs of two calls (a search and a time series) both drawn, each at its place."""
    series = fixture("time_series")
    calls = [
        {
            "tool": "search_items",
            "arguments": {"bbox": ADRIATIC["search_items"]},
            "result": {"structuredContent": {"items": []}},
        },
        {**series, "arguments": {**series["arguments"], "aoi": ADRIATIC["time_series"]}},
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


def solid_png(color, size=(16, 16)) -> str:
    """A PNG of one colour, base64."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def check_thumbnails(root, colors: dict[str, tuple[int, int, int]], tmp_path) -> None:
    """Each row of the table (in `root`, a page or a frame) shows its own scene's thumbnail, of
    `colors[id]`; a row captured while the list is drawn again (it scrolls back) is captured again."""
    for item_id, color in colors.items():
        cell = root.locator(f"#list tr[data-id='{item_id}'] img.thumb")
        for _ in range(5):
            cell.scroll_into_view_if_needed()
            shot = screenshot(cell, tmp_path / "thumb.png")
            centre = shot.getpixel((shot.width // 2, shot.height // 2))
            if all(abs(a - b) <= 2 for a, b in zip(centre, color)):
                break
        else:
            raise AssertionError(f"row {item_id}: {centre} where its thumbnail is {color}")


def _js(value) -> str:
    return json.dumps(value).replace("</", "<\\/")


@pytest.mark.testbed
def test_in_a_host_over_the_mcp_apps_protocol(page, live, tmp_path):
    """The page in a sandboxed iframe under the host's default CSP: handshake, tool-input and
    tool-result (the ranking as the server sent it: its view in _meta, with the footprints the
    server found) from the host, no tool called by the page, thumbnails named by resource URIs read
    with resources/read and shown in the table, size reported."""
    stats, footprints = live["cloud_cover_stats"], live["search_items"]
    scenes = footprints["result"]["structuredContent"]["items"]
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
                live = await client.call_tool_mcp(recorded["tool"], recorded["arguments"])
                live = live.model_dump(mode="json", by_alias=True, exclude_none=True)
                text = json.dumps(live).replace(str(tmp_path), "<workspace>").replace(str(ROOT), "<repo>")
                call = {
                    "tool": recorded["tool"],
                    "arguments": recorded["arguments"],
                    "result": json.loads(text),
                }
                assert build_map_view([call]) == build_map_view([recorded]), name
    finally:
        session.close()


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
    bboxes = [aoi] + [i["bbox"] for i in search["result"]["structuredContent"]["items"]]
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
    items = search["result"]["structuredContent"]["items"]
    colors = {i["id"]: (30 + 20 * n, 150, 220 - 20 * n) for n, i in enumerate(items)}
    thumbnails = {i["thumbnail"]: "data:image/png;base64," + solid_png(colors[i["id"]]) for i in items}
    path = tmp_path / "map.html"
    path.write_text(map_page([search], thumbnails=thumbnails))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-state=rendered]")
    assert page.evaluate("window.stacMap.view") == build_map_view([search])
    check_thumbnails(page, colors, tmp_path)


def test_ranking_rows_take_the_fields_every_row_shares():
    """cloud_cover_stats sends the fields its rows share once, in `common` (a ranking of one
    collection: collection_id there): the map's ranking rows still name their collection and CRS."""
    import copy

    call = copy.deepcopy(fixture("cloud_cover_stats"))
    sc = call["result"]["structuredContent"]
    assert sc["common"] == {"crs": "EPSG:32633"}
    sc["items"] = [r for r in sc["items"] if r.pop("collection_id") == "sentinel-2-l2a"]
    sc["common"]["collection_id"] = "sentinel-2-l2a"
    call["result"].pop("content", None)  # the view is built from the structured content
    ranking = build_map_view([call])["ranking"]
    assert len(ranking) == 5
    assert {r["collection"] for r in ranking} == {"sentinel-2-l2a"}


# --- Session.map: the same map in a notebook ----------------------------------------------------

NOTEBOOK_AOI = [13.595, 45.915, 13.63, 45.94]
NOTEBOOK_SEARCH = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-09-30"}
NOTEBOOK_FIELDS = {
    "type": "FeatureCollection",
    "features": [
        {"type": "Feature", "id": zone_id, "properties": {},
         "geometry": {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}}
        for zone_id, (w, s, e, n) in {
            "vineyard": (13.600, 45.927, 13.610, 45.935), "meadow": (13.610, 45.920, 13.620, 45.927)
        }.items()
    ],
}  # fmt: skip


@pytest.fixture
def sample_session(tmp_path):
    from stac_gdal_mcp import Session
    from stac_gdal_mcp.settings import load_settings

    with Session(load_settings(default_catalog="sample", workspace=tmp_path / "workspace")) as opened:
        yield opened


async def _tool_views(session, calls: dict[str, dict]) -> dict[str, dict]:
    """build_map_view of each tool's answer, called through a fastmcp Client (as a host calls it)."""
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server

    views = {}
    async with Client(build_server(session=session)) as client:
        for tool, arguments in calls.items():
            result = await client.call_tool_mcp(tool, arguments)
            dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            assert not dumped.get("isError"), dumped
            views[tool] = build_map_view([{"tool": tool, "arguments": arguments, "result": dumped}])
    return views


def _without_thumbnails(view: dict) -> dict:
    return {**view, "footprints": [{**fp, "thumbnail": None} for fp in view["footprints"]]}


async def test_session_map_gives_the_view_of_the_tools_answers(sample_session):
    """session.map(ranking | search results | zonal table | time series).view is the view the
    page builds from the cloud_cover_stats, search_items, zonal_stats and time_series answers of
    the same calls; a search's local thumbnails are inlined (the tool names them by resource URI)."""
    session = sample_session
    search = {"catalog": "sample", **NOTEBOOK_SEARCH}
    tools = await _tool_views(
        session,
        {
            "cloud_cover_stats": {"aoi": NOTEBOOK_AOI, "search": search},
            "search_items": {**search, "bbox": NOTEBOOK_AOI},
            "zonal_stats": {"geometries": NOTEBOOK_FIELDS, "search": search},
            "time_series": {"aoi": NOTEBOOK_AOI, "search": search},
        },
    )
    ranking = session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH)
    assert len(ranking) == 5 and session.map(ranking).view == tools["cloud_cover_stats"]
    assert tools["cloud_cover_stats"]["aois"][0]["bbox"] == NOTEBOOK_AOI

    results = session.search(bbox=NOTEBOOK_AOI, **NOTEBOOK_SEARCH)
    mapped = session.map(results)
    assert _without_thumbnails(mapped.view) == _without_thumbnails(tools["search_items"])
    assert [fp["id"] for fp in mapped.view["footprints"]] == results.ids and len(results) == 5
    for summary, fp in zip(results.summaries, mapped.view["footprints"]):
        assert fp["thumbnail"] == summary.thumbnail and Path(summary.thumbnail).is_file()
        want = "data:image/png;base64," + base64.b64encode(Path(summary.thumbnail).read_bytes()).decode()
        assert mapped.thumbnails[summary.thumbnail] == want
    for fp in tools["search_items"]["footprints"]:  # the tool's: resources the host reads
        assert fp["thumbnail"] == f"stac://sample/collections/sentinel-2-l2a/items/{fp['id']}/thumbnail"

    zonal = session.map(session.zonal_stats(NOTEBOOK_FIELDS, **NOTEBOOK_SEARCH)).view
    assert zonal == tools["zonal_stats"] and [z["id"] for z in zonal["zones"][0]["zones"]] == [
        "vineyard",
        "meadow",
    ]
    series = session.map(session.time_series(NOTEBOOK_AOI, **NOTEBOOK_SEARCH)).view
    assert series["series"][0]["image"].startswith("data:image/png;base64,")
    assert series == tools["time_series"]  # the chart too: drawn as the tool saves it


def test_session_map_of_outputs_and_several_results(sample_session, tmp_path):
    """An output record at its bbox, a preview with its quicklook, several results on one map;
    anything else refused in one line naming its type."""
    from stac_gdal_mcp.errors import InvalidArgument
    from stac_gdal_mcp.maps.calls import local_thumbnails

    session = sample_session
    item = ("sentinel-2-l2a", "S2A_33TUL_20240619_0_L2A")
    preview = session.preview(item, "red", bbox=NOTEBOOK_AOI, max_size=64)
    ranking = session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH)
    both = session.map(ranking, session.search(ids=list(ranking["item_id"])), preview)
    view = both.view
    # the preview was asked for the same bbox: one AOI, the first call's
    assert view["aois"] == [{"bbox": NOTEBOOK_AOI, "geometry": None, "tool": "cloud_cover_stats"}]
    assert session.map(preview).view["aois"] == [{"bbox": NOTEBOOK_AOI, "geometry": None, "tool": "preview"}]
    assert sorted(fp["rank"] for fp in view["footprints"]) == list(range(5))  # each ranked scene's footprint
    (output,) = view["outputs"]  # the preview at its bbox, with its quicklook
    assert output["bbox"] == preview.record.bbox and output["id"] == preview.record.id
    assert output["image"] == "data:image/png;base64," + base64.b64encode(preview.png).decode()
    assert session.map(preview.record).view["outputs"] == [{**output, "image": None}]  # the record alone
    assert repr(both) == "<MapView aois=1 footprints=5 ranking=5 outputs=1>"
    outside = tmp_path / "elsewhere.png"  # an image outside the catalogs and the workspace
    outside.write_bytes(preview.png)
    inside = str(session.outputs.path(preview.record.id))
    assert local_thumbnails([str(outside), inside, "https://example.org/t.png"], session.core) == {
        inside: output["image"]
    }
    for wrong in (42, {"tool": "x"}, session):
        with pytest.raises(InvalidArgument) as caught:
            session.map(wrong)
        assert str(caught.value).endswith(f"not {type(wrong).__name__}") and "\n" not in str(caught.value)


def test_session_map_shows_inline_as_the_standalone_page(sample_session, tmp_path):
    """In Jupyter: one <iframe> whose srcdoc is the page `save` writes, with the calls in it."""
    mapped = sample_session.map(sample_session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH))

    class Frames(HTMLParser):
        def __init__(self):
            super().__init__()
            self.frames = []

        def handle_starttag(self, tag, attrs):
            self.frames.append((tag, dict(attrs)))

    parser = Frames()
    parser.feed(mapped._repr_html_())
    ((tag, attrs),) = parser.frames
    path = mapped.save(tmp_path / "map.html")
    assert tag == "iframe" and attrs["srcdoc"] == path.read_text(encoding="utf-8") == mapped.html()
    assert attrs["sandbox"] == "allow-scripts"
    assert json.loads(_slot(attrs["srcdoc"], "map-view")) == mapped.view
    assert build_map_view(mapped.calls) == mapped.view


@pytest.mark.testbed
def test_session_map_page_and_notebook_frame_draw_the_rankings_aoi(page, sample_session, tmp_path):
    """The page `session.map(ranking).save()` writes draws the ranking's AOI where it projects, on
    the bundled coastline; shown as in Jupyter (its <iframe srcdoc> in a page) it draws the same
    view, without waiting for a host."""
    mapped = sample_session.map(sample_session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH))
    page.goto(mapped.save(tmp_path / "map.html").as_uri())
    page.wait_for_selector("body[data-state=rendered]")
    assert page.evaluate("window.stacMap.view") == mapped.view
    proj = Projection(page)
    proj.check([NOTEBOOK_AOI])
    img = screenshot(page, tmp_path / "session-map.png")
    assert check_outlines(img, proj, [(NOTEBOOK_AOI, AOI)]) == 16
    assert check_ground(img, proj, [NOTEBOOK_AOI]) >= 20

    notebook = tmp_path / "notebook.html"
    notebook.write_text(f"<!doctype html><html><body style='margin:0'>{mapped._repr_html_()}</body></html>")
    page.goto(notebook.as_uri())
    page.frame_locator("iframe").locator("body[data-state=rendered]").wait_for()
    frame = next(f for f in page.frames if f != page.main_frame)
    assert frame.evaluate("window.stacMap.view") == mapped.view
    box = page.locator("iframe").bounding_box()
    for _ in range(10):  # the frame may lay out (and draw) again once it has its size
        proj = Projection(frame, offset=(box["x"] + 1, box["y"] + 1))  # inside the frame's 1 px border
        img = screenshot(page, tmp_path / "session-map-frame.png")
        if vars(Projection(frame, offset=(box["x"] + 1, box["y"] + 1))) == vars(proj):
            break
    assert check_outlines(img, proj, [(NOTEBOOK_AOI, AOI)]) == 16
    assert "host" not in frame.text_content("#status")
