"""What an agent pays for a cloud_cover_stats answer: at the default 50 items the
structured result is at most 12 KB - each row without its nulls and its minor classes' zero
fractions, the fields every row shares (collection, mask, CRS, resolution, AOI pixels) given once
under `common` - and nothing is lost: the zeros and `common` put back into each row give the
library's full rows.

50 items of a local catalog over five synthetic Sentinel-2 scenes (each scene's files shared by
ten items with their own ids and dates, as a time stack of one tile)."""

import json

import pytest
from fastmcp import Client

from stac_gdal_mcp.operations.cloud import ZERO_NOTE, ZERO_OMITTED
from stac_gdal_mcp.testing import synthetic

S2 = "sentinel-2-l2a"
LIMIT_BYTES = 12_000


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    root = tmp_path_factory.mktemp("lean")
    items = []
    for n in range(5):
        scene, _ = synthetic.write_scene(
            S2, root / "scenes", f"scene{n}", f"2024-06-0{n + 1}T10:00:00Z", seed=n, size_px=64,
            cloud_fraction=0.15 * n, shadow_fraction=0.02 * n, with_visual=False,
        )  # fmt: skip
        for asset in scene["assets"].values():  # absolute: the items are listed elsewhere
            asset["href"] = str((root / "scenes" / f"scene{n}" / asset["href"]).resolve())
        for k in range(10):
            day = 1 + n * 10 + k
            item = json.loads(json.dumps(scene))
            item["id"] = f"S2B_33TUL_2024{6 + day // 31:02d}{1 + day % 30:02d}_0_L2A"
            item["properties"]["datetime"] = f"2024-{6 + day // 31:02d}-{1 + day % 30:02d}T10:06:{day:02d}Z"
            items.append(item)
    path = root / "items.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    return path, scene["bbox"]


async def test_cloud_cover_stats_at_50_items_is_small_and_complete(catalog, tmp_path):
    from stac_gdal_mcp import Session
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    path, bbox = catalog
    settings = load_settings(workspace=tmp_path / "ws", catalogs=[{"id": "lean", "path": str(path)}])
    search = {"catalog": "lean", "collections": [S2]}
    with Session(settings) as session:
        async with Client(build_server(session=session)) as client:
            answer = await client.call_tool("cloud_cover_stats", {"aoi": bbox, "search": search})
        full = session.cloud_cover(bbox, **search)
    lean = answer.structured_content
    size = len(json.dumps(lean, separators=(",", ":")).encode())
    assert lean["returned"] == 50 and lean["failed"] == 0
    print(f"cloud_cover_stats at 50 items: {size:,} bytes")
    assert size <= LIMIT_BYTES, f"{size:,} bytes at 50 items"
    assert set(lean["common"]) == {"collection_id", "mask_source", "crs", "resolution", "aoi_pixels"}
    assert all(None not in row.values() and "error" not in row for row in lean["items"])
    assert ZERO_NOTE in lean["notes"]
    zeros = dict.fromkeys(ZERO_OMITTED, 0.0)
    expected = [{k: v for k, v in row.model_dump().items() if v is not None} for row in full.items]
    assert [{**zeros, **lean["common"], **row} for row in lean["items"]] == expected


async def test_a_csv_output_is_read_as_text(tmp_path):
    """A time series' CSV resource comes back as text (not a base64 blob), the file's own bytes;
    its PNG chart stays a blob."""
    from mcp.types import BlobResourceContents, TextResourceContents

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    aoi = [13.60, 45.92, 13.62, 45.935]
    search = {"catalog": "sample", "collections": [S2], "datetime": "2024-06-01/2024-07-31"}
    with Session(load_settings(workspace=tmp_path / "ws")) as session:
        async with Client(build_server(session=session)) as client:
            result = (
                await client.call_tool("time_series", {"aoi": aoi, "search": search})
            ).structured_content
            csv, chart = result["csv"], result["chart"]
            [text] = await client.read_resource(f"stac-gdal://outputs/{csv['id']}/file")
            [blob] = await client.read_resource(f"stac-gdal://outputs/{chart['id']}/file")
        on_disk = session.outputs.path(csv["id"]).read_bytes()
    assert isinstance(text, TextResourceContents) and text.mime_type == "text/csv"
    assert text.text.encode() == on_disk and text.text.startswith("date,datetime,value")
    assert isinstance(blob, BlobResourceContents) and blob.mime_type == "image/png"
