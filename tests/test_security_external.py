"""External servers: a child's stderr is held in a bounded ring buffer in
memory - no file, however much it writes, and nothing left once the server exits - and
list_extensions shows the program name and the number of arguments, not the arguments (which
may be secrets), unless the entry declares them safe with `show_args`."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from fastmcp import Client

from stac_gdal_mcp.server.extensions.external import STDERR_KEEP, ExternalServer, launch_spec
from stac_gdal_mcp.settings import ExternalServerConfig, load_settings

pytestmark = pytest.mark.testbed  # starts external MCP servers as subprocesses

ECHO = Path(__file__).parent / "external_servers" / "echo_server.py"
PLAIN_SECRET = "hunter2-correct-horse"  # a secret as a plain argument: nothing marks it as one


def _temp_files() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if "stac-gdal-mcp" in name}


def _flooder(tmp_path: Path, megabytes: int) -> Path:
    """A server that writes `megabytes` MB to stderr, then serves like the echo server."""
    script = tmp_path / "flood.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import runpy, sys
            chunk = ("x" * 1023 + "\\n") * 1024
            for _ in range({megabytes}):
                sys.stderr.write(chunk)
            sys.stderr.write("last line before serving\\n")
            sys.stderr.flush()
            sys.argv = [{str(ECHO)!r}]
            runpy.run_path({str(ECHO)!r}, run_name="__main__")
            """
        )
    )
    return script


async def test_a_flood_of_stderr_stays_in_a_bounded_buffer(tmp_path):
    before = _temp_files()
    server = ExternalServer(
        launch_spec(ExternalServerConfig(name="flood", script=str(_flooder(tmp_path, 300))))
    )
    started = time.monotonic()
    await server.start()
    try:
        assert server.status == "running", server.error
        assert _temp_files() == before  # nothing on disk
        with anyio.fail_after(60):  # the reader keeps up with the child
            while server.stderr.total < 300 * 1024**2:
                await anyio.sleep(0.05)
        assert len(server.stderr.since(0)) <= STDERR_KEEP
        assert server.stderr.since(0).endswith(b"last line before serving\n")
        assert time.monotonic() - started < 60
    finally:
        await server.stop()
    assert _temp_files() == before
    server.stderr._reader.join(timeout=5)
    assert not server.stderr._reader.is_alive()  # the pipe is closed: nothing left behind


async def test_a_failing_child_is_quoted_from_the_buffer(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\nsys.stderr.write('x' * 200000 + '\\nconfig error: no licence\\n')\nsys.exit(3)\n"
    )
    server = ExternalServer(launch_spec(ExternalServerConfig(name="fails", script=str(script), timeout_s=10)))
    await server.start()
    await server.stop()
    assert server.status == "failed"
    assert "config error: no licence" in server.error and "\n" not in server.error
    assert len(server.error) < 5000


def _settings(tmp_path, *servers):
    return load_settings(
        workspace=tmp_path / "ws", default_catalog="sample", external_servers=[dict(s) for s in servers]
    )


async def test_list_extensions_hides_arguments_unless_declared_safe(build, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stac_gdal_mcp")
    hidden = {"name": "hidden", "cmd": [sys.executable, str(ECHO), "--label", PLAIN_SECRET]}
    shown = {
        "name": "shown",
        "cmd": [sys.executable, str(ECHO), "--label", "public-label"],
        "show_args": True,
    }
    mcp = build(_settings(tmp_path, hidden, shown))
    async with Client(mcp) as client:
        result = await client.call_tool("list_extensions", {})
    text = json.dumps(result.structured_content)
    by_name = {e["name"]: e for e in result.structured_content["extensions"]}
    assert by_name["hidden"]["source"] == f"{Path(sys.executable).name} (3 arguments not shown)"
    assert by_name["shown"]["source"] == f"{sys.executable} {ECHO} --label public-label"
    assert PLAIN_SECRET not in text and PLAIN_SECRET not in caplog.text
    assert str(ECHO.parent) not in by_name["hidden"]["source"]  # no server folders either
