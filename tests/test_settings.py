"""Settings from a TOML file and STAC_GDAL_MCP_* environment variables."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
    config = write(
        tmp_path,
        'builtin_catalogs = false\ndefault_catalog = "x"\n[[catalogs]]\nid = "x"\nurl = "https://example.org"\n',
    )
    assert [c.id for c in load_settings(config).catalogs] == ["x"]


@pytest.mark.parametrize(
    "text, words",
    [
        ('default_catalog = "nope"\n', "default_catalog 'nope' is not among the catalogs"),
        ('[[catalogs]]\nid = "a"\n', "give exactly one of `url` or `path`"),
        ('[[catalogs]]\nid = "a"\nurl = "ftp://x"\n', "must start with http"),
        ("[network]\ntimeout_s = -1\n", "network.timeout_s"),
        ("workspace = \n", "cannot read config file"),
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


# --- strictness: an unknown key anywhere is refused with one line naming it --------------------


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "[limits]\npage_sise = 5\n",
            "unknown key 'page_sise' in [limits]; did you mean 'page_size'?",
        ),
        (
            "[network]\ntimeout = 5\n",
            "unknown key 'timeout' in [network]; did you mean 'timeout_s'?",
        ),
        (
            'defualt_catalog = "sample"\n',
            "unknown key 'defualt_catalog' at the top level; did you mean 'default_catalog'?",
        ),
        (
            '[[catalogs]]\nid = "mine"\nurl = "https://example.org/stac"\ntitel = "Mine"\n',
            "unknown key 'titel' in [[catalogs]] entry 1 ('mine'); did you mean 'title'?",
        ),
        (
            '[plugins]\ndirectory = "/tmp"\n',
            "unknown key 'directory' in [plugins]; valid keys: dir, strict.",
        ),
    ],
)
def test_unknown_keys_in_the_file_are_refused(tmp_path, text, message):
    config = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert str(info.value) == f"config file {config}: {message}"


def test_every_unknown_key_is_named_on_one_line(tmp_path):
    config = write(tmp_path, "[limits]\npage_sise = 5\n[network]\ntimeout = 5\n")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    message = str(info.value)
    assert "\n" not in message and message.count(f"config file {config}") == 1
    assert "'page_sise' in [limits]; did you mean 'page_size'?" in message
    assert "'timeout' in [network]; did you mean 'timeout_s'?" in message


@pytest.mark.parametrize(
    "variable, value, message",
    [
        (
            "STAC_GDAL_MCP_LIMITS__PAGE_SISE",
            "5",
            "unknown key 'page_sise' in [limits]; did you mean 'page_size' (STAC_GDAL_MCP_LIMITS__PAGE_SIZE)?",
        ),
        (
            "STAC_GDAL_MCP_NETWORK",
            '{"timeout": 5}',
            "unknown key 'timeout' in [network]; did you mean 'timeout_s'?",
        ),
        # pydantic-settings alone would ignore this one
        ("STAC_GDAL_MCP_PAGE_SIZE", "5", "no such setting; did you mean STAC_GDAL_MCP_LIMITS__PAGE_SIZE?"),
    ],
)
def test_unknown_keys_in_the_environment_are_refused(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == f"environment variable {variable}: {message}"


def test_known_environment_variables_still_work(tmp_path, monkeypatch):
    for var, value in {
        "STAC_GDAL_MCP_LIMITS__PAGE_SIZE": "7",
        "STAC_GDAL_MCP_NETWORK": '{"timeout_s": 5}',
        "STAC_GDAL_MCP_TOKEN": "t",
        "STAC_GDAL_MCP_STRICT_PLUGINS": "true",
        "STAC_GDAL_MCP_WORKSPACE": str(tmp_path),
    }.items():
        monkeypatch.setenv(var, value)
    settings = load_settings()
    assert settings.limits.page_size == 7 and settings.network.timeout_s == 5
    assert (
        settings.token == "t" and settings.plugins.strict is True and settings.workspace == tmp_path.resolve()
    )


def test_unknown_keys_in_arguments_are_refused():
    with pytest.raises(ConfigError) as info:
        load_settings(limits={"page_sise": 5})
    assert str(info.value) == (
        "load_settings(limits=...): unknown key 'page_sise' in [limits]; did you mean 'page_size'?"
    )


# --- what --config names -------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists(os.devnull) or os.devnull != "/dev/null", reason="no /dev/null")
def test_dev_null_and_an_empty_file_are_an_empty_configuration(tmp_path):
    assert load_settings("/dev/null").limits.page_size == 20
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert load_settings(empty).default_catalog == "earth-search"


def test_a_directory_or_a_device_is_not_a_config_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    assert str(info.value) == f"config file {tmp_path} is a directory, not a TOML file"
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(ConfigError, match="is not a regular file"):
            load_settings(fifo)  # refused before anything opens it (which would block)


# --- the command line ------------------------------------------------------------------------------


def run_cli(*args):
    repo = str(Path(__file__).parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("STAC_GDAL_MCP_")}
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "stac_gdal_mcp", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.mark.testbed  # a subprocess
def test_no_command_prints_the_help():
    done = run_cli()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: stac-gdal-mcp")
    for words in ("serve", "run the MCP server", "demo", "offline tour", "--version"):
        assert words in done.stdout
    assert "error" not in done.stderr


@pytest.mark.testbed  # a subprocess
def test_every_serve_flag_has_help_text():
    done = run_cli("serve", "--help")
    assert done.returncode == 0, done.stderr
    assert "streamable HTTP at /mcp" in done.stdout  # --transport
    assert "HTTP port (default 8000" in done.stdout  # --port
    options = re.findall(r"^  (--[a-z-]+)(.*)$", done.stdout, flags=re.M)
    assert {name for name, _ in options} >= {"--transport", "--host", "--port", "--config", "--workspace"}
    described = re.split(r"\n  (?=--)", done.stdout.split("options:", 1)[1])
    assert all(len(block.split()) > 2 for block in described if block.strip().startswith("--"))


@pytest.mark.testbed  # a subprocess
def test_serve_reports_a_config_typo_on_stderr(tmp_path):
    config = write(tmp_path, "[limits]\npage_sise = 5\n")
    done = run_cli("serve", "--config", str(config))
    assert done.returncode == 2 and done.stdout == ""  # stdout is the MCP protocol
    assert done.stderr.strip() == (
        f"stac-gdal-mcp: config file {config}: unknown key 'page_sise' in [limits]; did you mean 'page_size'?"
    )


def _setting_names(model, prefix=""):
    """(dotted name, in a list of entries?) of every field of a settings model, recursively."""
    import typing

    from pydantic import BaseModel

    for name, field in model.model_fields.items():
        yield prefix + name, False
        outer = typing.get_origin(field.annotation)
        for kind in [field.annotation, *typing.get_args(field.annotation)]:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                if outer is list:  # [[catalogs]] entries: their keys are named as such
                    yield from ((n, True) for n, _ in _setting_names(kind))
                else:
                    yield from _setting_names(kind, prefix + name + ".")


def test_every_setting_is_in_the_configuration_doc():
    """docs/configuration.md names every field of Settings (sections as `network.timeout_s`,
    keys of list entries such as [[catalogs]] as `key` or `key = ...`), so it cannot drift."""
    from stac_gdal_mcp.settings import Settings

    doc = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    sections = {n for n, _ in _setting_names(Settings) if "." in n}
    sections = {n.rsplit(".", 1)[0] for n in sections}
    missing = [
        name
        for name, entry_key in _setting_names(Settings)
        if name not in sections
        and f"`{name}`" not in doc
        and not (entry_key and re.search(rf"^#?\s*{re.escape(name)} = |`{re.escape(name)}`", doc, re.M))
    ]
    assert missing == [], f"settings not named in docs/configuration.md: {missing}"


def test_a_signed_parquet_url_is_a_geoparquet_catalog():
    """The kind comes from the URL's path: a query (a signature) after `.parquet` does not make it an API."""
    from stac_gdal_mcp.settings import CatalogConfig

    signed = CatalogConfig(id="gp", url="https://example.org/snap/items.parquet?sv=2024&sig=abc")
    assert signed.kind == "geoparquet"
    assert CatalogConfig(id="api", url="https://example.org/stac/v1").kind == "api"


@pytest.mark.parametrize(
    "address", ["not an address", "file:///etc/passwd", "tcp://" + "x" * 10_240, "tcp://host", "tcp://host:0"]
)
def test_a_dask_scheduler_that_is_not_an_address_is_refused_at_load(address, monkeypatch):
    """One line naming the setting, the value shown shortened: every call on the cluster would
    otherwise fail (bare) later. From an argument and from the environment alike."""
    with pytest.raises(ConfigError) as info:
        load_settings(dask_scheduler=address)
    text = str(info.value)
    assert text.startswith("dask_scheduler ") and "tcp://host:port" in text, text
    assert "\n" not in text and len(text) < 300, text
    monkeypatch.setenv("STAC_GDAL_MCP_DASK_SCHEDULER", address)
    with pytest.raises(ConfigError, match="is not a dask scheduler address"):
        load_settings()


@pytest.mark.parametrize(
    "address",
    ["tcp://127.0.0.1:8786", "127.0.0.1:8786", "tls://scheduler.example.org:8786", "tcp://[::1]:8786"],
)
def test_dask_scheduler_addresses_are_accepted(address):
    assert load_settings(dask_scheduler=address).dask_scheduler == address
