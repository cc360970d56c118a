"""The one long-job wrapper of the tools: a Session call in a worker thread, as a `Job`.

`run_job(ctx, session, fn, ...)` waits for one of the session's job slots (limits.max_jobs),
runs `fn(..., job=job)` in a worker thread, sends the job's progress to the client (as the
status message when the call is an MCP task), and on cancellation cancels the job and waits
until it has cleaned up (removed its files) before the cancellation completes.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ..tasks import status_message

if TYPE_CHECKING:
    from fastmcp import Context

    from ...session import Session


async def run_job(ctx: Context | None, session: Session, fn, /, *args, **kwargs) -> Any:
    """`fn(*args, job=Job, **kwargs)` in a worker thread once a job slot is free; its progress
    (and the wait) reported to `ctx`; cancelled with the request (see the module docstring)."""
    import threading

    import anyio
    from anyio import from_thread, to_thread

    from ...processing.jobs import Job

    def report(done: float, total: float, message: str | None) -> None:
        if ctx is not None:
            if ctx.is_background_task:  # an MCP task: tasks/get shows the message only
                message = status_message(done, total, message)
            from_thread.run(functools.partial(ctx.report_progress, done, total, message))

    job = Job(report)
    finished = threading.Event()

    def work():
        try:
            with session.core.job_slots.hold(job):
                return fn(*args, job=job, **kwargs)
        finally:
            finished.set()

    try:
        return await to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        job.cancel()
        with anyio.CancelScope(shield=True):
            while not finished.is_set():  # the worker stops at its next chunk and removes its files
                await anyio.sleep(0.02)
        raise
