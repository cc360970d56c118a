"""The blocks an HTTP catalog keeps (httpfs.RangeReader), in one anonymous memory map made once:
a slot of `block` bytes a block, least recently used out first.

Kept as one Python `bytes` each, the blocks were allocated and freed by whichever of DuckDB's
threads read them, in glibc's per-thread heaps: a search streaming more than the bound through
the cache (the exact count of a bbox reads every part's footprints over HTTP, 400 MB at 10,000,000
items) left those heaps holding up to 90 MiB freed but not given back, on top of the 128 MiB
kept. Here the blocks are copied into slots of the one map: the cache's memory is the map's
pages, touched as slots are first filled and reused after, whatever the thread. A block is read
in place (a view of its slot, no copy): `take` pins the slot until `release`, and a pinned slot
is neither dropped nor written. Not thread-safe: the reader calls it under its lock.
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
        self._view = memoryview(self._map) if self._map is not None else None
        self._where: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()  # key -> (slot, length)
        self._free = list(range(self.slots))
        self._pins = [0] * self.slots  # readers of each slot's block now

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    def __iter__(self):
        """The keys kept, least recently used first."""
        return iter(self._where)

    def take(self, key: Hashable) -> tuple[int, memoryview] | None:
        """(slot, a view of the block kept under `key`), the block now the most recently used and
        its slot pinned until `release([slot])`; None when not kept."""
        found = self._where.get(key)
        if found is None or self._view is None:
            return None
        self._where.move_to_end(key)
        slot, length = found
        self._pins[slot] += 1
        return slot, self._view[slot * self.block : slot * self.block + length]

    def release(self, slots: list[int]) -> None:
        """Unpin the slots `take` gave."""
        for slot in slots:
            self._pins[slot] -= 1

    def put(self, key: Hashable, block: bytes | memoryview) -> None:
        """Keep a copy of `block` (a new key), in a free slot or that of the least recently used
        block not pinned; not kept when longer than a slot or when every slot is pinned."""
        if key in self._where or len(block) > self.block or self._view is None:
            return
        if not self._free:
            dropped = next((k for k, (slot, _) in self._where.items() if not self._pins[slot]), None)
            if dropped is None:
                return
            slot, length = self._where.pop(dropped)
            self.held -= length
            self._free.append(slot)
        slot = self._free.pop()
        self._view[slot * self.block : slot * self.block + len(block)] = block
        self._where[key] = (slot, len(block))
        self.held += len(block)
