"""The disk tier of the HTTP block cache (catalogs/disk_blocks.py behind httpfs.RangeReader):
blocks past the memory tier's bound are read back from a file of the workspace's cache folder,
not fetched again (requests counted by the test bed's Range server); the file has no name; its
bound holds, the least recently used out first; a new version of a file is fetched, not served
from it; a write that fails (a file size limit, in a process of its own) leaves the reads
fetching, every byte the file's; a range of blocks kept side by side is one os.pread, and what
the disk keeps is not kept in memory too."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

from stac_gdal_mcp.catalogs import httpfs
from stac_gdal_mcp.catalogs.httpfs import BLOCK, RangeReader
from stac_gdal_mcp.settings import CatalogConfig
from testbed import serve_directory

BLOCKS = 40  # blocks of the served file (and a short last one)


@pytest.fixture
def served_file(tmp_path):
    """A file of random bytes (no two blocks alike) behind the Range server."""
    path = tmp_path / "served" / "random.bin"
    path.parent.mkdir()
    path.write_bytes(random.Random(7).randbytes(BLOCKS * BLOCK + 1234))
    with serve_directory(path.parent, nodelay=True) as server:
        yield server, path


@pytest.fixture
def small_memory(monkeypatch):
    """A memory tier of 4 blocks: a read of the whole file goes past it."""
    monkeypatch.setattr(httpfs, "cache_bytes", lambda settings: 4 * BLOCK)


def _reader(make_settings, url: str, disk_mb: int) -> RangeReader:
    return RangeReader(
        CatalogConfig(id="disk", url=url), make_settings(limits={"http_disk_cache_mb": disk_mb})
    )


def _read_all(reader: RangeReader, version, step: int = 3 * BLOCK + 11) -> bytes:
    """The whole file, read in pieces that straddle blocks."""
    return b"".join(reader.read(version, at, at + step) for at in range(0, version.size, step))


@pytest.mark.parametrize("disk_mb", [0, 16])
def test_blocks_past_the_memory_bound_are_read_back_from_disk(
    make_settings, served_file, small_memory, disk_mb
):
    """With a disk tier, the second read of a file eight times the memory tier fetches nothing;
    without one (0), it fetches the file again."""
    server, path = served_file
    reader = _reader(make_settings, f"{server.url}/{path.name}", disk_mb)
    version = reader.version(f"{server.url}/{path.name}")
    assert _read_all(reader, version) == path.read_bytes()
    assert reader.blocks.held <= 4 * BLOCK
    server.reset_stats()
    assert _read_all(reader, version) == path.read_bytes()
    fetched = server.stats()["bytes"]
    if disk_mb:
        assert fetched == 0 and len(reader.disk) == BLOCKS + 1
    else:
        assert fetched >= path.stat().st_size - 4 * BLOCK and len(reader.disk) == 0


def test_the_disk_tier_file_has_no_name(make_settings, served_file, small_memory):
    """The blocks are in a file of the workspace's cache folder that no name leads to: the folder
    is empty while the file holds them, and the process's descriptor says it is deleted."""
    server, path = served_file
    reader = _reader(make_settings, f"{server.url}/{path.name}", 16)
    _read_all(reader, reader.version(f"{server.url}/{path.name}"))
    assert reader.disk.held > 4 * BLOCK
    assert reader.disk.folder.is_dir() and not list(reader.disk.folder.iterdir())
    assert os.readlink(f"/proc/self/fd/{reader.disk._fd}").endswith("(deleted)")


def test_the_disk_tier_keeps_its_bound_oldest_out(make_settings, served_file, small_memory):
    """A disk tier of 1 MB (16 blocks) under a file of 41 blocks read in order: it never holds
    more than 16, the last 16 read again fetch nothing, the first is fetched again."""
    server, path = served_file
    want = path.read_bytes()
    reader = _reader(make_settings, f"{server.url}/{path.name}", 1)
    version = reader.version(f"{server.url}/{path.name}")
    held = []
    for at in range(0, version.size, BLOCK):
        assert reader.read(version, at, at + BLOCK) == want[at : at + BLOCK]
        held.append((len(reader.disk), reader.disk.held))
    assert max(n for n, _ in held) == 16 and max(b for _, b in held) <= 1024**2
    server.reset_stats()
    start = (BLOCKS - 15) * BLOCK  # the last 16 blocks (the short one included)
    assert reader.read(version, start, version.size) == want[start:]
    assert server.stats()["bytes"] == 0
    assert reader.read(version, 0, 10) == want[:10]
    assert server.stats()["requests"] == 1


