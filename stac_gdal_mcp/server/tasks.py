"""MCP tasks: long tool calls a client can start, watch, cancel and pick up later.

The `io.modelcontextprotocol/tasks` extension (SEP-2663), served by `fastmcp-tasks` on an
in-memory docket in this process. `reproject_asset`, `convert_asset`, `cloud_cover_stats`,
`time_series` and `composite` are declared with `task=TASK` ("optional"):

- a client that declares the extension and calls one of them without asking for progress
  notifications gets a task at once (`CreateTaskResult`: taskId, ttlMs, pollIntervalMs); the
  work runs in the background; `tasks/get` answers `working` with a status message
  ("42% warped strip 3/7"), then `completed` with the tool's result inlined, or `failed`
  with the error; `tasks/cancel` stops the work (the job is cancelled, its files removed);
  a finished task is kept `limits.task_ttl_s` seconds, then it is gone;
- a call that carries a progress token (the client is watching the request: it wants progress
  notifications, and cancelling the request cancels the work) runs in the foreground as
  before. fastmcp's `Client.call_tool` always sends one, so it keeps today's behaviour;
  `fastmcp_tasks.call_tool_task` (or any client that declares the extension and sends no
  progress token) gets a task;
- clients that do not speak tasks are not affected at all.

Tasks live in the server process: they survive the client disconnecting (over HTTP another
connection can poll the same taskId), not the server restarting (the in-memory backend goes with
it). (fastmcp's in-memory transport ends the server's lifespan with its last client.)
fastmcp-tasks itself (and the docket worker) is imported and started with the first task, not
when the server starts (a faster cold start: `_extension_class`).
"""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import cache

POLL_INTERVAL = timedelta(seconds=1)


@cache
def available() -> bool:
    """Whether fastmcp-tasks is installed (without it, tools run in the foreground only); found
    without importing it."""
    from importlib.util import find_spec

    return find_spec("fastmcp_tasks") is not None


def task_config():
    """`task=` for the long tools: optional task execution (None when tasks are unavailable)."""
    if not available():
        return None
    from fastmcp.utilities.tasks import TaskConfig

    return TaskConfig(mode="optional", poll_interval=POLL_INTERVAL)


def install(mcp, settings) -> None:
    """Serve the tasks extension on `mcp` (in memory; results kept limits.task_ttl_s)."""
    if not available():
        return
    mcp.add_extension(_extension_class()(ttl=timedelta(seconds=settings.limits.task_ttl_s)))


MAX_TASK_ID = 128  # characters: task ids are uuids; a longer one is refused without being echoed


@cache
def _task_params():
    """The params of tasks/get, tasks/cancel (and tasks/update): a task id, by its wire name."""
    from mcp.types import RequestParams
    from pydantic import ConfigDict, Field

    class TaskParams(RequestParams):
        model_config = ConfigDict(populate_by_name=True, extra="allow")

        task_id: str = Field(alias="taskId")

    return TaskParams


