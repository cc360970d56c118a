"""The MCP layer: one module per tool family. Its tools (and resources) are module-level
functions whose first parameter is the `session`, declared with `@session_tool(...)`
(`@session_resource(uri)`); `register(mcp, session, module)` registers them over one Session.

Tool bodies are one call of a Session method (the long ones one `operations.run_operation`:
confirm, job through `jobs.run_job`, outputs, answer); schemas come
from the type hints and the `Field(description=...)` of each argument (array and object
arguments through `args.json_text`); docstrings are written for an agent. Core errors become tool errors once, through `core_errors`
(see errors.py: one log line per error).
"""

import functools
import inspect
import types
from typing import get_origin

from pydantic import BaseModel

from ...processing.estimate import Estimate
from ..schemas import RESULT_FIELDS, compact_tool, result_fields
from .errors import core_errors

# Tool annotations. The MCP spec's defaults are left out: openWorldHint true, idempotentHint false,
# and destructiveHint and idempotentHint of a read-only tool (meaningful only when readOnlyHint is false).
READ_ONLY = {"readOnlyHint": True}
WRITES_OUTPUT = {"readOnlyHint": False, "destructiveHint": False}


def tool(mcp, annotations, *, estimates: bool = False, **kwargs):
    """`@tool(mcp, READ_ONLY)`: register a tool whose core errors become tool errors. Its result is
    the pydantic model (or dict) of its return annotation, or with `estimates=True` also an
    Estimate (the answer of `dry_run=true`), as structured content with no output schema listed
    (server/schemas.py)."""

    def decorate(fn):
        name = kwargs.get("name") or fn.__name__
        wrapped = core_errors(fn)
        # the docstring as the description, given here: fastmcp then never imports griffe to parse
        # it (parameters are described by their Field annotations) - a faster cold start
        # paragraphs on one line each: the description is sent to the model every session
        paragraphs = (inspect.getdoc(fn) or "").split("\n\n")
        kwargs.setdefault("description", "\n\n".join(" ".join(p.split()) for p in paragraphs))
        signature = inspect.signature(fn)
        returns = signature.return_annotation
        model = isinstance(returns, type) and issubclass(returns, BaseModel)
        if model:
            RESULT_FIELDS[name] = result_fields(returns, *([Estimate] if estimates else []))
        if "output_schema" not in kwargs and (model or returns is dict or get_origin(returns) is dict):
            # no output schema: fastmcp need not generate one from the return type (a faster start);
            # results are serialized as they are (models by their own rules), as structured content
            kwargs["output_schema"] = None
            wrapped.__signature__ = signature.replace(return_annotation=inspect.Signature.empty)
        wrapped.__doc__ = None
        registered = mcp.tool(wrapped, annotations=annotations, **kwargs)
        compact_tool(mcp, name)  # small listed input schemas (server/schemas.py)
        return registered

    return decorate


def resource(mcp, uri, **kwargs):
    """`@resource(mcp, uri)`: register a resource whose core errors become resource errors."""
    from fastmcp.exceptions import ResourceError

    def decorate(fn):
        return mcp.resource(uri, **kwargs)(core_errors(fn, ResourceError))

    return decorate


def session_tool(annotations, *, app: bool = False, task: bool = False, **kwargs):
    """Declare a module-level tool `fn(session, ...)`: registered by `register` with `tool`
    (`app=True`: shown in the map app; `task=True`: may run as an MCP task)."""

    def declare(fn):
        fn.__session_tool__ = (annotations, app, task, kwargs)
        return fn

    return declare


def session_resource(uri, **kwargs):
    """Declare a module-level resource `fn(session, ...)`, registered by `register` (a callable
    keyword value is called with the session: a description naming a setting)."""

    def declare(fn):
        fn.__session_resource__ = (uri, kwargs)
        return fn

    return declare


def register(mcp, session, tools) -> None:
    """Register the tools and resources the module `tools` declares (or those of a list), each
    bound to `session`."""
    from ..map_app import map_app_config
    from ..tasks import task_config

    for fn in vars(tools).values() if isinstance(tools, types.ModuleType) else tools:
        if hasattr(fn, "__session_tool__"):
            annotations, app, task, kwargs = fn.__session_tool__
            options = {
                **({"app": map_app_config()} if app else {}),
                **({"task": task_config()} if task else {}),
            }
            tool(mcp, annotations, **options, **kwargs)(_bound(fn, session))
        elif hasattr(fn, "__session_resource__"):
            uri, kwargs = fn.__session_resource__
            kwargs = {k: v(session) if callable(v) else v for k, v in kwargs.items()}
            resource(mcp, uri, **kwargs)(_bound(fn, session))


def _bound(fn, session):
    """`fn` with its first parameter (the session) given: the signature clients see lacks it."""
    signature = inspect.signature(fn)
    if inspect.iscoroutinefunction(fn):

        async def bound(*args, **kwargs):
            return await fn(session, *args, **kwargs)

    else:

        def bound(*args, **kwargs):
            return fn(session, *args, **kwargs)

    functools.update_wrapper(bound, fn)
    del bound.__wrapped__  # the signature is this one, without `session`
    bound.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    return bound


def field_parameters(model, names) -> list[inspect.Parameter]:
    """The fields `names` of the pydantic `model` as keyword parameters of a tool function: each
    with its annotation as declared (type, description, bounds) and its default."""
    from typing import get_type_hints

    hints = get_type_hints(model, include_extras=True)
    parameters = []
    for name in names:
        field = model.model_fields[name]
        default = (
            inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        )
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[name])
        )
    return parameters


def declared_by(model, returns):
    """`@declared_by(Model, Result)`: a tool `fn(session, **arguments)` whose parameters are the
    fields of `model` (declared there once) and whose result is `returns`."""

    def declare(fn):
        parameters = [inspect.Parameter("session", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        parameters += field_parameters(model, model.model_fields)
        fn.__signature__ = inspect.Signature(parameters, return_annotation=returns)
        fn.__annotations__ = {p.name: p.annotation for p in parameters[1:]} | {"return": returns}
        return fn

    return declare
