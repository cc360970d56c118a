"""What an agent pays per task: canonical agent tasks run through this server and, side by
side in the same run, through stac-mcp (PyPI, pinned in requirements/bench-peers.txt), both as MCP
servers over stdio driven by the official `mcp` SDK client, against the same test bed: the pgstac
STAC API of tests/testbed holding real-shaped items (the Planetary Computer items of
tests/real_items/planetary-computer as published, and copies of its Landsat and Sentinel-2 items
spread over a season and an area). The pgstac API runs with pgstac's `context` off, as
stac-fastapi-pgstac does by default: it gives no `numberMatched`.

For each task (benchmarks/agent_tasks_defs.py): correct (the final answer against pystac-client on
the same API), calls, and the bytes of every tool answer as the client receives it, the text part
and the structured part apart; then the bytes of each server's tools/list.

Run: python benchmarks/agent_tasks.py [--peer PATH-TO-stac-mcp] [--only NAME,...]
     (stac-mcp: `python3 -m venv .peer-venv && .peer-venv/bin/pip install -r requirements/bench-peers.txt`;
      without it, only our side runs and the report says so)
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from agent_tasks_defs import FIELD, LANDSAT, S2, S2_BBOX, TASKS, landsat_id  # noqa: E402

REAL = HERE.parent / "tests" / "real_items" / "planetary-computer"
PEER = HERE.parent / ".peer-venv" / "bin" / "stac-mcp"


# --- the test bed's items ------------------------------------------------------------------------


def _moved(item: dict, item_id: str, when: datetime, box: list[float], cloud: float) -> dict:
    """A copy of the real `item` with another id, datetime, footprint and cloud cover."""
    out = copy.deepcopy(item)
    west, south, east, north = box
    out.update(id=item_id, bbox=box, links=[])
    out["geometry"] = {
        "type": "Polygon",
        "coordinates": [[[west, south], [east, south], [east, north], [west, north], [west, south]]],
    }
    out["properties"].update(datetime=when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), **{"eo:cloud_cover": cloud})
    return out


def landsat_items(real: dict) -> list[dict]:
    """179 scenes over FIELD in summer 2024, 60 over it in spring, 40 elsewhere in summer."""
    items = []
    west, south, east, north = FIELD
    summer, spring = datetime(2024, 6, 1, 18, tzinfo=UTC), datetime(2024, 3, 1, 18, tzinfo=UTC)
    for index in range(279):
        when = summer + timedelta(hours=12 * (index % 179)) if index < 179 or index >= 239 else spring
        if 179 <= index < 239:
            when = spring + timedelta(days=index - 179)
        shift = 40 if index >= 239 else 0
        box = [west - 1.1 + shift, south - 0.9, east + 1.0 + shift, north + 1.0]
        cloud = round((index * 37.77) % 100, 2)
        items.append(_moved(real, landsat_id(index), when, [round(v, 4) for v in box], cloud))
    return items


def sentinel_items(real: dict) -> list[dict]:
    """1,000 scenes over S2_BBOX in May 2024, 200 in April."""
    items = []
    for index in range(1200):
        start = datetime(2024, 5, 1, 10, tzinfo=UTC) if index < 1000 else datetime(2024, 4, 1, 10, tzinfo=UTC)
        when = start + timedelta(minutes=40 * (index % 1000))
        col, row = index % 10, (index // 10) % 10
        box = [
            S2_BBOX[0] + 0.1 * col,
            S2_BBOX[1] + 0.1 * row,
            S2_BBOX[0] + 0.1 * col + 0.12,
            S2_BBOX[1] + 0.1 * row + 0.12,
        ]
        item_id = (
            f"S2{'AB'[index % 2]}_MSIL2A_{when:%Y%m%dT%H%M%S}_R{index % 143:03d}_T32T{col}{row}_{index:04d}"
        )
        items.append(_moved(real, item_id, when, [round(v, 4) for v in box], round((index * 13.1) % 100, 2)))
    return items


def collection_of(collection_id: str, items: list[dict]) -> dict:
    """A collection document for `items`: their extent, and their assets as item_assets."""
    boxes = [i["bbox"] for i in items if i.get("bbox")]
    half = [len(b) // 2 for b in boxes]
    spatial = [
        min(b[0] for b in boxes), min(b[1] for b in boxes),
        max(b[h] for b, h in zip(boxes, half)), max(b[h + 1] for b, h in zip(boxes, half)),
    ]  # fmt: skip
    times = sorted(i["properties"].get("datetime") or i["properties"].get("start_datetime") for i in items)
    assets = {k: {f: v for f, v in a.items() if f != "href"} for k, a in items[0].get("assets", {}).items()}
    return {
        "type": "Collection", "stac_version": "1.0.0", "id": collection_id,
        "title": collection_id.replace("-", " ").title(),
        "description": f"Real-shaped {collection_id} items.",
        "license": "proprietary", "links": [], "item_assets": assets,
        "extent": {"spatial": {"bbox": [spatial]}, "temporal": {"interval": [[times[0], times[-1]]]}},
    }  # fmt: skip


def sample_items(cog_url: str) -> tuple[list[dict], list[dict]]:
    """The bundled sample catalog's synthetic scenes (COGs with a known truth.json), their asset
    hrefs on the Range server at `cog_url`, in collections `sample-<collection>`."""
    from stac_gdal_mcp.settings import SAMPLE_CATALOG

    collections, items = [], []
    for folder in sorted(p for p in SAMPLE_CATALOG.parent.iterdir() if (p / "collection.json").is_file()):
        collection = json.loads((folder / "collection.json").read_text())
        collection.update(id=f"sample-{folder.name}", links=[])
        collections.append(collection)
        for path in sorted(folder.glob("*/*.json")):
            item = json.loads(path.read_text())
            item.update(collection=collection["id"], links=[])
            for asset in item["assets"].values():
                asset["href"] = f"{cog_url}/{folder.name}/{item['id']}/{asset['href'].removeprefix('./')}"
            items.append(item)
    return collections, items


def test_bed_items() -> tuple[list[dict], list[dict]]:
    """(collections, items): every real item, and the copies above."""
    real: dict[str, list[dict]] = {}
    for path in sorted(REAL.glob("*.json")):
        document = json.loads(path.read_text())
        for item in document if isinstance(document, list) else []:
            real.setdefault(item["collection"], []).append(item)
    items = [i for group in real.values() for i in group]
    items += landsat_items(real[LANDSAT][0]) + sentinel_items(real[S2][0])
    by_collection: dict[str, list[dict]] = {}
    for item in items:
        by_collection.setdefault(item["collection"], []).append(item)
    return [collection_of(cid, group) for cid, group in by_collection.items()], items


# --- calling a server, counting what it answers ---------------------------------------------------


@dataclass
class Answer:
    text: str
    structured: dict | None
    is_error: bool


@dataclass
class Tally:
    calls: int = 0
    text: int = 0
    structured: int = 0
    seconds: float = 0.0
    answers: list[tuple[str, int, int]] = field(default_factory=list)


def _size(value) -> int:
    return (
        len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) if value is not None else 0
    )


def caller(session, tally: Tally, extra: dict):
    """`call(tool, arguments)` on `session`, counting calls and bytes into `tally`; `extra`
    arguments go with every call (stac-mcp's catalog_url)."""

    async def call(tool: str, arguments: dict) -> Answer:
        started = time.perf_counter()
        result = await session.call_tool(tool, {**arguments, **extra})
        tally.seconds += time.perf_counter() - started
        text = "".join(c.text for c in result.content if c.type == "text")
        tally.calls += 1
        structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
        is_error = getattr(result, "is_error", getattr(result, "isError", False))
        size = (len(text.encode()), _size(structured))
        tally.text, tally.structured = tally.text + size[0], tally.structured + size[1]
        tally.answers.append((tool, *size))
        return Answer(text, structured, bool(is_error))

    return call


async def run_side(command: list[str], env: dict, extra: dict, api, side: str, only) -> tuple[dict, int]:
    """Run every task `side` ("ours" or "peer") can do on the server `command`: per task name,
    (correct, Tally); and the bytes of its tools/list."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    results = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        tools_bytes = _size(listed.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"])
        for task in TASKS:
            run = getattr(task, side)
            if run is None or (only and task.name not in only):
                continue
            tally = Tally()
            try:
                answer = await run(caller(session, tally, extra))
                correct = bool(task.check(answer, task.truth(api)))
                if not correct and os.environ.get("AGENT_TASKS_DEBUG"):
                    print(f"  {side} {task.name} answered {str(answer)[:300]!r}", file=sys.stderr)
            except Exception as exc:  # a wrong shape of answer is a wrong answer, said once
                print(f"  {side} {task.name}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
                correct = False
            results[task.name] = (correct, tally)
    return results, tools_bytes


# --- the report ----------------------------------------------------------------------------------


def _cell(result) -> str:
    if result is None:
        return f"{'-':>4} {'':>5} {'':>9} {'':>9}"
    correct, tally = result
    return f"{'yes' if correct else 'NO':>4} {tally.calls:>5} {tally.text:>9,} {tally.structured:>9,}"


def report(ours: dict, peer: dict | None, tools: tuple[int, int | None]) -> bool:
    """Print the table; True when every task is correct and, where stac-mcp did the task right,
    ours takes no more calls and no more text bytes."""
    head = f"{'ok':>4} {'calls':>5} {'text B':>9} {'struct B':>9}"
    print(f"{'task':<20} | {'stac-gdal-mcp':^30} | {'stac-mcp 6.5':^30}")
    print(f"{'':<20} | {head} | {head}")
    good = True
    for task in TASKS:
        if task.name not in ours:
            continue
        mine, theirs = ours[task.name], (peer or {}).get(task.name)
        verdict = ""
        if theirs is not None and theirs[0]:
            lighter = mine[1].calls <= theirs[1].calls and mine[1].text <= theirs[1].text
            verdict = "" if lighter else "  HEAVIER"
            good &= lighter
        elif peer is not None and task.peer is None:
            verdict = f"  (stac-mcp {task.peer_gap or 'has no tool for it'})"
        good &= mine[0]
        print(f"{task.name:<20} | {_cell(mine)} | {_cell(theirs)}{verdict}")
    print(f"{'tools/list':<20} | {tools[0]:>30,} | {tools[1] if tools[1] is not None else '-':>30}")
    for name, (_, tally) in ours.items():
        answers = ", ".join(f"{t} {x:,}+{s:,} B" for t, x, s in tally.answers)
        print(f"  {name}: {answers}; {tally.seconds * 1000:.0f} ms")
    return good


def count_seconds(api, folder: Path) -> tuple[float, float]:
    """Median seconds of an exact count of the 1,000 Sentinel-2 matches (the count task's search)
    in-process, as the API is (no numberMatched: paged ids) and with pgstac's context on (the
    API's count)."""
    import statistics

    from agent_tasks_defs import S2_MONTH

    from stac_gdal_mcp.session import Session
    from stac_gdal_mcp.settings import load_settings
    from testbed.pgstac import _set_pgstac_setting

    settings = load_settings(
        workspace=folder / "count-ws", network={"allow_private_hosts": True},
        catalogs=[{"id": "bed", "url": api.url}], default_catalog="bed",
    )  # fmt: skip
    args = {"collections": [S2], "bbox": S2_BBOX, "datetime": S2_MONTH, "detail": "count"}
    out = []
    with Session(settings) as session:
        for context in ("off", "on"):
            _set_pgstac_setting(api.dsn, "context", context)
            times = []
            for _ in range(5):
                started = time.perf_counter()
                assert session.search(**args).page.matched == 1000
                times.append(time.perf_counter() - started)
            out.append(statistics.median(times))
    _set_pgstac_setting(api.dsn, "context", "off")
    return out[0], out[1]


def _config(folder: Path, url: str) -> dict:
    config = folder / "agent-tasks.toml"
    config.write_text(
        f'default_catalog = "testbed"\n[network]\nallow_private_hosts = true\n'
        f'[[catalogs]]\nid = "testbed"\nurl = "{url}"\n'
    )
    return {
        **os.environ,
        "STAC_GDAL_MCP_CONFIG": str(config),
        "STAC_GDAL_MCP_WORKSPACE": os.environ.setdefault("AGENT_TASKS_WORKSPACE", str(folder / "workspace")),
        "STAC_GDAL_MCP_LOG_LEVEL": "WARNING",
    }


def main() -> int:
    from testbed import start_pgstac

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", default=os.environ.get("STAC_MCP", str(PEER)), help="the stac-mcp command")
    parser.add_argument("--only", default="", help="comma-separated task names")
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n}
    peer_command = shutil.which(args.peer) or (args.peer if Path(args.peer).is_file() else None)
    from stac_gdal_mcp.settings import SAMPLE_CATALOG
    from testbed import serve_directory

    collections, items = test_bed_items()
    with (
        tempfile.TemporaryDirectory() as tmp,
        start_pgstac(tempfile.gettempdir(), context=False) as api,
        serve_directory(SAMPLE_CATALOG.parent) as cogs,
    ):
        sample_collections, sample = sample_items(cogs.url)
        api.load(collections + sample_collections, items + sample)
        env = _config(Path(tmp), api.url)
        serve = [sys.executable, "-m", "stac_gdal_mcp", "serve"]
        ours, our_tools = asyncio.run(run_side(serve, env, {}, api, "ours", only))
        peer, peer_tools = None, None
        if peer_command:
            peer_env = {**os.environ, "STAC_MCP_LOG_LEVEL": "WARNING"}
            peer, peer_tools = asyncio.run(
                run_side([peer_command], peer_env, {"catalog_url": api.url}, api, "peer", only)
            )
        else:
            print(f"stac-mcp not found at {args.peer}: only our side runs (see the module docstring)")
        paged, counted = count_seconds(api, Path(tmp)) if not only or "count" in only else (None, None)
    print(
        f"{len(items) + len(sample):,} items in {len(collections) + len(sample_collections)} collections on pgstac (no numberMatched)"
    )
    ok = report(ours, peer, (our_tools, peer_tools))
    if paged is not None:
        print(
            f"exact count of 1,000 matches (median of 5, in-process): {paged * 1000:.0f} ms paging ids "
            f"(no numberMatched), {counted * 1000:.0f} ms with the API's count (target <= 1 s): "
            + ("OK" if max(paged, counted) <= 1 else "MISSED")
        )
    print("every task correct and no heavier than stac-mcp: " + ("OK" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
