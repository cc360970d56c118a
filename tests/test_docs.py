"""The docs site builds with `mkdocs build --strict`, and its generated pages match the code.

The tool reference (docs/hooks/tool_reference.py) is checked against a `tools/list` taken here,
independently, through fastmcp's Client; the Python API page against `stac_gdal_mcp.__all__`.
The site is opened from disk in Debian's Chromium (as the README says: `make docs`, then open
`site/index.html`): its links lead to pages, not directory listings.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp import Client

import stac_gdal_mcp
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.settings import load_settings

pytestmark = pytest.mark.testbed  # runs mkdocs in a subprocess

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
    env["NO_MKDOCS_2_WARNING"] = "1"
    # Not -q: mkdocs counts warnings for --strict only when they are logged.
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    problems = [line for line in proc.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert proc.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        problems or [proc.stderr[-3000:]]
    )
    return out


LISTINGS = ("tools", "resources", "templates", "prompts")  # what the server lists, as the hook names it


@pytest.fixture(scope="module")
async def listings(tmp_path_factory) -> dict:
    workspace = tmp_path_factory.mktemp("workspace")
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("STAC_GDAL_MCP_")]:
            mp.delenv(name)
        server = build_server(load_settings(default_catalog="sample", workspace=str(workspace)))
        async with Client(server) as client:
            lists = (
                client.list_tools,
                client.list_resources,
                client.list_resource_templates,
                client.list_prompts,
            )
            return {key: await list_them() for key, list_them in zip(LISTINGS, lists, strict=True)}


def _section(page: str, anchor: str) -> str:
    """The HTML from the heading with id `anchor` to the next h2 or h3."""
    start = page.find(f'id="{anchor}"')
    assert start >= 0, f"no heading #{anchor} in the page"
    end = re.compile(r"<h[23][ >]").search(page, start)
    return page[start : end.start() if end else len(page)]


def _row(section: str, name: str) -> str:
    for row in re.findall(r"<tr>.*?</tr>", section, flags=re.S):
        if re.search(rf"<td><code>{re.escape(name)}</code></td>", row):
            return row
    raise AssertionError(f"no table row for `{name}`")


def test_tool_reference_lists_every_tool_and_parameter(site, listings):
    page = (site / "tools.html").read_text()
    assert listings["tools"], "the server lists no tools"
    for tool in listings["tools"]:
        section = _section(page, tool.name)
        schema = tool.input_schema
        required = set(schema.get("required") or [])
        params = section.split("Result fields")[0]  # the parameters table comes first
        for name in schema.get("properties") or {}:
            row = _row(params, name)
            assert ("<strong>required</strong>" in row) == (name in required), (
                f"{tool.name}.{name}: required mark wrong"
            )
        if tool.annotations and tool.annotations.read_only_hint is not None:
            expected = "yes" if tool.annotations.read_only_hint else "no"
            assert f"read-only: <strong>{expected}</strong>" in section, tool.name


def test_tool_reference_lists_resources_templates_and_prompts(site, listings):
    page = html.unescape((site / "tools.html").read_text())
    for resource in listings["resources"]:
        assert f"<code>{resource.uri}</code>" in page
    for template in listings["templates"]:
        assert f"<code>{template.uri_template}</code>" in page
    for prompt in listings["prompts"]:
        section = _section(page, prompt.name)
        for argument in prompt.arguments or []:
            _row(section, argument.name)


def test_api_page_shows_every_public_name(site):
    page = (site / "api.html").read_text()
    names = getattr(stac_gdal_mcp, "__all__", [])
    missing = [name for name in names if f'id="stac_gdal_mcp.{name}"' not in page]
    assert not missing, f"stac_gdal_mcp.__all__ names missing from the API page: {missing}"


def test_site_has_the_nav_pages(site):
    for page in ["quickstart", "catalogs", "configuration", "security", "extending", "figures", "api"]:
        assert (site / f"{page}.html").is_file(), page


def test_site_works_opened_from_disk(site):
    """file://.../index.html, then its links (the nav): each opens a page with its heading, and no
    link of the site points at a directory."""
    from map_pixels import CHROMIUM_ARGS, _unavailable

    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc})")
    executable = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    if not Path(executable).exists():
        _unavailable(f"{executable} not found")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
        page = browser.new_page()
        page.goto((site / "index.html").as_uri())
        assert page.title().startswith("stac-gdal-mcp")
        hrefs = page.eval_on_selector_all("nav a[href]", "links => links.map(a => a.href)")
        local = sorted({h.split("#")[0] for h in hrefs if h.startswith("file://")})
        assert len(local) >= 8, local
        assert [h for h in local if h.endswith("/")] == [], "links to directories: a listing, not a page"
        page.click("nav >> text=Quick start")
        page.wait_for_load_state()
        assert page.url.endswith("/quickstart.html")
        assert page.locator("article h1").first.inner_text().strip()
        assert "Index of" not in page.content()
        for href in local:
            page.goto(href)
            assert page.locator("article h1").count() >= 1, href
        browser.close()
