"""list_extensions: the plugins and external servers this server loaded, and how each is doing."""

from ..extensions.report import ExtensionList, Extensions
from . import READ_ONLY, tool


def register(mcp, extensions: Extensions) -> None:
    @tool(mcp, {**READ_ONLY, "openWorldHint": False})
    def list_extensions() -> ExtensionList:
        """List the extensions of this server: plugins (in-process tools) and external MCP servers
        (their tools appear as <server>_<tool>). For each: kind, name, source, version, status
        (loaded / running / failed / died / stopped), the error if it failed, its tools, and any
        capabilities it declared; `extensions` is empty when none is configured. Use it to see
        why an expected tool is missing."""
        return ExtensionList(extensions=extensions.entries())
