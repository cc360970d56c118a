"""The map's basemap from the server's settings, end to end in headless Chromium: a server built
with `[map] basemap` (a tile server on 127.0.0.1) and `attribution` serves its ui:// page and
declares the tile origin in the resource's CSP; a minimal MCP Apps host shows the page in a
sandboxed iframe under the CSP a host builds from that declaration (the origin added to img-src)
and reports it in ui/initialize. With the tile server up, its tiles are drawn at their Web
Mercator places with the attribution; with it down (a host offline, tiles that do not load), the
offline Natural Earth map is what shows, land and sea where the polygons say.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

import map_pixels
import pytest
from helpers import found_items
from map_pixels import HOST_CSP, Projection, check_ground, color_near, fixture, screenshot, sent
from test_map_page import HOST, _js, expected_tiles, tile_bounds, tile_color, tile_server

browser, served, page = map_pixels.browser, map_pixels.served, map_pixels.page
tiles = tile_server  # the fixture of test_map_page: a PNG of one colour per z/x/y on 127.0.0.1
ATTRIBUTION = "local test tiles"
pytestmark = pytest.mark.testbed  # a tile server on 127.0.0.1, as the other basemap tests


def served_page(make_settings, basemap: str) -> tuple[str, list[str]]:
    """(the ui:// page's HTML, the resource's declared resourceDomains) of a server whose settings
    say `[map] basemap = basemap`, `attribution = ATTRIBUTION` (read over MCP, in a thread: the
    browser's event loop must not see this one)."""
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.server.map_app import MAP_URI

    async def read():
        mcp = build_server(make_settings(map={"basemap": basemap, "attribution": ATTRIBUTION}))
        async with Client(mcp) as client:
            (content,) = await client.read_resource(MAP_URI)
            listed = {str(r.uri): r for r in await client.list_resources()}
        csp = ((listed[MAP_URI].meta or {}).get("ui") or {}).get("csp") or {}
        return content.text, list(csp.get("resourceDomains") or [])

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


def open_in_host(page, tmp_path, html: str, domains: list[str]):
    """The page in the host's sandboxed iframe, the declared domains allowed for images (as a host
    builds its CSP from the resource's) and reported in ui/initialize; the search's result sent."""
    csp = HOST_CSP.replace("img-src 'self' data:", "img-src 'self' data: " + " ".join(domains))
    app = html.replace("<head>", f'<head><meta http-equiv="Content-Security-Policy" content="{csp}">', 1)
    caps = {"serverTools": {}, "sandbox": {"csp": {"resourceDomains": domains}}}
    search = fixture("search_items")
    host = (
        HOST.replace("__CALL__", _js(sent(search)))
        .replace("__PAGE__", _js(app))
        .replace("__THUMBS__", _js({}))
        .replace("__CAPS__", _js(caps))
    )
    host_file = tmp_path / "host.html"
    host_file.write_text(host)
    page.goto(host_file.as_uri())
    page.frame_locator("#app").locator("body[data-state=rendered] #map path.fp").first.wait_for()
    frame = next(f for f in page.frames if f != page.main_frame)
    box = page.locator("#app").bounding_box()
    return frame, Projection(frame, offset=(box["x"], box["y"])), search


def test_tiles_from_the_settings_basemap_drawn_in_a_host(make_settings, page, tmp_path, tiles):
    origin, asked = tiles
    html, domains = served_page(make_settings, origin + "/{z}/{x}/{y}.png")
    assert domains == [origin]
    frame, proj, search = open_in_host(page, tmp_path, html, domains)
    assert wait_for(frame, "document.querySelectorAll('#map g.basemap image').length > 0")
    page.wait_for_load_state("networkidle")
    z, wanted = expected_tiles(proj)
    assert sorted(asked) == sorted(f"/{z}/{x}/{y}.png" for z, x, y in wanted)
    img = screenshot(page, tmp_path / "basemap-in-host.png")
    checked = 0
    for x, y, lon, lat in clear_points(proj, drawn_bboxes(search)):  # each shows its tile's colour
        tile = next(t for t in wanted if _inside(t, lon, lat))
        want = "#{:02x}{:02x}{:02x}".format(*tile_color(*tile))
        assert color_near(img, x, y, want, radius=0, tolerance=3), (tile, img.getpixel((round(x), round(y))))
        checked += 1
    assert checked >= 20
    assert ATTRIBUTION in frame.inner_text("#map-wrap")
    page.requests[:] = [u for u in page.requests if not u.startswith(origin)]


def test_offline_natural_earth_map_where_the_tiles_do_not_load(make_settings, page, tmp_path):
    origin = f"http://127.0.0.1:{closed_port()}"
    html, domains = served_page(make_settings, origin + "/{z}/{x}/{y}.png")
    frame, proj, search = open_in_host(page, tmp_path, html, domains)
    assert tiles_refused(page)  # the page asked for the tiles, and drew the map without them:
    assert wait_for(frame, "document.querySelectorAll('#map g.basemap image').length === 0")
    img = screenshot(page, tmp_path / "basemap-offline.png")
    assert check_ground(img, proj, drawn_bboxes(search)) >= 20  # land and sea as Natural Earth says
    page.requests[:] = [u for u in page.requests if not u.startswith(origin)]
    page.problems[:] = [p for p in page.problems if not p.startswith("Failed to load resource")]


def tiles_refused(page, seconds: float = 20.0) -> int:
    """How many loads the page saw refused (nothing listens at the tiles' origin; its other
    resources are data: and file: URLs), once that number has held for half a second. Polled
    through playwright so its events arrive: on a loaded machine the page asks for its tiles well
    after network idle, and Chromium does not always report a sandboxed frame's refused image as
    a request event, but always as the frame's console error."""
    import time

    end, seen, held = time.monotonic() + seconds, -1, 0
    while time.monotonic() < end and held < 5:
        page.wait_for_timeout(100)
        refused = sum("ERR_CONNECTION_REFUSED" in p for p in page.problems)
        held = held + 1 if refused and refused == seen else 0
        seen = refused
    return max(seen, 0)


def wait_for(frame, condition: str, seconds: float = 10.0) -> bool:
    """Whether `condition` came true in the frame within `seconds`, asked every 0.1 s (the
    frame's CSP forbids eval, which playwright's wait_for_function polls with)."""
    import time

    end = time.monotonic() + seconds
    while not frame.evaluate(f"() => {condition}"):
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


def drawn_bboxes(search: dict) -> list[list[float]]:
    return [search["arguments"]["bbox"]] + [
        i["bbox"] for i in found_items(search["result"]["structuredContent"])
    ]


def clear_points(proj, bboxes, step: int = 23):
    """(x, y, lon, lat) of plot points away from the drawn bboxes (12 px), the graticule (3 px)
    and the labels and scale bar: where only the ground (tiles or the world map) shows."""
    from map_pixels import distance_to_outline

    for i in range(1, int(proj.width // step)):
        for j in range(1, int((proj.height - 20) // step)):
            x, y = proj.ox + proj.left + i * step, proj.oy + proj.top + j * step
            lon = proj.west + (x - proj.ox - proj.left) / proj.kx
            lat = proj.north - (y - proj.oy - proj.top) / proj.ky
            if any(b[0] <= lon <= b[2] and b[1] <= lat <= b[3] for b in bboxes):
                continue
            if any(distance_to_outline(proj, b, x, y) < 12 for b in bboxes) or proj.over_overlay(x, y):
                continue
            grid_x = proj.px(round(lon / proj.step_lon) * proj.step_lon, 0)[0]
            grid_y = proj.px(0, round(lat / proj.step_lat) * proj.step_lat)[1]
            if abs(x - grid_x) >= 3 and abs(y - grid_y) >= 3:
                yield x, y, lon, lat


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _inside(tile, lon, lat) -> bool:
    w, s, e, n = tile_bounds(*tile)
    return w <= lon < e and s <= lat < n
