"""`stac-gdal-mcp demo`: start the server over stdio on the bundled sample catalog and drive it
as an MCP client through a realistic session, printing what an agent would see.

Each step is `async def step(client, say)`; processing and analysis steps are appended to
STEPS as those tools exist. Any failed step makes the demo exit non-zero. The outputs stay in the
workspace (a new folder unless `--workspace` names one), with `map.html`: the map app drawing the
demo's ranking, footprints, quicklook and time series, to open in a browser. The last lines name
the folder, the chart, the quicklook and the map.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

AOI = [13.55, 45.85, 13.75, 45.98]  # inside the sample catalog's area


def _show(value: Any, width: int = 150) -> str:
    """One line per entry, compact JSON, long lines cut: what an agent sees, readable by a person."""
    if isinstance(value, dict):
        lines = [f"  {k}: {json.dumps(v, default=str)}" for k, v in value.items()]
    elif isinstance(value, list):
        lines = [f"  {json.dumps(v, default=str)}" for v in value]
    else:
        lines = [f"  {json.dumps(value, default=str)}"]
    return "\n".join(line if len(line) <= width else line[: width - 3] + "..." for line in lines)


async def call(client, tool: str, **arguments) -> Any:
    result = await client.call_tool(tool, arguments)
    return result.structured_content if result.structured_content is not None else result.data


MAP_CALLS: list[dict] = []  # the calls the demo's map page draws: {"tool", "arguments", "result"}
KEPT: dict[str, str] = {}  # what the demo wrote and names at the end: label -> file in the workspace


async def call_for_map(client, tool: str, **arguments) -> dict:
    """`call`, keeping the whole result (content, structuredContent) for the map page."""
    result = await client.call_tool_mcp(tool, arguments)
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if result.is_error:
        raise RuntimeError(f"{tool}: " + " ".join(c.get("text", "") for c in dumped.get("content", [])))
    MAP_CALLS.append({"tool": tool, "arguments": arguments, "result": dumped})
    return dumped.get("structuredContent") or {}


def _items(page: dict) -> list[dict]:
    """The rows of a search_items answer (its table: `columns`, rows under their collection) as
    one dict each, with its collection."""
    columns = page.get("columns", [])
    grouped = [
        (c, row) for c, block in (page.get("collections") or {}).items() for row in block.get("rows", [])
    ]
    if grouped:
        return [{"collection": c, **dict(zip(columns, row))} for c, row in grouped]
    return [dict(zip(columns, row)) for row in page.get("rows", [])]


async def step_catalogs(client, say):
    tools = await client.list_tools()
    say("tools/list", [t.name for t in tools])
    catalogs = (await call(client, "list_catalogs"))["catalogs"]
    say("list_catalogs()", [{k: c.get(k) for k in ("id", "kind", "url", "path")} for c in catalogs])


async def step_collections(client, say):
    result = await call(client, "list_collections", catalog="sample")
    say(
        'list_collections(catalog="sample")',
        [{k: c[k] for k in ("id", "title", "temporal_extent", "asset_keys")} for c in result["collections"]],
    )
    detail = await call(client, "get_collection", collection_id="sentinel-2-l2a", catalog="sample")
    say(
        'get_collection("sentinel-2-l2a") item_assets',
        {
            k: {"roles": v["roles"], "bands": v["bands"], "gsd": v.get("gsd")}
            for k, v in detail["item_assets"].items()
        },
    )


async def step_search(client, say):
    args = dict(
        catalog="sample",
        collections=["sentinel-2-l2a", "landsat-c2-l2"],
        bbox=AOI,
        datetime="2024-06-01/2024-09-30",
        max_cloud_cover=60,
        sortby="eo:cloud_cover",
        limit=2,
    )
    page = await call(client, "search_items", **args)
    say(
        f"search_items({', '.join(f'{k}={v!r}' for k, v in args.items())})",
        {
            "matched": page.get("matched"),
            "returned": page["returned"],
            "notes": page.get("notes", []),
            "items": [
                {k: i.get(k) for k in ("id", "collection", "datetime", "cloud_cover")} for i in _items(page)
            ],
            "next_cursor": (page.get("next_cursor") or "")[:24] + "...",
        },
    )
    seen = [i["id"] for i in _items(page)]
    while page.get("next_cursor"):
        page = await call(client, "search_items", catalog="sample", cursor=page["next_cursor"], limit=2)
        seen += [i["id"] for i in _items(page)]
    say("paging with next_cursor until it is null: ids seen", seen)
    if len(seen) != len(set(seen)):
        raise RuntimeError("paging returned duplicates")
    first = next(iter(_items(page)), None)
    if first:
        item = await call(
            client, "get_item", collection_id=first["collection"], item_id=first["id"], catalog="sample"
        )
        say(
            f'get_item("{first["collection"]}", "{first["id"]}")',
            {
                "properties": {
                    k: item["properties"].get(k)
                    for k in ("datetime", "eo:cloud_cover", "proj:code", "platform")
                },
                "assets": {  # an asset names its roles only when not the item's asset_defaults
                    k: ", ".join(a.get("roles", item.get("asset_defaults", {}).get("roles")) or [])
                    for k, a in item["assets"].items()
                },
            },
        )
        uri = f"stac://sample/collections/{first['collection']}/items/{first['id']}"
        contents = await client.read_resource(uri)
        say(f"resources/read {uri}", f"{len(contents[0].text)} characters of STAC JSON")


async def step_processing(client, say):
    item = {"collection_id": "sentinel-2-l2a", "item_id": "S2A_33TUL_20240619_0_L2A", "catalog": "sample"}
    info = await call(client, "inspect_asset", asset="red", **item)
    say(
        'inspect_asset(..., asset="red")',
        {
            k: info[k]
            for k in (
                "width",
                "height",
                "dtypes",
                "nodata",
                "crs",
                "crs_name",
                "resolution",
                "block_size",
                "overviews",
                "is_cog",
            )
        },
    )
    record = await call(client, "reproject_asset", asset="nir", dst_crs="EPSG:4326", bbox=AOI, **item)
    props = record["properties"]
    say(
        'reproject_asset(..., asset="nir", dst_crs="EPSG:4326", bbox=AOI)',
        {
            "id": record["id"],
            "lineage": props["processing:lineage"],
            "proj:shape": props["proj:shape"],
            "file:size": record["assets"]["data"]["file:size"],
            "derived_from": [l["href"] for l in record["links"] if l["rel"] == "derived_from"],
        },
    )
    await call_for_map(client, "preview", **item, bbox=AOI, max_size=256)
    content = MAP_CALLS[-1]["result"]["content"]
    image, note = content[0], content[1]
    say(
        "preview(..., bbox=AOI) -> image content + output",
        {"image": f"{image['mimeType']}, {len(image['data']) * 3 // 4} bytes", "note": note["text"]},
    )
    KEPT["quicklook"] = MAP_CALLS[-1]["result"]["structuredContent"]["assets"]["data"]["href"]
    listed = await call(client, "list_outputs")
    say("list_outputs()", [{k: o[k] for k in ("id", "operation", "size")} for o in listed["outputs"]])
    contents = await client.read_resource(f"stac-gdal://outputs/{record['id']}")
    say(
        f"resources/read stac-gdal://outputs/{record['id']}",
        f"{len(contents[0].text)} characters of STAC-like JSON",
    )


STEPS = [step_catalogs, step_collections, step_search]
STEPS.append(step_processing)


async def _whole_items(client, say, search: dict) -> None:
    """Cloud cover over whole items, clearest first, checked against the sample's known truth."""
    from pathlib import Path

    truth = json.loads((Path(__file__).parent / "data" / "sample" / "truth.json").read_text())
    whole = await call_for_map(client, "cloud_cover_stats", aoi=AOI, search=search)
    ids = [r["item_id"] for r in whole["items"]]
    await call_for_map(client, "search_items", catalog="sample", ids=ids, limit=len(ids))  # their footprints
    say(
        "cloud_cover_stats(aoi=AOI (covers the whole items), search=...) - clearest first",
        [
            _row(
                whole,
                r,
                "item_id",
                "scene_cloud_cover",
                "cloud_fraction",
                "shadow_fraction",
                "clear_fraction",
                "nodata_fraction",
                "mask_source",
            )
            for r in whole["items"]
        ],
    )
    for row in whole["items"]:
        if abs(row["cloud_fraction"] - truth[row["item_id"]]["cloud_fraction"]) > 0.005:
            raise RuntimeError(
                f"{row['item_id']}: cloud fraction {row['cloud_fraction']} differs from the truth"
            )
    say("checked against data/sample/truth.json", "every cloud_fraction within 0.5 percentage points")


