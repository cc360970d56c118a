"""The map in the host: an MCP App (the `io.modelcontextprotocol/ui` extension).

`register_map_app(mcp)` registers the `ui://` resource: the map page of the core
(`stac_gdal_mcp.maps`, which `Session.map` shows in a notebook too: `maps/map.html`, inline
script and style, no library, with the Natural Earth 1:110m land and borders inlined), so it draws
a coastline with no network. Tools point to it with `_meta.ui.resourceUri`
(`app=map_app_config()` on the tool); hosts that implement MCP Apps show the page next to the tool
result and pass it the result, hosts that do not show the result as before. A tile basemap is off
unless `basemap` (a `{z}/{x}/{y}` URL) is given: its origin is then declared in the resource's CSP
(`resourceDomains`) and the page draws tiles only where the host allows that origin.

The page builds nothing: when the client declares the MCP Apps extension, the result of a tool
on the map carries the map's view (`build_map_view`) in `_meta["stac-gdal-mcp/map-view"]`
(its quicklook as `{"content": index}`: the image block of the same result, sent once), and a
cloud_cover_stats ranking's view has its scenes' footprints (found with search_items here).
The tool's content and structured content are unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

from ..maps import build_map_view, map_html, tile_origin
from ..maps.view import footprint_search, image_block
from ..models import MAP_LAYER_META, MAP_VIEW_META

__all__ = ["MAP_URI", "VIEW_META", "map_app_config", "map_view", "register_map_app", "view_as_sent"]

MAP_URI = "ui://stac-gdal-mcp/map.html"
VIEW_META = MAP_VIEW_META  # the key of the view in a tool result's _meta

log = logging.getLogger(__name__)


def map_app_config():
    """`app=` for a tool whose results the map can show: `_meta.ui.resourceUri` = MAP_URI."""
    from fastmcp.apps import AppConfig

    return AppConfig(resource_uri=MAP_URI)


def result_json(result) -> dict[str, Any]:
    """A fastmcp ToolResult as the CallToolResult JSON the view reads (its map layer in `_meta`)."""
    content = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]
    out = {"content": content, "structuredContent": result.structured_content, "isError": result.is_error}
    return {**out, "_meta": result.meta} if result.meta else out


def view_as_sent(calls: list[dict], view: dict[str, Any] | None = None) -> dict[str, Any]:
    """`build_map_view(calls)` (or `view`, already built of them) as a result's `_meta` carries
    it: a quicklook or chart is `{"content": index}`, the image block of the first call's result
    that holds it (the image travels once)."""
    view = build_map_view(calls) if view is None else view
    content = calls[0]["result"].get("content") or []
    first = image_block(calls[0]["result"])
    for entry in view["outputs"] + view["series"]:
        if entry["image"] is not None:
            same = [i for i, c in enumerate(content) if entry["image"].endswith("," + str(c.get("data")))]
            entry["image"] = {"content": same[0] if same else first}
    return view


async def map_view(mcp, tool: str, arguments: dict, result) -> dict[str, Any]:
    """The view of one tool call as the page gets it (`view_as_sent`); for a ranking whose scenes
    have no footprint, with the search_items call that finds them (made here, on `mcp`)."""
    from fastmcp.exceptions import ToolError

    calls = [{"tool": tool, "arguments": arguments, "result": result_json(result)}]
    view = build_map_view(calls)  # built once: the footprints it lacks, then the view as sent
    search = footprint_search(view, calls[0]["result"])
    if search is None:
        return view_as_sent(calls, view)
    try:
        found = await mcp.call_tool("search_items", search, run_middleware=False)
    except Exception as exc:  # the view without them: the ranking is still the answer
        log.warning("map: the footprints of a ranking could not be fetched: %r", exc)
        view = view_as_sent(calls, view)
        view["notes"].append(
            "Footprints could not be fetched" + (f": {exc}" if isinstance(exc, ToolError) else "")
        )
        return view
    return view_as_sent([*calls, {"tool": "search_items", "arguments": search, "result": result_json(found)}])


def _map_views():
    """fastmcp middleware: the result of a tool on the map carries its view in `_meta`, for a
    client that declares the MCP Apps extension."""
    from fastmcp.apps import UI_EXTENSION_ID
    from fastmcp.server.middleware import Middleware
    from fastmcp.tools.base import ToolResult

    class MapViews(Middleware):
        async def on_call_tool(self, context, call_next):
            result = await call_next(context)
            if not isinstance(result, ToolResult):
                return result
            view = await self._view(context, result)
            meta = {k: v for k, v in (result.meta or {}).items() if k != MAP_LAYER_META}  # the view's
            result.meta = {**meta, VIEW_META: view} if view is not None else meta or None
            return result

        async def _view(self, context, result):
            ctx = context.fastmcp_context
            if ctx is None or not ctx.client_supports_extension(UI_EXTENSION_ID):
                return None
            name, arguments = context.message.name, dict(context.message.arguments or {})
            tool = await ctx.fastmcp.get_tool(name)
            if tool is None or ((tool.meta or {}).get("ui") or {}).get("resourceUri") != MAP_URI:
                return None
            try:
                return await map_view(ctx.fastmcp, name, arguments, result)
            except Exception:  # the answer matters more than its map: sent without a view
                log.exception("map: no view for a %s result", name)
                return None

    return MapViews()


def register_map_app(mcp, basemap: str | None = None, attribution: str | None = None) -> str:
    """Register the map page as the `ui://` resource on `mcp`, and the middleware that gives the
    results of the tools on the map their view; returns its URI. With `basemap` (a tile URL
    template such as `https://tile.openstreetmap.org/{z}/{x}/{y}.png`), its origin is declared in
    the resource's CSP `resourceDomains` and the page draws tiles where the host allows it."""
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

    mcp.add_middleware(_map_views())
    return MAP_URI
