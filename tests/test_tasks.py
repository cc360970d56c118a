"""MCP tasks, through fastmcp's client, which speaks the io.modelcontextprotocol/tasks
extension (fastmcp-tasks): a long call starts at once as a task, its status shows progress,
cancelling it stops the work and leaves nothing in the workspace, its result is fetched (also
from another connection to the HTTP server: tasks survive the client disconnecting), and a
finished task expires after limits.task_ttl_s. A plain call (with progress notifications) still runs in the foreground.
Also: results that write outputs carry resource_link blocks a client can read.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks import ToolTask, call_tool_task
from helpers import scaled, serve_http, utm_aoi, write_cog
from mcp.shared.exceptions import MCPError

from stac_gdal_mcp.processing import formats
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.testing import synthetic
from testbed import serve_directory

SIZE = 4096


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    """A Range server answering every request after 0.1 s, over a 4096 px uint16 COG."""
    root = tmp_path_factory.mktemp("tasks")
    rng = np.random.default_rng(3)
    write_cog(root / "big.tif", rng.integers(1, 5000, (SIZE, SIZE), dtype="uint16"), blocksize=512)
    with serve_directory(root, delay_s=0.1) as server:
        yield server


@pytest.fixture
def big(slow_server):
    """A fresh name for the big COG (GDAL caches what it read per URL, per process)."""
    name = f"big-{uuid.uuid4().hex[:6]}.tif"
    os.link(slow_server.directory / "big.tif", slow_server.directory / name)
    return f"{slow_server.url}/{name}"


@pytest.fixture
def small_chunks(monkeypatch):
    """512-row strips, so that a conversion has several steps to report and cancel between."""
    monkeypatch.setattr(formats, "CHUNK_BYTES", 1)


def leftovers(settings) -> list[str]:
    workspace = settings.workspace
    found = [
        p.name for f in ("outputs", "records") if (workspace / f).exists() for p in (workspace / f).iterdir()
    ]
    tmp = workspace / ".tmp"
    found += [p.name for p in tmp.iterdir() if not p.name.endswith(".alive")] if tmp.exists() else []
    return sorted(found)


async def wait_for(task: ToolTask, predicate, timeout: float = 60):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        status = await task.status()
        seen.append((status.status, status.status_message))
        if predicate(status):
            return status, seen
        await asyncio.sleep(0.1)
    raise AssertionError(f"not reached in {timeout} s: {seen[-5:]}")


async def test_task_runs_in_background_with_progress(make_settings, big, small_chunks):
    settings = make_settings()
    async with Client(build_server(settings)) as client:
        started = time.monotonic()
        task = await call_tool_task(client, "convert_asset", {"href": big, "output_format": "GTiff"})
        assert time.monotonic() - started < scaled(2.0)  # the answer is the task, not the work
        created = task.create_result
        assert created.status == "working" and created.ttl_ms == 900_000 and created.poll_interval_ms == 1000
        status, seen = await wait_for(task, lambda s: s.status == "completed", timeout=120)
        result = await task.result()
    messages = [m for state, m in seen if state == "working" and m]
    assert any("%" in m and "strip" in m for m in messages), seen  # progress, in the status message
    percents = [int(m.split("%")[0]) for m in messages if m.split("%")[0].isdigit()]
    assert percents == sorted(percents)
    record = result.structured_content
    assert record["properties"]["proj:shape"] == [SIZE, SIZE]
    links = [b for b in result.content if b.type == "resource_link"]
    assert {link.uri for link in links} == {f"stac-gdal://outputs/{record['id']}"} | (
        {f"stac-gdal://outputs/{record['id']}/file"}
        if record["assets"]["data"]["file:size"] <= settings.limits.max_resource_bytes
        else set()
    )


def test_tasks_are_declared_without_importing_fastmcp_tasks(tmp_path):
    """A fresh process: the server declares the tasks extension and lists its tools without
    importing fastmcp-tasks and pydocket (a faster cold start); the tests above use tasks."""
    code = """
