"""Plugins: loaded from a directory and from an installed entry point, collisions, containment,
strict mode, call-time errors - all through a fastmcp Client talking to build_server()."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp import Client
from helpers import DISCOVERY_TOOLS

from stac_gdal_mcp.errors import ConfigError
from stac_gdal_mcp.server import build_server, build_server_parts
from stac_gdal_mcp.server.extensions import ExtensionError
from stac_gdal_mcp.settings import load_settings

PLUGINS = Path(__file__).parent / "plugins"
ECHO_SERVER = Path(__file__).parent / "external_servers" / "echo_server.py"
CORE_TOOLS = set(DISCOVERY_TOOLS)


@pytest.fixture
def local_catalog(tmp_path):
    """A local ItemCollection whose items fall in two collections we know."""
    items = [
        {
            "type": "Feature",
            "stac_version": "1.0.0",
            "id": f"item-{i}",
            "collection": cid,
            "geometry": {"type": "Point", "coordinates": [0, 0]},
            "bbox": [0, 0, 0, 0],
            "properties": {"datetime": "2024-01-01T00:00:00Z"},
            "links": [],
            "assets": {},
        }
        for i, cid in enumerate(["acme-b", "acme-a", "acme-b"])
    ]
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    return {"id": "mine", "path": str(path)}


def settings_with(tmp_path, **overrides):
    return load_settings(workspace=tmp_path / "workspace", **overrides)


def extensions_by_name(result) -> dict:
    return {e["name"]: e for e in result.structured_content["extensions"]}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_directory_plugin_tools_work_and_are_listed(build, tmp_path, local_catalog, mode):
    mcp = build(settings_with(tmp_path, plugins={"dir": PLUGINS / "good"}, catalogs=[local_catalog]))
    async with Client(mcp, mode=mode) as client:
        names = {t.name for t in await client.list_tools()}
        namespaced = {f"acme_{tool}" for tool in ("echo", "collection_ids", "fail", "collection")}
        assert namespaced | {"list_extensions"} <= names
        assert names >= CORE_TOOLS

        assert (await client.call_tool("acme_echo", {"text": "stac"})).data == "cats"
        ids = await client.call_tool("acme_collection_ids", {"catalog": "mine"})
        assert ids.data == ["acme-a", "acme-b"]  # the collections of the items we wrote

        listed = extensions_by_name(await client.call_tool("list_extensions", {}))
    acme = listed["acme_tools"]
    assert acme["kind"] == "plugin" and acme["status"] == "loaded" and acme["error"] is None
    assert acme["version"] == "0.3.0"
    assert acme["source"] == f"file {PLUGINS / 'good' / 'acme_tools.py'}"
    assert acme["tools"] == ["acme_echo", "acme_collection_ids", "acme_fail", "acme_collection"]
    assert acme["capabilities"] == {"cloud_mask": {"sensors": ["sentinel-2"], "method": "threshold"}}
    # _private.py, no_register.py, nested/deep.py and notes.txt are not plugins
    assert set(listed) == {"acme_tools"}


async def test_plugin_tool_annotations_and_schema_come_from_the_function(build, tmp_path):
    mcp = build(settings_with(tmp_path, plugins={"dir": PLUGINS / "good"}))
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
    echo = tools["acme_echo"]
    assert echo.annotations.read_only_hint is True
    assert echo.input_schema["properties"]["text"]["description"] == "any text"
    assert echo.input_schema["required"] == ["text"]
    assert echo.description.startswith("Return the text, reversed.")


async def test_plugin_dir_from_environment_alias(build, tmp_path, monkeypatch):
    monkeypatch.setenv("STAC_GDAL_MCP_PLUGIN_DIR", str(PLUGINS / "good"))
    mcp = build(settings_with(tmp_path))
    async with Client(mcp) as client:
        assert (await client.call_tool("acme_echo", {"text": "ab"})).data == "ba"


async def test_installed_entry_point_plugin(build, tmp_path, monkeypatch):
    from importlib.metadata import entry_points

    monkeypatch.syspath_prepend(str(PLUGINS / "installed"))
    # the fixture distribution is found by importlib.metadata, as pip-installed packages are
    assert [ep.value for ep in entry_points(group="stac_gdal_mcp.plugins")] == ["acme_installed:register"]

    mcp = build(settings_with(tmp_path))
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["acme_installed_ping"].description == "Answer with a pong."
        assert tools["acme_bbox_area"].annotations.read_only_hint is True
        assert tools["acme_bbox_area"].annotations.open_world_hint is False
        assert (await client.call_tool("acme_installed_ping", {})).data == "pong from acme_installed"
        area = await client.call_tool("acme_bbox_area", {"bbox": [10.0, 40.0, 12.5, 44.0]})
        assert area.data == pytest.approx(2.5 * 4.0)
        listed = extensions_by_name(await client.call_tool("list_extensions", {}))
    acme = listed["acme"]
    assert acme["status"] == "loaded"
    assert acme["version"] == "1.2.3"
    assert acme["source"] == "entry point acme = acme_installed:register (acme-installed 1.2.3)"
    assert acme["tools"] == ["acme_installed_ping", "acme_bbox_area"]


async def test_broken_plugins_are_skipped_and_startup_continues(build, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="stac_gdal_mcp")
    mcp = build(settings_with(tmp_path, plugins={"dir": PLUGINS / "broken"}))
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
        listed = extensions_by_name(await client.call_tool("list_extensions", {}))
        assert (await client.call_tool("zz_ping", {})).data == "pong"

    assert listed["zz_fine"]["status"] == "loaded"
    failed = {name: e["error"] for name, e in listed.items() if e["status"] == "failed"}
    assert set(failed) == {"bad_import", "bad_register", "too_new", "steals_core_name"}
    assert failed["bad_import"] == (
        "cannot be imported: ModuleNotFoundError: No module named 'stac_gdal_mcp_dependency_that_does_not_exist'"
    )
    assert failed["bad_register"] == "register() raised RuntimeError: ACME_HOME is not set"
    assert failed["too_new"] == "incompatible: needs stac-gdal-mcp >= 99.0, this is 0.1.0"
    steals = PLUGINS / "broken" / "steals_core_name.py"
    assert failed["steals_core_name"] == (
        f"tool 'search_items' of plugin 'steals_core_name' (file {steals}) collides with 'search_items' of a core tool"
    )
    # nothing of a failed plugin is installed, and the core tool keeps its name and body
    assert "bad_register_tool" not in tools and "bad_import_tool" not in tools
    assert tools["search_items"].description.startswith("Search catalogs for items")
    # each failure is a one-line warning on the log, without a traceback
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "skipped" in r.getMessage()]
    assert len(warnings) == 4
    assert all(r.exc_info is None for r in warnings)
    assert "Traceback" not in caplog.text


async def test_plugin_versus_plugin_collision_names_both(build, tmp_path):
    mcp = build(settings_with(tmp_path, plugins={"dir": PLUGINS / "collide"}))
    async with Client(mcp) as client:
        names = {t.name for t in await client.list_tools()}
        listed = extensions_by_name(await client.call_tool("list_extensions", {}))
        assert (await client.call_tool("shared_tool", {})).data == "alpha"
    assert listed["alpha"]["status"] == "loaded"
    assert listed["beta"]["status"] == "failed"
    alpha, beta = PLUGINS / "collide" / "alpha.py", PLUGINS / "collide" / "beta.py"
    assert listed["beta"]["error"] == (
        f"tool 'shared_tool' of plugin 'beta' (file {beta}) collides with 'shared_tool' of plugin 'alpha' (file {alpha})"
    )
    assert "beta_other" not in names  # a plugin is installed whole or not at all


@pytest.mark.testbed  # an external server subprocess
async def test_plugin_versus_external_server_collision_names_both(build, tmp_path):
    settings = settings_with(
        tmp_path,
        plugins={"dir": PLUGINS / "external_collide"},
        external_servers=[{"name": "echo", "script": str(ECHO_SERVER)}],
    )
    mcp = build(settings)
    async with Client(mcp) as client:
        listed = extensions_by_name(await client.call_tool("list_extensions", {}))
        # the plugin's tool keeps the name; the external server is skipped
        assert (await client.call_tool("echo_echo", {"text": "x"})).data == "x"
        names = {t.name for t in await client.list_tools()}
    assert listed["claims_echo"]["status"] == "loaded"
    assert listed["echo"]["status"] == "failed"
    plugin_file = PLUGINS / "external_collide" / "claims_echo.py"
    assert listed["echo"]["error"].startswith(
        f"tool 'echo_echo' of external server 'echo' (script {ECHO_SERVER.name}) collides with "
        f"'echo_echo' of plugin 'claims_echo' (file {plugin_file})"
    )
    assert "echo_environment" not in names


async def test_call_time_error_is_a_tool_error_without_traceback(build, tmp_path, local_catalog, caplog):
    caplog.set_level(logging.INFO)
    mcp = build(settings_with(tmp_path, plugins={"dir": PLUGINS / "good"}, catalogs=[local_catalog]))
    async with Client(mcp) as client:
        result = await client.call_tool(
            "acme_fail", {"message": "cloud mask model not found"}, raise_on_error=False
        )
        assert result.is_error
        assert result.content[0].text == (
            "tool 'acme_fail' (plugin 'acme_tools') failed: RuntimeError: cloud mask model not found"
        )
        # a core error raised inside a plugin tool reaches the client with the core's message
        missing = await client.call_tool(
            "acme_collection", {"catalog": "mine", "collection_id": "nope"}, raise_on_error=False
        )
        assert missing.is_error
        assert (
            missing.content[0].text == "collection 'nope' not found in catalog 'mine'; it has: acme-a, acme-b"
        )
        # the server is fine afterwards
        assert (await client.call_tool("acme_echo", {"text": "ok"})).data == "ko"
    assert "Traceback" not in caplog.text
    assert not any(r.exc_info for r in caplog.records)


async def test_call_time_error_traceback_only_with_debug_logging(build, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stac_gdal_mcp")
    mcp = build(settings_with(tmp_path, plugins={"dir": PLUGINS / "good"}))
    async with Client(mcp) as client:
        result = await client.call_tool("acme_fail", {"message": "boom"}, raise_on_error=False)
    assert result.is_error and "Traceback" not in result.content[0].text
    logged = [r for r in caplog.records if r.levelno == logging.WARNING and "acme_fail" in r.getMessage()]
    assert logged and logged[0].exc_info is not None and "Traceback" in caplog.text


@pytest.mark.parametrize("how", ["config", "environment"])
def test_strict_mode_refuses_to_start_and_says_why(tmp_path, monkeypatch, how):
    if how == "config":
        settings = settings_with(tmp_path, plugins={"dir": PLUGINS / "broken", "strict": True})
    else:
        monkeypatch.setenv("STAC_GDAL_MCP_PLUGIN_DIR", str(PLUGINS / "broken"))
        monkeypatch.setenv("STAC_GDAL_MCP_STRICT_PLUGINS", "true")
        settings = settings_with(tmp_path)
    assert settings.plugins.strict is True
    with pytest.raises(ExtensionError) as raised:
        build_server(settings)
    message = str(raised.value)
    assert isinstance(raised.value, ConfigError)
    assert message.startswith("strict plugin mode")
    assert (
        "plugin 'bad_register'" in message
        and "register() raised RuntimeError: ACME_HOME is not set" in message
    )
    assert "plugin 'bad_import'" in message and "ModuleNotFoundError" in message
    assert "plugin 'too_new'" in message and "incompatible" in message
    assert "plugin 'steals_core_name'" in message and "collides with 'search_items' of a core tool" in message
    assert "zz_fine" not in message


def test_strict_mode_starts_when_every_plugin_loads(tmp_path):
    parts = build_server_parts(settings_with(tmp_path, plugins={"dir": PLUGINS / "good", "strict": True}))
    assert [e.status for e in parts.extensions.entries()] == ["loaded"]


def test_missing_plugin_directory(tmp_path):
    missing = tmp_path / "no-such-dir"
    parts = build_server_parts(settings_with(tmp_path, plugins={"dir": missing}))
    [entry] = parts.extensions.entries()
    assert entry.status == "failed"
    assert entry.error == f"plugin directory {missing} does not exist or is not a directory"
    with pytest.raises(ExtensionError, match="does not exist"):
        build_server(settings_with(tmp_path, plugins={"dir": missing, "strict": True}))


@pytest.mark.testbed  # a subprocess
def test_cli_serve_refuses_to_start_in_strict_mode(tmp_path):
    env = {
        **os.environ,
        "STAC_GDAL_MCP_PLUGIN_DIR": str(PLUGINS / "broken"),
        "STAC_GDAL_MCP_STRICT_PLUGINS": "true",
        "STAC_GDAL_MCP_WORKSPACE": str(tmp_path / "workspace"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "stac_gdal_mcp.cli", "serve"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert proc.stdout == ""  # stdout is the MCP channel: nothing may be printed there
    assert "strict plugin mode" in proc.stderr and "bad_register" in proc.stderr
    assert "Traceback" not in proc.stderr


EXAMPLE_PLUGIN = Path(__file__).parent.parent / "examples" / "acme-plugin"


async def test_example_plugin_writes_an_output_with_a_record(build, tmp_path):
    """The example plugin (examples/acme-plugin) resolves two assets of a synthetic scene,
    writes NDVI as a COG through the output store, and records where it came from."""
    import numpy as np
    import rasterio

    from stac_gdal_mcp.testing import synthetic

    scenes = tmp_path / "scenes"
    item, _ = synthetic.write_scene(
        "sentinel-2-l2a", scenes, "S2X_TEST_NDVI", "2024-06-01T10:00:00Z", size_px=64, href_base=str(scenes)
    )
    catalog_file = scenes / "items.json"
    catalog_file.write_text(json.dumps({"type": "FeatureCollection", "features": [item]}))
    settings = settings_with(
        tmp_path,
        plugins={"dir": EXAMPLE_PLUGIN},
        catalogs=[{"id": "scenes", "path": str(catalog_file)}],
        default_catalog="scenes",
    )
    mcp = build(settings)
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["acme_normalized_difference"].annotations.read_only_hint is False
        result = await client.call_tool(
            "acme_normalized_difference",
            {
                "collection_id": "sentinel-2-l2a",
                "item_id": "S2X_TEST_NDVI",
                "a": "nir",
                "b": "red",
                "output_name": "ndvi.tif",
            },
        )
        listed = extensions_by_name(await client.call_tool("list_extensions", {}))
    assert listed["acme_stac_plugin"]["version"] == "1.0.0"
    assert listed["acme_stac_plugin"]["capabilities"]["spectral_index"]["formula"] == "(a - b) / (a + b)"

    summary = result.structured_content
    store = build.parts(mcp).session.outputs
    record = store.get(summary["id"])
    out_path = store.path(summary["id"])
    assert out_path.parent == settings.workspace / "outputs" and out_path.name == "ndvi.tif"
    derived = {link.href for link in record.links if link.rel == "derived_from"}
    assert {item["assets"]["nir"]["href"], item["assets"]["red"]["href"]} <= derived

    # the truth, computed here from the two COGs and the item's scale/offset
    def reflectance(key):
        band = item["assets"][key]["raster:bands"][0]
        with rasterio.open(item["assets"][key]["href"]) as src:
            dn = src.read(1).astype("float64")
        return np.where(dn == band["nodata"], np.nan, dn * band["scale"] + band["offset"])

    nir, red = reflectance("nir"), reflectance("red")
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(nir + red != 0, (nir - red) / (nir + red), np.nan)
    with rasterio.open(out_path) as src:
        written = src.read(1)
        assert src.driver == "GTiff" and src.profile["tiled"] and src.crs.to_epsg() == 32633
        with rasterio.open(item["assets"]["nir"]["href"]) as nir_src:
            assert src.transform == nir_src.transform
    from rio_cogeo.cogeo import cog_validate

    assert cog_validate(str(out_path))[0]
    assert np.isnan(written).sum() == np.isnan(expected).sum()
    np.testing.assert_allclose(written, expected, rtol=1e-5, atol=1e-6, equal_nan=True)