def test_a_new_version_is_fetched_not_read_from_disk(make_settings, served_file, small_memory):
    """The file replaced by other bytes of the same size: its new version's blocks are fetched,
    and every byte read is the new file's."""
    server, path = served_file
    url = f"{server.url}/{path.name}"
    reader = _reader(make_settings, url, 16)
    old = reader.version(url)
    _read_all(reader, old)
    new_bytes = random.Random(8).randbytes(path.stat().st_size)
    path.write_bytes(new_bytes)
    os.utime(path, (1_000_000_000, 1_000_000_000))  # another Last-Modified, whatever the clock
    new = reader.version(url)
    assert new != old and new.size == old.size
    server.reset_stats()
    assert _read_all(reader, new) == new_bytes
    assert server.stats()["bytes"] == len(new_bytes)


FAILING = """
import json, resource, signal, sys
from stac_gdal_mcp.catalogs import httpfs
from stac_gdal_mcp.settings import CatalogConfig, load_settings
url, workspace, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3])
httpfs.cache_bytes = lambda settings: 4 * httpfs.BLOCK
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), not the process
resource.setrlimit(resource.RLIMIT_FSIZE, (blocks * httpfs.BLOCK, resource.RLIM_INFINITY))
settings = load_settings(workspace=workspace, network={"allow_private_hosts": True}, limits={"http_disk_cache_mb": 16})
reader = httpfs.RangeReader(CatalogConfig(id="full", url=url), settings)
version = reader.version(url)
read = [reader.read(version, at, at + 3 * httpfs.BLOCK + 11) for _ in range(2)
        for at in range(0, version.size, 3 * httpfs.BLOCK + 11)]
half = len(read) // 2
print(json.dumps([b"".join(read[:half]).hex(), b"".join(read[half:]).hex(), reader.disk.failed, len(reader.disk)]))
"""


def test_a_failed_write_leaves_the_reads_fetching(tmp_path, served_file):
    """In a process whose files may not grow past 6 blocks, the tier's 7th write fails: it
    keeps the 6 blocks written, writes no more, and both reads of the file are its bytes (the
    second fetching what the tier does not hold)."""
    server, path = served_file
    server.reset_stats()
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(FAILING),
            f"{server.url}/{path.name}",
            str(tmp_path / "ws"),
            "6",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    first, second, failed, kept = json.loads(run.stdout)
    want = path.read_bytes().hex()
    assert first == want and second == want
    assert failed and kept == 6
    assert server.stats()["bytes"] >= 2 * path.stat().st_size - 10 * BLOCK


def test_reads_of_blocks_kept_on_disk_are_one_pread_each_and_not_kept_in_memory(
    make_settings, served_file, monkeypatch
):
    """Blocks fetched together lie side by side on disk: once the file is read, every range of
    it (within a block, across blocks, the short last one, the end) is one os.pread of exactly
    its bytes, and the memory tier keeps none of what the disk keeps."""
    from stac_gdal_mcp.catalogs import disk_blocks

    server, path = served_file
    want = path.read_bytes()
    reader = _reader(make_settings, f"{server.url}/{path.name}", 16)
    version = reader.version(f"{server.url}/{path.name}")
    assert reader.read(version, 0, version.size) == want  # one request, written in a row
    assert reader.blocks.held == 0 and len(reader.disk) == BLOCKS + 1
    preads = []
    pread = os.pread
    monkeypatch.setattr(disk_blocks.os, "pread", lambda fd, n, at: preads.append(n) or pread(fd, n, at))
    server.reset_stats()
    rng = random.Random(3)
    ranges = [(0, 1), (BLOCK - 5, BLOCK + 5), (len(want) - 1300, len(want)), (7, 7 + 5 * BLOCK)]
    ranges += [(a, a + rng.randrange(1, 3 * BLOCK)) for a in (rng.randrange(len(want)) for _ in range(40))]
    for start, end in ranges:
        assert reader.read(version, start, end) == want[start:end], (start, end)
    assert preads == [min(end, len(want)) - start for start, end in ranges]
    assert server.stats()["bytes"] == 0
