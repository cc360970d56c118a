"""The operations' tools, made from their classes (`operations.registry.OPERATIONS`) by one
factory, `operation_tool`: the tool's parameters are the class's fields (those not marked
library-only, with their descriptions and bounds), then `quicklook`, `dry_run` and `confirm` as
the class's `Tool` says; its description is the class's `description`. Its body is
`run_operation`:

1. confirm (`confirm.unconfirmed`): a job larger than limits.confirm_bytes runs once the user
   said yes (`confirm=None`: the tool has no such step);
2. the job (`jobs.run_job`): the operation in a worker thread, with progress and cancel;
3. a dry run answers its estimate; else the result's kind keeps its outputs (saves them) and
   answers (operations/registry.py), in the same job, as a notebook user would with `session.save`;
4. the answer becomes the tool result: images, the structured value, links to the outputs.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import TYPE_CHECKING, Any

from fastmcp import Context
from fastmcp.dependencies import CurrentContext

from ...models import MAP_LAYER_META, map_area
from ...operations.base import Operation, validated
from ...operations.params import DryRunArg, QuicklookArg
from ..links import answered, estimate_result
from ..resources import OUTPUT_URI
from . import READ_ONLY, WRITES_OUTPUT, field_parameters, session_tool
from .confirm import ConfirmArg, unconfirmed
from .jobs import run_job

if TYPE_CHECKING:
    from ...session import Session


def operation_tools() -> list:
    """The tool of every operation, in the registry's order."""
    from ...operations import OPERATIONS

    return [operation_tool(cls) for cls in OPERATIONS.values()]


def operation_tool(cls: type[Operation]):
    """The tool of the operation `cls` (a `session_tool`, registered by `tools.register`)."""
    options = cls.tool
    P = inspect.Parameter
    parameters = [P("session", P.POSITIONAL_OR_KEYWORD)]
    parameters += field_parameters(cls, cls.tool_parameters())
    for wanted, name, annotation in (
        (options.quicklook, "quicklook", QuicklookArg),
        (options.dry_run, "dry_run", DryRunArg),
        (options.confirm, "confirm", ConfirmArg),
    ):
        if wanted:
            parameters.append(P(name, P.KEYWORD_ONLY, default=False, annotation=annotation))
    parameters.append(P("ctx", P.KEYWORD_ONLY, default=CurrentContext(), annotation=Context))

    async def tool(session: Session, *, ctx=None, quicklook=False, dry_run=False, confirm=None, **values):
        operation = validated(cls, {k: output_file(session, v) for k, v in values.items()})
        return await run_operation(
            ctx,
            session,
            functools.partial(operation, session.core),
            confirm=confirm if options.confirm else None,
            quicklook=quicklook,
            dry_run=dry_run,
            area=map_area(dict(operation)),
        )

    tool.__name__ = tool.__qualname__ = cls.name
    tool.__doc__ = cls.description
    tool.__signature__ = inspect.Signature(parameters, return_annotation=cls.answer_model)
    tool.__annotations__ = {p.name: p.annotation for p in parameters if p.annotation is not P.empty}
    annotations = READ_ONLY if options.read_only else WRITES_OUTPUT
    return session_tool(annotations, app=options.map, task=options.task, estimates=options.dry_run)(tool)


_OUTPUT = re.compile(re.escape(OUTPUT_URI.split("{", 1)[0]) + r"([^/]+)(?:/file)?")


def output_file(session: Session, value: Any) -> Any:
    """A stac-gdal://outputs/ URI as the output's file in the workspace; anything else as given."""
    if isinstance(value, str):
        found = _OUTPUT.fullmatch(value.strip())
        if found:
            return str(session.outputs.path(found.group(1)))
    return value


async def run_operation(
    ctx: Context | None,
    session: Session,
    call,
    /,
    *,
    confirm: bool | None = None,
    quicklook: bool = False,
    dry_run: bool = False,
    area: dict | None = None,
):
    """The tool result of `call(job=..., dry_run=...)` run as a job (see the module's docstring);
    `quicklook`: the answer shows a PNG of the output; `area`: the call's (`models.map_area`),
    where the map draws its answer."""
    if confirm is not None:
        stop = await unconfirmed(ctx, session, confirm, call, dry_run=dry_run, area=area)
        if stop is not None:
            return stop
    result = await run_job(ctx, session, _answer, session, call, dry_run, quicklook, area)
    if ctx is not None and ctx.is_background_task and result.meta:  # no map draws a task's result:
        result.meta = {k: v for k, v in result.meta.items() if k != MAP_LAYER_META} or None  # no layer
    return result


def _answer(session: Session, call, dry_run: bool, quicklook: bool, area: dict | None, *, job) -> Any:
    """The job: the call, then its result kept and answered (a dry run: its estimate), drawn at
    the call's `area`."""
    from ...operations import registry
    from ...processing.estimate import Estimate

    result = call(job=job, **({"dry_run": True} if dry_run else {}))  # (save_search has none)
    if isinstance(result, Estimate):
        return estimate_result(result, area=area)
    limits = session.settings.limits
    answer = registry.answer(session.core, result, limits, job=job, quicklook=quicklook)
    return answered(answer, limits.max_resource_bytes, area=area)
