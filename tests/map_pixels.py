"""The map page in headless Chromium, and its screenshots checked pixel by pixel: what
test_map_page.py, test_map_notebook.py and test_zonal_mcp.py share (fixtures `browser`, `served`,
`page`; the colours docs/map-app.md gives; the page's declared projection; the checks).

Expected pixel positions are computed here from the items' bboxes and the projection the <svg>
declares (data-west/north/kx/ky/left/top), whose own sanity (aspect = cos(latitude), extent
covers every bbox) is checked too. Land and sea are where the Natural Earth polygons (decoded here,
in Python, with shapely) say; the coastline lies where its arcs project.

Chromium is Debian's (`apt-get install chromium`, done by scripts/install-test-deps.sh), driven
by playwright; when either is missing the browser tests skip locally and fail under CI=true.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import math
import os
import re
import shutil
import urllib.parse
from pathlib import Path

import pytest

from stac_gdal_mcp.maps import build_map_view, map_html
from stac_gdal_mcp.server.map_app import VIEW_META, view_as_sent

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
    from helpers import found_items

    return {item["id"]: item["bbox"] for item in found_items(search_fixture["result"]["structuredContent"])}


def _slot(html: str, name: str) -> str:
    return re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', html, re.S).group(1)


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
