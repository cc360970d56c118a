"""Progress reporting, cancellation and a wall-time limit for one long operation.

The operation (running in a worker thread) calls `job.progress(done, total)` between chunks;
that raises `OperationCancelled` once someone called `job.cancel()`, and `LimitExceeded` once
the job has run longer than its time limit (`limits.job_timeout_s`, set by the core function
with `job.limit_time`), so the operation stops at the next chunk and the output store removes
what was written. Reports are throttled.

Inside a long GDAL call (building overviews, writing a COG) the same checks run through
`job.gdal_callback()`, a GDAL progress function that returns 0 (GDAL then stops) once the job
is cancelled or out of time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..errors import LimitExceeded, OperationCancelled

ProgressCallback = Callable[[float, float, str | None], None]


class Job:
    def __init__(self, on_progress: ProgressCallback | None = None, *, min_interval_s: float = 0.2):
        self._on_progress = on_progress
        self._min_interval_s = min_interval_s
        self._cancelled = threading.Event()
        self._started = time.monotonic()
        self._deadline: float | None = None
        self._limit_s: float | None = None
        self._last = 0.0
        self._last_fraction = -1.0

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def limit_time(self, seconds: float | None) -> None:
        """Stop the job `seconds` after it was created (None or <= 0: no limit). The first call
        wins, so a core function called by another keeps the outer limit."""
        if seconds and seconds > 0 and self._deadline is None:
            self._limit_s = float(seconds)
            self._deadline = self._started + float(seconds)

    @property
    def out_of_time(self) -> bool:
        return self._deadline is not None and time.monotonic() > self._deadline

    def seconds_left(self, most: float) -> float:
        """Seconds before the time limit, at most `most` (`most` when there is no limit)."""
        if self._deadline is None:
            return most
        return max(0.0, min(most, self._deadline - time.monotonic()))

    @property
    def should_stop(self) -> bool:
        return self._cancelled.is_set() or self.out_of_time

    def check(self) -> None:
        """Raise OperationCancelled if the job was cancelled, LimitExceeded if out of time."""
        if self._cancelled.is_set():
            raise OperationCancelled("the operation was cancelled; nothing was written")
        if self.out_of_time:
            raise LimitExceeded(
                f"the operation ran longer than limits.job_timeout_s={self._limit_s:g} s and was stopped; "
                "nothing was written. Use a smaller bbox, a coarser resolution or fewer items"
            )

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (a retry's backoff), waking up at once when cancelled."""
        if self._deadline is not None:
            seconds = max(0.0, min(seconds, self._deadline - time.monotonic()))
        self._cancelled.wait(seconds)
        self.check()

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

    def gdal_callback(self, start: float, end: float, total: float, message: str):
        """A GDAL progress function (GDALProgressFunc) for the part `start`..`end` of `total`:
        reports progress and returns 0, making GDAL stop, once the job should stop.

        Keep the returned object alive for as long as GDAL may call it."""
        from .gdal_calls import PROGRESS_FUNC

        def callback(fraction, _message, _data):
            if self.should_stop:
                return 0
            try:
                self.progress(start + (end - start) * max(0.0, min(1.0, fraction)), total, message)
            except Exception:  # cancelled between the check and the report, or a reporting failure
                return 0 if self.should_stop else 1
            return 1

        return PROGRESS_FUNC(callback)


def timed(job: Job | None, core) -> Job:
    """`job` (a new one when None), limited to the session's limits.job_timeout_s: how every
    operation's `run` starts."""
    job = job or Job()
    job.limit_time(core.settings.limits.job_timeout_s)
    return job
