"""stac-gdal-mcp: find imagery in STAC catalogs and process its COG assets with GDAL.

The package is two layers: a core of plain functions returning pydantic models
(`stac_gdal_mcp.discovery`, `stac_gdal_mcp.processing`, ...) that a notebook can call
directly, and a thin MCP server on top (`stac_gdal_mcp.server.build_server`).
"""

__version__ = "0.1.0"
