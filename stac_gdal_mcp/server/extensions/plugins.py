"""Find and load plugins: entry points in the group `stac_gdal_mcp.plugins`, then every `*.py`
file directly in the plugin directory (`STAC_GDAL_MCP_PLUGIN_DIR` or `plugins.dir`).

Each plugin provides `register(registry)`. A plugin that fails to import, raises in `register`,
declares itself incompatible (IncompatiblePluginError) or brings a tool name that is taken is
skipped and recorded as failed; the caller decides whether that stops the server (strict mode).
"""

import importlib.util
import logging
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from .errors import ExtensionError, IncompatiblePluginError
from .names import ToolNames
from .registry import Registry
from .report import ExtensionInfo

ENTRY_POINT_GROUP = "stac_gdal_mcp.plugins"
MODULE_PREFIX = "stac_gdal_mcp_plugins"

log = logging.getLogger("stac_gdal_mcp.server.extensions")


@dataclass
class PluginSource:
    name: str
    source: str
    version: str | None
    load: Callable[[], object]  # imports the plugin, returns its register callable (or module)
    is_file: bool = False  # a file of the plugin directory (one without register() is not a plugin)


def discover(plugin_dir: Path | None) -> tuple[list[PluginSource], list[ExtensionInfo]]:
    """The plugins to load, in order (entry points by name, then files by name), and a failed
    record if the configured plugin directory is missing."""
    found = [
        _from_entry_point(ep) for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    ]
    problems = []
    if plugin_dir is not None:
        folder = Path(plugin_dir).expanduser()
        if not folder.is_dir():
            problems.append(
                ExtensionInfo(
                    kind="plugin",
                    name=folder.name or str(folder),
                    source=f"plugin directory {folder}",
                    status="failed",
                    error=f"plugin directory {folder} does not exist or is not a directory",
                )
            )
        else:
            found += [
                _from_file(path)
                for path in sorted(folder.glob("*.py"))
                if path.is_file() and not path.name.startswith("_")
            ]
    return found, problems


def _from_entry_point(ep) -> PluginSource:
    dist = getattr(ep, "dist", None)
    where = f" ({dist.name} {dist.version})" if dist is not None else ""
    return PluginSource(
        name=ep.name,
        source=f"entry point {ep.name} = {ep.value}{where}",
        version=dist.version if dist is not None else None,
        load=ep.load,
    )


def _from_file(path: Path) -> PluginSource:
    def load():
        module_name = f"{MODULE_PREFIX}.{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        return module

    return PluginSource(name=path.stem, source=f"file {path}", version=None, load=load, is_file=True)


def load_plugin(plugin: PluginSource, mcp, session, names: ToolNames) -> ExtensionInfo | None:
    """Import and register one plugin; add its tools to `mcp` only if all of it worked.
    Returns None for a plugin-directory file that defines no `register` (not a plugin)."""
    info = ExtensionInfo(
        kind="plugin", name=plugin.name, source=plugin.source, version=plugin.version, status="failed"
    )
    owner = f"plugin '{plugin.name}' ({plugin.source})"
    try:
        loaded = plugin.load()
    except IncompatiblePluginError as exc:
        return _failed(info, f"incompatible: {exc}")
    except (Exception, SystemExit) as exc:
        return _failed(info, f"cannot be imported: {type(exc).__name__}: {exc}")
    if isinstance(loaded, types.ModuleType):
        version = getattr(loaded, "__version__", None)
        info.version = str(version) if version is not None else info.version
        register = getattr(loaded, "register", None)
        if register is None and plugin.is_file:
            log.info(
                "plugin directory: %s defines no register(registry); not a plugin, skipped", plugin.source
            )
            return None
    else:
        register = loaded
    if not callable(register):
        return _failed(info, "has no register(registry) callable")
    registry = Registry(session, plugin.name)
    try:
        register(registry)
    except IncompatiblePluginError as exc:
        return _failed(info, f"incompatible: {exc}")
    except (Exception, SystemExit) as exc:
        return _failed(info, f"register() raised {type(exc).__name__}: {exc}")
    tool_names = [tool.name for tool in registry.tools]
    try:
        names.claim(tool_names, owner)
    except ExtensionError as exc:
        return _failed(info, str(exc))
    for tool in registry.tools:
        mcp.add_tool(tool)
    info.status, info.tools, info.capabilities = "loaded", tool_names, registry.capabilities
    log.info("plugin %s loaded from %s: %s", plugin.name, plugin.source, ", ".join(tool_names) or "no tools")
    return info


def _failed(info: ExtensionInfo, why: str) -> ExtensionInfo:
    info.status, info.error = "failed", why
    log.warning("plugin %s (%s) skipped: %s", info.name, info.source, why)
    return info
