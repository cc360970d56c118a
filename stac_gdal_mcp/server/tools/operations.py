"""The body of every operation's tool: `run_operation(ctx, session, method, ...)`, one line.

1. confirm (`confirm.unconfirmed`): a job larger than limits.confirm_bytes runs once the user
   said yes (`confirm=None`: the tool has no such step);
2. the job (`jobs.run_job`): the Session method in a worker thread, with progress and cancel;
3. a dry run answers its estimate; else the result's kind keeps its outputs (saves them) and
   answers (operations/registry.py), in the same job, as a notebook user would with `session.save`;
4. the answer becomes the tool result: images, the structured value, links to the outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..links import answered, estimate_result
from .confirm import unconfirmed
from .jobs import run_job

if TYPE_CHECKING:
    from fastmcp import Context

    from ...session import Session


async def run_operation(
    ctx: Context | None,
    session: Session,
    method: str,
    /,
    *args: Any,
    confirm: bool | None = None,
    quicklook: bool = False,
    **arguments: Any,
):
    """The tool result of `session.<method>(*args, **arguments)` run as a job (see the module's
    docstring); `quicklook`: the answer shows a PNG of the output."""
    call = getattr(session, method)
    if confirm is not None:
        stop = await unconfirmed(ctx, session, confirm, call, *args, **arguments)
        if stop is not None:
            return stop
    return await run_job(ctx, session, _answer, session, call, args, arguments, quicklook)


def _answer(session: Session, call, args: tuple, arguments: dict, quicklook: bool, *, job):
    """The job: the call, then its result kept and answered (a dry run: its estimate)."""
    from ...operations import registry
    from ...processing.estimate import Estimate

    result = call(*args, job=job, **arguments)
    if isinstance(result, Estimate):
        return estimate_result(result)
    limits = session.settings.limits
    answer = registry.answer(session.core, result, limits, job=job, quicklook=quicklook)
    return answered(answer, limits.max_resource_bytes)
