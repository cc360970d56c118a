"""External MCP servers over stdio: validate an entry, start the child in a minimal environment,
keep its session, and report what happened to it.

Each server runs as a child process that we talk to over its stdin/stdout. It is started once, at
startup, on the extension host's event loop (see host.py) and kept for the life of the server.
A server that fails to start or dies is not restarted: its tools answer with a clear error and
list_extensions shows why. Its stderr goes through a pipe into a ring buffer in memory (the last
STDERR_KEEP bytes; nothing on disk, however much it writes), whose last lines (redacted) are quoted
when it fails. Its stdout is read by a thread of its own (stdio.py), one message at most
`max_message_bytes`: a longer answer is dropped unread and its request fails with a clear error.
Every request is bounded by the entry's `timeout_s`. list_extensions and the log show the program's name and its number of arguments,
not the arguments (they may hold secrets), unless the entry sets `show_args = true`.
"""

import contextlib
import logging
import os
import re
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ConfigError
from ...settings import ExternalServerConfig
from .errors import ExternalServerError
from .redact import argv_secrets, redact, redact_argv
from .report import ExtensionInfo

log = logging.getLogger("stac_gdal_mcp.server.extensions")

NAMESPACE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
KNOWN_KEYS = set(ExternalServerConfig.model_fields)
STDERR_KEEP = 64 * 1024  # bytes of a child's stderr kept in memory (the most recent)
MESSAGE_FACTOR = 16  # a message from a child may be this many times its max_result_bytes (+ 1 MiB)


@dataclass
class LaunchSpec:
    """A validated entry: what to run, where, with which environment."""

    config: ExternalServerConfig
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    secrets: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def shown(self) -> str:
        """The command as logs and list_extensions show it: the program's name and the number
        of its arguments (a script: its file name), or - with `show_args` - the whole command
        line with secrets masked. Never the folders it lives in."""
        if self.config.show_args:
            return redact_argv(self.argv, self.secrets)
        if self.config.script is not None:
            return f"script {Path(self.config.script).name}"
        count = len(self.argv) - 1
        hidden = f" ({count} argument{'s' if count != 1 else ''} not shown)" if count else ""
        return f"{Path(self.argv[0]).name}{hidden}"


def launch_spec(config: ExternalServerConfig, environ: dict[str, str] | None = None) -> LaunchSpec:
    """Validate one [[external_servers]] entry; raise ConfigError saying what is wrong."""
    name = config.name
    where = f"external server '{name}'"
    if not NAMESPACE.match(name):
        raise ConfigError(
            f"{where}: name must start with a letter and contain only letters, digits and '-' "
            "(at most 32 characters); it becomes the prefix of its tools: <name>_<tool>"
        )
    extra = set(config.model_extra or {})
    if "url" in extra:
        raise ConfigError(
            f"{where}: `url` is not supported; external servers are started over stdio with `cmd` or `script`"
        )
    if extra - KNOWN_KEYS:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(extra))}; known keys: {', '.join(sorted(KNOWN_KEYS))}"
        )
    if (config.cmd is None) == (config.script is None):
        raise ConfigError(
            f"{where}: give exactly one of `cmd` (a command line as a list) or `script` (a path)"
        )
    cwd = None
    if config.cwd is not None:
        cwd_path = Path(config.cwd).expanduser()
        if not cwd_path.is_dir():
            raise ConfigError(f"{where}: cwd {config.cwd} does not exist or is not a directory")
        cwd = str(cwd_path.resolve())
    env = config.child_env(environ)
    if config.cmd is not None:
        argv = _cmd_argv(config.cmd, where, env, cwd)
    else:
        argv = _script_argv(config.script, where, cwd)
    # env values and argv secrets: masked wherever the child's words reach us (its stderr tail)
    secrets = [value for key, value in env.items() if key in config.env] + argv_secrets(argv[1:])
    if config.tools is not None and not all(isinstance(t, str) and t for t in config.tools):
        raise ConfigError(f"{where}: `tools` must be a list of tool names")
    return LaunchSpec(config=config, argv=argv, env=env, cwd=cwd, secrets=secrets)


def _cmd_argv(cmd: list[str], where: str, env: dict[str, str], cwd: str | None) -> list[str]:
    if not cmd or any(not isinstance(part, str) or not part.strip() for part in cmd):
        raise ConfigError(
            f'{where}: `cmd` must be a non-empty list of non-blank strings, e.g. ["node", "server.js"]'
        )
    program = cmd[0]
    if os.sep in program:
        path = Path(cwd or ".", program) if not os.path.isabs(program) else Path(program)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"{where}: {program} is not an executable file")
        return [str(path.absolute()), *cmd[1:]]
    found = shutil.which(program, path=env.get("PATH"))
    if found is None:
        raise ConfigError(f"{where}: program '{program}' was not found on PATH")
    return [found, *cmd[1:]]


