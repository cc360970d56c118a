"""One deadline for a whole HTTP exchange (http.py): connect, status line, headers and body.

A socket timeout bounds each read, not the exchange: a server sending its headers a byte a
second answers every read in time and holds the request for minutes. So each attempt runs under
a `Deadline`: the sockets of the connections it uses (opened by it, or reused from the pool) are
registered with it, and when the deadline passes a timer shuts them down, which ends any read
waiting on them at once; `expired` then tells the caller why the exchange failed.

The requests session gets this through `WatchedAdapter`, whose connection pools make
connections that register their socket with the thread's current deadline.
"""

from __future__ import annotations

import contextlib
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
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, at - time.monotonic()), self._expire)
        self._timer.daemon = True

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
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[Deadline]:
    """A Deadline `seconds` from now for the exchanges this thread makes inside the block."""
    watch = Deadline(time.monotonic() + seconds)
    outer = getattr(_current, "deadline", None)
    _current.deadline = watch
    watch._timer.start()
    try:
        yield watch
    finally:
        watch._timer.cancel()
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
