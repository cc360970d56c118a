"""Extensions: plugin tools (in-process) and external MCP servers (child processes over stdio).

`install_extensions(mcp, session)` is the last step of `build_server`: it adds `list_extensions`,
loads plugins (entry points in `stac_gdal_mcp.plugins`, then `*.py` files in the plugin
directory), then starts the configured external servers and mounts each under its name. Tool
names are unique across core tools, plugins and external servers: a collision fails the
extension that arrives second and names both sides. A failed extension is skipped with a
warning and shown by `list_extensions`; in strict mode the server refuses to start instead.

Plugins are trusted code running in our process. External servers are local programs we start
but do not sandbox; what they return is treated as untrusted. See docs/extending.md.
"""

import asyncio
import atexit
import logging
import re

from ...errors import ConfigError
from .errors import ExtensionError, ExternalServerError, IncompatiblePluginError
from .names import ToolNames
from .registry import Registry
from .report import ExtensionInfo, Extensions

__all__ = [
    "ExtensionError",
    "ExtensionInfo",
    "Extensions",
    "ExternalServerError",
    "IncompatiblePluginError",
    "Registry",
    "install_extensions",
]

log = logging.getLogger("stac_gdal_mcp.server.extensions")


def install_extensions(mcp, session) -> Extensions:
    """Load plugins and external servers into `mcp`; return what was loaded (closed with the
    session: external servers are stopped). Raises ExtensionError (a ConfigError) in strict
    mode if any extension failed."""
    from .plugins import discover, load_plugin

    settings = session.settings
    report = Extensions(strict=settings.plugins.strict)
    _register_list_extensions(mcp, report)

    sources, problems = discover(settings.plugins.dir)
    report.plugins += problems
    if sources or settings.external_servers:  # listing the core tools' names costs a start-up
        names = ToolNames(_tool_names(mcp))
        for source in sources:
            info = load_plugin(source, mcp, session, names)
            if info is not None:
                report.plugins.append(info)
        if settings.external_servers:
            _install_external_servers(mcp, settings.external_servers, names, report)

    session.on_close(report.close)
    failures = report.failures()
    if report.strict and failures:
        report.close()
        raise ExtensionError(
            "strict plugin mode (plugins.strict / STAC_GDAL_MCP_STRICT_PLUGINS) - refusing to start: "
            + "; ".join(f"{e.kind.replace('_', ' ')} '{e.name}' ({e.source}) {e.error}" for e in failures)
        )
    return report


def _register_list_extensions(mcp, report: Extensions) -> None:
    from ..tools import READ_ONLY, tool
    from .report import ExtensionList

    @tool(mcp, {**READ_ONLY, "openWorldHint": False})
    def list_extensions() -> ExtensionList:
        """This server's plugins and external MCP servers (tools named <server>_<tool>): status,
        error, tools: why an expected tool is missing."""
        return ExtensionList(extensions=report.entries())


def _tool_names(mcp) -> list[str]:
    """Names of the tools registered so far (core tools), listed on a private event loop so this
    works whether or not the caller is inside one."""
    from concurrent.futures import ThreadPoolExecutor

    async def names():
        return [t.name for t in await mcp.list_tools(run_middleware=False)]

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, names()).result()


def _install_external_servers(mcp, configs, names: ToolNames, report: Extensions) -> None:
    from .external import ExternalServer, launch_spec
    from .host import Host
    from .redact import redact_argv

    specs, seen = [], set()
    for config in configs:
        try:
            if config.name in seen:
                raise ConfigError(f"external server '{config.name}': another external server has this name")
            seen.add(config.name)
            specs.append(launch_spec(config))
        except ConfigError as exc:
            literal = [v for v in config.env.values() if isinstance(v, str)]
            shown = redact_argv(config.cmd, literal) if config.cmd else (config.script or "")
            info = ExtensionInfo(
                kind="external_server", name=config.name, source=shown, status="failed", error=str(exc)
            )
            log.warning("external server %s skipped: %s", config.name, exc)
            report.external.append(info)
    if not specs:
        return

    report.host = host = Host()
    atexit.register(report.close)
    servers = [ExternalServer(spec) for spec in specs]

    async def start_all():
        await asyncio.gather(*(server.start() for server in servers))

    host.run(start_all(), timeout=max(s.timeout_s for s in servers) + 30)
    for server in servers:
        report.external.append(server)
        if server.status != "running":
            continue
        tool_names = [f"{server.name}_{t.name}" for t in server.tools]
        try:
            names.claim(tool_names, f"external server '{server.name}' ({server.spec.shown})")
        except ExtensionError as exc:
            server.fail_now(str(exc))
            host.run(server.stop(), timeout=30)
            continue
        _mount(mcp, server, host)
        server.exposed = (
            tool_names,
            [_namespaced_uri(server.name, str(r.uri)) for r in server.resources]
            + [_namespaced_uri(server.name, t.uri_template) for t in server.templates],
            [f"{server.name}_{p.name}" for p in server.prompts],
        )


def _mount(mcp, server, host) -> None:
    """Mount the server's components under its name: tools and prompts become <name>_<x>,
    resources scheme://<name>/path (fastmcp's namespacing)."""
    from fastmcp import FastMCP

    from .components import ExternalPrompt, ExternalResource, ExternalTemplate, ExternalTool

    facade = FastMCP(server.name, mask_error_details=True)
    for t in server.tools:
        facade.add_tool(ExternalTool.from_mcp(t, server, host))
    for r in server.resources:
        facade.add_resource(ExternalResource.from_mcp(r, server, host))
    for t in server.templates:
        facade.add_template(ExternalTemplate.from_mcp(t, server, host))
    for p in server.prompts:
        facade.add_prompt(ExternalPrompt.from_mcp(p, server, host))
    mcp.mount(facade, namespace=server.name)


def _namespaced_uri(namespace: str, uri: str) -> str:
    return re.sub(r"^([^:]+://)", lambda m: f"{m.group(1)}{namespace}/", uri, count=1)
