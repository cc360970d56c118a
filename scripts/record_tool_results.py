"""Record every tool's result on a fixed set of calls, so that a refactoring can prove it changed
no answer: run it before and after, and compare the two files byte for byte.

    .venv/bin/python scripts/record_tool_results.py --out before.json
    (change the code)
    .venv/bin/python scripts/record_tool_results.py --out after.json && cmp before.json after.json

The server is built on the bundled offline `sample` catalog (plus `sample-copy`, the same catalog
under a second id, for a multi-catalog search) with a temporary workspace, and driven through a
fastmcp in-memory Client: tools/list (and resources, templates, prompts), then every tool on the
calls in CALLS (dry runs, errors, an MCP task and the resources included), in order.

What changes from run to run is replaced by placeholders, and nothing else: paging cursors
(signed with a per-session key) by `<cursor>`, output ids (`<stem>-<random hex>`) by
`<output:N>` in order of appearance, times of writing by `<time>` (also inside texts), the
temporary workspace by `<workspace>` and the package's folder (the sample catalog's hrefs) by
`<package>`; the lists of a dry run's estimate (`inputs`, `files`: headers are read concurrently,
so they come in the order the reads finished) are sorted. Images and served files are recorded
as their length and SHA-256, which still tell any changed byte. (The output files' checksums
need no placeholder: the files embed no time of writing - two runs give the same bytes.)

Which package is imported is printed to stderr: run it with `PYTHONPATH=<tree>` from that tree
to record another checkout (e.g. a git worktree of the commit before a change).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

AOI = [13.60, 45.92, 13.62, 45.935]  # a few fields inside the sample catalog's area
BBOX = [13.55, 45.85, 13.75, 45.98]
S2 = "sentinel-2-l2a"
LANDSAT = "landsat-c2-l2"
ITEM = "S2A_33TUL_20240808_0_L2A"
JUNE_JULY = "2024-06-01/2024-07-31"
REF = {"catalog": "sample", "collection_id": S2, "item_id": ITEM}
RED = {**REF, "asset": "red"}
SEARCH = {"collections": [S2], "datetime": JUNE_JULY}
FIELDS = {  # two fields inside AOI, as zones
    "type": "FeatureCollection",
    "features": [
        {"type": "Feature", "id": f"field-{i}", "properties": {},
         "geometry": {"type": "Polygon", "coordinates": [[[w, s], [w + 0.008, s], [w + 0.008, s + 0.006], [w, s + 0.006], [w, s]]]}}
        for i, (w, s) in enumerate([(13.601, 45.921), (13.611, 45.928)])
    ],
}  # fmt: skip

#: (label, tool, arguments); an argument "$cursor:<label>" is the next_cursor of that call's result,
#: "$output:<label>" the output id of that call's result.
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("catalogs", "list_catalogs", {}),
    ("collections", "list_collections", {"catalog": "sample"}),
    ("collections-page1", "list_collections", {"catalog": "sample", "limit": 1}),
    ("collections-page2", "list_collections", {"catalog": "sample", "cursor": "$cursor:collections-page1"}),
    ("collections-q", "list_collections", {"catalog": "sample", "q": "landsat"}),
    ("collection", "get_collection", {"collection_id": S2, "catalog": "sample"}),
    ("collection-unknown", "get_collection", {"collection_id": "sentinel-2-l2x", "catalog": "sample"}),
    ("queryables", "get_queryables", {"collection_id": S2, "catalog": "sample"}),
    ("queryables-all", "get_queryables", {"catalog": "sample"}),
    (
        "search",
        "search_items",
        {
            "catalog": "sample",
            "collections": [S2, LANDSAT],
            "bbox": BBOX,
            "datetime": "2024-06-01/2024-09-30",
            "max_cloud_cover": 60,
            "sortby": "eo:cloud_cover",
            "limit": 2,
        },
    ),
    ("search-page2", "search_items", {"catalog": "sample", "cursor": "$cursor:search"}),
    (
        "search-filter",
        "search_items",
        {
            "collections": S2,
            "intersects": {"type": "Point", "coordinates": [13.61, 45.93]},
            "filter": "eo:cloud_cover < 40",
            "sortby": "-datetime",
        },
    ),
    ("search-query-ids", "search_items", {"ids": [ITEM, "nope"], "query": {"eo:cloud_cover": {"lt": 10}}}),
    ("search-full", "search_items", {"collections": [S2], "ids": [ITEM], "detail": "full"}),
    (
        "search-federated",
        "search_items",
        {"catalog": ["sample", "sample-copy"], "collections": [S2], "bbox": AOI, "limit": 3},
    ),
    (
        "search-federated-page2",
        "search_items",
        {"catalog": ["sample", "sample-copy"], "cursor": "$cursor:search-federated"},
    ),
    ("search-bad-bbox", "search_items", {"bbox": [13.7, 45.9, 13.6]}),
    ("search-bad-json", "search_items", {"bbox": "[13.6, 45.9"}),
    ("search-unknown-catalog", "search_items", {"catalog": "nowhere"}),
    ("item", "get_item", {"collection_id": S2, "item_id": ITEM, "catalog": "sample"}),
    ("item-unknown", "get_item", {"collection_id": S2, "item_id": "nope", "catalog": "sample"}),
    ("inspect", "inspect_asset", {**REF, "asset": "red"}),
    ("inspect-scl", "inspect_asset", {**REF, "asset": "scl"}),
    ("inspect-bad", "inspect_asset", {"catalog": "sample", "collection_id": S2}),
    (
        "reproject-dry",
        "reproject_asset",
        {**RED, "dst_crs": "EPSG:4326", "bbox": AOI, "dry_run": True},
    ),
    ("reproject", "reproject_asset", {**RED, "dst_crs": "EPSG:4326", "bbox": AOI}),
    (
        "reproject-quicklook",
        "reproject_asset",
        {
            **REF,
            "asset": "nir",
            "dst_crs": "EPSG:3857",
            "bbox": AOI,
            "resolution": 20,
            "resampling": "bilinear",
            "output_name": "nir-3857",
            "quicklook": True,
        },
    ),
    (
        "reproject-name-taken",
        "reproject_asset",
        {**REF, "asset": "nir", "dst_crs": "EPSG:3857", "bbox": AOI, "output_name": "nir-3857"},
    ),
    ("reproject-bad-crs", "reproject_asset", {**RED, "dst_crs": "EPSG:nope"}),
    (
        "convert-dry",
        "convert_asset",
        {**RED, "output_format": "PNG", "bbox": AOI, "dry_run": True},
    ),
    ("convert-png", "convert_asset", {**RED, "output_format": "PNG", "bbox": AOI}),
    (
        "convert-gtiff",
        "convert_asset",
        {
            **REF,
            "asset": "visual",
            "output_format": "GTiff",
            "bbox": AOI,
            "bands": [1, 3],
            "creation_options": {"COMPRESS": "ZSTD"},
        },
    ),
    ("convert-href", "convert_asset", {"href": "$file:reproject", "output_format": "COG"}),
    ("convert-bad-band", "convert_asset", {**RED, "output_format": "GTiff", "bands": [5]}),
    ("preview-dry", "preview", {**REF, "bbox": AOI, "max_size": 64, "dry_run": True}),
    ("preview-item", "preview", {**REF, "bbox": AOI, "max_size": 64}),
    ("preview-asset", "preview", {**REF, "asset": "nir", "max_size": 64}),
    ("preview-assets", "preview", {**REF, "assets": ["nir", "red", "green"], "bbox": AOI, "max_size": 48}),
    ("preview-both", "preview", {**REF, "asset": "nir", "assets": ["red"]}),
    ("cloud-dry", "cloud_cover_stats", {"aoi": AOI, "search": SEARCH, "dry_run": True}),
    (
        "cloud",
        "cloud_cover_stats",
        {"aoi": AOI, "search": {"catalog": "sample", "collections": [S2, LANDSAT]}},
    ),
    (
        "cloud-items",
        "cloud_cover_stats",
        {
            "aoi": {
                "type": "Polygon",
                "coordinates": [[[13.60, 45.92], [13.62, 45.92], [13.62, 45.935], [13.60, 45.92]]],
            },
            "search": {
                "items": [
                    {"collection_id": S2, "item_id": ITEM},
                    {"collection_id": LANDSAT, "item_id": "LC09_L2SP_190028_20240627_02_T1"},
                ]
            },
            "sort": "datetime",
            "resolution": 30,
        },
    ),
    (
        "cloud-max-items",
        "cloud_cover_stats",
        {"aoi": AOI, "search": {"collections": [S2]}, "max_items": 2, "sort": "search"},
    ),
    ("cloud-bad-search", "cloud_cover_stats", {"aoi": AOI, "search": {"collection": [S2]}}),
    ("series-dry", "time_series", {"aoi": AOI, "search": SEARCH, "dry_run": True}),
    ("series", "time_series", {"aoi": AOI, "search": SEARCH}),
    (
        "series-formula",
        "time_series",
        {
            "aoi": AOI,
            "search": {
                "collections": [S2, LANDSAT],
                "datetime": "2024-06-01/2024-09-30",
                "max_cloud_cover": 60,
            },
            "expression": "(nir-red)/(nir+red)",
            "reducer": "median",
            "mask_clouds": False,
            "resolution": 30,
            "crs": "EPSG:32633",
            "max_items": 4,
        },
    ),
    ("series-bad-expression", "time_series", {"aoi": AOI, "search": SEARCH, "expression": "nir +* red"}),
    (
        "composite-dry",
        "composite",
        {"aoi": AOI, "bands": ["red", "green", "blue"], "search": SEARCH, "dry_run": True},
    ),
    ("composite", "composite", {"aoi": AOI, "bands": ["red", "green", "blue"], "search": SEARCH}),
    (
        "composite-quicklook",
        "composite",
        {
            "aoi": AOI,
            "bands": ["nir"],
            "search": {"collections": [S2]},
            "method": "max",
            "resolution": 20,
            "quicklook": True,
        },
    ),
    ("composite-bad-band", "composite", {"aoi": AOI, "bands": ["nope"], "search": SEARCH}),
    ("zonal-dry", "zonal_stats", {"geometries": FIELDS, "search": SEARCH, "dry_run": True}),
    (
        "zonal",
        "zonal_stats",
        {"geometries": FIELDS, "search": SEARCH, "stats": ["mean", "count", "majority"]},
    ),
    ("zonal-day", "zonal_stats", {"geometries": FIELDS, "search": {"collections": [S2]}, "per": "day"}),
    ("zonal-bad-stat", "zonal_stats", {"geometries": FIELDS, "search": SEARCH, "stats": ["avg"]}),
    ("save-search", "save_search", {"search": {**SEARCH, "sortby": "id"}, "bbox": AOI}),
    (
        "save-search-ndjson",
        "save_search",
        {"search": {"collections": [S2]}, "format": "ndjson", "max_items": 2},
    ),
    ("save-search-bad-format", "save_search", {"search": SEARCH, "format": "csv"}),
    ("extensions", "list_extensions", {}),
    ("outputs", "list_outputs", {}),
    ("delete", "delete_output", {"output_id": "$output:convert-png"}),
    ("delete-again", "delete_output", {"output_id": "$output:convert-png"}),
    ("outputs-after-delete", "list_outputs", {}),
]

#: resources read after the calls: (label, uri); "$output:<label>" as above
READS: list[tuple[str, str]] = [
    ("catalogs", "stac://catalogs"),
    ("collection", f"stac://sample/collections/{S2}"),
    ("item", f"stac://sample/collections/{S2}/items/{ITEM}"),
    ("item-unknown", f"stac://sample/collections/{S2}/items/nope"),
    ("record", "stac-gdal://outputs/$output:reproject"),
    ("file", "stac-gdal://outputs/$output:reproject/file"),
    ("csv", "stac-gdal://outputs/$output:series.csv/file"),
    ("record-deleted", "stac-gdal://outputs/$output:convert-png"),
]


class Normaliser:
    """Replaces what differs between runs by placeholders (see the module docstring)."""

    def __init__(self, workspace: Path, package: Path):
        self.workspace = workspace
        self.package = package  # the bundled sample catalog's hrefs are under it
        self.outputs: dict[str, str] = {}
        self.times: set[str] = set()  # times of writing, as they appear in records ("created")

    def learn(self, value: Any) -> None:
        """Note the output ids and times of writing in a result (before it is normalised)."""
        if isinstance(value, dict):
            if self._looks_like_output(value.get("id")):
                self.output(value["id"])
                properties = value.get("properties") if isinstance(value.get("properties"), dict) else value
                for key in ("created", "updated", "processing:datetime"):
                    if isinstance(properties.get(key), str):
                        self.times.add(properties[key])
            for item in value.values():
                self.learn(item)
        elif isinstance(value, list):
            for item in value:
                self.learn(item)

    def _looks_like_output(self, name: Any) -> bool:
        if not isinstance(name, str) or "/" in name:
            return False
        return name in self.outputs or (self.workspace / "records" / f"{name}.json").exists()

    def output(self, output_id: str) -> str:
        return self.outputs.setdefault(output_id, f"<output:{len(self.outputs) + 1}>")

    def text(self, text: str) -> str:
        for path in {str(self.workspace), str(self.workspace.resolve())}:
            text = text.replace(path, "<workspace>")
        text = text.replace(str(self.package), "<package>")
        for output_id, placeholder in sorted(self.outputs.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(output_id, placeholder)
        for moment in self.times:
            text = text.replace(moment, "<time>")
        return text

    def value(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            out = {k: self.value(v, k) for k, v in value.items()}
            if "inputs" in out and "files" in out:  # an estimate: headers are read concurrently,
                for name in ("inputs", "files"):  # so its lists come in the order reads finished
                    if isinstance(out[name], list):
                        out[name] = sorted(out[name], key=lambda v: json.dumps(v, sort_keys=True))
            return out
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            if key in ("next_cursor", "cursor", "prev_cursor") and value:
                return "<cursor>"
            return self.text(value)
        return value

    def json_text(self, text: str) -> Any:
        """A text block: parsed and normalised when it is JSON, else normalised as text."""
        try:
            parsed = json.loads(text)
        except ValueError:
            return self.text(text)
        if not isinstance(parsed, (dict, list)):
            return self.text(text)
        self.learn(parsed)
        return {"json": self.value(parsed)}


def _digest(data: bytes) -> dict[str, Any]:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _block(block: Any, norm: Normaliser) -> dict[str, Any]:
    """One content block of a result, normalised."""
    kind = block.type
    if kind == "text":
        return {"type": "text", "text": norm.json_text(block.text)}
    if kind == "image":
        return {"type": "image", "mimeType": block.mime_type, **_digest(base64.b64decode(block.data))}
    if kind == "resource_link":
        dumped = block.model_dump(mode="json", exclude_none=True)
        return norm.value(dumped)
    return norm.value(block.model_dump(mode="json", exclude_none=True))


def _output_id(results: dict[str, Any], reference: str) -> str:
    """The output id of `<label>` (a record's `id`) or `<label>.<field>` (e.g. `series.csv`)."""
    label, _, field = reference.partition(".")
    structured = results[label].structured_content
    return (structured[field] if field else structured)["id"]


def _resolve(arguments: dict, results: dict[str, Any], session) -> dict:
    """The arguments with `$cursor:`, `$output:` and `$file:` references replaced."""
    out = {}
    for key, value in arguments.items():
        if isinstance(value, str) and value.startswith("$"):
            kind, label = value[1:].split(":", 1)
            if kind == "cursor":
                value = results[label].structured_content["next_cursor"]
            elif kind == "output":
                value = _output_id(results, label)
            elif kind == "file":
                value = str(session.outputs.path(_output_id(results, label)))
        out[key] = value
    return out


def _expand(uri: str, results: dict[str, Any]) -> str:
    """`$output:<reference>` inside a URI replaced by that output id."""
    return re.sub(r"\$output:([\w.-]+)", lambda m: _output_id(results, m.group(1)), uri)


async def _record_call(client, label, tool, arguments, results, session, norm) -> dict[str, Any]:
    progress: list[Any] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    resolved = _resolve(arguments, results, session)
    result = await client.call_tool(tool, resolved, raise_on_error=False, progress_handler=on_progress)
    results[label] = result
    structured = result.structured_content
    norm.learn(structured)
    entry: dict[str, Any] = {"label": label, "tool": tool, "arguments": norm.value(arguments)}
    entry["is_error"] = result.is_error
    entry["structured_content"] = norm.value(structured)
    entry["content"] = [_block(b, norm) for b in result.content]
    # the messages only (their count depends on how the work was chunked, not on the answer)
    entry["progress_messages"] = sorted({norm.text(m) for m in progress if m and "%" not in m})
    return entry


async def _record_task(client, norm) -> dict[str, Any]:
    """convert_asset as an MCP task: its final result (the statuses on the way depend on timing)."""
    from fastmcp_tasks import call_tool_task

    task = await call_tool_task(client, "convert_asset", {**RED, "output_format": "GTiff", "bbox": AOI})
    result = await task.result()
    norm.learn(result.structured_content)
    return {
        "label": "convert-task",
        "structured_content": norm.value(result.structured_content),
        "content": [_block(b, norm) for b in result.content],
    }


async def _read(client, uri: str, norm: Normaliser) -> dict[str, Any]:
    try:
        contents = await client.read_resource(uri)
    except Exception as exc:  # a resource error: its message is the answer
        return {"error": norm.text(str(exc))}
    out = []
    for content in contents:
        entry: dict[str, Any] = {"mimeType": content.mime_type}
        if hasattr(content, "text"):
            entry["text"] = norm.json_text(content.text)
        else:
            entry.update(_digest(base64.b64decode(content.blob)))
        out.append(entry)
    return {"contents": out}


async def record(workspace: Path) -> dict[str, Any]:
    import fastmcp_tasks  # noqa: F401  (imported before the Client: it declares the tasks extension)
    from fastmcp import Client

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import SAMPLE_CATALOG, load_settings

    settings = load_settings(
        workspace=workspace,
        default_catalog="sample",
        catalogs=[{"id": "sample-copy", "title": "The sample catalog again", "path": str(SAMPLE_CATALOG)}],
    )
    import stac_gdal_mcp

    norm = Normaliser(workspace, Path(stac_gdal_mcp.__file__).parent)
    answers: dict[str, Any] = {}
    with Session(settings) as session:
        mcp = build_server(session=session)
        async with Client(mcp) as client:
            answers["tools/list"] = [
                t.model_dump(mode="json", exclude_none=True) for t in await client.list_tools()
            ]
            answers["resources/list"] = [
                r.model_dump(mode="json", exclude_none=True) for r in await client.list_resources()
            ]
            answers["resources/templates/list"] = [
                r.model_dump(mode="json", exclude_none=True) for r in await client.list_resource_templates()
            ]
            answers["prompts/list"] = [
                p.model_dump(mode="json", exclude_none=True) for p in await client.list_prompts()
            ]
            prompt = await client.get_prompt(
                "find_clear_imagery", {"place": "Nova Gorica", "start": "2024-06", "end": "2024-08"}
            )
            answers["prompts/get"] = [m.model_dump(mode="json", exclude_none=True) for m in prompt.messages]
            results: dict[str, Any] = {}
            calls = [await _record_call(client, *call, results, session, norm) for call in CALLS]
            calls.append(await _record_task(client, norm))
            answers["calls"] = calls
            answers["reads"] = {
                label: await _read(client, _expand(uri, results), norm) for label, uri in READS
            }
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the JSON file to write")
    args = parser.parse_args()
    import stac_gdal_mcp

    print(f"recording the tools of {stac_gdal_mcp.__file__}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="tool-results-") as tmp:
        answers = asyncio.run(record(Path(tmp) / "workspace"))
    args.out.write_text(json.dumps(answers, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{len(answers['calls'])} calls recorded in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
