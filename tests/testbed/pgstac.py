"""A real STAC API for tests: PostgreSQL/PostGIS + pgstac + stac-fastapi-pgstac on 127.0.0.1.

    with start_pgstac() as api:
        api.load(collections, items)
        pystac_client.Client.open(api.url).search(...)

Everything lives in a fresh temporary directory (cluster, unix socket, logs) that is removed
on exit, together with the uvicorn process and the PostgreSQL server. When something needed
is missing or does not start, `TestbedUnavailable` says why (conftest decides skip or fail).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

PG_MAJOR = "15"
DATABASE = "pgstac"
SUPERUSER = "postgres"

# Item properties tests filter and sort on; registered in pgstac.queryables so the API lists
# them and sorts numbers as numbers. (`datetime` is a column pgstac registers itself.)
DEFAULT_QUERYABLES: dict[str, dict] = {
    "eo:cloud_cover": {
        "title": "Cloud cover",
        "type": "number",
        "minimum": 0,
        "maximum": 100,
    },
    "platform": {"title": "Platform", "type": "string"},
    "constellation": {"title": "Constellation", "type": "string"},
    "proj:epsg": {"title": "EPSG code", "type": "integer"},
}
_WRAPPERS = {"number": "to_float", "integer": "to_int", "string": "to_text"}

# The extensions stac-fastapi-pgstac should enable (keys of its extension maps).
ENABLED_EXTENSIONS = "query,sort,fields,filter,pagination,collection_search,free_text"


class TestbedUnavailable(RuntimeError):
    """A test service cannot start here; the message says why."""

    __test__ = False  # not a pytest test class despite the name


@dataclass
class PgstacAPI:
    """A running stac-fastapi-pgstac API and its database."""

    url: str
    """Root URL of the STAC API, e.g. http://127.0.0.1:41234 (no trailing slash)."""
    dsn: str
    """libpq connection string of the pgstac database (superuser, trust auth)."""
    workdir: Path
    """Temporary directory holding the cluster, socket and logs (removed on exit)."""
    conformance: list[str] = field(default_factory=list)
    """Conformance classes the running API declares at /conformance."""
    startup_s: float = 0.0
    """Seconds from start_pgstac() entry until the API answered /conformance."""
    server_log: Path | None = None
    postgres_log: Path | None = None

    def conforms_to(self, fragment: str) -> bool:
        """True when a declared conformance class contains `fragment` (e.g. "item-search#sort")."""
        return any(fragment in uri for uri in self.conformance)

    def load(self, collections: Iterable[dict] = (), items: Iterable[dict] = ()) -> None:
        """Upsert collections, then items, into pgstac (the API sees them at once)."""
        from pypgstac.db import PgstacDB
        from pypgstac.load import Loader, Methods

        collections, items = list(collections), list(items)
        db = PgstacDB(dsn=self.dsn)
        try:
            with db:
                loader = Loader(db=db)
                if collections:
                    loader.load_collections(iter(collections), Methods.upsert)
                if items:
                    loader.load_items(iter(items), Methods.upsert)
        finally:
            db.close()

    def register_queryables(self, queryables: dict[str, dict]) -> None:
        """Add item-property queryables for all collections (existing names are kept)."""
        import psycopg

        with _connect(self.dsn) as conn:
            for name, definition in queryables.items():
                conn.execute(
                    """
                    INSERT INTO pgstac.queryables (name, definition, property_wrapper)
                    SELECT %s, %s::jsonb, %s
                    WHERE NOT EXISTS (SELECT 1 FROM pgstac.queryables WHERE name = %s)
                    """,
                    (
                        name,
                        psycopg.types.json.Jsonb(definition),
                        _WRAPPERS.get(definition.get("type")),
                        name,
                    ),
                )