async def step_analysis(client, say):
    """Cloud cover inside an AOI (checked against the sample's known truth), then an NDVI time
    series and a cloud-free composite."""
    search = dict(
        catalog="sample", collections=["sentinel-2-l2a", "landsat-c2-l2"], datetime="2024-06-01/2024-09-30"
    )
    await _whole_items(client, say, search)
    field = [13.60, 45.92, 13.62, 45.935]  # a few fields: their sky differs from the scene's
    s2 = {**search, "collections": ["sentinel-2-l2a"]}
    small = await call(client, "cloud_cover_stats", aoi=field, sort="datetime", search=search)
    say(
        f"cloud_cover_stats(aoi={field}, search=..., sort='datetime')",
        [
            _row(small, r, "item_id", "scene_cloud_cover", "cloud_fraction", "clear_fraction", "valid_pixels")
            for r in small["items"]
        ],
    )
    series = await call_for_map(
        client,
        "time_series",
        aoi=field,
        search=s2,
        expression="ndvi",
        reducer="median",
    )
    say(
        "time_series(aoi=field, search={'collections': ['sentinel-2-l2a'], ...}, expression='ndvi', "
        "reducer='median')",
        {
            "rows": [
                {k: r[k] for k in ("date", "value", "valid_fraction", "item_ids")} for r in series["rows"]
            ],
            "csv": series["csv"]["uri"],
            "chart": series["chart"]["uri"],
            "grid": series["grid"],
            "scheduler": series["scheduler"],
        },
    )
    KEPT["chart"] = series["chart"]["file"]
    comp = await call(
        client,
        "composite",
        aoi=field,
        bands=["red", "green", "blue"],
        search=s2,
    )
    say(
        "composite(aoi=field, bands=['red', 'green', 'blue'], search={'collections': ['sentinel-2-l2a'], ...})",
        {k: comp[k] for k in ("output", "items", "valid_fraction", "grid")},
    )
    contents = await client.read_resource(comp["output"]["uri"])
    record = json.loads(contents[0].text)
    say(
        f"resources/read {comp['output']['uri']}: derived_from",
        sorted(
            {
                l["title"]
                for l in record["links"]
                if l["rel"] == "derived_from" and l.get("title", "").startswith("item")
            }
        ),
    )


