"""Search summaries stay small on real catalog items: at most 5% of the full item on an
Earth Search sentinel-2-l2a and a Planetary Computer landsat-c2-l2 item (tests/real_items,
reconstructed: see its README), with no empty `roles`, and nothing an agent needs to choose lost:
every listed asset's roles come back from `asset_roles`, every data asset is listed. A local
catalog's thumbnail is a resource the client can read, not the server's file path."""

import json
from pathlib import Path

import pytest
from fastmcp import Client
from helpers import found_items

from stac_gdal_mcp.discovery.summaries import item_summary

ITEMS = Path(__file__).parent / "real_items"
NAMES = ["earth-search-sentinel-2-l2a.json", "planetary-computer-landsat-c2-l2.json"]


def _compact(value) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


@pytest.mark.parametrize("name", NAMES)
def test_summary_of_a_real_item_is_at_most_5_percent(name):
    item = json.loads((ITEMS / name).read_text())
    summary = item_summary(item).model_dump(mode="json")
    ratio = _compact(summary) / _compact(item)
    assert ratio <= 0.05, f"{name}: {ratio:.2%}"
    assets = summary["assets"]
    assert all(asset.get("roles") != [] for asset in assets.values())
    common = summary.get("asset_roles") or ["data"]
    for key, asset in item["assets"].items():
        roles = asset.get("roles") or []
        if "thumbnail" in roles or roles == ["metadata"]:
            assert key not in assets
            continue
        assert (assets[key].get("roles") or common) == (roles or ["data"]), key
    thumbnail = next((a["href"] for a in item["assets"].values() if "thumbnail" in a.get("roles", [])), None)
    assert summary.get("thumbnail") == thumbnail


async def test_a_local_thumbnail_is_a_readable_resource(tmp_path):
    """search_items names a sample item's thumbnail by its resource; reading it gives the file's
    bytes; an unknown item is an error naming it."""
    import base64

    from mcp.shared.exceptions import MCPError

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import SAMPLE_CATALOG, load_settings

    search = {"catalog": "sample", "collections": ["sentinel-2-l2a"], "limit": 3}
    async with Client(build_server(load_settings(workspace=tmp_path / "ws"))) as client:
        items = found_items((await client.call_tool("search_items", search)).structured_content)
        reads = [(item, (await client.read_resource(item["thumbnail"]))[0]) for item in items]
        with pytest.raises(MCPError, match="item 'nope' not found"):
            await client.read_resource("stac://sample/collections/sentinel-2-l2a/items/nope/thumbnail")
    assert len(reads) == 3
    for item, content in reads:
        assert item["thumbnail"] == f"stac://sample/collections/sentinel-2-l2a/items/{item['id']}/thumbnail"
        on_disk = SAMPLE_CATALOG.parent / "sentinel-2-l2a" / item["id"] / "thumbnail.png"
        assert base64.b64decode(content.blob) == on_disk.read_bytes()
