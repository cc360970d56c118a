"""The blocks an HTTP catalog keeps (httpfs.RangeReader), in one anonymous memory map made once:
a slot of `block` bytes a block, least recently used out first.

Kept as one Python `bytes` each, the blocks were allocated and freed by whichever of DuckDB's
threads read them, in glibc's per-thread heaps: a search streaming more than the bound through
the cache (the exact count of a bbox reads every part's footprints over HTTP, 400 MB at 10,000,000
items) left those heaps holding up to 90 MiB freed but not given back, on top of the 128 MiB
kept. Here the blocks are copied into slots of the one map: the cache's memory is the map's
pages, touched as slots are first filled and reused after, whatever the thread. Not thread-safe:
the reader calls it under its lock.
"""

from __future__ import annotations

import mmap
from collections import OrderedDict
from collections.abc import Hashable


class BlockStore:
    """At most `bound // block` blocks of at most `block` bytes each, by key."""

    def __init__(self, bound: int, block: int):
        self.block = block
        self.slots = bound // block
        self.held = 0  # bytes of the blocks kept
        self._map = mmap.mmap(-1, self.slots * block) if self.slots else None
        self._where: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()  # key -> (slot, length)
        self._free = list(range(self.slots))

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    def __iter__(self):
        """The keys kept, least recently used first."""
        return iter(self._where)

    def get(self, key: Hashable) -> bytes | None:
        """A copy of the block kept under `key` (now the most recently used), or None."""
        found = self._where.get(key)
        if found is None:
            return None
        self._where.move_to_end(key)
        start = found[0] * self.block
        return self._map[start : start + found[1]]

    def put(self, key: Hashable, block: bytes | memoryview) -> None:
        """Keep a copy of `block` (a new key; not kept when longer than a slot), the least recently
        used block dropped first when every slot is taken."""
        if key in self._where or len(block) > self.block or not self.slots:
            return
        if not self._free:
            slot, length = self._where.popitem(last=False)[1]
            self.held -= length
            self._free.append(slot)
        slot = self._free.pop()
        start = slot * self.block
        self._map[start : start + len(block)] = block
        self._where[key] = (slot, len(block))
        self.held += len(block)
