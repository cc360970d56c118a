"""The map page: maps/map.html (inline script and style, no library) with the Natural Earth
1:110m land, borders and populated places inlined (data/naturalearth/), so it draws a coastline
and names places with no network.

`map_html(basemap, attribution)` is the page a host shows beside a tool result (the result
carries its view); `map_page(calls)` is the same page with the view of the calls in it
(`build_map_view`): a file to open in a browser or to show in a notebook. The page is package
data read as a file: the same whoever serves it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from .view import build_map_view

MAP_HTML = ("maps", "map.html")  # inside the stac_gdal_mcp package
WORLD = ("data", "naturalearth", "countries-110m.json")
PLACES = ("data", "naturalearth", "populated-places-110m.json")

_SLOT = '<script type="application/json" id="{}">{}</script>'


@cache
def _page_source() -> str:
    return resources.files("stac_gdal_mcp").joinpath(*MAP_HTML).read_text(encoding="utf-8")


@cache
def _bundled(*path: str) -> str:
    """A bundled JSON file as text safe inside <script>."""
    text = resources.files("stac_gdal_mcp").joinpath(*path).read_text(encoding="utf-8").strip()
    return text.replace("<", "\\u003c")


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no `</` (closing tag) or `<!--`."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def _fill(html: str, slot: str, text: str) -> str:
    empty = _SLOT.format(slot, "{}" if slot == "map-config" else "")
    if html.count(empty) != 1:
        raise RuntimeError(f"map.html: the #{slot} script is missing")
    return html.replace(empty, _SLOT.format(slot, text))


def tile_origin(basemap: str) -> str:
    """`https://host[:port]` of a tile URL template; ValueError if it is not http(s) with {z}/{x}/{y}."""
    parts = urlsplit(basemap)
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or not all(k in basemap for k in ("{z}", "{x}", "{y}"))
    ):
        raise ValueError(f"basemap: a http(s) tile URL with {{z}}, {{x}} and {{y}} expected, not {basemap!r}")
    return f"{parts.scheme}://{parts.netloc}".lower()


def map_html(
    basemap: str | None = None,
    attribution: str | None = None,
    view: Mapping[str, Any] | None = None,
    thumbnails: Mapping[str, str] | None = None,
) -> str:
    """The page: map.html with the world map inlined and its configuration (`basemap`: a tile URL
    template, off when None; `thumbnails`: thumbnail as given -> `data:` URI); with `view`
    (`build_map_view`'s), a standalone page that draws it (see `map_page`)."""
    config: dict[str, Any] = {}
    if basemap:
        config["basemap"] = {"url": basemap, "attribution": attribution or ""}
        config["resource_domains"] = [tile_origin(basemap)]
    if thumbnails:
        config["thumbnails"] = dict(thumbnails)
    html = _fill(_page_source(), "world-110m", _bundled(*WORLD))
    html = _fill(html, "places-110m", _bundled(*PLACES))
    if config:
        html = _fill(html, "map-config", _script_json(config))
    if view is not None:
        html = _fill(html, "map-view", _script_json(view))
    return html


def map_page(calls: Iterable[Mapping[str, Any]], **options: Any) -> str:
    """A standalone HTML page of the map drawing `calls` (`{"tool", "arguments", "result"}` each,
    as for `build_map_view`, which builds the view it holds): open it in a browser or show it in a
    notebook. `options` as for `map_html` (basemap, attribution, thumbnails)."""
    return map_html(view=build_map_view(calls), **options)
