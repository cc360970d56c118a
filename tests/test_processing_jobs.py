"""Long operations: progress reports, cancellation and failures leave no file and no record,
and the size limits are checked before any pixel is read."""

from __future__ import annotations

import asyncio
import time
import uuid

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from fastmcp.exceptions import ToolError
from helpers import write_cog
from mcp.shared.exceptions import MCPError

from stac_gdal_mcp.core import Core
from stac_gdal_mcp.errors import LimitExceeded, OperationCancelled, ProcessingFailed
from stac_gdal_mcp.operations.convert import convert_asset
from stac_gdal_mcp.operations.warp import reproject_asset
from stac_gdal_mcp.processing import formats
from stac_gdal_mcp.processing.access import resolve_input
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.server import build_server
from testbed import serve_directory

pytestmark = pytest.mark.testbed  # a slow Range server

SIZE = 2048


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    """A Range server that waits 0.3 s per request, over one incompressible 2048 x 2048 COG."""
    root = tmp_path_factory.mktemp("slow")
    data = np.random.default_rng(9).integers(1, 60000, (SIZE, SIZE), dtype="uint16")
    write_cog(root / "big.tif", data, nodata=0, blocksize=256)
    with serve_directory(root, delay_s=0.3) as server:
        yield server


@pytest.fixture
def big(slow_server):
    """A fresh name for the big COG (GDAL caches what it read per URL, per process)."""
    name = f"big-{uuid.uuid4().hex[:6]}.tif"
    (slow_server.directory / name).hardlink_to(slow_server.directory / "big.tif")
    return f"{slow_server.url}/{name}"


@pytest.fixture
def small_chunks(monkeypatch):
    """One 512-row strip per chunk, so that there are several chunks to report and cancel between."""
    monkeypatch.setattr(formats, "CHUNK_BYTES", 1)


def leftovers(settings) -> list[str]:
    folders = [settings.workspace / "outputs", settings.workspace / "records"]
    return sorted(p.name for f in folders if f.exists() for p in f.iterdir())


async def test_progress_is_reported(make_settings, slow_server, big, small_chunks):
    settings = make_settings()
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with Client(build_server(settings)) as client:
        result = await client.call_tool(
            "convert_asset",
            {"href": big, "output_format": "COG"},
            progress_handler=on_progress,
        )
    assert result.structured_content["properties"]["proj:shape"] == [SIZE, SIZE]
    fractions = [p / t for p, t, _ in seen]
    assert len(seen) >= 3, seen
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("strip" in (m or "") for _, _, m in seen)


async def test_cancelled_call_leaves_nothing(make_settings, slow_server, big, small_chunks):
    settings = make_settings()
    async with Client(build_server(settings)) as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("reproject_asset", {"href": big, "dst_crs": "EPSG:4326"}, timeout=1.0)
        # the server cancels the job; its worker stops at the next strip and removes its files
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            before = slow_server.stats()["requests"]
            await asyncio.sleep(0.5)
            if slow_server.stats()["requests"] == before:  # no more reads: the worker has stopped
                break
        assert leftovers(settings) == []
        assert (await client.call_tool("list_outputs", {})).structured_content["outputs"] == []


def test_cancelled_job_leaves_nothing(make_settings, slow_server, big, small_chunks):
    settings = make_settings()
    core = Core(settings)
    source = resolve_input(core, href=big)
    job = Job(
        lambda done, total, message: job.cancel() if "strip 1/" in (message or "") else None, min_interval_s=0
    )
    with pytest.raises(OperationCancelled):
        reproject_asset(core, source, dst_crs="EPSG:3857", job=job)
    assert leftovers(settings) == []


def test_failing_write_leaves_nothing(make_settings, slow_server, big):
    settings = make_settings()
    core = Core(settings)
    source = resolve_input(core, href=big)
    with pytest.raises(ProcessingFailed, match="BitsPerSample 16 not allowed for JPEG"):
        convert_asset(core, source, output_format="COG", creation_options={"COMPRESS": "JPEG"})
    assert leftovers(settings) == []


async def test_failing_write_through_the_tool(make_settings, slow_server, big):
    settings = make_settings()
    arguments = {"href": big, "output_format": "GTiff", "creation_options": {"COMPRESS": "JPEG"}}
    async with Client(build_server(settings)) as client:
        with pytest.raises(ToolError, match="BitsPerSample 16 not allowed for JPEG"):
            await client.call_tool("convert_asset", arguments)
    assert leftovers(settings) == []


