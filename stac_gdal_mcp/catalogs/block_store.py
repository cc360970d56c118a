"""The blocks an HTTP catalog keeps (httpfs.RangeReader), in one anonymous memory map made once:
slots of `block` bytes holding blocks in whole quarters side by side, least recently used out first.

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

UNITS = 4  # a slot holds blocks of a quarter of it side by side: a file's short last block takes
# the quarters it needs, not a whole slot (780 parts of 140 KB: 2,340 blocks, 1,560 of them whole,
# in 2,048 slots, which a slot each overflowed so that every search fetched the parts again)


class BlockStore:
    """At most `bound // block` slots of `block` bytes, each holding blocks in whole quarters
    side by side (a block at most a slot), by key."""

    def __init__(self, bound: int, block: int):
        self.block = block
        self.unit = max(1, block // UNITS)
        self.units = block // self.unit  # units a slot
        self.slots = bound // block
        self.held = 0  # bytes of the blocks kept
        self._map = mmap.mmap(-1, self.slots * block) if self.slots else None
        self._view = memoryview(self._map) if self._map is not None else None
        # key -> (slot, first unit, length)
        self._where: OrderedDict[Hashable, tuple[int, int, int]] = OrderedDict()
        self._used = [0] * self.slots  # each slot's units taken, a bit each
        self._room: list[set[int]] = [set() for _ in range(self.units + 1)]  # longest free run -> slots
        self._room[self.units].update(range(self.slots))
        self._pins = [0] * self.slots  # readers of each slot's blocks now

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
        slot, first, length = found
        self._pins[slot] += 1
        start = slot * self.block + first * self.unit
        return slot, self._view[start : start + length]

    def release(self, slots: list[int]) -> None:
        """Unpin the slots `take` gave."""
        for slot in slots:
            self._pins[slot] -= 1

    def put(self, key: Hashable, block: bytes | memoryview) -> None:
        """Keep a copy of `block` (a new key) in free units of a slot, the least recently used
        blocks not pinned dropped until a slot has room; not kept when longer than a slot or
        when no slot can make room."""
        if key in self._where or len(block) > self.block or self._view is None:
            return
        need = max(1, -(-len(block) // self.unit))
        slot = next((next(iter(self._room[n])) for n in range(need, self.units + 1) if self._room[n]), None)
        while slot is None:
            dropped = next((k for k, found in self._where.items() if not self._pins[found[0]]), None)
            if dropped is None:
                return
            freed, first, length = self._where.pop(dropped)
            self.held -= length
            self._mark(freed, first, -(-length // self.unit) if length else 1, False)
            slot = freed if _longest(~self._used[freed], self.units) >= need else None
        first = _first_run(~self._used[slot], self.units, need)
        self._mark(slot, first, need, True)
        start = slot * self.block + first * self.unit
        self._view[start : start + len(block)] = block
        self._where[key] = (slot, first, len(block))
        self.held += len(block)

    def _mark(self, slot: int, first: int, count: int, used: bool) -> None:
        """Units first..first + count of `slot` taken (or freed), the slot filed by its room."""
        self._room[_longest(~self._used[slot], self.units)].discard(slot)
        bits = ((1 << count) - 1) << first
        self._used[slot] = self._used[slot] | bits if used else self._used[slot] & ~bits
        self._room[_longest(~self._used[slot], self.units)].add(slot)


def _longest(free: int, units: int) -> int:
    """The longest run of set bits among the `units` low bits of `free`."""
    best = run = 0
    for unit in range(units):
        run = run + 1 if free >> unit & 1 else 0
        best = max(best, run)
    return best


def _first_run(free: int, units: int, need: int) -> int:
    """The first unit of the first run of `need` set bits among the `units` low bits of `free`."""
    run = 0
    for unit in range(units):
        run = run + 1 if free >> unit & 1 else 0
        if run == need:
            return unit - need + 1
    raise ValueError("no room")  # put finds a slot with room first
