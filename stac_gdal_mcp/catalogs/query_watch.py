"""One thread that interrupts DuckDB queries past their deadline (limits.query_timeout_s).

A `threading.Timer` a query starts and joins a thread of its own: on a loaded machine that
costs milliseconds a query (4-26 ms measured at a load of 15 on 2 cores), as much as DuckDB's
whole answer to a small search. Here every query is registered with the one watching thread,
started once, and taken off when it ends.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_lock = threading.Condition()
_due: list[tuple[float, int]] = []  # (deadline, token), the earliest first
_interrupts: dict[int, Callable[[], None]] = {}  # the queries still running, by token
_tokens = itertools.count()
_thread: threading.Thread | None = None


@contextmanager
def watched(seconds: float, interrupt: Callable[[], None]) -> Iterator[None]:
    """Runs the block with `interrupt` called if it is still running after `seconds`."""
    global _thread
    token = next(_tokens)
    with _lock:
        heapq.heappush(_due, (time.monotonic() + seconds, token))
        _interrupts[token] = interrupt
        if _thread is None:
            _thread = threading.Thread(target=_watch, name="query-deadlines", daemon=True)
            _thread.start()
        elif _due[0][1] == token:  # the new earliest deadline: the thread waits for it
            _lock.notify()
    try:
        yield
    finally:
        with _lock:
            _interrupts.pop(token, None)


def _watch() -> None:
    while True:
        with _lock:
            while _due and _due[0][1] not in _interrupts:
                heapq.heappop(_due)  # a query that ended
            if not _due:
                _lock.wait()
                continue
            late = _due[0][0] - time.monotonic()
            if late > 0:
                _lock.wait(late)
                continue
            _, token = heapq.heappop(_due)
            interrupt = _interrupts.pop(token)
        interrupt()
