"""Every size or time a user guide (or the README) states is measured, and says by what.

A figure - a number with a unit of bytes (B, KB, MiB, GB, bytes) or of time (ms, s, us, min) -
is one of three things:

- a measurement: the paragraph, list item or table it stands in (a table with the paragraph that
  introduces it) names the test or benchmark that measures it (`tests/test_x.py`,
  `benchmarks/bench_x.py`), a file that exists;
- a setting's value: written beside the setting's name or the word "default"; where the name
  is given (`limits.max_result_bytes` (1 MiB)) the value is checked against the setting's default;
- one of the code's own sizes (a cache, a chunk, a threshold), listed in CONSTANTS below with
  the reason, so that a new one is a decision, not an accident.

A new figure that is none of these fails here. The answer sizes the analysis guide gives for
per-field statistics are measured here, on the bundled sample catalog, through the MCP client.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDES = ("discovery.md", "processing.md", "analysis.md", "catalogs.md", "configuration.md")
PAGES = [ROOT / "docs" / name for name in GUIDES] + [ROOT / "README.md"]

NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNIT = r"(?:[KMGT]i?B|kB|B|bytes|ms|s|us|µs|min|minutes|hours)"
FIGURE = re.compile(rf"(?<![\w.\-/`]){NUMBER}(?:\s?(?:-|–|/)\s?{NUMBER})*\s?{UNIT}(?![\w])")
SOURCE = re.compile(r"\b((?:benchmarks|tests|scripts)/[\w/.-]+\.py)\b")
SETTING = re.compile(r"`((?:limits|network)\.\w+)`")

# The code's own sizes and times, stated as the code sets them (not measured): each a phrase of a
# guide that holds the figure, and why it is no measurement. An entry no longer found fails.
CONSTANTS = {
    "discovery.md": {
        "about cap / 20 kB items": "the chunk rule of the code",
        "parts hold more than 64 MB": "the threshold of the code's time-sliced sort",
        "with 16 KiB kept": "the answer budget's reserve, a constant of the code",
    },
    "processing.md": {
        "(1.2 GB of float32)": "arithmetic: 10,000 x 10,000 x 3 x 4 bytes",
        "uint16 COG (512 px tiles, DEFLATE + predictor, overviews; 217 MB)": "the size of the input",
        "days x bands x 12 MB per tile in flight (about 0.5 GB": "arithmetic: 1024 px float32 tiles, 3 copies",
        "counted as 0 bytes": "a count the estimate refuses to make",
    },
    "analysis.md": {
        "(at most about 190 MB:": "the coverage cache's cap",
        "~70 MB), the decoded": "arithmetic: 10,000 fields x 600 pixels",
        "GDAL's `/vsicurl/` cache (128 MB)": "a GDAL option the code sets",
        "(about 25 bytes a row": "arithmetic: the columns of a row",
    },
    "catalogs.md": {
        "(at most every 5 s)": "httpfs.REVALIDATE_S, the opened files' versions asked again after it",
        "(every 30 s)": "httpfs.SWEEP_S, every file's version asked again after it",
    },
    "configuration.md": {
        "wait at most 30 s for a": "the cap the code puts on a Retry-After",
        "(16 KiB of it kept": "the answer budget's reserve, a constant of the code",
        "16 times this + 1 MiB": "the external servers' message cap, a constant of the code",
        "the files of at most 16 MB that": "local_copies.COPY_MAX, the largest file copied whole",
    },
    "README.md": {},
}


def _blocks(text: str) -> list[str]:
    """The page's paragraphs, list items and tables (code blocks left out); a table or a list
    item carries the paragraph that introduces it (one ending in ':' for a list item)."""
    blocks: list[str] = []
    current: list[str] = []
    kind = ""
    fenced = False

    def close():
        nonlocal current, kind
        if current:
            blocks.append(f"{kind}\n" + "\n".join(current))
        current, kind = [], ""

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            close()
            continue
        if fenced:
            continue
        stripped = line.strip()
        starts_item = re.match(r"(?:[-*]|\d+\.)\s", stripped) is not None and not line.startswith("  ")
        is_table = stripped.startswith("|")
        if not stripped or stripped.startswith("#"):
            close()
            if stripped:
                blocks.append("heading\n" + stripped)
            continue
        if (is_table and kind != "table") or (not is_table and kind == "table") or starts_item:
            close()
        if not current:
            kind = "table" if is_table else "item" if starts_item else "paragraph"
        current.append(line)
    close()
    return blocks


def _scopes(text: str):
    """(a paragraph, list item or table row; the text whose sources cover its figures): a table's
    row is covered by its own cells and the paragraph that introduces the table."""
    previous = ""  # the last paragraph, the caption of what follows it
    for block in _blocks(text):
        kind, body = block.split("\n", 1)
        if kind == "heading":
            previous = ""
            continue
        if kind == "table":
            for row in body.splitlines():
                yield row, row + "\n" + previous
            previous = body + "\n" + previous
            continue
        scope = body
        introduced = kind == "item" and previous.rstrip().endswith(":")
        if body.lstrip().startswith("->") or introduced:
            scope += "\n" + previous
        if kind == "paragraph":
            previous = body
        yield body, scope


def _default_of(key: str):
    from stac_gdal_mcp.settings import load_settings

    section, name = key.split(".", 1)
    return getattr(getattr(load_settings(), section), name, None)


def _value(figure: str) -> float | None:
    """A single figure in bytes or seconds (None for ranges)."""
    found = re.fullmatch(rf"({NUMBER})\s?({UNIT})", figure)
    if not found:
        return None
    number = float(found.group(1).replace(",", ""))
    unit = found.group(2)
    scale = {"ms": 1e-3, "s": 1, "us": 1e-6, "µs": 1e-6, "min": 60, "minutes": 60, "hours": 3600}
    if unit in scale:
        return number * scale[unit]
    powers = {"B": 0, "bytes": 0, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4}
    return number * (1024 if "i" in unit else 1000) ** powers[unit[0] if unit[0] in "KkMGT" else unit]


def _is_setting(block: str, start: int, figure: str) -> str | None:
    """Why the figure at `start` is a setting's value, or None; a wrong default fails."""
    before = block[max(0, start - 60) : start]
    named = list(SETTING.finditer(block[max(0, start - 40) : start]))
    if named:
        key = named[-1].group(1)
        default, stated = _default_of(key), _value(figure)
        if isinstance(default, int | float) and stated is not None and default:
            decimal = stated if "i" in figure else _value(figure.replace("B", "iB"))
            close = [abs(v - default) <= 0.05 * default for v in (stated, decimal) if v is not None]
            assert any(close), f"{figure} stated as the default of {key}, which is {default}"
        return key
    if re.search(r"\bdefaults?\b", before, re.I):
        return "default"
    return None


