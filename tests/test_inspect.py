"""inspect as an operation (operations/inspect.py): its dry run reads the header only, its run is
cancellable, and the inspect_asset tool answers what Session.inspect returns."""

import os

import pytest
import rasterio

import stac_gdal_mcp
from stac_gdal_mcp.errors import OperationCancelled
from stac_gdal_mcp.processing.jobs import Job

ITEM = ("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path_factory.mktemp("ws")) as session:
        yield session


def test_dry_run_counts_the_header_and_no_tile(session):
    estimate = session.inspect(ITEM, "red", dry_run=True)
    path = session.asset(ITEM, "red").gdal_path
    with rasterio.open(path) as src:  # the header ends where the first tile of any level starts
        levels = [{}] + [{"ovr": i} for i in range(len(src.overviews(1)))]
        first_tile = min(int(src.get_tag_item("BLOCK_OFFSET_0_0", "TIFF", bidx=1, **lv)) for lv in levels)
    (read,) = estimate.files
    assert estimate.operation == "inspect_asset" and estimate.item_ids == [ITEM[1]]
    assert (read.reads, read.tiles, estimate.read_tiles, estimate.read_requests) == (0, 0, 0, 0)
    assert first_tile <= estimate.read_bytes < os.path.getsize(path)


def test_a_cancelled_job_reads_nothing(session):
    job = Job()
    job.cancel()
    with pytest.raises(OperationCancelled):
        session.inspect(ITEM, "red", job=job)


async def test_the_tool_answers_the_library_header(session):
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server

    async with Client(build_server(session=session)) as client:
        answer = await client.call_tool(
            "inspect_asset",
            {"catalog": "sample", "collection_id": ITEM[0], "item_id": ITEM[1], "asset": "red"},
        )
    assert answer.structured_content == session.inspect(ITEM, "red").model_dump(mode="json")
