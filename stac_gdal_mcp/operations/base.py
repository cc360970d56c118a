"""`Operation`: one class per operation, declared once.

An operation is a pydantic model whose annotated fields (with their descriptions and bounds)
are its parameters - the only place they are spelled. The class names itself (`name`: the tool's
name, and the kind of its results; `library_name`: the Session's method), says which fields the
library takes positionally (`positional`) and how it is offered as a tool (`Tool`). An instance
is one checked call: `estimate(core)` says what it would read and write, `run(core, job)` does
the work, and both go through the one plan the class builds (`plan(core)`), so a dry run cannot
disagree with its run.

Parameter groups that travel together are base classes whose fields every operation of the
group shares and which parse them once: an asset reference (`OnAsset`), an area with a search
and a load (`OverArea`). A field marked `LIBRARY_ONLY` (GDAL options, a Python object as the
input) is a keyword of the Session's method but no parameter of the tool.

The Session's methods are made from the classes (`library_method`): the signature lists every
field with its type, description and default (`help`, tab completion), the keywords of the
`search` group may be given flat (`collections=...`), and the call builds the model, so a
notebook call and a tool call build the same object.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections import namedtuple
from typing import TYPE_CHECKING, Any, ClassVar, get_args, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError

from ..discovery.query import check_names
from ..errors import InvalidArgument
from ..processing.requests import LIBRARY_ONLY  # in a field's Annotated metadata: a Session keyword only

if TYPE_CHECKING:
    from ..core import Core
    from ..processing.estimate import Estimate
    from ..processing.jobs import Job


#: How an operation is offered as a tool: `read_only` (else it writes outputs), drawn by the map
#: app (`map`), may run as a background task (`task`), takes `dry_run`, asks before a large job
#: (`confirm`), can show a PNG of its output (`quicklook`).
Tool = namedtuple(
    "Tool", "read_only map task dry_run confirm quicklook", defaults=(False, True, True, True, True, False)
)


class Operation(BaseModel):
    """One call of an operation: its fields are its parameters (see the module's docstring); its
    results are `result.Result`s, which save, answer and draw themselves."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: ClassVar[str]  # the tool's name; the kind of its results
    library_name: ClassVar[str]  # the Session's method
    positional: ClassVar[tuple[str, ...]] = ()  # the library's positional parameters
    tool: ClassVar[Tool] = Tool()
    description: ClassVar[str]  # the tool's description, for an agent (the docstring: a person's)
    answer_model: ClassVar[type[BaseModel]]  # the structured content of the tool's answer

    def plan(self, core: Core) -> Any:
        """What the call reads and writes, worked out once for `estimate` and `run` (the checks
        that need the catalog or the files are made here)."""
        return self

    def estimate(self, core: Core) -> Estimate:
        raise NotImplementedError

    def run(self, core: Core, job: Job | None = None) -> Any:
        raise NotImplementedError

    def __call__(self, core: Core, *, dry_run: bool = False, job: Job | None = None) -> Any:
        """Its estimate (`dry_run`: headers only, nothing written), else its run with `job`."""
        return self.estimate(core) if dry_run else self.run(core, job)

    @classmethod
    def parameters(cls) -> dict[str, Any]:
        """Field name -> its annotation as declared (`Annotated[type, Field(...)]`), in order."""
        hints = get_type_hints(cls, include_extras=True)
        return {name: hints[name] for name in cls.model_fields}

    @classmethod
    def tool_parameters(cls) -> dict[str, Any]:
        """The fields a tool takes: all but those marked LIBRARY_ONLY."""
        return {n: a for n, a in cls.parameters().items() if LIBRARY_ONLY not in get_args(a)[1:]}

    @classmethod
    def of(cls, *args: Any, **values: Any) -> Operation:
        """The call as the library names it: `positional` arguments, then keywords; a name of the
        `search` group given flat goes into `search`. A bad value: one line (InvalidArgument)."""
        if len(args) > len(cls.positional):
            raise InvalidArgument(f"{cls.library_name} takes {len(cls.positional)} positional arguments")
        values.update(zip(cls.positional, args))
        group = search_names(cls)
        flat = {k: values.pop(k) for k in list(values) if k not in cls.model_fields and k in group}
        unknown = [k for k in values if k not in cls.model_fields]
        if unknown and group:
            check_names(dict.fromkeys(unknown), group, tuple(cls.model_fields))
        if unknown:
            raise InvalidArgument(unknown_names(unknown, tuple(cls.model_fields)))
        if flat:
            values["search"] = {**(values.get("search") or {}), **flat}
        return validated(cls, values)


def validated(cls: type[Operation], values: dict) -> Operation:
    """`cls(**values)`; a value that does not validate is one line naming it."""
    try:
        return cls(**values)
    except ValidationError as exc:
        raise InvalidArgument(argument_errors(exc)) from None


def argument_errors(error: ValidationError) -> str:
    """A pydantic ValidationError of a call's arguments as one line: each bad parameter with
    what is wrong (our own validators' messages, e.g. from the JSON-text parser, as they are)."""
    parts = []
    for e in error.errors(include_url=False):
        name = ".".join(str(part) for part in e["loc"]) or "arguments"
        if e["type"] == "value_error" and "error" in e.get("ctx", {}):
            text = str(e["ctx"]["error"])
            parts.append(text if text.startswith(name) else f"{name}: {text}")
        else:
            parts.append(f"{name}: {e['msg']}")
    return "; ".join(parts)


def unknown_names(unknown: list[str], names: tuple[str, ...] | list[str]) -> str:
    """The line "unknown argument 'serch' (did you mean 'search'?)": each name with the nearest known ones."""
    parts = [f"{name!r}{f' ({nearest(name, names)})' if nearest(name, names) else ''}" for name in unknown]
    return f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(parts)}"


