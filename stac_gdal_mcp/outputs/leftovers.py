"""Leftovers of writers that died: who owns an entry of the workspace's `.tmp/` folder.

Everything being written lives in `<workspace>/.tmp/`, named `<pid>-<session>-...` after the
process and the store that wrote it. An entry is stale when that process no longer runs (or is a
zombie), when it is this process but the store is gone (a restarted server that got the same pid,
e.g. in a container), or when its name is not one a store writes.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

TMP_DIR = ".tmp"
# stores alive in this process (their session ids): leftovers of another session of the same
# pid (a restarted server that got the same pid, e.g. in a container) are stale
LIVE_SESSIONS: set[str] = set()
LIVE_LOCK = threading.Lock()


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    try:  # a zombie (ended, not yet reaped by its parent) is dead too
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _owner(name: str) -> tuple[int, str] | None:
    """(pid, session) from a `.tmp` entry name `<pid>-<session>-...`, None if not one of ours."""
    match = re.match(r"^(\d+)-([0-9a-f]{8})(?:[-.]|$)", name)
    return (int(match.group(1)), match.group(2)) if match else None


def stale(name: str) -> bool:
    owner = _owner(name)
    if owner is None:
        return True  # not a name this store writes: nothing may live here
    pid, session = owner
    if pid == os.getpid():
        with LIVE_LOCK:
            return session not in LIVE_SESSIONS
    return not _pid_alive(pid)


def register(session: str) -> None:
    """A store of this process is alive: its entries are not stale."""
    with LIVE_LOCK:
        LIVE_SESSIONS.add(session)


def unregister(session: str) -> None:
    with LIVE_LOCK:
        LIVE_SESSIONS.discard(session)
