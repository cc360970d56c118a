"""build_server(settings) -> FastMCP: the tools, resources and prompts over one `Session`.

`build_server_parts` gives the parts too: the server, the Session its tools call, and the
extensions it loaded (closed with the session).
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..session import Session
from ..settings import Settings

if TYPE_CHECKING:
    from .extensions import Extensions

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
cloud_cover_stats, time_series and composite take their items as `search`, an object of
search_items' arguments: search={"collections": ["sentinel-2-l2a"], "datetime": "2024-06"}.
Every file written is an output with a STAC-like record at stac-gdal://outputs/{output_id}.
Array and object arguments may also be sent as JSON text (a string).
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


@dataclass(frozen=True)
class ServerParts:
    """A built server: `mcp` (the FastMCP server), the `session` its tools call, and the
    `extensions` (plugins, external servers) it loaded; `session.close()` stops the latter."""

    mcp: Any
    session: Session
    extensions: Extensions


def build_server_parts(
    settings: Settings | None = None, *, session: Session | None = None, http_token: str | None = None
) -> ServerParts:
    """The MCP server over `session` (default: a new Session from `settings`); `http_token`
    protects the HTTP transport. Output records of the session name themselves by this server's
    resource URIs (stac-gdal://outputs/...)."""
    from .._version import __version__
    from . import tasks
    from .extensions import install_extensions
    from .http_guard import guarded_server
    from .map_app import register_map_app
    from .resources import record_links
    from .tools import discovery, processing, register, saving
    from .tools.errors import argument_errors_middleware, hide_folders
    from .tools.operations import operation_tools

    if session is None:
        session = Session(settings)
    elif settings is not None and settings is not session.settings:
        raise ValueError("give either settings or a session, not both")
    session.outputs.links = record_links(session.settings)
    hide_folders(session.settings.workspace, *session.core.catalogs.local_roots())
    mcp = guarded_server(  # a FastMCP whose HTTP apps check Host and Origin first (DNS rebinding)
        session.settings,
        "stac-gdal-mcp",
        instructions=INSTRUCTIONS,
        version=__version__,
        mask_error_details=True,
        auth=_token_auth(http_token) if http_token else None,
        middleware=[argument_errors_middleware()],
    )
    tasks.install(mcp, session.settings)  # long tools as MCP tasks (server/tasks.py)
    # module-level tools, each bound to the session
    for tools in (discovery, processing, operation_tools(), saving):
        register(mcp, session, tools)
    discovery.register_prompts(mcp)
    register_map_app(mcp, *session.settings.map.tiles)  # the ui:// map the tools point to (MCP Apps)
    # Last step: plugins and external servers, after every core tool, so name collisions are caught.
    extensions = install_extensions(mcp, session)
    return ServerParts(mcp, session, extensions)


def build_server(
    settings: Settings | None = None, *, session: Session | None = None, http_token: str | None = None
):
    """The MCP server (a FastMCP) over `session`, or over a new Session from `settings`."""
    return build_server_parts(settings, session=session, http_token=http_token).mcp
