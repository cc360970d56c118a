"""The Range filesystem (catalogs/httpfs.py) read by many threads at once, as DuckDB reads it:
every byte read compared with the file on disk, served by the real Range server of the test bed.

DuckDB's fsspec bridge reads at a position with two calls on the one file object all its
threads share, `seek(location)` then `read(n)`; another thread may run between the two."""

from __future__ import annotations

import random
import sys
import threading

import pytest

from stac_gdal_mcp.catalogs.httpfs import BLOCK, RangeFileSystem, RangeReader
from stac_gdal_mcp.settings import CatalogConfig
from testbed import serve_directory

THREADS, READS = 8, 400


@pytest.fixture
def served_file(tmp_path):
    """A file of random bytes (no two blocks alike) behind the Range server."""
    path = tmp_path / "random.bin"
    path.write_bytes(random.Random(5).randbytes(40 * BLOCK + 1234))
    with serve_directory(tmp_path, nodelay=True) as server:
        yield server, path


@pytest.fixture
def switch_often():
    """Threads switched every microsecond (not every 5 ms), so that a thread runs between
    another's two calls often enough to be seen."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _filesystem(make_settings, url: str, **overrides) -> RangeFileSystem:
    settings = make_settings(**overrides)
    reader = RangeReader(CatalogConfig(id="threads", url=url), settings)
    return RangeFileSystem(reader, [reader.version(url)])


def test_threads_sharing_one_file_read_their_own_ranges(make_settings, served_file, switch_often):
    """Each thread seeks then reads random ranges (within a block, across blocks, past the end)
    of one shared file object: each gets the bytes of its own range, never another's."""
    server, path = served_file
    want = path.read_bytes()
    file = _filesystem(make_settings, f"{server.url}/{path.name}").open("0.parquet", "rb")
    wrong = _read_in_threads(file, want, READS, [1, 8, 100, BLOCK // 3, BLOCK, 3 * BLOCK + 7])
    assert not wrong, f"{len(wrong)} of {THREADS * READS} reads got another range's bytes: {wrong[:5]}"


def _read_in_threads(file, want: bytes, reads: int, lengths: list[int]) -> list[tuple[int, int]]:
    """THREADS threads each seeking then reading `reads` random ranges of `lengths` from the one
    shared `file`: the (start, length) of those whose bytes were not `want`'s."""
    wrong: list[tuple[int, int]] = []

    def reading(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(reads):
            start, length = rng.randrange(len(want)), rng.choice(lengths)
            file.seek(start)
            if file.read(length) != want[start : start + length]:
                wrong.append((start, length))

    threads = [threading.Thread(target=reading, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wrong


def test_a_read_between_anothers_seek_and_read_does_not_move_it(make_settings, served_file):
    """Thread A seeks, thread B seeks elsewhere and reads, then A reads: A gets the bytes where it
    sought; reads without a seek go on from where the same thread's last read ended."""
    server, path = served_file
    want = path.read_bytes()
    file = _filesystem(make_settings, f"{server.url}/{path.name}").open("0.parquet", "rb")
    file.seek(BLOCK - 10)
    other = []
    thread = threading.Thread(target=lambda: other.append((file.seek(7 * BLOCK), file.read(4), file.tell())))
    thread.start()
    thread.join()
    assert other == [(7 * BLOCK, want[7 * BLOCK : 7 * BLOCK + 4], 7 * BLOCK + 4)]
    assert file.read(20) + file.read(5) == want[BLOCK - 10 : BLOCK + 15]
    assert file.tell() == BLOCK + 15


def test_a_small_cache_read_by_many_threads_stays_within_its_bound(make_settings, served_file, monkeypatch):
    """A cache of 4 blocks under 8 threads reading across 41: blocks pushed out while others
    read them, every byte read still the file's, and the blocks kept never more than the bound
    (each kept counted as it is added, and the bytes held counted again at the end)."""
    from stac_gdal_mcp.catalogs import httpfs

    monkeypatch.setattr(httpfs, "cache_bytes", lambda settings: 4 * BLOCK)
    server, path = served_file
    want = path.read_bytes()
    fs = _filesystem(make_settings, f"{server.url}/{path.name}", limits={"http_disk_cache_mb": 0})
    reader, held = fs.reader, []  # (blocks kept on disk are not kept in memory too)
    keep = httpfs.RangeReader._keep

    def counted(self, key, block):
        keep(self, key, block)
        held.append((self.blocks.held, len(self.blocks)))

    monkeypatch.setattr(httpfs.RangeReader, "_keep", counted)
    file = fs.open("0.parquet", "rb")
    wrong = _read_in_threads(file, want, READS // 2, [1, 100, BLOCK, 2 * BLOCK + 7])
    assert not wrong, f"{len(wrong)} reads got other bytes: {wrong[:5]}"
    assert len(held) > 40 and max(b for b, _ in held) <= 4 * BLOCK and max(n for _, n in held) <= 4
    taken = [reader.blocks.take(key) for key in list(reader.blocks)]  # each block read in place
    reader.blocks.release([slot for slot, _ in taken])
    assert sum(len(view) for _, view in taken) == reader.blocks.held <= 4 * BLOCK
    assert len({slot for slot, _ in taken}) == len(taken)  # a slot each


def test_the_blocks_kept_take_no_heap_memory(make_settings, served_file, monkeypatch):
    """The blocks a cache of 8 keeps are copies in its one memory map (block_store.py), not
    Python objects allocated by the threads that read them: once 8 threads have read every
    block of the file (40 fetched, 8 kept), the Python heap holds less than one block more than
    before (counting allocations made by the reader's and the store's code). Kept as `bytes` each,
    the 8 blocks alone were 8 * BLOCK more."""
    import tracemalloc

    from stac_gdal_mcp.catalogs import block_store, httpfs

    monkeypatch.setattr(httpfs, "cache_bytes", lambda settings: 8 * BLOCK)
    server, path = served_file
    want = path.read_bytes()
    # the memory tier alone (with a disk tier, blocks read back from it are not kept in memory)
    fs = _filesystem(make_settings, f"{server.url}/{path.name}", limits={"http_disk_cache_mb": 0})
    file = fs.open("0.parquet", "rb")
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        assert not _read_in_threads(file, want, READS // 4, [BLOCK, 3 * BLOCK + 7])
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    cache = [tracemalloc.Filter(True, httpfs.__file__), tracemalloc.Filter(True, block_store.__file__)]
    grown = sum(
        s.size_diff for s in after.filter_traces(cache).compare_to(before.filter_traces(cache), "filename")
    )
    assert grown < BLOCK, f"the heap grew by {grown} bytes while 8 blocks were kept"
    assert len(fs.reader.blocks) == 8 and fs.reader.blocks.held == 8 * BLOCK


def test_a_block_read_in_place_is_not_overwritten_until_released():
    """A store of 2 slots: a block taken (pinned) stays whole while newer blocks come and go
    through the other slot; with both pinned a new block is not kept; once released, the least
    recently used goes first."""
    from stac_gdal_mcp.catalogs.block_store import BlockStore

    store = BlockStore(2 * 4, 4)
    store.put("a", b"aaaa")
    store.put("b", b"bbbb")
    slot_a, view_a = store.take("a")
    for key in "cde":  # each pushes out the least recently used block not pinned
        store.put(key, key.encode() * 4)
    assert bytes(view_a) == b"aaaa" and list(store) == ["a", "e"]
    slot_e, _ = store.take("e")
    store.put("f", b"ffff")
    assert list(store) == ["a", "e"] and "f" not in store and store.held == 8
    store.release([slot_a, slot_e])
    store.put("f", b"ffff")
    assert list(store) == ["e", "f"] and store.take("a") is None


def test_short_blocks_share_a_slot_in_quarters():
    """A file's short last block takes the quarters of a slot it needs, beside others: a store of
    2 slots of 4 bytes keeps a whole block and three short ones; a whole block then needs a free
    slot (the least recently used goes), and a short one the run of quarters it needs (the least
    recently used go until one slot has it), the blocks left intact."""
    from stac_gdal_mcp.catalogs.block_store import BlockStore

    store = BlockStore(2 * 4, 4)
    for key, block in (("a", b"aaaa"), ("b", b"b"), ("c", b"cc"), ("d", b"d")):
        store.put(key, block)
    assert list(store) == ["a", "b", "c", "d"] and store.held == 8
    store.put("e", b"eeee")
    assert list(store) == ["b", "c", "d", "e"]
    store.put("f", b"fff")
    assert list(store) == ["d", "e", "f"] and store.held == 8
    taken = {key: store.take(key) for key in "def"}
    assert {key: bytes(view) for key, (_, view) in taken.items()} == {"d": b"d", "e": b"eeee", "f": b"fff"}
    assert taken["d"][0] == taken["f"][0] != taken["e"][0]
