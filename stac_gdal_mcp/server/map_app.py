"""The map in the host: an MCP App (the `io.modelcontextprotocol/ui` extension).

`register_map_app(mcp)` registers the `ui://` resource: the map page of the core
(`stac_gdal_mcp.maps`, which `Session.map` shows in a notebook too: `maps/map.html`, inline
script and style, no library, with the Natural Earth 1:110m land and borders inlined), so it draws
a coastline with no network. Tools point to it with `_meta.ui.resourceUri`
(`app=map_app_config()` on the tool); hosts that implement MCP Apps show the page next to the tool
result and pass it the result, hosts that do not show the result as before. A tile basemap is off
unless `basemap` (a `{z}/{x}/{y}` URL) is given: its origin is then declared in the resource's CSP
(`resourceDomains`) and the page draws tiles only where the host allows that origin.
"""

from __future__ import annotations

from ..maps import map_html, tile_origin

__all__ = ["MAP_URI", "map_app_config", "register_map_app"]

MAP_URI = "ui://stac-gdal-mcp/map.html"


def map_app_config():
    """`app=` for a tool whose results the map can show: `_meta.ui.resourceUri` = MAP_URI."""
    from fastmcp.apps import AppConfig

    return AppConfig(resource_uri=MAP_URI)


def register_map_app(mcp, basemap: str | None = None, attribution: str | None = None) -> str:
    """Register the map page as the `ui://` resource on `mcp`; returns its URI. With `basemap` (a
    tile URL template such as `https://tile.openstreetmap.org/{z}/{x}/{y}.png`), its origin is
    declared in the resource's CSP `resourceDomains` and the page draws tiles where the host
    allows it."""
    from fastmcp.apps import AppConfig, ResourceCSP

    html = map_html(basemap, attribution)
    csp = ResourceCSP(resource_domains=[tile_origin(basemap)]) if basemap else None

    @mcp.resource(
        MAP_URI,
        name="map",
        title="Map: footprints, AOI, clear-sky ranking, quicklooks",
        description=(
            "MCP App (text/html;profile=mcp-app) that draws the result of search_items, "
            "cloud_cover_stats, time_series and the processing tools on a map with coastlines "
            "and borders. Self-contained: no network unless a basemap is configured."
        ),
        app=AppConfig(prefers_border=True, csp=csp),
    )
    def map_page_resource() -> str:
        return html

    return MAP_URI