def _unmeasured(page: Path) -> list[str]:
    text = page.read_text()
    constants = CONSTANTS[page.name]
    problems = []
    for block, scope in _scopes(text):
        sources = SOURCE.findall(scope)
        missing = [s for s in sources if not (ROOT / s).is_file()]
        assert not missing, f"{page.name} names files that do not exist: {missing}"
        for found in FIGURE.finditer(block):
            if sources or any(
                phrase in block and phrase.find(found.group()) >= 0 and found.group() in phrase
                for phrase in constants
            ):
                continue
            row = block[block.rfind("\n", 0, found.start()) + 1 : found.start()]
            if page.name == "configuration.md" and row.startswith("| `") and row.count("|") == 2:
                continue  # the settings table's default column: checked below
            if _is_setting(block, found.start(), found.group()):
                continue
            line = text[: text.find(block)].count("\n") + 1 + block[: found.start()].count("\n")
            problems.append(f"{page.name}:{line}: {found.group()!r} in {block.strip()[:70]!r}...")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_figure_names_the_test_or_benchmark_that_measures_it(page):
    problems = _unmeasured(page)
    assert problems == [], (
        "figures without the test or benchmark that measures them (name it in the same "
        "paragraph, list item or table caption, or list a constant in CONSTANTS):\n" + "\n".join(problems)
    )


def test_the_constants_list_holds_only_phrases_still_in_the_guides():
    stale = [
        f"{name}: {phrase!r}"
        for name, phrases in CONSTANTS.items()
        for phrase in phrases
        if phrase not in (ROOT / ("README.md" if name == "README.md" else f"docs/{name}")).read_text()
    ]
    assert stale == []


def test_the_settings_table_states_the_defaults():
    """configuration.md's table: each `limits.`/`network.` key's default column is the default."""
    from stac_gdal_mcp.settings import load_settings

    settings = load_settings()
    checked = 0
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        keys = re.findall(r"`((?:limits|network)\.\w+)`", cells[0])
        number = re.match(rf"`?({NUMBER}(?:e\d+)?)`?(?:\s?({UNIT}|px))?", cells[1])
        if len(keys) != 1 or not number:
            continue
        section, name = keys[0].split(".")
        default = getattr(getattr(settings, section), name)
        figure = number.group(0).strip("`")
        stated = _value(figure) if number.group(2) and number.group(2) != "px" else None
        if stated is None:
            stated = float(number.group(1).replace(",", ""))
        assert abs(stated - default) <= 0.05 * default, (keys[0], cells[1], default)
        checked += 1
    assert checked >= 20


def _field(name: str, west: float, south: float, east: float, north: float) -> dict:
    ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
    return {
        "type": "Feature",
        "properties": {"name": name},
        "geometry": {"type": "Polygon", "coordinates": [ring]},
    }


THREE_FIELDS = {
    "type": "FeatureCollection",
    "features": [
        _field(f"S{c + 1}", 13.601 + c * 0.0065, 45.9205, 13.607 + c * 0.0065, 45.927) for c in range(3)
    ],
}
STATED = re.compile(r"about ([\d.]+) KB of text for 3 fields over the sample's 5 scenes")


async def test_the_zonal_answer_is_the_size_the_analysis_guide_states(make_settings, build):
    """3 fields x 5 scenes of the sample catalog, NDVI, default statistics, per scene: the text
    part of the answer as the client receives it, within 20% of what analysis.md says."""
    from fastmcp import Client

    stated = STATED.search((ROOT / "docs" / "analysis.md").read_text())
    assert stated, "analysis.md no longer states the zonal answer's size for 3 fields over 5 scenes"
    mcp = build(make_settings(default_catalog="sample"))
    async with Client(mcp) as client:
        result = await client.call_tool(
            "zonal_stats",
            {
                "geometries": THREE_FIELDS,
                "search": {"collections": ["sentinel-2-l2a"]},
                "id_property": "name",
                "expression": "ndvi",
            },
        )
    text = "".join(block.text for block in result.content if block.type == "text")
    rows = json.loads(text)["rows"]
    assert len(rows) == 15  # 3 fields x 5 scenes
    measured = len(text.encode()) / 1000
    assert abs(measured - float(stated.group(1))) <= 0.2 * float(stated.group(1)), (
        f"analysis.md says about {stated.group(1)} KB; measured {measured:.1f} KB: correct the guide"
    )