import asyncio, sys
from fastmcp import Client
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.settings import load_settings
from fastmcp.utilities.tasks import TASKS_EXTENSION_ID

async def main():
    mcp = build_server(load_settings(workspace=sys.argv[1]))
    async with Client(mcp) as client:
        assert TASKS_EXTENSION_ID in (client.server_capabilities.extensions or {})
        assert len(await client.list_tools()) >= 15
        print("after tools/list:", "fastmcp_tasks" in sys.modules, "docket" in sys.modules)

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.splitlines() == ["after tools/list: False False"], out.stdout + out.stderr


async def test_plain_call_stays_in_the_foreground(make_settings, big, small_chunks):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with Client(build_server(make_settings())) as client:
        result = await client.call_tool(
            "convert_asset", {"href": big, "output_format": "GTiff"}, progress_handler=on_progress
        )
    assert not result.is_error and len(seen) >= 3  # progress notifications, as before tasks
    assert all("%" not in (m or "") for _, _, m in seen)  # the plain messages


async def test_cancel_stops_the_work_and_leaves_nothing(make_settings, slow_server, big, small_chunks):
    settings = make_settings()
    async with Client(build_server(settings)) as client:
        task = await call_tool_task(client, "reproject_asset", {"href": big, "dst_crs": "EPSG:4326"})
        await wait_for(task, lambda s: "strip" in (s.status_message or ""))
        await task.cancel()
        status, _ = await wait_for(task, lambda s: s.status != "working", timeout=30)
        assert status.status == "cancelled"
        # the job stops at its next strip: no more reads, and its files are removed
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            before = slow_server.stats()["requests"]
            await asyncio.sleep(1.0)
            if slow_server.stats()["requests"] == before and not leftovers(settings):
                break
        assert slow_server.stats()["requests"] == before
        assert leftovers(settings) == []
        assert (await client.call_tool("list_outputs", {})).structured_content["outputs"] == []
        with pytest.raises(Exception, match="cancelled"):
            await task.result()


async def test_finished_task_expires(make_settings, big, small_chunks):
    settings = make_settings(limits={"task_ttl_s": 2})
    async with Client(build_server(settings)) as client:
        task = await call_tool_task(client, "convert_asset", {"href": big, "output_format": "GTiff"})
        assert task.create_result.ttl_ms == 2000
        await wait_for(task, lambda s: s.status == "completed", timeout=120)
        record = (await task.result()).structured_content
        assert (settings.workspace / "records" / f"{record['id']}.json").exists()
        await asyncio.sleep(3.0)  # past limits.task_ttl_s
        with pytest.raises(MCPError, match="not found"):
            await task.status()


