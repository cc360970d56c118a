"""Progress reporting and cancellation for one long operation.

The operation (running in a worker thread) calls `job.progress(done, total)` between chunks;
that raises `OperationCancelled` once someone called `job.cancel()`, so the operation stops at
the next chunk and the output store removes what was written. Reports are throttled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..errors import OperationCancelled

ProgressCallback = Callable[[float, float, str | None], None]


class Job:
    def __init__(self, on_progress: ProgressCallback | None = None, *, min_interval_s: float = 0.2):
        self._on_progress = on_progress
        self._min_interval_s = min_interval_s
        self._cancelled = threading.Event()
        self._last = 0.0
        self._last_fraction = -1.0

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise OperationCancelled if the job was cancelled."""
        if self._cancelled.is_set():
            raise OperationCancelled("the operation was cancelled; nothing was written")

    def progress(self, done: float, total: float, message: str | None = None) -> None:
        """Report `done` of `total`, then check for cancellation. Throttled: a report goes out when
        min_interval_s has passed or 5% more is done (the last step always goes out)."""
        self.check()
        now = time.monotonic()
        fraction = done / total if total else 0.0
        due = now - self._last >= self._min_interval_s or fraction - self._last_fraction >= 0.05
        if self._on_progress is not None and (done >= total or due):
            self._last, self._last_fraction = now, fraction
            self._on_progress(float(done), float(total), message)
        self.check()
