"""Errors as a client and the server's log see them: an expected failure is one tool error with
the message a person can act on, and ONE log line, in the one format of the server's log."""

import logging
import re
import subprocess
import sys
import textwrap

import pytest
from fastmcp import Client


def warnings_and_up(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_core_error_is_one_log_line(build, make_settings, caplog):
    caplog.set_level(logging.INFO)
    async with Client(build(make_settings())) as client:
        result = await client.call_tool(
            "get_collection", {"collection_id": "sentinel-2-l2x", "catalog": "sample"}, raise_on_error=False
        )
    assert result.is_error
    assert result.content[0].text.startswith("collection 'sentinel-2-l2x' not found in catalog 'sample'")
    [record] = warnings_and_up(caplog)
    assert record.name == "stac_gdal_mcp.tools" and record.exc_info is None
    assert record.getMessage() == f"tool 'get_collection' failed: {result.content[0].text}"


async def test_an_error_in_a_long_tool_is_one_log_line(build, make_settings, caplog):
    caplog.set_level(logging.INFO)
    async with Client(build(make_settings())) as client:
        result = await client.call_tool(
            "time_series",
            {"aoi": [13.6, 45.92, 13.6, 45.935], "search": {"catalog": "sample"}},
            raise_on_error=False,
        )
    assert result.is_error and "has no area" in result.content[0].text
    [record] = warnings_and_up(caplog)
    assert record.getMessage() == f"tool 'time_series' failed: {result.content[0].text}"


async def test_a_resource_error_is_one_log_line_without_traceback(build, make_settings, caplog):
    caplog.set_level(logging.INFO)
    async with Client(build(make_settings())) as client:
        try:
            await client.read_resource("stac-gdal://outputs/no-such-output")
        except Exception as exc:
            message = str(exc)
    assert "no output 'no-such-output'" in message
    [record] = warnings_and_up(caplog)
    assert record.getMessage().startswith("resource 'output_record' failed: no output 'no-such-output'")
    assert "Traceback" not in caplog.text


async def test_invalid_arguments_are_one_line_for_the_client_and_the_log(build, make_settings, caplog):
    caplog.set_level(logging.INFO)
    async with Client(build(make_settings())) as client:
        result = await client.call_tool(
            "preview", {"href": "x.tif", "bbox": [1, 2, 3], "max_size": 4}, raise_on_error=False
        )
    assert result.is_error
    assert result.content[0].text == (
        "invalid arguments for preview: bbox: List should have at least 4 items after validation, not 3; "
        "max_size: Input should be greater than or equal to 16"
    )
    [record] = warnings_and_up(caplog)
    assert record.getMessage().startswith("Invalid arguments for tool 'preview'")


LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: \S")

SESSION = """
import asyncio, sys
import pytest
from fastmcp import Client
from stac_gdal_mcp.server.logs import setup_logging
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.settings import load_settings

setup_logging("INFO")
settings = load_settings(workspace=sys.argv[1])

async def main():
    async with Client(build_server(settings)) as client:
        await client.call_tool("get_item", {"collection_id": "sentinel-2-l2a", "item_id": "nope",
                                            "catalog": "sample"}, raise_on_error=False)
        await client.call_tool("search_items", {"catalog": "sample", "bbox": "[1, 2"},
                               raise_on_error=False)
        try:
            await client.read_resource("stac-gdal://outputs/nope")
        except Exception:
            pass

asyncio.run(main())
"""


@pytest.mark.testbed  # a subprocess
def test_setup_logging_gives_one_format_and_one_line_per_error(tmp_path):
    """As `stac-gdal-mcp serve` logs: fastmcp's lines too in our format, no wrapped rich output."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SESSION), str(tmp_path / "workspace")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(LINE.match(line) for line in lines), done.stderr
    errors = [line for line in lines if " WARNING " in line or " ERROR " in line]
    assert len(errors) == 3, done.stderr
    assert "WARNING stac_gdal_mcp.tools: tool 'get_item' failed: item 'nope' not found" in errors[0]
    assert "WARNING fastmcp.server.server: Invalid arguments for tool 'search_items'" in errors[1]
    assert "WARNING stac_gdal_mcp.tools: resource 'output_record' failed: no output 'nope'" in errors[2]


async def test_a_prompt_without_its_arguments_names_them(build, make_settings):
    """Not "Error rendering prompt": the missing arguments, by name; with them, the steps use
    cloud_cover_stats in the area, then preview or composite."""
    from mcp.shared.exceptions import MCPError

    async with Client(build(make_settings())) as client:
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("find_clear_imagery", {"place": "Trieste"})
        with pytest.raises(MCPError) as none:
            await client.get_prompt("explore_catalog", {})
        arguments = {"place": "Trieste", "start": "2024-06-01", "end": "2024-08-31"}
        text = (await client.get_prompt("find_clear_imagery", arguments)).messages[0].content.text
    assert str(missing.value) == "prompt 'find_clear_imagery' needs start, end (required: place, start, end)"
    assert "needs catalog" in str(none.value)
    steps = [text.index(tool) for tool in ("search_items(", "cloud_cover_stats(", "preview(", "composite(")]
    assert steps == sorted(steps) and "2024-06-01/2024-08-31" in text
