"""The MCP layer: one module per tool family, each with `register(mcp, core)`.

Tool bodies are one call into the core; schemas come from the type hints and the
`Field(description=...)` of each argument (array and object arguments through `args.json_text`);
docstrings are written for an agent. Core errors become tool errors once, through `core_errors`
(see errors.py: one log line per error).
"""

import inspect

from ..schemas import compact_tool
from .errors import core_errors

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": True}
WRITES_OUTPUT = {
    "readOnlyHint": False,
    "destructiveHint": False,
    "idempotentHint": False,
    "openWorldHint": True,
}


def tool(mcp, annotations, **kwargs):
    """`@tool(mcp, READ_ONLY)`: register a tool whose core errors become tool errors."""

    def decorate(fn):
        wrapped = core_errors(fn)
        # the docstring as the description, given here: fastmcp then never imports griffe to parse
        # it (parameters are described by their Field annotations) - a faster cold start
        kwargs.setdefault("description", inspect.getdoc(fn))
        wrapped.__doc__ = None
        registered = mcp.tool(wrapped, annotations=annotations, **kwargs)
        compact_tool(mcp, kwargs.get("name") or fn.__name__)  # small listed schemas (server/schemas.py)
        return registered

    return decorate


def resource(mcp, uri, **kwargs):
    """`@resource(mcp, uri)`: register a resource whose core errors become resource errors."""
    from fastmcp.exceptions import ResourceError

    def decorate(fn):
        return mcp.resource(uri, **kwargs)(core_errors(fn, ResourceError))

    return decorate