def test_limits_checked_before_reading(make_settings, slow_server):
    settings = make_settings(limits={"max_output_pixels": 1_000_000})
    core = Core(settings)
    name = f"limit-{uuid.uuid4().hex[:6]}.tif"
    (slow_server.directory / name).hardlink_to(slow_server.directory / "big.tif")
    source = resolve_input(core, href=f"{slow_server.url}/{name}")
    file_size = (slow_server.directory / name).stat().st_size
    with pytest.raises(LimitExceeded, match=r"smaller bbox, a coarser resolution \(at least 2\d\.\d"):
        reproject_asset(core, source, dst_crs="EPSG:32633")
    with pytest.raises(LimitExceeded, match="max_output_pixels"):
        convert_asset(core, source, output_format="GTiff")
    sent = slow_server.stats()["paths"][f"/{name}"]["bytes"]
    assert sent <= 64 * 1024 < file_size  # the header only
    # a coarser resolution fits, and reads an overview
    record = reproject_asset(core, source, dst_crs="EPSG:32633", resolution=30)
    assert record.properties.proj_shape == [683, 683]
    assert leftovers(settings) == [f"{record.id}.json", f"{record.id}.tif"]
    bytes_limited = make_settings(limits={"max_output_bytes": 1_000_000})
    with pytest.raises(LimitExceeded, match="max_output_bytes"):
        convert_asset(Core(bytes_limited), source, output_format="COG")


async def test_jobs_beyond_max_jobs_wait_their_turn(make_settings, slow_server, small_chunks):
    """limits.max_jobs=1: two conversions at once run one after the other - the second reports
    that it waits, and its reads start only after the first's last read - and both are right; a
    third, cancelled while it waits, reads nothing and leaves nothing."""
    settings = make_settings(limits={"max_jobs": 1})
    names = [f"big-{uuid.uuid4().hex[:6]}.tif" for _ in range(4)]  # fresh: GDAL caches per URL
    for name in names:
        (slow_server.directory / name).hardlink_to(slow_server.directory / "big.tif")
    hrefs = [f"{slow_server.url}/{name}" for name in names]
    waited = {0: 0, 1: 0}

    def counting(n):
        async def on_progress(progress, total, message):
            waited[n] += "waiting for a free slot" in (message or "")

        return on_progress

    async with Client(build_server(settings)) as client:

        async def convert(n, href):
            args = {"href": href, "output_format": "GTiff"}
            return (
                await client.call_tool("convert_asset", args, progress_handler=counting(n))
            ).structured_content

        first = asyncio.create_task(convert(0, hrefs[0]))
        await asyncio.sleep(0.5)  # the first holds the only slot
        records = [*await asyncio.gather(first, convert(1, hrefs[1]))]
        holder = asyncio.create_task(convert(0, hrefs[3]))
        await asyncio.sleep(0.5)
        with pytest.raises(MCPError, match="timed out"):  # waits behind `holder`, then is cancelled
            await client.call_tool("convert_asset", {"href": hrefs[2], "output_format": "GTiff"}, timeout=1.0)
        await holder
        outputs = (await client.call_tool("list_outputs", {})).structured_content["outputs"]
    assert waited == {0: 0, 1: waited[1]} and waited[1] >= 1, waited
    paths = [path for path, _, _ in slow_server.request_log()]
    reads = {n: [i for i, path in enumerate(paths) if path.endswith(names[n])] for n in range(3)}
    assert reads[1] and [i for i in reads[0] if i < min(reads[1])]  # the first read before the second
    assert not [i for i in reads[0] if min(reads[1]) < i < max(reads[1])]  # and not while it read
    assert reads[2] == []  # the cancelled call never started reading
    assert len(outputs) == 3
    with rasterio.open(slow_server.directory / names[0]) as src:
        want = src.read(1)
    for record in records:
        with rasterio.open(record["assets"]["data"]["href"]) as out:
            assert np.array_equal(out.read(1), want)


def test_a_jobs_progress_is_its_own_compute_s_not_the_process_s(tmp_path):
    """A job's dask progress callback belongs to its own compute: while the job computes, another
    dask compute of the process (another job, a notebook) neither reports to it nor can be
    cancelled with it (a callback entered as a context is registered for every compute)."""
    import threading

    import dask
    import dask.array as da
    from dask.callbacks import Callback

    from stac_gdal_mcp.processing.dask_runtime import compute
    from stac_gdal_mcp.settings import load_settings

    core = Core(load_settings(workspace=tmp_path))
    started, release = threading.Event(), threading.Event()
    threads: set[int] = set()

    def report(done, total, message):
        threads.add(threading.get_ident())

    def wait(block):
        started.set()
        release.wait(30)
        return block

    job = Job(report, min_interval_s=0)
    # `meta` given: dask would otherwise call `wait` once while building the graph, to learn its
    # output type, and that call alone waited the whole 30 s before the compute began
    mine = da.ones((4, 4), chunks=2).map_blocks(wait, dtype=float, meta=np.empty((0, 0)))
    outcome = []

    def run():
        try:
            compute(core, job, mine)
        except OperationCancelled as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert started.wait(30)
        assert not Callback.active  # nothing registered for the whole process
        job.cancel()  # cancelling this job must not reach the other compute
        (other,) = dask.compute(da.ones((8, 8), chunks=2).sum(), scheduler="threads")
        assert other == 64
    finally:
        release.set()
        worker.join(30)
    assert len(outcome) == 1  # the cancelled job itself stopped