@contextlib.contextmanager
def start_pgstac(
    parent_dir: str | os.PathLike | None = None,
    *,
    queryables: dict[str, dict] | None = None,
    context: bool = True,
    timeout_s: float = 60.0,
) -> Iterator[PgstacAPI]:
    """Start PostgreSQL + pgstac + stac-fastapi-pgstac; yield a `PgstacAPI`; tear all down.

    parent_dir: where to create the temporary directory (default: the system temp dir).
        As root, PostgreSQL runs as the `postgres` user, which must be able to reach it.
    queryables: item-property queryables to register (default DEFAULT_QUERYABLES).
    context: ask pgstac to return numberMatched in search results.
    timeout_s: how long to wait for each server to answer.
    """
    started = time.monotonic()
    bindir = _find_postgres_bindir()
    workdir = Path(tempfile.mkdtemp(prefix="pgstac-testbed-", dir=parent_dir))
    cluster = _Cluster(bindir, workdir)
    server: subprocess.Popen | None = None
    try:
        cluster.start(timeout_s)
        dsn = cluster.create_database(DATABASE)
        _migrate(dsn)
        api = PgstacAPI(url="", dsn=dsn, workdir=workdir, postgres_log=cluster.log)
        api.register_queryables(DEFAULT_QUERYABLES if queryables is None else queryables)
        if context:
            _set_pgstac_setting(dsn, "context", "on")
        server, api.url, api.server_log = _start_api(cluster.port, workdir)
        api.conformance = _wait_for_api(api.url, server, api.server_log, timeout_s)
        api.startup_s = time.monotonic() - started
        logger.info("pgstac testbed at %s ready in %.1f s", api.url, api.startup_s)
        yield api
    finally:
        if server is not None:
            _stop_process(server)
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _find_postgres_bindir() -> Path:
    bindir = Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin")
    control = Path(f"/usr/share/postgresql/{PG_MAJOR}/extension/postgis.control")
    missing = [str(p) for p in (bindir / "initdb", bindir / "pg_ctl") if not p.exists()]
    if not control.exists():
        missing.append(str(control))
    if missing:
        raise TestbedUnavailable(
            f"PostgreSQL {PG_MAJOR} + PostGIS 3 not installed (missing {', '.join(missing)}); "
            "run scripts/install-test-deps.sh"
        )
    for module in ("pypgstac", "psycopg", "stac_fastapi.pgstac", "uvicorn"):
        try:
            __import__(module)
        except ImportError as exc:
            raise TestbedUnavailable(f"python package for {module} missing: {exc}") from exc
    return bindir


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def as_postgres() -> list[str]:
    """The command prefix that runs a program as user postgres (PostgreSQL refuses root).
    runuser lives in /usr/sbin, which a minimal PATH (`env -i PATH=/usr/bin:/bin`) lacks."""
    runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
    if runuser is None:
        raise TestbedUnavailable("running as root, and runuser (util-linux) was not found to run as postgres")
    return [runuser, "-u", "postgres", "--"]


class _Cluster:
    """A throw-away PostgreSQL cluster under `workdir`, listening on 127.0.0.1 only."""

    def __init__(self, bindir: Path, workdir: Path):
        self.bindir = bindir
        self.data = workdir / "pgdata"
        self.socket_dir = workdir / "socket"
        self.log = workdir / "postgres.log"
        self.port = free_port()
        self.started = False
        self._as_postgres = os.geteuid() == 0  # PostgreSQL refuses to run as root

    def _run(self, *args: str, timeout_s: float) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = [*as_postgres(), *cmd]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TestbedUnavailable(f"{args[0]} failed: {exc}{self._log_tail()}") from exc
        if proc.returncode != 0:
            raise TestbedUnavailable(
                f"{args[0]} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}"
                f"{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        return _tail(self.log, "postgres.log")

    def start(self, timeout_s: float) -> None:
        self.socket_dir.mkdir()
        if self._as_postgres:
            workdir = self.data.parent
            shutil.chown(workdir, user="postgres")
            shutil.chown(self.socket_dir, user="postgres")
            check = subprocess.run([*as_postgres(), "test", "-w", str(workdir)])
            if check.returncode != 0:
                raise TestbedUnavailable(
                    f"user postgres cannot write {workdir}: pass a parent_dir it can reach"
                )
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
            timeout_s=timeout_s,
        )
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-p {self.port}",
                f"-k {self.socket_dir}",
                "-c fsync=off",  # test data: durability does not matter, speed does
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=50",
            ]
        )
        self._run(
            "pg_ctl",
            "start",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(int(timeout_s)),
            "-o",
            options,
            timeout_s=timeout_s + 5,
        )
        self.started = True

    def dsn(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, database: str) -> str:
        import psycopg

        try:
            with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{database}"')
        except psycopg.Error as exc:
            raise TestbedUnavailable(f"cannot create database {database}: {exc}") from exc
        return self.dsn(database)

    def stop(self) -> None:
        if not self.started:
            return
        try:
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", timeout_s=60)
        except TestbedUnavailable as exc:
            logger.warning("stopping PostgreSQL: %s", exc)
        self.started = False


