"""`stac-gdal-mcp serve` pauses the cyclic garbage collector while it builds the server (a faster
start: docs/figures.md) and always turns it back on: before serving, with what start-up
made frozen, and after a start that fails. Its Arrow allocator is the system's unless the user
chose one (flat memory at region scale: docs/figures.md)."""

from __future__ import annotations

import os
import subprocess
import sys

# FastMCP.run replaced by a report of the collector's state at the moment serving would begin
SCRIPT = """
import gc, sys
from fastmcp import FastMCP

def run(self, **kwargs):
    print("serving", gc.isenabled(), gc.get_freeze_count(), kwargs["transport"], flush=True)

FastMCP.run = run
from stac_gdal_mcp.cli import main

code = main(sys.argv[1:])
print("after", gc.isenabled(), flush=True)
sys.exit(code)
"""


# FastMCP.run replaced by a report of the Arrow memory pool the server's process allocates from
POOL_SCRIPT = """
import sys
from fastmcp import FastMCP

def run(self, **kwargs):
    import pyarrow
    print(pyarrow.default_memory_pool().backend_name, flush=True)

FastMCP.run = run
from stac_gdal_mcp.cli import main

sys.exit(main(sys.argv[1:]))
"""

MMAP_SCRIPT = """
import ctypes
import sys
from fastmcp import FastMCP

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

def run(self, **kwargs):
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.free.argtypes, libc.mallinfo2.restype = ctypes.c_void_p, [ctypes.c_void_p], Info
    size = 4 << 20
    libc.free(libc.malloc(size))  # (glibc's own rule: a mapped block freed raises the threshold past it)
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    print("mapped" if libc.mallinfo2().hblkhd - before >= size else "heap", flush=True)
    libc.free(block)

FastMCP.run = run
from stac_gdal_mcp.cli import main

sys.exit(main(sys.argv[1:]))
"""


def _serve(tmp_path, *args: str, script: str = SCRIPT, **env_vars: str) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("STAC_GDAL_MCP_")
        and k not in ("ARROW_DEFAULT_MEMORY_POOL", "MALLOC_MMAP_THRESHOLD_")
    }
    env.update(env_vars, STAC_GDAL_MCP_WORKSPACE=str(tmp_path / "ws"))
    return subprocess.run(
        [sys.executable, "-c", script, "serve", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_collector_is_on_and_start_up_frozen_when_serving_begins(tmp_path):
    result = _serve(tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    serving, after = result.stdout.splitlines()
    word, enabled, frozen, transport = serving.split()
    assert (word, enabled, transport) == ("serving", "True", "stdio")
    assert int(frozen) > 100_000  # the modules, classes and schemas made while starting
    assert after == "after True"


def test_collector_is_on_after_a_start_that_fails(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('default_catalog = "nope"\n')
    result = _serve(tmp_path, "--config", str(config))
    assert result.returncode == 2 and "default_catalog 'nope'" in result.stderr
    assert result.stdout.splitlines() == ["after True"]


def test_a_blank_or_whitespace_token_is_refused_at_start(tmp_path):
    """`--token ' '` protects nothing (and makes an illegal header): refused before serving,
    from the command line and from STAC_GDAL_MCP_TOKEN alike, without echoing the value."""
    for token in (" ", "", "\t", "two words"):
        result = _serve(tmp_path, "--transport", "http", "--host", "0.0.0.0", "--token", token)
        assert result.returncode == 2, (token, result.stdout)
        assert "serving" not in result.stdout and "--token" in result.stderr
    env_token = subprocess.run(
        [sys.executable, "-c", SCRIPT, "serve", "--transport", "http"],
        env={**os.environ, "STAC_GDAL_MCP_WORKSPACE": str(tmp_path / "ws"), "STAC_GDAL_MCP_TOKEN": "  "},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert env_token.returncode == 2 and "token is blank" in env_token.stderr
    good = _serve(tmp_path, "--transport", "http", "--token", "s3cret-Token_value")
    assert good.returncode == 0 and good.stdout.startswith("serving"), good.stderr[-2000:]


def test_the_server_allocates_arrow_memory_from_the_system_unless_told_otherwise(tmp_path):
    """mimalloc (Arrow's default) kept 60 MB its threads freed over a 100,000-zone call: the server
    sets the system allocator before pyarrow is imported; a user's ARROW_DEFAULT_MEMORY_POOL wins."""
    chosen = _serve(tmp_path, script=POOL_SCRIPT)
    assert chosen.returncode == 0, chosen.stderr[-2000:]
    assert chosen.stdout.split() == ["system"]
    users = _serve(tmp_path, script=POOL_SCRIPT, ARROW_DEFAULT_MEMORY_POOL="jemalloc")
    assert users.returncode == 0, users.stderr[-2000:]
    assert users.stdout.split() == ["jemalloc"]


def test_the_server_gives_large_freed_blocks_back_to_the_system(tmp_path):
    """glibc raises its mmap threshold past each mapped block freed, and blocks of that size then
    come from the heap, whose freed middle stays resident (a zonal table's columns, again and
    again): the server fixes the threshold, so a 4 MiB block is mapped after one was freed; a
    user's MALLOC_MMAP_THRESHOLD_ wins."""
    chosen = _serve(tmp_path, script=MMAP_SCRIPT)
    assert chosen.returncode == 0, chosen.stderr[-2000:]
    assert chosen.stdout.split() == ["mapped"]
    users = _serve(tmp_path, script=MMAP_SCRIPT, MALLOC_MMAP_THRESHOLD_=str(8 << 20))
    assert users.returncode == 0, users.stderr[-2000:]
    assert users.stdout.split() == ["heap"]
