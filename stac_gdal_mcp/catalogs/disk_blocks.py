"""The blocks an HTTP catalog keeps on local disk (httpfs.RangeReader's second tier, behind the
memory map of block_store.py): slots of `block` bytes in one file of the workspace's cache folder,
least recently used out first, at most `bound` bytes (limits.http_disk_cache_mb).

A search reading more than the memory tier holds (the exact count of a bbox over 10,000,000
items reads the bbox and footprint columns, 400-800 MB) fetched every byte again each time it
ran; kept here, the bytes of a file's version are fetched once. The file is made unlinked (it
has no name: nothing is left behind however the process ends) and read with os.pread, not
mapped: a mapped file's pages would count in the server's RSS, the pages read here are the
system's page cache.

A block is written as it is fetched. A write that fails or is cut short (a full disk, a file size
limit) keeps nothing and stops the tier writing (the reads fetch what it does not hold); a block
read back shorter than it was written is not used. Thread-safe: a slot being read or written is
pinned, neither dropped nor given to another block.
"""

from __future__ import annotations

import os
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from pathlib import Path


class DiskBlocks:
    """At most `bound // block` blocks of at most `block` bytes, by key, in a file made in
    `folder` at the first block kept."""

    def __init__(self, folder: Path, bound: int, block: int):
        self.folder, self.block = Path(folder), block
        self.slots = bound // block if bound > 0 else 0
        self.held = 0  # bytes of the blocks kept
        self.failed = False  # a write failed (or the file could not be made): nothing more written
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._where: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()  # key -> (slot, length)
        self._free = list(reversed(range(self.slots)))  # slot 0 first: the file grows as it fills
        self._pins: dict[int, int] = {}  # slot -> readers and writers now

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    @property
    def usable(self) -> bool:
        """Whether blocks are kept (a bound, and no write failed)."""
        return self.slots > 0 and not self.failed

    def get(self, keys: list[Hashable]) -> dict[Hashable, memoryview]:
        """The blocks kept under `keys` (now the most recently used), read with one os.pread per
        run of them in consecutive slots (blocks fetched together were written together); a
        block that cannot be read back whole is left out."""
        with self._lock:
            found = sorted((*self._where[k], k) for k in keys if k in self._where)
            for slot, _, key in found:
                self._where.move_to_end(key)
                self._pins[slot] = self._pins.get(slot, 0) + 1
        out: dict[Hashable, memoryview] = {}
        try:
            for run in _runs(found, self.block):
                first, size = run[0][0], (run[-1][0] - run[0][0]) * self.block + run[-1][1]
                try:
                    data = memoryview(os.pread(self._fd, size, first * self.block))
                except OSError:
                    continue
                for slot, length, key in run:
                    at = (slot - first) * self.block
                    if at + length <= len(data):
                        out[key] = data[at : at + length]
        finally:
            with self._lock:
                for slot, _, _ in found:
                    self._unpin_locked(slot)
        return out

    def span(self, keys: list[Hashable], skip: int, size: int) -> bytes | None:
        """`size` bytes from `skip` into the blocks kept under `keys` (a file's consecutive
        blocks), in one os.pread when they lie in consecutive slots, each whole but the last
        (blocks fetched together are written together): no copy of each block joined after, no
        lock held while reading. None when one is not kept, they lie apart, or the read is short."""
        with self._lock:
            where = [self._where.get(k) for k in keys]
            if not where or None in where:
                return None
            first = where[0][0]
            if any(s != first + i for i, (s, _) in enumerate(where)) or any(
                n != self.block for _, n in where[:-1]
            ):
                return None
            if skip + size > (len(where) - 1) * self.block + where[-1][1]:
                return None
            for key in keys:
                self._where.move_to_end(key)
            for slot in range(first, first + len(where)):
                self._pins[slot] = self._pins.get(slot, 0) + 1
        try:
            data = os.pread(self._fd, size, first * self.block + skip)
        except OSError:
            data = b""
        finally:
            with self._lock:
                for slot in range(first, first + len(where)):
                    self._unpin_locked(slot)
        return data if len(data) == size else None

    def put(self, key: Hashable, block: bytes | memoryview) -> bool:
        """Write `block` under `key` (a new key) in a free slot, or the least recently used one
        not pinned: whether it is kept (not when longer than a slot, when every slot is pinned,
        or once a write has failed)."""
        with self._lock:
            if key in self._where:
                return True
            if self.failed or not self.slots or len(block) > self.block:
                return False
            slot = self._slot()
            if slot is None:
                return False
            self._pins[slot] = self._pins.get(slot, 0) + 1
        try:
            written = os.pwrite(self._fd, block, slot * self.block)
        except (OSError, ValueError):
            written = -1
        with self._lock:
            self._unpin_locked(slot)
            if written == len(block):
                self._where[key] = (slot, len(block))
                self.held += len(block)
                return True
            self._free.append(slot)
            self.failed = True
            return False

    def _slot(self) -> int | None:
        """A slot to write (under the lock): a free one, else the least recently used block not
        pinned dropped; the file made first (None, and the tier off, when it cannot be)."""
        if self._fd is None:
            try:
                self._fd = _unlinked(self.folder)
            except OSError:
                self.failed = True
                return None
            weakref.finalize(self, os.close, self._fd)
        if self._free:
            return self._free.pop()
        dropped = next((k for k, (slot, _) in self._where.items() if not self._pins.get(slot)), None)
        if dropped is None:
            return None
        slot, length = self._where.pop(dropped)
        self.held -= length
        return slot

    def _unpin_locked(self, slot: int) -> None:
        left = self._pins[slot] - 1
        if left:
            self._pins[slot] = left
        else:
            del self._pins[slot]


def _runs(found: list[tuple[int, int, Hashable]], block: int) -> list[list[tuple[int, int, Hashable]]]:
    """(slot, length, key) sorted by slot, as runs of consecutive slots each whole but the last."""
    runs: list[list] = []
    for entry in found:
        last = runs[-1][-1] if runs else None
        if last is not None and last[0] + 1 == entry[0] and last[1] == block:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs


def _unlinked(folder: Path) -> int:
    """A new file in `folder` (made first) with no name, open for reading and writing: Linux's
    O_TMPFILE, elsewhere a file made and unlinked at once."""
    folder.mkdir(parents=True, exist_ok=True)
    if hasattr(os, "O_TMPFILE"):
        try:
            return os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600)
        except OSError:  # a file system without it
            pass
    fd, name = tempfile.mkstemp(prefix="http-blocks-", dir=folder)
    os.unlink(name)
    return fd
