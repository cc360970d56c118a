"""Settings from a TOML file and STAC_GDAL_MCP_* environment variables."""

from __future__ import annotations

import pytest

from stac_gdal_mcp.errors import ConfigError
from stac_gdal_mcp.settings import load_settings

TOML = """
workspace = "{ws}"
default_catalog = "mine"

[network]
allow_private_hosts = true
timeout_s = 12

[limits]
max_items = 50
page_size = 5

[[catalogs]]
id = "mine"
path = "{path}"
headers = {{ Authorization = "env:MY_TOKEN" }}

[[catalogs]]
id = "earth-search"
url = "https://example.org/stac"
"""


def write(tmp_path, text=None):
    config = tmp_path / "config.toml"
    config.write_text(text or TOML.format(ws=tmp_path / "ws", path=tmp_path / "catalog.json"))
    return config


def test_toml_file_extends_and_replaces_builtin_catalogs(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "secret-123")
    settings = load_settings(write(tmp_path))
    ids = [c.id for c in settings.catalogs]
    assert ids == ["earth-search", "planetary-computer", "usgs-landsat", "sample", "mine"]
    assert settings.catalog("earth-search").url == "https://example.org/stac"  # replaced
    assert settings.catalog(None).id == "mine"
    assert settings.catalog("mine").resolved_headers() == {"Authorization": "secret-123"}
    assert settings.network.allow_private_hosts is True and settings.network.timeout_s == 12
    assert settings.limits.max_items == 50 and settings.limits.page_size == 5
    assert settings.workspace == (tmp_path / "ws").resolve()


def test_environment_overrides_file(tmp_path, monkeypatch):
    monkeypatch.setenv("STAC_GDAL_MCP_CONFIG", str(write(tmp_path)))
    monkeypatch.setenv("STAC_GDAL_MCP_LIMITS__PAGE_SIZE", "7")
    monkeypatch.setenv("STAC_GDAL_MCP_DEFAULT_CATALOG", "sample")
    monkeypatch.setenv("STAC_GDAL_MCP_PLUGIN_DIR", str(tmp_path))
    settings = load_settings()
    assert settings.limits.page_size == 7 and settings.limits.max_items == 50
    assert settings.default_catalog == "sample"
    assert settings.plugins.dir == tmp_path


def test_builtin_catalogs_can_be_dropped(tmp_path):
    config = write(tmp_path, f'builtin_catalogs = false\ndefault_catalog = "x"\n[[catalogs]]\nid = "x"\nurl = "https://example.org"\n')
    assert [c.id for c in load_settings(config).catalogs] == ["x"]


@pytest.mark.parametrize(
    "text, words",
    [
        ('default_catalog = "nope"\n', "default_catalog 'nope' is not among the catalogs"),
        ('[[catalogs]]\nid = "a"\n', "give exactly one of `url` or `path`"),
        ('[[catalogs]]\nid = "a"\nurl = "ftp://x"\n', "must start with http"),
        ('[network]\ntimeout_s = -1\n', "network.timeout_s"),
        ('workspace = \n', "cannot read config file"),
        ('colour = "blue"\n', "colour"),
    ],
)
def test_invalid_configuration_is_explained(tmp_path, text, words):
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text))
    assert words in str(info.value)


def test_missing_config_file_and_env_header(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")
    monkeypatch.delenv("MY_TOKEN", raising=False)
    settings = load_settings(write(tmp_path))
    with pytest.raises(ConfigError, match="MY_TOKEN"):
        settings.catalog("mine").resolved_headers()
