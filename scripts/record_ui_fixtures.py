"""Record real tool results on the bundled `sample` catalog for the map app's tests.

Writes tests/ui_fixtures/<name>.json, each {"tool", "arguments", "result"} where `result` is the
CallToolResult exactly as a host would pass it to the app in `ui/notifications/tool-result`
(content, structuredContent, isError), with the map layer its tool made in `_meta` (what the
server builds the map's view of, before it sends the view in its place: `_recorded`). Run again
whenever a tool's result shape changes:

    .venv/bin/python scripts/record_ui_fixtures.py            # all of them
    .venv/bin/python scripts/record_ui_fixtures.py time_series  # only the ones named
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "ui_fixtures"

AOI = [13.55, 45.85, 13.75, 45.98]  # the demo's AOI: covers every sample scene
FIELD = [13.595, 45.915, 13.63, 45.94]  # a few fields inside both footprints
SEARCH = {"catalog": "sample", "collections": ["sentinel-2-l2a", "landsat-c2-l2"]}
S2_ITEM = {"catalog": "sample", "collection_id": "sentinel-2-l2a", "item_id": "S2A_33TUL_20240619_0_L2A"}

CALLS = {
    "search_items": (
        "search_items",
        {**SEARCH, "bbox": AOI, "datetime": "2024-06-01/2024-09-30", "limit": 20},
    ),
    "cloud_cover_stats": (
        "cloud_cover_stats",
        {"aoi": FIELD, "search": {**SEARCH, "datetime": "2024-06-01/2024-09-30"}},
    ),
    "preview": ("preview", {**S2_ITEM, "bbox": FIELD, "max_size": 192}),
    "reproject_asset": (
        "reproject_asset",
        {**S2_ITEM, "asset": "nir", "dst_crs": "EPSG:4326", "bbox": FIELD},
    ),
    "time_series": (
        "time_series",
        {
            "aoi": FIELD,
            "search": {**SEARCH, "collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-09-30"},
        },
    ),
}


def _clean(result) -> dict:
    """The CallToolResult as JSON, as a host passes it on."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _layers():
    """fastmcp middleware that keeps the map layer of each tool result it passes (added after the
    map's middleware, it sees the result before that takes the layer out): `layers[-1]`."""
    from fastmcp.server.middleware import Middleware

    from stac_gdal_mcp.models import MAP_LAYER_META

    class Layers(Middleware):
        def __init__(self):
            self.layers: list = []

        async def on_call_tool(self, context, call_next):
            result = await call_next(context)
            self.layers.append((getattr(result, "meta", None) or {}).get(MAP_LAYER_META))
            return result

    return Layers()


async def _recorded(layers, client, tool: str, arguments: dict) -> dict:
    """The result a client gets, with the map layer the tool made (as the server's tool gives it,
    before the map's middleware) in its `_meta`: one call, so that both name the same outputs."""
    from stac_gdal_mcp.models import MAP_LAYER_META

    result = await client.call_tool_mcp(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content}")
    layer = layers.layers[-1]
    clean = _clean(result)
    return {**clean, "_meta": {**clean.get("_meta", {}), MAP_LAYER_META: layer}} if layer else clean


def _scrub(value, workspace: str):
    """Machine paths out of the fixtures: the workspace and the checkout's own folder."""
    if isinstance(value, str):
        return value.replace(workspace, "<workspace>").replace(str(ROOT), "<repo>")
    if isinstance(value, list):
        return [_scrub(v, workspace) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, workspace) for k, v in value.items()}
    return value


async def record(names: list[str]) -> None:
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ui-fixtures-") as tmp:
        mcp = build_server(load_settings(default_catalog="sample", workspace=tmp))
        layers = _layers()
        mcp.add_middleware(layers)
        async with Client(mcp) as client:
            recorded = {}
            for name, (tool, arguments) in CALLS.items():
                if names and name not in names:
                    continue
                recorded[name] = {
                    "tool": tool,
                    "arguments": arguments,
                    "result": await _recorded(layers, client, tool, arguments),
                }
            # The search the server makes for the ranked scenes' footprints (the ranking's map view).
            if "cloud_cover_stats" not in recorded:
                return _write(recorded, tmp)
            rows = recorded["cloud_cover_stats"]["result"]["structuredContent"]["items"]
            ids = [row["item_id"] for row in rows]
            collections = list(dict.fromkeys(row["collection_id"] for row in rows))
            arguments = {"ids": ids, "limit": len(ids), "catalog": "sample", "collections": collections}
            recorded["cloud_cover_stats.footprints"] = {
                "tool": "search_items",
                "arguments": arguments,
                "result": await _recorded(layers, client, "search_items", arguments),
            }
        _write(recorded, tmp)


def _write(recorded: dict, workspace: str) -> None:
    for name, fixture in recorded.items():
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(_scrub(fixture, str(workspace)), indent=1) + "\n")
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    unknown = set(sys.argv[1:]) - set(CALLS)
    if unknown:
        raise SystemExit(f"unknown fixtures {sorted(unknown)}; known: {sorted(CALLS)}")
    asyncio.run(record(sys.argv[1:]))