def nearest(name: str, names) -> str:
    """The hint "did you mean 'search'?" naming the known names nearest to `name`; "" when none is near."""
    near = difflib.get_close_matches(str(name), list(names), n=3)
    return f"did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def search_names(cls: type[Operation]) -> tuple[str, ...]:
    """The names the `search` group of `cls` takes (none without one)."""
    annotation = cls.parameters().get("search")
    if annotation is None:
        return ()
    (group,) = [a for a in get_args(get_args(annotation)[0]) if a is not type(None)]
    return tuple(group.__annotations__)


def library_method(cls: type[Operation]):
    """The Session's method of `cls`: `session.<method>(*positional, **fields, job=, dry_run=)`
    -> the operation's result (`dry_run=True`: its Estimate), its signature made of the fields."""

    def method(self, *args: Any, job: Job | None = None, dry_run: bool = False, **values: Any):
        return cls.of(*args, **values)(self.core, dry_run=dry_run, job=job)

    method.__name__ = method.__qualname__ = cls.library_name
    method.__doc__ = _doc(cls)
    method.__signature__ = _signature(cls)  # type: ignore[attr-defined]
    return method


def field_parameters(
    model: type[BaseModel], positional: tuple[str, ...] = (), leave_out: tuple[str, ...] = ()
) -> list[inspect.Parameter]:
    """The fields of `model` (but `leave_out`) as a method's parameters, each with its type and
    default: the `positional` ones first (positional or keyword), then the others keyword-only."""
    P = inspect.Parameter
    parameters = []
    for name, info in model.model_fields.items():
        if name in leave_out:
            continue
        kind = P.POSITIONAL_OR_KEYWORD if name in positional else P.KEYWORD_ONLY
        default = P.empty if info.is_required() else info.get_default(call_default_factory=True)
        # the type (its description: in the docstring)
        parameters.append(P(name, kind, default=default, annotation=info.annotation))
    return sorted(parameters, key=lambda p: p.kind)


def takes_fields(model: type[BaseModel], positional: tuple[str, ...], shown: dict[str, str]):
    """`@takes_fields(Model, positional, shown)`: a method `fn(self, **values)` whose parameters
    are the fields of `model` (declared there once), the `positional` ones also by position. Its
    signature lists each field with its default and its type as text (`shown` names some: e.g. an
    alias), as `from __future__ import annotations` shows a hand-written one (help, tab
    completion); its help is `fn`'s; a name that is no field is refused with the nearest ones."""
    names = tuple(model.model_fields)

    def decorate(fn):
        @functools.wraps(fn)
        def method(self, *args: Any, **values: Any):
            if len(args) > len(positional):
                raise InvalidArgument(f"{fn.__name__} takes {len(positional)} positional arguments")
            values.update(zip(positional, args))
            unknown = [name for name in values if name not in names]
            if unknown:
                raise InvalidArgument(unknown_names(unknown, names))
            return fn(self, **values)

        parameters = [
            p.replace(annotation=shown.get(p.name) or inspect.formatannotation(p.annotation))
            for p in field_parameters(model, positional)
        ]
        self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [self, *parameters], return_annotation=fn.__annotations__.get("return", inspect.Signature.empty)
        )
        return method

    return decorate


def _signature(cls: type[Operation]) -> inspect.Signature:
    P = inspect.Parameter
    flat = ("search",) if search_names(cls) else ()  # given flat, as **search
    parameters = [P("self", P.POSITIONAL_OR_KEYWORD), *field_parameters(cls, cls.positional, flat)]
    parameters += [
        P("job", P.KEYWORD_ONLY, default=None, annotation="Job | None"),
        P("dry_run", P.KEYWORD_ONLY, default=False, annotation=bool),
    ]
    if search_names(cls):
        parameters.append(P("search", P.VAR_KEYWORD, annotation="Any"))
    returns = cls.run.__annotations__.get("return", "Any")
    return inspect.Signature(
        parameters, return_annotation=f"{getattr(returns, '__name__', returns)} | Estimate"
    )


def _doc(cls: type[Operation]) -> str:
    """The class's docstring, then each parameter with its description."""
    lines = [inspect.getdoc(cls) or "", "", "Parameters:"]
    for name, info in cls.model_fields.items():
        described = f": {info.description}" if info.description else ""
        default = "" if info.is_required() else f" (default {info.get_default(call_default_factory=True)!r})"
        if name == "search" and search_names(cls):
            lines.append(f"    **search: the items' search - {', '.join(search_names(cls))}")
        else:
            lines.append(f"    {name}{described}{default}")
    lines += [
        "    job: progress and cancellation (processing.jobs.Job)",
        "    dry_run: True: an Estimate of what it would read and write (only headers are read)",
    ]
    return "\n".join(lines)
