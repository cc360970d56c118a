"""A job cancelled before its worker thread started it ends, and gives its slot back: with every
one of anyio's worker-thread tokens taken (other calls hold the threads), a job that has its job
slot waits for a thread; cancelling it then must end the call at once and free the slot (the
cancelled work never runs), not wait for a worker that will never start it."""

from __future__ import annotations

import asyncio
import threading

import anyio
from anyio import to_thread
from helpers import scaled

from stac_gdal_mcp.core import JobSlots
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.server.tools.jobs import _run_in_thread


async def test_a_job_cancelled_while_waiting_for_a_thread_ends_and_frees_its_slot():
    slots, ran = JobSlots(1), threading.Event()
    assert slots.try_acquire()  # the job's slot, taken as run_job takes it
    limiter = to_thread.current_default_thread_limiter()
    tokens, limiter.total_tokens = limiter.total_tokens, 1
    try:
        async with limiter:  # every worker thread is busy with another call
            call = asyncio.create_task(_run_in_thread(Job(), slots, lambda job: ran.set()))
            await asyncio.sleep(0.1)  # the job waits for a thread
            call.cancel()
            await asyncio.wait({call}, timeout=scaled(5))
            assert call.cancelled(), "the cancelled call did not end"  # before: it never ended
    finally:
        limiter.total_tokens = tokens
    assert slots.try_acquire()  # its slot is free again
    await anyio.sleep(0.2)
    assert not ran.is_set()  # the cancelled work never ran