class _LazyTasks:
    """The tasks extension, started when a client first asks for a task.

    fastmcp-tasks imports pydocket, redis, cronsim and fastmcp's client (about a second of a cold
    start on a loaded 2-core machine), and its lifespan starts a docket worker before the
    server answers anything. This extension declares the same capability and methods at once, and
    imports, binds and starts fastmcp-tasks' `TasksExtension` (in memory, a queue of this server's
    own) only for the first `tasks/*` request or the first tool call that should become a task:
    one the client made as a task (it declared the extension) without a progress token - a call
    with a progress token runs in the foreground, as the client is watching it.

    The body of the class `_extension_class` makes with fastmcp's `ServerExtension` (imported only
    then, as the server starts).
    """

    def __init__(self, *, ttl: timedelta):
        self.ttl = ttl
        self._real = None  # fastmcp-tasks' TasksExtension, once started
        self._runner = None  # the asyncio task that holds the real extension's lifespan
        self._lock = self._stop = self._context = None  # per lifespan (a server may start again)
        self._running = False

    def settings(self) -> dict:
        return {}

    def methods(self):
        from fastmcp.server.extensions import MethodBinding
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        versions = frozenset(MODERN_PROTOCOL_VERSIONS)  # SEP-2663's methods exist in that era only
        return [
            MethodBinding(
                method=f"tasks/{name}",
                params_type=_task_params(),
                handler=self._handler(name),
                protocol_versions=versions,
            )
            for name in ("get", "update", "cancel")
        ]

    def _handler(self, name: str):
        async def handle(ctx, params):
            from fastmcp_tasks import models

            if len(params.task_id) > MAX_TASK_ID:  # ours are uuids: never echo a forged one whole
                from mcp.shared.exceptions import MCPError

                raise MCPError(-32602, f"task not found (an id of {len(params.task_id):,} characters)")
            real = await self._started()
            kind = models.UpdateTaskParams if name == "update" else models.GetTaskParams
            own = kind.model_validate(params.model_dump(by_alias=True, exclude_none=True))
            return await getattr(real, f"_handle_{name}")(ctx, own)

        return handle

    async def intercept_tool_call(self, params, context, call_next):
        from fastmcp.utilities.tasks import TASKS_EXTENSION_ID
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        rc = context.request_context
        meta = (rc.meta if rc is not None else None) or {}
        if meta.get("progressToken") is not None:  # watched: runs in the foreground
            return await call_next()
        modern = rc is not None and rc.protocol_version in MODERN_PROTOCOL_VERSIONS
        if not (modern and context.client_extension_settings(TASKS_EXTENSION_ID) is not None):
            return await call_next()  # the client did not ask for tasks: nothing to start
        real = await self._started()
        return await real.intercept_tool_call(params, context, call_next)

    async def _started(self):
        """fastmcp-tasks' extension, bound to this server and its lifespan running."""
        import asyncio

        async with self._lock:
            if self._real is None:
                if not self._running:
                    raise RuntimeError("the tasks extension is not running (no server lifespan)")
                from fastmcp_tasks import TasksExtension

                real = TasksExtension(url="memory://", name=f"stac-gdal-mcp-{uuid.uuid4().hex[:12]}")
                real._bind(self.server)  # as add_extension binds it (its methods are ours)
                ready = asyncio.get_running_loop().create_future()
                # its own asyncio task, entering and leaving the lifespan in order, in the context
                # variables of the server's lifespan (not of this request: its workers would take
                # the request's Context for theirs)
                self._runner = asyncio.create_task(self._run(real, ready), context=self._context.copy())
                await ready
                self._real = real
        return self._real

    async def _run(self, real, ready) -> None:
        """Run `real`'s lifespan until this extension's lifespan ends."""
        try:
            async with real.lifespan():
                docket = getattr(self.server, "_docket", None)
                if docket is not None:
                    docket.execution_ttl = self.ttl  # finished tasks kept limits.task_ttl_s
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    @asynccontextmanager
    async def lifespan(self):
        import contextvars

        import anyio

        self._lock, self._stop, self._running = anyio.Lock(), anyio.Event(), True
        self._context = contextvars.copy_context()
        try:
            yield
        finally:
            self._running = False
            self._stop.set()
            runner, self._runner, self._real = self._runner, None, None
            if runner is not None:
                with anyio.CancelScope(shield=True):
                    await runner  # the docket worker stopped, the tasks' hooks released


@cache
def _extension_class():
    """`_LazyTasks` as a fastmcp `ServerExtension` (fastmcp's extension machinery imported here,
    when the server is built, not when this module is)."""
    from fastmcp.server.extensions import ServerExtension
    from fastmcp.utilities.tasks import TASKS_EXTENSION_ID

    return type("LazyTasks", (_LazyTasks, ServerExtension), {"identifier": TASKS_EXTENSION_ID})


def status_message(done: float, total: float, message: str | None) -> str:
    """A task's status message: its progress in words (tasks/get carries no numbers)."""
    share = f"{done / total:.0%}" if total else f"{done:g}"
    return f"{share} {message}" if message else share