def _script_argv(script: str, where: str, cwd: str | None) -> list[str]:
    path = Path(script).expanduser()
    if not path.is_absolute():
        path = Path(cwd or ".") / path
    path = path.resolve()
    if not path.is_file():
        raise ConfigError(f"{where}: script {script} does not exist")
    if path.suffix == ".py":
        return [sys.executable, str(path)]
    if path.suffix == ".sh":
        return [shutil.which("sh") or "/bin/sh", str(path)]
    if not os.access(path, os.X_OK):
        raise ConfigError(
            f"{where}: script {script} is neither .py nor .sh and is not executable (chmod +x it)"
        )
    return [str(path)]


class ExternalServer:
    """One child MCP server and our session with it. Async methods run on the host loop."""

    def __init__(self, spec: LaunchSpec):
        self.spec = spec
        self.status = "stopped"
        self.error: str | None = None
        self.notes: list[str] = []
        self.client = None
        self.tools: list = []  # mcp.types.Tool, after the allow-list
        self.resources: list = []
        self.templates: list = []
        self.prompts: list = []
        self._stderr_mark = 0
        self.exposed: tuple[list[str], list[str], list[str]] = (
            [],
            [],
            [],
        )  # tool names, resource URIs, prompts
        self.stderr = StderrRing(STDERR_KEEP)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def timeout_s(self) -> float:
        return self.spec.config.timeout_s

    @property
    def max_message_bytes(self) -> int:
        """The longest message read from the child; a longer one is dropped unread (results are
        then cut to max_result_bytes: JSON escaping and the structured copy need the room)."""
        return MESSAGE_FACTOR * self.spec.config.max_result_bytes + 2**20

    def redact(self, text: str) -> str:
        return redact(text, self.spec.secrets)

    async def start(self) -> None:
        """Start the child, open the session, list what it offers. Never raises: a failure is
        recorded in `status`/`error`."""
        import anyio
        from fastmcp import Client

        from .stdio import BoundedStdioTransport

        spec = self.spec
        log.info(
            "starting external server %s: %s (cwd %s; environment: %s)",
            self.name,
            spec.shown,
            spec.cwd or os.getcwd(),
            ", ".join(sorted(spec.env)) or "empty",
        )
        transport = BoundedStdioTransport(
            spec.argv, spec.env, spec.cwd, self.stderr.open_writer(), self.max_message_bytes
        )
        # Requests are timed by `request` (anyio.fail_after), so the client sets no timeout of its own.
        self.client = Client(transport, name="stac-gdal-mcp", init_timeout=self.timeout_s)
        try:
            with anyio.fail_after(self.timeout_s):
                await self.client.__aenter__()
                self.status = "running"
                tools = await self._list(self.client.list_tools)
                self.resources = await self._list(self.client.list_resources)
                self.templates = await self._list(self.client.list_resource_templates)
                self.prompts = await self._list(self.client.list_prompts)
        except TimeoutError:
            await self._fail(f"failed to start: no answer within {self.timeout_s:g} s")
            return
        except Exception as exc:
            await self._fail(f"failed to start: {_describe(exc)}")
            return
        allowed = self.spec.config.tools
        if allowed is not None:
            offered = {t.name for t in tools}
            missing = [name for name in allowed if name not in offered]
            if missing:
                self.notes.append(f"allow-listed tools not offered by the server: {', '.join(missing)}")
            tools = [t for t in tools if t.name in allowed]
        self.tools = tools
        log.info("external server %s running: %d tools", self.name, len(tools))

    async def _list(self, method):
        from mcp.shared.exceptions import MCPError
        from mcp_types import METHOD_NOT_FOUND

        try:
            return await method()
        except MCPError as exc:
            if exc.error.code == METHOD_NOT_FOUND:
                return []
            raise

    async def request(self, what: str, call):
        """Send one request (`call(client)`) and map every way it can fail to ExternalServerError."""
        import anyio
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        from .stdio import OVERSIZE

        if self.status != "running":
            raise ExternalServerError(self.unavailable())
        self._stderr_mark = self._stderr_size()
        try:
            with anyio.fail_after(self.timeout_s):
                return await call(self.client)
        except TimeoutError:
            raise ExternalServerError(
                f"external server '{self.name}' did not answer {what} within {self.timeout_s:g} s"
            ) from None
        except MCPError as exc:
            if exc.error.code == OVERSIZE:
                raise ExternalServerError(
                    f"external server '{self.name}' sent an answer to {what} of more than "
                    f"{self.max_message_bytes} bytes; it was dropped "
                    f"(max_result_bytes is {self.spec.config.max_result_bytes})"
                ) from None
            if exc.error.code == CONNECTION_CLOSED or not await self._alive():
                await self._died(what)
                raise ExternalServerError(self.unavailable()) from None
            raise ExternalServerError(
                f"external server '{self.name}' returned an error for {what}: {self.redact(exc.error.message)}"
            ) from None
        except Exception as exc:
            if not await self._alive():
                await self._died(what)
                raise ExternalServerError(self.unavailable()) from None
            raise ExternalServerError(
                f"external server '{self.name}' gave an unusable answer to {what}: {self.redact(_describe(exc))}"
            ) from None

    async def _alive(self) -> bool:
        import anyio

        try:
            with anyio.fail_after(min(self.timeout_s, 5)):
                return bool(await self.client.ping())
        except Exception:
            return False

    def unavailable(self) -> str:
        return f"external server '{self.name}' is not available: {self.error or self.status}"

    async def _died(self, what: str) -> None:
        self.status = "died"
        self.error = self.redact(
            f"it stopped during {what}; its tools are unavailable until stac-gdal-mcp restarts"
        )
        await self.stderr.settled()
        self.error += self._stderr_tail(since=self._stderr_mark)
        # not a warning of its own: the failed request is logged, in one line that quotes this
        log.debug("external server %s died: %s", self.name, self.error)
        await self._close_client()

    async def _fail(self, why: str) -> None:
        self.status = "failed"
        await self.stderr.settled()
        self.error = self.redact(why) + self._stderr_tail()
        log.warning("external server %s skipped: %s", self.name, self.error)
        await self._close_client()

    def fail_now(self, why: str) -> None:
        """Record a failure found outside the host loop (e.g. a name collision); caller closes."""
        self.status = "failed"
        self.error = self.redact(why)
        log.warning("external server %s skipped: %s", self.name, self.error)

    def _stderr_size(self) -> int:
        return self.stderr.total

    def _stderr_tail(self, since: int = 0, lines: int = 3) -> str:
        """The last lines the child wrote to stderr after byte `since`, redacted, on one line."""
        text = self.stderr.since(max(since, self.stderr.total - 4096)).decode("utf-8", "replace")
        tail = [" ".join(line.split()) for line in text.splitlines()]
        tail = [line for line in tail if line.strip(" │╭╮╰╯─❱")][-lines:]
        return f" (its stderr ended with: {self.redact(' | '.join(tail))})" if tail else ""

    async def _close_client(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                await client.close()
            except Exception as exc:  # a dead child can fail to close cleanly; nothing to do
                log.debug("closing external server %s: %s", self.name, exc)

    async def stop(self) -> None:
        if self.status == "running":
            self.status = "stopped"
        await self._close_client()
        self.stderr.close()

    def info(self) -> ExtensionInfo:
        """What list_extensions shows (`exposed` is set when its components are mounted)."""
        tools, resources, prompts = self.exposed if self.status in ("running", "died") else ([], [], [])
        error = "; ".join(self.notes) if self.status == "running" and self.notes else self.error
        return ExtensionInfo(
            kind="external_server",
            name=self.name,
            source=self.spec.shown,
            status=self.status,
            error=error,
            tools=tools,
            resources=resources,
            prompts=prompts,
            trusted=self.spec.config.trusted,
        )


class StderrRing:
    """A child's stderr: the write end of a pipe for the child, and a thread that reads the other
    end into memory, keeping the last `keep` bytes. `total` counts every byte ever written."""

    def __init__(self, keep: int):
        self.keep = keep
        self.total = 0
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._writer = None
        self._reader: threading.Thread | None = None
        self._read_fd: int | None = None

    def open_writer(self):
        """A file object on the pipe's write end, for the child's stderr (opened once)."""
        if self._writer is None:
            read_fd, write_fd = os.pipe()
            self._read_fd = read_fd
            self._writer = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
            self._reader = threading.Thread(target=self._drain, name="external-stderr", daemon=True)
            self._reader.start()
        return self._writer

    def _drain(self) -> None:
        fd = self._read_fd
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                with self._lock:
                    self.total += len(chunk)
                    self._buffer += chunk
                    if len(self._buffer) > self.keep:
                        del self._buffer[: len(self._buffer) - self.keep]
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)

    async def settled(self, seconds: float = 0.2) -> None:
        """Give the reader a moment to take in what a child that just failed wrote (waiting in a
        worker thread: the host loop serves the other servers meanwhile)."""
        import anyio

        if self._reader is not None and self._reader.is_alive():
            await anyio.to_thread.run_sync(self._reader.join, seconds)

    def since(self, position: int) -> bytes:
        """The bytes written after `position` that are still kept."""
        with self._lock:
            start = max(0, len(self._buffer) - (self.total - position))
            return bytes(self._buffer[start:])

    def close(self) -> None:
        """Close our write end: the reader ends when the child's end closes too."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.close()


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside the wrappers fastmcp and anyio put around the
    real cause (RuntimeError "failed to connect", exception groups)."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen and len(parts) < 4:
        seen.add(id(exc))
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        text = str(exc) or type(exc).__name__
        if not any(text in p for p in parts):
            parts.append(text)
        exc = exc.__cause__ or exc.__context__
    return ": ".join(parts)
