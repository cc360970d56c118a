"""Real services the test suite starts on 127.0.0.1.

- `start_pgstac()`: PostgreSQL/PostGIS + pgstac + stac-fastapi-pgstac (a real STAC API).
- `serve_directory()`: a Range-capable HTTP server for COGs that counts the bytes it serves.

Both are plain context managers; tests/conftest.py wraps them in fixtures.
"""

from .pgstac import PgstacAPI, TestbedUnavailable, start_pgstac
from .rangeserver import RangeServer, serve_directory

__all__ = [
    "PgstacAPI",
    "RangeServer",
    "TestbedUnavailable",
    "serve_directory",
    "start_pgstac",
]
