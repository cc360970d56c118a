"""The `registry` a plugin's `register(registry)` receives.

It adds tools (`add_tool`) and records optional metadata (`add_capability`), and gives access
to the library: the `Session` the core tools use (`registry.session`), and from it settings,
catalogs, asset resolution and the output store, so a plugin tool can do what a core tool does.
Nothing is added to the server until `register` returns without an error and none of the
plugin's tool names collide; a plugin is installed whole or not at all.
"""

import functools
import inspect
import json
import logging
from typing import Any

from ...errors import StacGdalMcpError
from ..tools import READ_ONLY, WRITES_OUTPUT
from ..tools.errors import client_error, message_for
from .names import TOOL_NAME

log = logging.getLogger("stac_gdal_mcp.server.extensions")


class Registry:
    READ_ONLY = READ_ONLY
    WRITES_OUTPUT = WRITES_OUTPUT

    def __init__(self, session, plugin_name: str):
        self.session = session  # the stac_gdal_mcp.Session the server's own tools call
        self.plugin_name = plugin_name
        self.tools: list = []  # fastmcp Tool objects, installed after register() succeeds
        self.capabilities: dict[str, Any] = {}
        self.log = logging.getLogger(f"stac_gdal_mcp.plugins.{plugin_name}")

    # -- read access to the core ---------------------------------------------------------
    @property
    def version(self) -> str:
        from ..._version import __version__

        return __version__

    @property
    def core(self):
        """The services core functions take first (`stac_gdal_mcp.core.Core`)."""
        return self.session.core

    @property
    def settings(self):
        return self.session.settings

    @property
    def catalogs(self):
        return self.session.core.catalogs

    @property
    def outputs(self):
        """The output store (`stac_gdal_mcp.outputs.OutputStore`): `writing(...)` then `commit(...)`
        gives a file in the workspace with a STAC-like record, exactly as core tools write theirs."""
        return self.session.outputs

    def resolve_input(self, **reference):
        """Resolve an input the way every processing tool does: `href=...`, or `collection_id=`,
        `item_id=`, `asset=` (a key or a band common name) and optionally `catalog=`. Returns an
        `AssetSource` (open it with `stac_gdal_mcp.processing.access.open_raster`)."""
        return self.session.asset(**reference)

    # -- what a plugin adds ---------------------------------------------------------------
    def add_tool(
        self, fn_or_definition, name: str | None = None, description: str | None = None, annotations=None
    ):
        """Add a tool: a function (its schema comes from the type hints and docstring, as for core
        tools) or a tool made with `fastmcp.tools.Tool.from_function(...)`. Name tools
        `<org>_<tool>`; a name that is taken is an error naming both sides."""
        from fastmcp.tools import Tool
        from fastmcp.tools.function_tool import FunctionTool

        if isinstance(fn_or_definition, FunctionTool):
            tool = fn_or_definition
            tool_name = name or tool.name
            update = {"name": tool_name, "fn": contain(tool.fn, tool_name, self.plugin_name)}
            if description is not None:
                update["description"] = description
            if annotations is not None:
                update["annotations"] = _annotations(annotations)
            tool = tool.model_copy(update=update)
        elif isinstance(fn_or_definition, Tool):
            raise TypeError(
                f"add_tool accepts a function or a tool made with Tool.from_function, "
                f"not a {type(fn_or_definition).__name__}"
            )
        elif callable(fn_or_definition):
            fn = fn_or_definition
            tool_name = name or fn.__name__
            tool = Tool.from_function(
                contain(fn, tool_name, self.plugin_name),
                name=tool_name,
                description=description,
                annotations=_annotations(annotations) if annotations is not None else None,
            )
        else:
            raise TypeError(f"add_tool needs a function, got {type(fn_or_definition).__name__}")
        if not TOOL_NAME.match(tool.name):
            raise ValueError(
                f"tool name {tool.name!r} is not valid (letters, digits, _ . - only, at most 128)"
            )
        self.tools.append(tool)
        return tool

    def add_capability(self, name: str, metadata: dict[str, Any] | None = None) -> None:
        """Record optional metadata (shown by list_extensions), e.g. add_capability("cloud_mask", {"sensors": [...]})."""
        if not isinstance(name, str) or not name:
            raise ValueError("a capability needs a non-empty name")
        metadata = {} if metadata is None else metadata
        json.dumps(metadata)  # shown by list_extensions: must be JSON (raises TypeError otherwise)
        self.capabilities[name] = metadata


def _annotations(value):
    from mcp.types import ToolAnnotations

    return value if isinstance(value, ToolAnnotations) else ToolAnnotations(**value)


def contain(fn, tool_name: str, plugin_name: str):
    """Wrap a plugin tool so that whatever it raises reaches the client as a tool error with a
    one-line message, never a stack trace (the traceback is logged only at DEBUG level)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                raise _tool_error(exc, tool_name, plugin_name) from None

    else:

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                raise _tool_error(exc, tool_name, plugin_name) from None

    return wrapper


def _tool_error(exc: Exception, tool_name: str, plugin_name: str):
    """The tool error for what a plugin tool raised, logged once (see tools/errors.py)."""
    from fastmcp.exceptions import ToolError

    if isinstance(exc, (ToolError, StacGdalMcpError)):
        return client_error(ToolError, message_for(exc), f"tool '{tool_name}' (plugin '{plugin_name}')")
    message = f"tool '{tool_name}' (plugin '{plugin_name}') failed: {type(exc).__name__}: {exc}"
    return client_error(ToolError, message, exc_info=exc if log.isEnabledFor(logging.DEBUG) else None)
