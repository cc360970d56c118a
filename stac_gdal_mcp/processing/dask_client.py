"""The dask.distributed client of `settings.dask_scheduler`: connected once per address and reused,
but only to a peer that answers as a dask scheduler with workers, within the time given.

dask.distributed trusts its peer: it waits for a silent one (or an HTTP server, which waits for a
request) past any job limit, and allocates whatever size the first 8 bytes it reads announce (a
peer sending garbage, or 2^60, makes it ask for exabytes). So before the client connects, the
address is probed here: a scheduler speaks first (its handshake, a small msgpack frame), and a
peer that says nothing within the time, announces a frame over `HANDSHAKE_BYTES` or sends one
that is not a handshake is refused in one line naming the setting. A scheduler without workers is
refused too (its tasks would wait forever). Later calls on the cluster are bounded by the job's
time (`bounded`)."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from ..errors import StacGdalMcpError, Unreachable

log = logging.getLogger(__name__)

HANDSHAKE_BYTES = 1024**2  # a scheduler's handshake is a few hundred bytes
CONNECT_S = 10.0  # at most, for connecting (less when the job has less time left)

_CLIENTS: dict[str, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def dask_client(address: str, seconds: float = CONNECT_S):
    """A dask.distributed Client for `address` with at least one worker, connected once (within
    `seconds`) and reused; else `Unreachable`, one line naming the setting."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(address)
        if client is not None and client.status == "running":
            return client
        deadline = time.monotonic() + max(0.5, seconds)
        probe(address, deadline)
        client = bounded(address, deadline, "connecting", _connect, address, deadline)
        try:  # (its own timeout ends the wait first: bounded's is the backstop)
            bounded(address, deadline + 1, "waiting for its workers", _workers, address, client, deadline)
        except BaseException:
            _close_later(client)
            raise
        _CLIENTS[address] = client
        return client


def probe(address: str, deadline: float) -> None:
    """Refuse, in one line, a tcp:// peer that does not open with a dask scheduler's handshake
    before `deadline` (other transports are left to dask.distributed and the time bound)."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme != "tcp":
        return
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=_left(deadline)) as sock:
            sock.settimeout(_left(deadline))
            (size,) = struct.unpack("<Q", _read(sock, 8, deadline))
            if size > HANDSHAKE_BYTES:
                raise _NotScheduler(f"its first message announced {size:,} bytes")
            _check_handshake(_read(sock, size, deadline))
    except _NotScheduler as exc:
        raise Unreachable(f"{_named(address)} is not a dask scheduler: {exc}") from None
    except TimeoutError:
        raise Unreachable(
            f"{_named(address)} did not answer as a dask scheduler within the time given "
            "(limits.job_timeout_s, at most 10 s to connect)"
        ) from None
    except OSError as exc:
        raise Unreachable(f"{_named(address)} cannot be reached: {exc.strerror or exc}") from None


class _NotScheduler(Exception):
    pass


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _read(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < size:
        sock.settimeout(_left(deadline))
        chunk = sock.recv(min(65536, size - len(data)))
        if not chunk:
            raise _NotScheduler("it closed the connection")
        data += chunk
    return bytes(data)


def _check_handshake(frames: bytes) -> None:
    """The frames dask's TCP comm sends as a handshake: a count, each frame's length, then a
    msgpack message, a dict of the peer's settings (`compression`, `python`, ...)."""
    from distributed.protocol.core import loads
    from distributed.protocol.utils import unpack_frames

    try:
        message = loads(unpack_frames(frames))
    except Exception:
        raise _NotScheduler("its first message is not a dask handshake") from None
    if not isinstance(message, dict) or "compression" not in message:
        raise _NotScheduler("its first message is not a dask handshake")


def _connect(address: str, deadline: float):
    """The client, its stream to the scheduler keeping no copy of what it sent: by default it
    keeps its last `distributed.admin.low-level-log-length` (1,000) messages, a log for dask's
    developers, each holding the arguments of the tasks it submitted (at region scale every
    group's zone indexes and items: about 48 MB of the server's peak at a million zones)."""
    import dask
    from distributed import Client

    with dask.config.set({"distributed.admin.low-level-log-length": 0}):
        return Client(address, set_as_default=False, timeout=_left(deadline))


def _workers(address: str, client, deadline: float) -> None:
    try:
        client.wait_for_workers(1, timeout=_left(deadline))
    except TimeoutError:
        raise Unreachable(f"{_named(address)} has no workers: no task can run") from None


def bounded(address: str, deadline: float, doing: str, fn, *args, tasks: bool = False, **kwargs):
    """`fn(*args, **kwargs)`, a call on the cluster, within `deadline`: on a thread of its own,
    abandoned (its result closed when it comes) once the time is up; any failure one line naming
    the setting - but with `tasks` (the call gathers results) an error is raised as it is, for
    the caller to word (a task's own: a read that failed on a worker)."""
    lock = threading.Lock()
    outcome: dict[str, Any] = {}

    def run():
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller
            value, outcome["error"] = None, exc
        with lock:
            outcome["value"] = value
            if outcome.get("abandoned"):
                _close_later(value)

    thread = threading.Thread(target=run, daemon=True, name="dask-call")
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        outcome["abandoned"] = "value" not in outcome
    if outcome["abandoned"]:
        raise Unreachable(f"{_named(address)} did not answer while {doing} within the time given")
    error = outcome.get("error")
    if isinstance(error, StacGdalMcpError) or (tasks and error is not None):
        raise error
    if error is not None:
        log.debug("dask call failed", exc_info=error)
        text = " ".join(str(error).split())[:300] or type(error).__name__
        raise Unreachable(f"{_named(address)} failed while {doing}: {text}") from None
    return outcome["value"]


def _close_later(client) -> None:
    if hasattr(client, "close"):
        threading.Thread(target=lambda: _quiet(client.close, timeout=2), daemon=True).start()


def _quiet(fn, **kwargs) -> None:
    try:
        fn(**kwargs)
    except Exception:  # a client of a broken peer may fail to close; it is dropped either way
        log.debug("closing a dask client failed", exc_info=True)


def _named(address: str) -> str:
    return f"the dask scheduler at {address} (settings.dask_scheduler)"
