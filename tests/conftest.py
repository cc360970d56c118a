"""Shared fixtures: the real services the suite starts on 127.0.0.1, and settings for tests.
(Shared helper functions are in helpers.py.)

- `pgstac_api` (session): PostgreSQL/PostGIS + pgstac + stac-fastapi-pgstac. Each test module
  loads its own collections (unique ids) with `pgstac_api.load(collections, items)`.
  Locally, a test bed that cannot start skips the tests that need it; under CI=true it fails.
- `cog_server` (session): a Range-capable HTTP server over `cog_server.root`, counting bytes.
  GDAL caches /vsicurl/ reads per process: write fresh file names, never rewrite one.
- `make_settings(**overrides)`: settings with a fresh workspace and private hosts allowed
  (the test services are on loopback).
- `build(settings)`: `build_server(settings)`, its session closed at the end of the test (which
  stops any external MCP server it started); `build.parts(mcp)` gives the `ServerParts` (the
  server's session and extensions).
"""

from __future__ import annotations

import pytest
from helpers import scaled

from testbed import pgstac_for_pytest, serve_directory

# What starts services: a test using one of these fixtures (directly or through another fixture),
# or in a module that imports one of the test bed's servers, is in the `testbed` lane;
# `pytest -m "not testbed"` runs the rest, the fast unit lane. Modules and tests that start
# subprocesses or a browser carry the mark themselves.
SERVICES = {"pgstac_api", "cog_server"}
SERVERS = ("serve_faults", "serve_directory", "serve_mini_api", "pgstac_for_pytest", "start_pgstac")


def pytest_collection_modifyitems(config, items):
    # The long fuzzing lane is deselected (not skipped) unless `-m` names it: `pytest -m fuzz`.
    if "fuzz" not in (config.getoption("-m") or ""):
        long_lane = [item for item in items if item.get_closest_marker("fuzz")]
        if long_lane:
            config.hook.pytest_deselected(items=long_lane)
            items[:] = [item for item in items if not item.get_closest_marker("fuzz")]
    for item in items:
        module = getattr(item, "module", None)
        if SERVICES & set(getattr(item, "fixturenames", ())) or any(hasattr(module, s) for s in SERVERS):
            item.add_marker(pytest.mark.testbed)


@pytest.fixture(scope="session")
def pgstac_api():
    with pgstac_for_pytest() as api:
        yield api


@pytest.fixture(scope="session")
def cog_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("cogs")
    with serve_directory(root) as server:
        server.root = root
        yield server


@pytest.fixture
def make_settings(tmp_path):
    from stac_gdal_mcp.settings import load_settings

    def make(**overrides):
        overrides.setdefault("workspace", tmp_path / "workspace")
        # HTTP timeouts scaled for CI and loaded machines (helpers.TIME_SCALE): an innocent read must not
        # hit a timeout meant for a stalled server
        network = {"allow_private_hosts": True, "timeout_s": scaled(10), "max_retries": 2}
        network.update(overrides.pop("network", {}))
        return load_settings(network=network, **overrides)

    return make


@pytest.fixture
def make_testbed_session(make_settings, pgstac_api):
    """Sessions on the pgstac test bed's catalog, its default, with settings `overrides`."""
    from stac_gdal_mcp import Session

    def make(**overrides):
        catalogs = [{"id": "testbed", "url": pgstac_api.url}]
        return Session(make_settings(catalogs=catalogs, default_catalog="testbed", **overrides))

    return make


@pytest.fixture
def testbed_session(make_testbed_session):
    """A Session on the pgstac test bed's catalog (the module's `scenes` loaded first)."""
    return make_testbed_session()


@pytest.fixture
def build():
    from stac_gdal_mcp.server import build_server_parts

    built = {}

    def make(settings):
        parts = build_server_parts(settings)
        built[id(parts.mcp)] = parts
        return parts.mcp

    make.parts = lambda mcp: built[id(mcp)]
    yield make
    for parts in built.values():
        parts.session.close()
