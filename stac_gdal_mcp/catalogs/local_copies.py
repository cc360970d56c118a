"""Whole local copies of the small files an HTTP catalog's searches open (httpfs.RangeReader), so
that DuckDB reads them as local files, natively.

Every read of a file served through the Python filesystem DuckDB is given (httpfs.RangeFileSystem)
is a call into Python under its global lock; a query scanning many small parts makes thousands
(the exact count of a bbox over 780 parts of 10,000,000 items: 1,562 opens and 5,460 reads) and
took 2.5x the time of the same query on the same files on disk, whatever the reads did (a Python
filesystem reading local files with os.pread: 1.07 s, DuckDB's own reads 0.41 s). A file of at
most COPY_MAX bytes that a search opened is copied whole after the search, in the background,
through the reader (the blocks it already holds, the rest fetched once), and the searches after
read the copy (`path`).

The copies are files of a folder of the workspace's `cache/http-copies/`, one a process, removed
when the process ends (and the folders of processes no longer running, when a new one is made);
at most `bound` bytes (limits.http_copies_mb), least recently used out first. A copy is one
version of a file (its size and validators, httpfs.Version): a file changed on the server is a
new version, read by range until copied again. A copy that fails (a read, a full disk) is not
kept and not tried again for that version.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from .redact import masked_url

RangeReader = Version = Any  # httpfs.RangeReader and httpfs.Version (httpfs imports this module)
COPY_MAX = 16 * 1024**2  # files larger than this are read by range only
CHUNK = 4 * 1024**2  # bytes read and written at a time while copying
_COPYING = ThreadPoolExecutor(1, thread_name_prefix="http-copies")


class LocalCopies:
    """Local copies of the files `reader` reads, at most `bound` bytes, in a folder made in
    `folder` at the first copy."""

    def __init__(self, reader: RangeReader, folder: Path, bound: int):
        self.reader, self.parent, self.bound = reader, Path(folder), bound
        self.held = 0  # bytes of the copies kept
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, Version], str] = OrderedDict()  # (name, version) -> path
        self._asked: set[tuple[str, Version]] = set()  # copied, being copied, or failed
        self._folder: Path | None = None
        self._pending: list[Future] = []

    def path(self, name: str, version: Version) -> str | None:
        """The local path of the copy of `version` (read by DuckDB as `name`), None when there is none."""
        with self._lock:
            found = self._kept.get((name, version))
            if found is not None:
                self._kept.move_to_end((name, version))
            return found

    def want(self, files: list[tuple[str, Version]]) -> None:
        """Copy each (name, version) of at most COPY_MAX bytes not copied yet, in the background."""
        if self.bound <= 0:
            return
        with self._lock:
            new = [f for f in files if f not in self._asked and f[1].size <= min(COPY_MAX, self.bound)]
            self._asked.update(new)
        if new:
            future = _COPYING.submit(self._copy_all, new)
            with self._lock:
                self._pending = [f for f in self._pending if not f.done()] + [future]

    def wait(self, timeout: float | None = None) -> None:
        """Until the copies asked so far are made (tests, benchmarks)."""
        with self._lock:
            pending = list(self._pending)
        wait(pending, timeout)

    def _copy_all(self, files: list[tuple[str, Version]]) -> None:
        for name, version in files:
            if _ending():  # the process is ending: no copy it would remove at once
                return
            try:
                self._copy(name, version)
            except Exception as exc:  # no caller waits: said once, on stderr; the file read by range
                logging.getLogger(__name__).warning("no local copy of %s: %r", masked_url(version.url), exc)

    def _copy(self, name: str, version: Version) -> None:
        """The whole of `version` written to a new file, read by range through the reader, then
        kept under its name (nothing kept when a read or a write fails)."""
        from ..errors import StacGdalMcpError

        try:
            folder = self._made() / hashlib.sha256(repr((name, version)).encode()).hexdigest()[:24]
        except OSError:  # no folder can be made (a read-only workspace): the files read by range
            return
        target = folder / name
        partial = folder / f".{name}.partial"
        try:
            folder.mkdir(exist_ok=True)
            with open(partial, "wb") as out:
                for start in range(0, version.size, CHUNK):
                    if _ending():
                        raise OSError("the process is ending")
                    out.write(self.reader.read(version, start, min(version.size, start + CHUNK)))
            if partial.stat().st_size != version.size:
                raise OSError(f"{partial} is {partial.stat().st_size} bytes, not {version.size}")
            os.replace(partial, target)
        except (OSError, StacGdalMcpError):
            shutil.rmtree(folder, ignore_errors=True)
            return
        with self._lock:
            self._kept[(name, version)] = str(target)
            self.held += version.size
            while self.held > self.bound and len(self._kept) > 1:
                (_, dropped), path = self._kept.popitem(last=False)
                self.held -= dropped.size
                shutil.rmtree(Path(path).parent, ignore_errors=True)  # DuckDB's open handles read on

    def _made(self) -> Path:
        """This process's folder (made once; removed when the process ends), the folders of
        processes no longer running removed first."""
        with self._lock:
            if self._folder is None:
                self.parent.mkdir(parents=True, exist_ok=True)
                for old in self.parent.iterdir():
                    pid = old.name.partition("-")[0]
                    if pid.isdigit() and not _running(int(pid)):
                        shutil.rmtree(old, ignore_errors=True)
                self._folder = self.parent / f"{os.getpid()}-{os.urandom(4).hex()}"
                self._folder.mkdir()
                weakref.finalize(self, shutil.rmtree, self._folder, True)
            return self._folder


def _running(pid: int) -> bool:
    """Whether process `pid` runs (or is not ours to ask)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def _ending() -> bool:
    """Whether the process is ending (its main thread done: the copies queued are not made, so
    that it does not wait for them to end)."""
    return not threading.main_thread().is_alive()
