"""`stac-gdal-mcp demo`: start the server over stdio on the bundled sample catalog and drive it
as an MCP client through a realistic session, printing what an agent would see.

Each step is `async def step(client, say)`; processing and analysis steps are appended to
STEPS as those tools exist. Any failed step makes the demo exit non-zero.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
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
            "matched": page["matched"],
            "returned": page["returned"],
            "notes": page["notes"],
            "items": [
                {k: i[k] for k in ("id", "collection", "datetime", "cloud_cover")} for i in page["items"]
            ],
            "next_cursor": (page["next_cursor"] or "")[:24] + "...",
        },
    )
    seen = [i["id"] for i in page["items"]]
    while page["next_cursor"]:
        page = await call(client, "search_items", catalog="sample", cursor=page["next_cursor"], limit=2)
        seen += [i["id"] for i in page["items"]]
    say("paging with next_cursor until it is null: ids seen", seen)
    if len(seen) != len(set(seen)):
        raise RuntimeError("paging returned duplicates")
    first = page["items"][0] if page["items"] else None
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
                "assets": {k: ", ".join(a.get("roles") or []) for k, a in item["assets"].items()},
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
    result = await client.call_tool("preview", {**item, "max_size": 256})
    image = result.content[0]
    say(
        "preview(...) -> image content + output",
        {"image": f"{image.mime_type}, {len(image.data) * 3 // 4} bytes", "note": result.content[1].text},
    )
    listed = await call(client, "list_outputs")
    say("list_outputs()", [{k: o[k] for k in ("id", "operation", "size")} for o in listed["outputs"]])
    contents = await client.read_resource(f"stac-gdal://outputs/{record['id']}")
    say(
        f"resources/read stac-gdal://outputs/{record['id']}",
        f"{len(contents[0].text)} characters of STAC-like JSON",
    )


STEPS = [step_catalogs, step_collections, step_search]
STEPS.append(step_processing)


async def step_analysis(client, say):
    """Cloud cover inside an AOI (checked against the sample's known truth), then an NDVI time
    series and a cloud-free composite."""
    from pathlib import Path

    truth = json.loads((Path(__file__).parent / "data" / "sample" / "truth.json").read_text())
    search = dict(
        catalog="sample", collections=["sentinel-2-l2a", "landsat-c2-l2"], datetime="2024-06-01/2024-09-30"
    )
    whole = await call(client, "cloud_cover_stats", aoi=AOI, search=search)
    say(
        "cloud_cover_stats(aoi=AOI (covers the whole items), search=...) - clearest first",
        [
            {
                k: r[k]
                for k in (
                    "item_id",
                    "scene_cloud_cover",
                    "cloud_fraction",
                    "shadow_fraction",
                    "clear_fraction",
                    "nodata_fraction",
                    "mask_source",
                )
            }
            for r in whole["items"]
        ],
    )
    for row in whole["items"]:
        if abs(row["cloud_fraction"] - truth[row["item_id"]]["cloud_fraction"]) > 0.005:
            raise RuntimeError(
                f"{row['item_id']}: cloud fraction {row['cloud_fraction']} differs from the truth"
            )
    say("checked against data/sample/truth.json", "every cloud_fraction within 0.5 percentage points")
    field = [13.60, 45.92, 13.62, 45.935]  # a few fields: their sky differs from the scene's
    s2 = {**search, "collections": ["sentinel-2-l2a"]}
    small = await call(client, "cloud_cover_stats", aoi=field, sort="datetime", search=search)
    say(
        f"cloud_cover_stats(aoi={field}, search=..., sort='datetime')",
        [
            {
                k: r[k]
                for k in ("item_id", "scene_cloud_cover", "cloud_fraction", "clear_fraction", "valid_pixels")
            }
            for r in small["items"]
        ],
    )
    series = await call(
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


async def run_demo(workspace: str | None = None) -> int:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    with tempfile.TemporaryDirectory(prefix="stac-gdal-mcp-demo-") as tmp:
        env = {
            **os.environ,
            "STAC_GDAL_MCP_DEFAULT_CATALOG": "sample",
            "STAC_GDAL_MCP_WORKSPACE": workspace or tmp,
            "STAC_GDAL_MCP_LOG_LEVEL": "WARNING",
            "FASTMCP_LOG_LEVEL": "WARNING",
        }
        transport = StdioTransport(sys.executable, ["-m", "stac_gdal_mcp", "serve"], env=env)

        def say(title: str, value: Any) -> None:
            print(f"\n>>> {title}\n{_show(value)}", flush=True)

        print("stac-gdal-mcp demo: the server runs over stdio on the bundled offline `sample` catalog.")
        async with Client(transport) as client:
            for step in STEPS:
                try:
                    await step(client, say)
                except Exception as exc:
                    print(f"\n!!! demo step {step.__name__} failed: {exc}", file=sys.stderr)
                    return 1
        print("\ndemo finished: every step succeeded.")
        return 0
