"""kill -9 in the middle of a large write leaves a workspace that the next start makes
consistent: no temporary or scratch file, no file without a record, no record without a file,
and list_outputs works.

The real `stac-gdal-mcp serve` runs over stdio (fastmcp's StdioTransport) behind `sh -c 'echo $$;
exec ...'`, so the test knows its pid. A convert_asset of a 6144 x 6144 COG is killed when the
progress reports say it is reading strips, building overviews, or writing the COG; what the
workspace holds is read from the file system directly.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

import numpy as np
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from test_processing_access import write_cog

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

SIZE = 6144


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kill-input")
    rng = np.random.default_rng(11)
    data = rng.integers(1, 60000, (SIZE, SIZE), dtype="uint16")
    return write_cog(folder / "big.tif", data, nodata=0, blocksize=512)


def server(workspace, pid_file):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
    env.update(STAC_GDAL_MCP_WORKSPACE=str(workspace), STAC_GDAL_MCP_DEFAULT_CATALOG="sample")
    command = f"echo $$ > {pid_file}; exec {sys.executable} -m stac_gdal_mcp serve"
    return StdioTransport("sh", ["-c", command], env=env)


def state(workspace) -> dict:
    records = {}
    for path in (workspace / "records").glob("*.json"):
        records[path.stem] = os.path.basename(json.loads(path.read_text())["assets"]["data"]["href"])
    files = (
        sorted(p.name for p in (workspace / "outputs").iterdir()) if (workspace / "outputs").exists() else []
    )
    tmp = sorted(p.name for p in (workspace / ".tmp").iterdir()) if (workspace / ".tmp").exists() else []
    return {"records": records, "files": files, "tmp": tmp}


async def kill_during(workspace, pid_file, source, stage: str) -> dict:
    seen: list[str] = []

    async def on_progress(progress, total, message):
        seen.append(message or "")

    async with Client(server(workspace, pid_file)) as client:
        pid = int(pid_file.read_text())
        call = asyncio.create_task(
            client.call_tool(
                "convert_asset", {"href": str(source), "output_format": "COG"}, progress_handler=on_progress
            )
        )
        deadline = time.monotonic() + 120
        while not any(stage in m for m in seen):
            assert not call.done(), f"finished before '{stage}': {seen}"
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(call, 30)
        except Exception:  # the connection is gone: any error will do
            pass
        else:
            pytest.fail("the call succeeded after its server was killed")
    return state(workspace)


@pytest.mark.parametrize("stage", ["read strip", "building overviews", "writing COG"])
async def test_kill_mid_write_then_restart(tmp_path, big_input, stage):
    workspace = tmp_path / "ws"
    (workspace / "inputs").mkdir(parents=True)
    source = workspace / "inputs" / "big.tif"
    source.hardlink_to(big_input)
    pid_file = tmp_path / "pid"

    # one finished output first, which must survive everything
    async with Client(server(workspace, pid_file)) as client:
        kept = (
            await client.call_tool(
                "convert_asset", {"href": str(source), "output_format": "GTiff", "bbox": None}
            )
        ).structured_content
    killed_pid = int(pid_file.read_text())

    after_kill = await kill_during(workspace, pid_file, source, stage)
    dead = int(pid_file.read_text())
    assert any(name.startswith(f"{dead}-") and not name.endswith(".alive") for name in after_kill["tmp"]), (
        after_kill  # the kill did leave a partial write behind
    )
    assert killed_pid != dead

    async with Client(server(workspace, pid_file)) as client:
        listed = (await client.call_tool("list_outputs", {})).structured_content["outputs"]
        alive = int(pid_file.read_text())
        after_restart = state(workspace)
    assert [o["id"] for o in listed] == [kept["id"]]
    assert after_restart["records"] == {kept["id"]: os.path.basename(kept["assets"]["data"]["href"])}
    assert after_restart["files"] == sorted(after_restart["records"].values())  # no orphan either way
    assert all(name.startswith(f"{alive}-") for name in after_restart["tmp"]), after_restart["tmp"]