def _migrate(dsn: str) -> None:
    from pypgstac.db import PgstacDB
    from pypgstac.migrate import Migrate

    db = PgstacDB(dsn=dsn)
    try:
        with db:
            version = Migrate(db).run_migration()
        logger.info("pgstac migrated to %s", version)
    except Exception as exc:  # any failure here means: no STAC API for the tests
        raise TestbedUnavailable(f"pypgstac migrate failed: {exc}") from exc
    finally:
        db.close()


def _connect(dsn: str):
    """An autocommit connection with pgstac first on the search_path (its triggers need it)."""
    import psycopg

    return psycopg.connect(dsn, autocommit=True, options="-c search_path=pgstac,public")


def _set_pgstac_setting(dsn: str, name: str, value: str) -> None:
    with _connect(dsn) as conn:
        conn.execute(
            "INSERT INTO pgstac.pgstac_settings (name, value) VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
            (name, value),
        )


def _start_api(pg_port: int, workdir: Path) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    log = workdir / "stac-fastapi.log"
    db = {
        "USER": SUPERUSER,
        "PASSWORD": "unused-trust-auth",
        "HOST": "127.0.0.1",
        "PORT": str(pg_port),
        "DATABASE": DATABASE,
    }
    inherited = os.environ.items()
    env = {key: value for key, value in inherited if not key.startswith(("PG", "POSTGRES_"))}
    env.update({f"PG{key}": value for key, value in db.items()})
    env.update(  # the names older stac-fastapi-pgstac releases read
        {
            "POSTGRES_USER": db["USER"],
            "POSTGRES_PASS": db["PASSWORD"],
            "POSTGRES_HOST_READER": db["HOST"],
            "POSTGRES_HOST_WRITER": db["HOST"],
            "POSTGRES_PORT": db["PORT"],
            "POSTGRES_DBNAME": db["DATABASE"],
            "ENABLED_EXTENSIONS": ENABLED_EXTENSIONS,
            "DB_MIN_CONN_SIZE": "1",
            "DB_MAX_CONN_SIZE": "5",
            "STAC_FASTAPI_TITLE": "stac-gdal-mcp test catalog",
            "STAC_FASTAPI_DESCRIPTION": "pgstac testbed started by the test suite",
            "STAC_FASTAPI_VERSION": "test",
            "STAC_FASTAPI_LANDING_ID": "stac-gdal-mcp-testbed",
        }
    )
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "stac_fastapi.pgstac.app:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    with open(log, "wb") as log_file:
        # cwd=workdir: pydantic-settings reads a .env from the working directory
        server = subprocess.Popen(
            cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    return server, f"http://127.0.0.1:{port}", log


def _wait_for_api(url: str, server: subprocess.Popen, log: Path, timeout_s: float) -> list[str]:
    import httpx

    deadline = time.monotonic() + timeout_s
    last_error = "no answer"
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise TestbedUnavailable(
                f"stac-fastapi-pgstac exited with {server.returncode}{_tail(log, log.name)}"
            )
        try:
            response = httpx.get(f"{url}/conformance", timeout=2.0)
            if response.status_code == 200:
                return list(response.json()["conformsTo"])
            last_error = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last_error = repr(exc)
        time.sleep(0.1)
    raise TestbedUnavailable(
        f"stac-fastapi-pgstac did not answer {url}/conformance within {timeout_s:.0f} s "
        f"({last_error}){_tail(log, log.name)}"
    )


def _stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(path: Path, label: str, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"\n--- last lines of {label} ---\n" + "\n".join(text)
