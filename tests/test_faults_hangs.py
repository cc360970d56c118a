"""No hang: a tiny file claiming an enormous raster is refused before any pixel is read; a job
is cancellable inside GDAL's overview building and COG writing, and bounded by
limits.job_timeout_s; either way nothing is left in the workspace.

Expected sizes come from the file's header read with rasterio; the stages are recognised from
the job's own progress messages.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from fastmcp.exceptions import ToolError
from helpers import scaled
from rasterio.transform import from_origin
from test_processing_access import write_cog

from stac_gdal_mcp.core import Core
from stac_gdal_mcp.errors import LimitExceeded, OperationCancelled
from stac_gdal_mcp.operations.convert import convert_asset
from stac_gdal_mcp.operations.warp import reproject_asset
from stac_gdal_mcp.processing.access import resolve_input
from stac_gdal_mcp.processing.jobs import Job

HUGE = 200_000


def leftovers(workspace) -> list[str]:
    return sorted(
        str(p.relative_to(workspace))
        for folder in ("outputs", "records", ".tmp")
        if (workspace / folder).exists()
        for p in (workspace / folder).iterdir()
        if p.suffix != ".alive"
    )


@pytest.fixture
def huge_tiff(make_settings):
    """A sparse 200000 x 200000 GeoTIFF without overviews: a few hundred KB on disk."""
    settings = make_settings()
    path = settings.workspace / "inputs" / "huge.tif"
    path.parent.mkdir(parents=True)
    profile = dict(
        driver="GTiff",
        width=HUGE,
        height=HUGE,
        count=1,
        dtype="uint8",
        crs="EPSG:32633",
        transform=from_origin(300000, 6000000, 10, 10),
        tiled=True,
        blockxsize=1024,
        blockysize=1024,
        SPARSE_OK="TRUE",
        nodata=0,
    )
    with rasterio.open(path, "w", **profile):
        pass
    assert path.stat().st_size < 2_000_000
    with rasterio.open(path) as src:
        assert (src.width, src.height, src.overviews(1)) == (HUGE, HUGE, [])
    return settings, path


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("preview", {"max_size": 256}),
        ("reproject_asset", {"dst_crs": "EPSG:4326", "resolution": 0.5}),
        ("convert_asset", {"output_format": "PNG"}),
    ],
)
async def test_huge_header_is_refused_at_once(build, huge_tiff, tool, arguments):
    settings, path = huge_tiff
    async with Client(build(settings)) as client:
        start = time.monotonic()
        with pytest.raises(ToolError) as info:
            await client.call_tool(tool, {"href": str(path), **arguments})
        assert time.monotonic() - start < scaled(10)
    message = str(info.value)
    assert "max_read_pixels" in message or "max_output_pixels" in message, message
    assert "bbox" in message and "\n" not in message
    assert leftovers(settings.workspace) == []


async def test_huge_header_with_a_small_bbox_works(build, huge_tiff):
    """The same file, asked for a small part, reads only that part."""
    settings, path = huge_tiff
    with rasterio.open(path) as src:
        left, top = src.bounds.left, src.bounds.top
    from pyproj import Transformer

    to_wgs84 = Transformer.from_crs(32633, 4326, always_xy=True)
    west, north = to_wgs84.transform(left + 1000, top - 1000)
    east, south = to_wgs84.transform(left + 6000, top - 6000)
    async with Client(build(settings)) as client:
        result = await client.call_tool(
            "preview", {"href": str(path), "bbox": [west, south, east, north], "max_size": 64}
        )
    assert result.structured_content["properties"]["proj:shape"][0] <= 64


@pytest.fixture(scope="module")
def big_local(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cancel")
    data = np.random.default_rng(4).integers(1, 60000, (4096, 4096), dtype="uint16")
    return write_cog(folder / "big.tif", data, nodata=0, blocksize=512)


@pytest.fixture
def core_and_source(make_settings, big_local):
    settings = make_settings()
    (settings.workspace / "inputs").mkdir(parents=True)
    path = settings.workspace / "inputs" / "big.tif"
    path.hardlink_to(big_local)
    core = Core(settings)
    return core, resolve_input(core, href=str(path))


@pytest.mark.testbed  # seconds of GDAL work on a 4096 px raster per case
@pytest.mark.parametrize("operation", ["convert", "reproject"])
@pytest.mark.parametrize("stage", ["strip", "building overviews", "writing COG"])
def test_cancel_stops_inside_gdal(core_and_source, operation, stage):
    core, source = core_and_source
    cancelled_at = {}

    def on_progress(done, total, message):
        if stage in (message or "") and not cancelled_at:
            cancelled_at["t"] = time.monotonic()
            job.cancel()

    job = Job(on_progress, min_interval_s=0)
    with pytest.raises(OperationCancelled):
        if operation == "convert":
            convert_asset(core, source, output_format="COG", job=job)
        else:
            reproject_asset(core, source, dst_crs="EPSG:3857", job=job)
    assert cancelled_at, f"never reached '{stage}'"
    assert time.monotonic() - cancelled_at["t"] < scaled(2.0)
    assert leftovers(core.settings.workspace) == []


@pytest.mark.testbed  # a 4096 px raster
def test_job_wall_time_limit(make_settings, big_local):
    settings = make_settings(limits={"job_timeout_s": 0.3})
    (settings.workspace / "inputs").mkdir(parents=True)
    path = settings.workspace / "inputs" / "big.tif"
    path.hardlink_to(big_local)
    core = Core(settings)
    source = resolve_input(core, href=str(path))
    job = Job()
    start = time.monotonic()
    with pytest.raises(LimitExceeded, match="job_timeout_s=0.3"):
        reproject_asset(core, source, dst_crs="EPSG:3857", job=job)
    assert time.monotonic() - start < scaled(3.0)
    assert leftovers(settings.workspace) == []
