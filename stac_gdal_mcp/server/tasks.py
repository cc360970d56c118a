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
"""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import cache

POLL_INTERVAL = timedelta(seconds=1)


@cache
def available() -> bool:
    """Whether fastmcp-tasks is installed (without it, tools run in the foreground only)."""
    try:
        import fastmcp_tasks  # noqa: F401
    except ImportError:
        return False
    return True


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


@cache
def _extension_class():
    from fastmcp_tasks import TasksExtension

    class WatchedCallsInForeground(TasksExtension):
        """fastmcp-tasks' extension, except that a call with a progress token runs in the
        foreground, and finished tasks are kept `ttl`."""

        def __init__(self, *, ttl: timedelta):
            # a queue of this server's own: several servers in one process must not share one
            super().__init__(url="memory://", name=f"stac-gdal-mcp-{uuid.uuid4().hex[:12]}")
            self.ttl = ttl

        async def intercept_tool_call(self, params, context, call_next):
            rc = context.request_context
            meta = (rc.meta if rc is not None else None) or {}
            if meta.get("progressToken") is not None:
                return await call_next()
            return await super().intercept_tool_call(params, context, call_next)

        @asynccontextmanager
        async def lifespan(self):
            async with super().lifespan():
                docket = getattr(self.server, "_docket", None)
                if docket is not None:
                    docket.execution_ttl = self.ttl
                yield

    return WatchedCallsInForeground


def status_message(done: float, total: float, message: str | None) -> str:
    """A task's status message: its progress in words (tasks/get carries no numbers)."""
    share = f"{done / total:.0%}" if total else f"{done:g}"
    return f"{share} {message}" if message else share
