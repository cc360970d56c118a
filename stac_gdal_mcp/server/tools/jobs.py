"""The one long-job wrapper of the tools: a Session call in a worker thread, as a `Job`.

`run_job(ctx, session, fn, ...)` waits for one of the session's job slots (limits.max_jobs),
runs `fn(..., job=job)` in a worker thread, sends the job's progress to the client (as the
status message when the call is an MCP task), and on cancellation cancels the job and waits
until it has cleaned up (removed its files) before the cancellation completes.

While any job runs, the interpreter favours the event loop (`responsive`): jobs build many
Python objects (items, dask graphs, xarray indexes), so CPython's cyclic collector made full
(generation 2) collections, each holding the interpreter lock for 0.5-2 s on a loaded 2-core
machine, and every cheap call waited for them; and the event loop waited up to 5 ms (the
switch interval) behind each of dozens of job threads for the lock. docs/reliability.md, 6.
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..tasks import status_message

if TYPE_CHECKING:
    from fastmcp import Context

    from ...session import Session


async def run_job(ctx: Context | None, session: Session, fn, /, *args, **kwargs) -> Any:
    """`fn(*args, job=Job, **kwargs)` in a worker thread once a job slot is free; its progress
    (and the wait) reported to `ctx`; cancelled with the request (see the module docstring)."""
    from anyio import from_thread

    from ...processing.jobs import Job

    def report(done: float, total: float, message: str | None) -> None:
        if ctx is not None:
            if ctx.is_background_task:  # an MCP task: tasks/get shows the message only
                message = status_message(done, total, message)
            from_thread.run(functools.partial(ctx.report_progress, done, total, message))

    job = Job(report)
    slots = session.core.job_slots
    await _wait_for_slot(ctx, job, slots)
    with responsive():
        return await _run_in_thread(job, slots, fn, *args, **kwargs)


async def _run_in_thread(job, slots, fn, /, *args, **kwargs) -> Any:
    """`fn` in a worker thread, holding the job slot taken for it (released at the end)."""
    import anyio
    from anyio import to_thread

    finished = threading.Event()
    # Taken by the work as it starts, or by a cancellation before that: a call cancelled while
    # it waited for a thread (all busy) or before its thread picked it up never runs its work.
    claim = threading.Lock()

    def work():
        if not claim.acquire(blocking=False):
            return None  # cancelled before it started
        try:
            return fn(*args, job=job, **kwargs)
        finally:
            finished.set()

    try:
        return await to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        job.cancel()
        if not claim.acquire(blocking=False):  # the work has started
            with anyio.CancelScope(shield=True):
                while not finished.is_set():  # it stops at its next chunk and removes its files
                    await anyio.sleep(0.02)
        raise
    finally:
        slots.release()


# While jobs run: a full collection after 100 (not 10) of the middle generation's, and the lock
# offered to a waiting thread after 1 ms (not 5 ms). Measured in docs/reliability.md, 6.
FULL_COLLECTION_EVERY = 100
SWITCH_INTERVAL_S = 0.001
_running = 0  # jobs inside `responsive()`, of every server of the process
_saved: tuple | None = None  # the collector's thresholds and the switch interval before them
_lock = threading.Lock()  # (servers of one process may run on event loops in several threads)


@contextmanager
def responsive():
    """While the first to the last concurrent job runs, rarer full collections and a shorter
    switch interval (see the module docstring); the interpreter's own settings come back after
    the last job."""
    global _running, _saved
    with _lock:
        if _running == 0:
            _saved = (gc.get_threshold(), sys.getswitchinterval())
            young, middle, full = _saved[0]
            gc.set_threshold(young, middle, max(full, FULL_COLLECTION_EVERY))
            sys.setswitchinterval(min(_saved[1], SWITCH_INTERVAL_S))
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0 and _saved is not None:
                gc.set_threshold(*_saved[0])
                sys.setswitchinterval(_saved[1])
                _saved = None


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
