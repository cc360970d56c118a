"""The MCP face: `build_server(settings)` returns a FastMCP server whose tools, resources and
prompts call the library (`stac_gdal_mcp.Session`). Nothing below this package imports it."""

from .app import ServerParts, build_server, build_server_parts

__all__ = ["ServerParts", "build_server", "build_server_parts"]
