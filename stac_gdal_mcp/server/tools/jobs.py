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
    slots = session.core.job_slots
    await _wait_for_slot(ctx, job, slots)

    def work():
        try:
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
    finally:
        slots.release()


async def _wait_for_slot(ctx: Context | None, job, slots, poll_s: float = 0.2) -> None:
    """Take a job slot, waiting on the event loop (not in a thread: a hundred queued jobs must
    not take the threads cheap calls run in), reporting progress "waiting ..." meanwhile; the
    wait counts in the job's time limit and ends when the request is cancelled."""
    import anyio

    while not slots.try_acquire():
        job.check()  # out of time (limits.job_timeout_s counts the wait)
        if ctx is not None:
            message = slots.waiting
            await ctx.report_progress(
                0, 1, status_message(0, 1, message) if ctx.is_background_task else message
            )
        await anyio.sleep(poll_s)
