"""One deadline for a whole HTTP exchange (http.py): connect, status line, headers and body.

A socket timeout bounds each read, not the exchange: a server sending its headers a byte a
second answers every read in time and holds the request for minutes. So each attempt runs under
a `Deadline`: the sockets of the connections it uses (opened by it, or reused from the pool) are
registered with it, and when the deadline passes the watcher shuts them down, which ends any
read waiting on them at once; `expired` then tells the caller why the exchange failed. One
watcher thread serves every deadline of the process (a heap of them, earliest first): a timer
thread started per exchange cost half a millisecond of each range read's ~1 ms of CPU, and a
search over 780 parts over HTTP asks 780 files' versions.

The requests session gets this through `WatchedAdapter`, whose connection pools make
connections that register their socket with the thread's current deadline.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()  # .deadline: the Deadline of the exchange this thread runs


class Deadline:
    """Sockets to shut down at `at` (time.monotonic)."""

    def __init__(self, at: float):
        self.at = at
        self.expired = False
        self.ended = False  # the exchange ended first: nothing to shut down
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def watch(self, sock: socket.socket | None) -> None:
        """Shut `sock` down at the deadline (at once if it has passed)."""
        if sock is None:
            return
        with self._lock:
            if not self.expired:
                self._sockets.append(sock)
                return
        _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            if self.ended:
                return
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)

    def _end(self) -> None:
        with self._lock:
            self.ended = True
            self._sockets = []


class _Watcher:
    """The one thread that expires deadlines as they pass, started at the first one: a heap of
    (at, n, Deadline); an exchange that ends first marks its Deadline ended, and the watcher
    drops it when its time comes."""

    def __init__(self):
        self._heap: list[tuple[float, int, Deadline]] = []
        self._numbers = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, watch: Deadline) -> None:
        with self._wake:
            heapq.heappush(self._heap, (watch.at, next(self._numbers), watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="http-deadlines", daemon=True)
                self._thread.start()
            if self._heap[0][2] is watch:  # earlier than the watcher waits for
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._heap and (self._heap[0][2].ended or self._heap[0][0] <= time.monotonic()):
                    heapq.heappop(self._heap)[2]._expire()  # shutdown() does not block
                wait = self._heap[0][0] - time.monotonic() if self._heap else None
                self._wake.wait(wait)


_watcher = _Watcher()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[Deadline]:
    """A Deadline `seconds` from now for the exchanges this thread makes inside the block."""
    watch = Deadline(time.monotonic() + seconds)
    outer = getattr(_current, "deadline", None)
    _current.deadline = watch
    _watcher.add(watch)
    try:
        yield watch
    finally:
        watch._end()
        _current.deadline = outer


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _register(sock: socket.socket | None) -> None:
    watch = getattr(_current, "deadline", None)
    if watch is not None:
        watch.watch(sock)


class _Watched:
    """A connection whose socket is watched by the thread's deadline: when it connects, and at
    each request it carries (a connection reused from the pool)."""

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _register(self.sock)  # type: ignore[attr-defined]

    def request(self, *args, **kwargs) -> None:
        _register(self.sock)  # type: ignore[attr-defined]
        super().request(*args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_Watched, HTTPConnection):
    pass


class _HTTPSConnection(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class WatchedAdapter(HTTPAdapter):
    """requests' adapter whose connections (direct, or through a proxy) are watched."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = _POOLS
        return manager
