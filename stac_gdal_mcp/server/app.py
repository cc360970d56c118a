"""build_server(settings) -> FastMCP: registers tools, resources and prompts; maps core errors once."""

from __future__ import annotations

import hmac
import logging

from ..core import Core
from ..settings import Settings

log = logging.getLogger("stac_gdal_mcp")

INSTRUCTIONS = """\
Find satellite imagery in STAC catalogs and process its Cloud-Optimized GeoTIFF assets.
Start with list_catalogs and list_collections, search with search_items (bbox in WGS84
[west, south, east, north], datetime as an RFC 3339 interval, max_cloud_cover in percent),
then get_item for a full item. Search results are compact summaries; page with next_cursor.
To know how cloudy the user's own area was, use cloud_cover_stats (per scene, inside the AOI),
not the scene-wide eo:cloud_cover. Process assets with inspect_asset, reproject_asset,
convert_asset and preview (inputs: href, or collection_id + item_id + asset, where asset may be
a band common name such as red, nir or scl); time_series and composite load many scenes.
Every file written is an output with a STAC-like record at stac-gdal://outputs/{output_id}.
"""


def _token_auth(token: str):
    from fastmcp.server.auth import AccessToken, TokenVerifier

    class BearerToken(TokenVerifier):
        """Every HTTP request must carry `Authorization: Bearer <token>`."""

        async def verify_token(self, candidate: str) -> AccessToken | None:
            if hmac.compare_digest(candidate.encode(), token.encode()):
                return AccessToken(token=candidate, client_id="stac-gdal-mcp", scopes=[])
            return None

    return BearerToken()


def build_server(
    settings: Settings | None = None, *, core: Core | None = None, http_token: str | None = None
):
    """The MCP server over a `Core`; `http_token` protects the HTTP transport."""
    from fastmcp import FastMCP

    from .. import __version__
    from .map_app import register_map_app
    from .tools import analysis, discovery, processing
    from .tools.errors import argument_errors_middleware

    core = core or Core(settings)
    mcp = FastMCP(
        "stac-gdal-mcp",
        instructions=INSTRUCTIONS,
        version=__version__,
        mask_error_details=True,
        auth=_token_auth(http_token) if http_token else None,
        middleware=[argument_errors_middleware()],
    )
    discovery.register(mcp, core)
    processing.register(mcp, core)
    analysis.register(mcp, core)
    register_map_app(mcp)  # the ui:// map the tools above point to (MCP Apps hosts)
    mcp.core = core  # for in-process users (tests, notebooks, extensions)
    # Last step: plugins and external servers, after every core tool, so name collisions are caught.
    from .extensions import install_extensions

    install_extensions(mcp, core)
    return mcp