STEPS.append(step_analysis)


def _found(workspace: Path, name: str) -> Path | None:
    """A file the server named (absolute, or a name under the workspace)."""
    path = Path(name)
    if path.is_absolute():
        return path if path.is_file() else None
    return next((p for p in sorted(workspace.rglob(path.name)) if p.is_file()), None)


async def _thumbnail(client, ref: str) -> str | None:
    """A thumbnail as a `data:` URI: a local file of the sample catalog, or a resource the server serves."""
    mime = mimetypes.guess_type(ref)[0] or "image/png"
    if "://" in ref and not ref.startswith(("http:", "https:", "file:")):
        try:
            (content,) = await client.read_resource(ref)
        except Exception:
            return None
        blob = getattr(content, "blob", None)
        return f"data:{content.mime_type or mime};base64,{blob}" if blob else None
    path = Path(ref.removeprefix("file://"))
    sample = (Path(__file__).parent / "data" / "sample").resolve()
    if path.is_file() and path.resolve().is_relative_to(sample):
        return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()
    return None


async def write_map(client, workspace: Path) -> Path:
    """The map app as a standalone page drawing the demo's calls, thumbnails inlined."""
    from .maps import build_map_view, map_page

    refs = {fp["thumbnail"] for fp in build_map_view(MAP_CALLS)["footprints"] if fp["thumbnail"]}
    thumbnails = {ref: uri for ref in sorted(refs) if (uri := await _thumbnail(client, ref))}
    path = workspace / "map.html"
    path.write_text(map_page(MAP_CALLS, thumbnails=thumbnails), encoding="utf-8")
    return path


def _say_kept(workspace: Path) -> None:
    print(f"\ndemo finished: every step succeeded. Its outputs are kept in {workspace}:")
    for label in ("chart", "quicklook", "map"):
        found = _found(workspace, KEPT[label]) if label in KEPT else None
        print(f"  {label:<10} {found or '(not written)'}")
    print(
        "Open the map in a browser: the ranked scenes on a map, their thumbnails, the quicklook and the AOIs."
    )


async def run_demo(workspace: str | None = None) -> int:
    from fastmcp import Client
    from fastmcp.apps import UI_EXTENSION_ID
    from fastmcp.client.transports import StdioTransport
    from mcp.client.extension import advertise

    folder = Path(workspace or tempfile.mkdtemp(prefix="stac-gdal-mcp-demo-")).resolve()
    env = {
        **os.environ,
        "STAC_GDAL_MCP_DEFAULT_CATALOG": "sample",
        "STAC_GDAL_MCP_WORKSPACE": str(folder),
        "STAC_GDAL_MCP_LOG_LEVEL": "WARNING",
        "FASTMCP_LOG_LEVEL": "WARNING",
    }
    transport = StdioTransport(sys.executable, ["-m", "stac_gdal_mcp", "serve"], env=env)

    def say(title: str, value: Any) -> None:
        print(f"\n>>> {title}\n{_show(value)}", flush=True)

    print("stac-gdal-mcp demo: the server runs over stdio on the bundled offline `sample` catalog.")
    MAP_CALLS.clear()
    KEPT.clear()
    async with Client(transport, extensions=[advertise(UI_EXTENSION_ID)]) as client:  # views for the map
        for step in STEPS:
            try:
                await step(client, say)
            except Exception as exc:
                print(f"\n!!! demo step {step.__name__} failed: {exc}", file=sys.stderr)
                print(f"(outputs so far are in {folder})", file=sys.stderr)
                return 1
        KEPT["map"] = str(await write_map(client, folder))
    _say_kept(folder)
    return 0


def _row(result: dict, row: dict, *keys: str) -> dict:
    """A cloud_cover_stats row with the fields its rows share (`common`) and the fractions it
    leaves out when they are 0 (its note says so), for printing."""
    whole = {**(result.get("common") or {}), **row}
    return {k: whole.get(k, 0.0 if k.endswith("_fraction") else None) for k in keys}
