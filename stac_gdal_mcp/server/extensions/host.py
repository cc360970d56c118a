"""An event loop in a background thread that owns the sessions with external servers.

Startup (`build_server`) is synchronous and may run inside someone else's event loop, while
tool calls arrive on whatever loop serves the MCP front end. Keeping every external session on
one private loop lets a child process start once, at startup, and serve calls from any loop.
"""

import asyncio
import threading


class Host:
    def __init__(self, name: str = "stac-gdal-mcp-external"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro, timeout: float | None = None):
        """Run `coro` on the host loop and wait for it (from synchronous code)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def call(self, coro):
        """Run `coro` on the host loop and await it from another event loop (cancellation follows)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()
