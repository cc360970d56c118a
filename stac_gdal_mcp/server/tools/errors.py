"""How errors reach the client and the log: once each, in one line. The one place where core
errors become MCP errors.

- A core error's message is the core's (neutral: it names arguments, not tools), plus what this
  face adds for some classes: the tool to call next (`HINTS`).
- An expected failure (a core error, an external server that is down, a plugin that raised) is
  given to the client as a tool (resource, prompt) error with its message, and logged here as
  ONE warning line. The fastmcp error carries `log_level=DEBUG`, so fastmcp's own record of it
  (once per server layer - mounted external servers are a second layer - without the message,
  and with a traceback for resources) only shows in a debug log.
- Arguments that do not validate get a one-line error naming each bad parameter instead of
  pydantic's multi-line report (`ArgumentErrors`); fastmcp logs such a call as one line.
- Anything else is a bug: fastmcp masks it for the client and logs its traceback.

Why not fastmcp's ErrorHandlingMiddleware: it turns exceptions into JSON-RPC errors (-32602,
-32603, ...), where a tool error must be a result with isError (the agent reads it and acts),
and it runs after fastmcp has already logged the failure with a traceback.
"""

import functools
import inspect
import logging
import re
from pathlib import Path

from ...catalogs.security import folders_pattern, scrubbed
from ...errors import CatalogUnavailable, CollectionNotFound, OutputExists, OutputNotFound, StacGdalMcpError

log = logging.getLogger("stac_gdal_mcp.tools")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# What this face adds to a core error's message: the tool that helps next.
HINTS: dict[type[StacGdalMcpError], str] = {
    OutputNotFound: "; list_outputs shows the outputs there are",
    OutputExists: " or delete_output it first",
    CatalogUnavailable: " (list_catalogs shows them)",
    CollectionNotFound: "; list_collections shows a catalog's collections",
}


def message_for(exc: BaseException) -> str:
    """The message a client gets for a core error: the core's, with this face's hint."""
    text = str(exc)
    if "; it has: " in text:  # the message lists the choices already
        return text
    for kind, hint in HINTS.items():
        if isinstance(exc, kind) and hint.strip(" ;") not in text:
            return text + hint
    return text


# The servers' own folders (workspaces, local catalogs' folders): a path under one is named
# relative to it in every error a client gets (a library's "cannot open /srv/ws/x.tif").
_SERVER_FOLDERS: set[Path] = set()
_hidden = folders_pattern(())


def hide_folders(*folders) -> None:
    """Add folders that error messages never show (see `client_error`)."""
    global _hidden
    _SERVER_FOLDERS.update(Path(f) for f in folders)
    _hidden = folders_pattern(_SERVER_FOLDERS)


def client_error(error_type, message: str, what: str | None = None, exc_info=None):
    """`error_type(message)` (ToolError, ResourceError, PromptError) for an expected failure,
    logged here as one line: "<what> failed: <message>" (just the message without `what`). Paths
    under the servers' own folders are named relative to them (`hide_folders`)."""
    message = _CONTROL.sub(lambda m: repr(m.group())[1:-1], message)  # one line, whatever the input held
    message = scrubbed(message, _hidden)
    if what is None:
        log.warning("%s", message, exc_info=exc_info)
    else:
        log.warning("%s failed: %s", what, message, exc_info=exc_info)
    return error_type(message, log_level=logging.DEBUG)


def core_errors(fn, error_type=None):
    """Wrap a tool or resource function so that a core error reaches the client as a
    ToolError (ResourceError for resources) carrying its message, without a traceback."""
    if error_type is None:
        from fastmcp.exceptions import ToolError as error_type
    what = f"{'tool' if error_type.__name__ == 'ToolError' else 'resource'} '{fn.__name__}'"

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except StacGdalMcpError as exc:
                raise client_error(error_type, message_for(exc), what) from None

    else:

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except StacGdalMcpError as exc:
                raise client_error(error_type, message_for(exc), what) from None

    return wrapper


def argument_errors_middleware():
    """fastmcp middleware: a tool call whose arguments do not validate fails with one line."""
    from fastmcp.exceptions import ToolError, ValidationError
    from fastmcp.server.middleware import Middleware
    from pydantic import ValidationError as PydanticValidationError

    from ...operations.base import argument_errors

    class ArgumentErrors(Middleware):
        async def on_call_tool(self, context, call_next):
            try:
                return await call_next(context)
            except ValidationError as exc:
                cause = exc.__cause__
                if not isinstance(cause, PydanticValidationError):
                    raise
                message = argument_errors(cause) + await _nearest_names(context, cause)
                message = f"invalid arguments for {context.message.name}: {message}"
                raise ToolError(message, log_level=logging.DEBUG) from None

    return ArgumentErrors()


async def _nearest_names(context, error) -> str:
    """The hints "; serch: did you mean 'search'?" for each unknown argument near a name the tool takes."""
    from ...operations.base import nearest

    unknown = [str(e["loc"][0]) for e in error.errors() if e["type"] == "unexpected_keyword_argument"]
    if not unknown:
        return ""
    tool = await context.fastmcp_context.fastmcp.get_tool(context.message.name)
    names = list((tool.parameters if tool else {}).get("properties", {}))
    return "".join(f"; {name}: {nearest(name, names)}" for name in unknown if nearest(name, names))
