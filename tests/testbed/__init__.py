"""Real services the test suite starts on 127.0.0.1.

- `start_pgstac()`: PostgreSQL/PostGIS + pgstac + stac-fastapi-pgstac (a real STAC API).
- `serve_directory()`: a Range-capable HTTP server for COGs that counts the bytes it serves.

Both are plain context managers; tests/conftest.py wraps them in fixtures.
"""

import contextlib
import os
import tempfile

from .pgstac import PgstacAPI, TestbedUnavailable, start_pgstac
from .rangeserver import RangeServer, serve_directory


@contextlib.contextmanager
def pgstac_for_pytest():
    """`start_pgstac` for a pytest fixture: a test bed that cannot start skips the tests that
    need it, except under CI=true, where it fails them. The cluster lives under the system temp
    dir, which the `postgres` user can reach when we run as root."""
    import pytest

    try:
        with start_pgstac(tempfile.gettempdir()) as api:
            yield api
    except TestbedUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"pgstac test bed did not start (CI=true makes this a failure): {exc}")
        pytest.skip(f"pgstac test bed unavailable: {exc}")


__all__ = [
    "PgstacAPI",
    "RangeServer",
    "TestbedUnavailable",
    "pgstac_for_pytest",
    "serve_directory",
    "start_pgstac",
]