@pytest.mark.testbed  # runs `stac-gdal-mcp serve --transport http` as a subprocess
async def test_task_survives_the_client_disconnecting(tmp_path, big):
    """Over streamable HTTP: one client starts a task and goes away; the server keeps working, and
    a new connection polls the same task id and fetches its result."""
    config = tmp_path / "config.toml"
    config.write_text(f'workspace = "{tmp_path / "ws"}"\n[network]\nallow_private_hosts = true\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
    env.update(STAC_GDAL_MCP_CONFIG=str(config), STAC_GDAL_MCP_TOKEN="task-token")
    with serve_http(env) as port:
        url = f"http://127.0.0.1:{port}/mcp"

        def client():
            return Client(StreamableHttpTransport(url, headers={"Authorization": "Bearer task-token"}))

        async with client() as first:
            task = await call_tool_task(first, "convert_asset", {"href": big, "output_format": "COG"})
            created = task.create_result
        async with client() as second:  # a new session: the first one is closed
            again = ToolTask(second, "convert_asset", created)
            await wait_for(again, lambda s: s.status == "completed", timeout=120)
            record = (await again.result()).structured_content
        assert record["properties"]["proj:shape"] == [SIZE, SIZE]
        assert (tmp_path / "ws" / "records" / f"{record['id']}.json").exists()


async def test_analysis_tools_as_tasks(make_settings, cog_server, pgstac_api):
    folder = f"task-scenes-{uuid.uuid4().hex[:6]}"
    collection = f"task-s2-{uuid.uuid4().hex[:6]}"
    items = []
    for seed, when in enumerate(["2024-06-01T10:00:00Z", "2024-06-06T10:00:00Z"]):
        item, _ = synthetic.write_scene(
            "sentinel-2-l2a",
            cog_server.root / folder,
            f"S2T_{seed}",
            when,
            collection_id=collection,
            seed=seed,
            size_px=256,
            blocksize=128,
            with_visual=False,
            href_base=f"{cog_server.url}/{folder}",
        )
        items.append(item)
    pgstac_api.load([synthetic.collection("sentinel-2-l2a", collection)], items)
    settings = make_settings(catalogs=[{"id": "testbed", "url": pgstac_api.url}], default_catalog="testbed")
    aoi = utm_aoi(500000 + 300, 5000000 - 2200, 500000 + 2200, 5000000 - 300)
    search = {"aoi": aoi, "search": {"collections": [collection]}}
    async with Client(build_server(settings)) as client:
        cloud = await call_tool_task(client, "cloud_cover_stats", search)
        series = await call_tool_task(client, "time_series", {**search, "expression": "ndvi"})
        composite = await call_tool_task(client, "composite", {**search, "bands": ["red", "nir"]})
        dry = await call_tool_task(client, "composite", {**search, "bands": ["red"], "dry_run": True})
        rows = (await cloud.result()).structured_content["items"]
        table = await series.result()
        picture = await composite.result()
        estimate = (await dry.result()).structured_content
    assert sorted(r["item_id"] for r in rows) == ["S2T_0", "S2T_1"]
    assert len(table.structured_content["rows"]) == 2
    uris = {b.uri for b in table.content if b.type == "resource_link"}
    assert f"stac-gdal://outputs/{table.structured_content['csv']['id']}/file" in uris
    assert f"stac-gdal://outputs/{table.structured_content['chart']['id']}/file" in uris
    assert any(b.type == "resource_link" for b in picture.content)
    assert estimate["dry_run"] is True and estimate["operation"] == "composite"


async def test_resource_links_name_readable_resources(make_settings, big):
    settings = make_settings()
    bbox = [0, 0, 2000, 2000]  # a corner, in the COG's own CRS (its origin is 500000, 5000000)
    bbox = [500000 + bbox[0], 5000000 - bbox[3], 500000 + bbox[2], 5000000 - bbox[1]]
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(
            "convert_asset", {"href": big, "output_format": "COG", "bbox": bbox, "bbox_crs": "EPSG:32633"}
        )
        record = result.structured_content
        links = {b.uri: b for b in result.content if b.type == "resource_link"}
        file_link = links[f"stac-gdal://outputs/{record['id']}/file"]
        record_link = links[f"stac-gdal://outputs/{record['id']}"]
        content = (await client.read_resource(file_link.uri))[0]
        body = (await client.read_resource(record_link.uri))[0].text
    path = settings.workspace / "outputs" / record["assets"]["data"]["href"].rsplit("/", 1)[-1]
    assert file_link.name == path.name and file_link.size == path.stat().st_size
    assert file_link.mime_type == record["assets"]["data"]["type"]
    import base64

    assert base64.b64decode(content.blob) == path.read_bytes()
    assert record_link.mime_type == "application/geo+json" and record["id"] in body


async def test_a_long_forged_task_id_is_not_echoed(make_settings):
    """tasks/get with a 1 MB id: refused as not found in one short line, the id not quoted back."""
    from fastmcp_tasks.client import _send_get

    async with Client(build_server(make_settings())) as client:
        with pytest.raises(MCPError) as raised:
            await _send_get(client.session, "x" * 1_000_000)
    message = str(raised.value)
    assert "not found" in message
    assert len(message) < 200
