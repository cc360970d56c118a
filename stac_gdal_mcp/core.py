"""The services every core function takes as its first argument, built once from the settings.

`Core` holds the settings, the catalogs, the output store, the cursor codec and the job slots.
It sits in the foundation (it imports only `catalogs` and `settings`; the output store's module
on first use, by name, as the layers above do not need it to start). Core functions
(`discovery.collections.list_collections(core, ...)`, `processing.load.prepare(core, ...)`, ...)
take it first; the public `stac_gdal_mcp.Session` wraps one and is what notebooks, the
server's tools and plugins use.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from .catalogs import Catalogs
from .catalogs.cursors import Cursors
from .settings import Settings, load_settings

if TYPE_CHECKING:
    from .outputs import OutputStore


class _Waiting(Protocol):
    def progress(self, done: float, total: float, message: str | None = None) -> None: ...


class JobSlots:
    """At most `size` jobs at once (`limits.max_jobs`): every worker thread could otherwise start
    a large read at the same time. `hold(job)` waits for a slot in the calling thread, reporting
    the wait as progress (`job.progress`, which raises once the job is cancelled or out of time,
    ending the wait); the server waits without a thread (`try_acquire` on its event loop, then
    `release`), so that queued jobs do not use up the threads cheap calls run in."""

    def __init__(self, size: int):
        self.size = size
        self._free = threading.BoundedSemaphore(size)

    @property
    def waiting(self) -> str:
        return f"waiting for a free slot: {self.size} jobs are running (limits.max_jobs)"

    def try_acquire(self) -> bool:
        return self._free.acquire(blocking=False)

    def release(self) -> None:
        self._free.release()

    @contextmanager
    def hold(self, job: _Waiting, *, poll_s: float = 0.2):
        while not self._free.acquire(timeout=poll_s):
            job.progress(0, 1, self.waiting)
        try:
            yield
        finally:
            self._free.release()


class Core:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or load_settings()
        # made here, not on first use: two threads must never sign with two different keys
        self.cursors: Cursors = Cursors()
        # the slots processing jobs wait for (limits.max_jobs); one per core, made here for the same reason
        self.job_slots = JobSlots(self.settings.limits.max_jobs)

    @cached_property
    def catalogs(self) -> Catalogs:
        return Catalogs(self.settings)

    @cached_property
    def outputs(self) -> OutputStore:
        from .outputs import OutputStore

        return OutputStore(self.settings)

    def close(self) -> None:
        """Release what was opened (the output store's claim on the workspace)."""
        store = self.__dict__.get("outputs")
        close = getattr(store, "close", None)
        if close is not None:
            close()
