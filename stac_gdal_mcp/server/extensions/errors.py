"""Errors of the extension machinery (plugins and external servers)."""

from ...errors import ConfigError, StacGdalMcpError


class IncompatiblePluginError(StacGdalMcpError):
    """Raised by a plugin (at import or in `register`) that cannot work with this version of
    stac-gdal-mcp; the plugin is skipped and shown as failed, like any other broken plugin."""


class ExtensionError(ConfigError):
    """An extension could not be installed: a name collision, an invalid external-server entry,
    or - in strict mode - any extension that failed, which stops the server from starting."""


class ExternalServerError(StacGdalMcpError):
    """A call to an external MCP server could not be answered (not running, died, timed out)."""
