"""What a newcomer reads: the README says how to run the notebooks, and the way it says works
(the Makefile target installs the `notebooks` extra the package declares)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_says_how_to_run_the_notebooks():
    readme = (ROOT / "README.md").read_text()
    assert "make notebooks" in readme and '".[notebooks]"' in readme
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\nnotebooks:", 1)[1].split("\n\n", 1)[0]
    assert '".[notebooks]"' in target and "jupyter lab" in target
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("jupyterlab") for req in extras["notebooks"])
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))  # there are notebooks to run


async def test_the_map_basemap_comes_from_settings_and_is_declared_in_the_csp(make_settings, build, tmp_path):
    """[map] basemap: the public default (OpenStreetMap, credited), a URL of one's own, or off."""
    import json
    import re

    from fastmcp import Client

    from stac_gdal_mcp.server.map_app import MAP_URI

    async def page_of(**map_settings):
        mcp = build(make_settings(map=map_settings) if map_settings else make_settings())
        async with Client(mcp) as client:
            (content,) = await client.read_resource(MAP_URI)
            listed = {str(r.uri): r for r in await client.list_resources()}
        found = re.search(
            r'<script type="application/json" id="map-config">(.*?)</script>', content.text, re.S
        )
        config = json.loads(found.group(1)) if found else {}
        csp = ((listed[MAP_URI].meta or {}).get("ui") or {}).get("csp") or {}
        return config, csp

    config, csp = await page_of()
    assert config["basemap"] == {
        "url": "https://tile.openstreetmap.org/{z}/{x}/{y}.png",
        "attribution": "© OpenStreetMap contributors",
    }
    assert csp.get("resourceDomains") == ["https://tile.openstreetmap.org"]
    config, csp = await page_of(basemap="http://127.0.0.1:8123/{z}/{x}/{y}.png", attribution="local tiles")
    assert config["basemap"] == {"url": "http://127.0.0.1:8123/{z}/{x}/{y}.png", "attribution": "local tiles"}
    assert csp.get("resourceDomains") == ["http://127.0.0.1:8123"]
    config, csp = await page_of(basemap="")
    assert "basemap" not in config and not csp.get("resourceDomains")


GUIDES = ("discovery.md", "processing.md", "analysis.md", "catalogs.md", "configuration.md")


def test_the_guides_name_no_source_paths_nor_issue_numbers():
    """A user guide says what to pass and what comes back: the package's source paths belong to
    architecture.md, the issue that made a feature to the commit log."""
    import re

    found = []
    for name in GUIDES:
        for number, line in enumerate((ROOT / "docs" / name).read_text().splitlines(), start=1):
            if re.search(r"stac_gdal_mcp/|\bissues? \d+|\(#\d+\)|^Core: ", line):
                found.append(f"{name}:{number}: {line.strip()[:80]}")
    assert found == []
