"""`stac-gdal-mcp serve` pauses the cyclic garbage collector while it builds the server (a faster
start: docs/figures.md, issue 14) and always turns it back on: before serving, with what start-up
made frozen, and after a start that fails."""

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


def _serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
    env["STAC_GDAL_MCP_WORKSPACE"] = str(tmp_path / "ws")
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, "serve", *args],
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
