"""The MCP layer: one module per tool family, each with `register(mcp, core)`.

Tool bodies are one call into the core; schemas come from the type hints and the
`Field(description=...)` of each argument; docstrings are written for an agent. Core errors
become tool errors here, once, through `core_errors`.
"""

import functools
import inspect

from ..errors import StacGdalMcpError

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": True}
WRITES_OUTPUT = {
    "readOnlyHint": False,
    "destructiveHint": False,
    "idempotentHint": False,
    "openWorldHint": True,
}


def core_errors(fn, error_type=None):
    """Wrap a tool or resource function so that a core error reaches the client as a
    ToolError (ResourceError for resources) carrying its message, without a traceback."""
    if error_type is None:
        from fastmcp.exceptions import ToolError as error_type

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except StacGdalMcpError as exc:
                raise error_type(str(exc)) from None

    else:

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except StacGdalMcpError as exc:
                raise error_type(str(exc)) from None

    return wrapper


def tool(mcp, annotations, **kwargs):
    """`@tool(mcp, READ_ONLY)`: register a tool whose core errors become tool errors."""

    def decorate(fn):
        return mcp.tool(core_errors(fn), annotations=annotations, **kwargs)

    return decorate


def resource(mcp, uri, **kwargs):
    """`@resource(mcp, uri)`: register a resource whose core errors become resource errors."""
    from fastmcp.exceptions import ResourceError

    def decorate(fn):
        return mcp.resource(uri, **kwargs)(core_errors(fn, ResourceError))

    return decorate
