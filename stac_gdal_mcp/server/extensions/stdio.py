"""The stdio link to one external server, bounded: its answers are read in a thread of their own,
a message at most `max_message_bytes` long, so no answer however large or slow holds up an event
loop or fills our memory.

mcp's own stdio client reads the child's stdout on the event loop and joins the pieces of a line
by concatenation (quadratic in its length), then parses it whole: a 300 MB answer kept the loop
busy for minutes and took gigabytes. Here a thread reads the pipe in chunks, keeps a message only
while it fits, parses it off the loop and hands it over; a longer message is read past and
dropped, and the request it answered gets an error of its own (`OVERSIZE`) at once.
"""

import asyncio
import contextlib
import logging
import os
import re
import signal
import threading
from collections.abc import Callable

import anyio
from fastmcp.client.transports.base import ClientTransport, TransportOptions

log = logging.getLogger("stac_gdal_mcp.server.extensions")

OVERSIZE = -32099  # JSON-RPC error code (server-defined range) for an answer we dropped
READ_CHUNK = 1 << 20
EXIT_GRACE_S = 2.0  # after its stdin closes, before the child's process group is killed
# The id of a response: first member after "jsonrpc" (as the Python SDK writes it), or last.
_HEAD_ID = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"[^"\\]{0,200}")')
_TAIL_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"[^"\\]{0,200}")\s*\}\s*$')
EDGE = 512  # bytes kept from each end of a dropped message, to find its id


class BoundedStdioTransport(ClientTransport):
    """A fastmcp client transport to a child started with `argv`, whose stderr goes to `stderr`
    (a file object with a descriptor) and whose messages are at most `max_message_bytes`."""

    def __init__(self, argv: list[str], env: dict, cwd: str | None, stderr, max_message_bytes: int):
        self.argv, self.env, self.cwd, self.stderr = argv, env, cwd, stderr
        self.max_message_bytes = max_message_bytes

    @contextlib.asynccontextmanager
    async def connect_session(self, *, transport_options: TransportOptions | None = None, **session_kwargs):
        options = transport_options or TransportOptions()
        async with self._streams() as (read_stream, write_stream):
            async with options.session_class(read_stream, write_stream, **session_kwargs) as session:
                yield session

    @contextlib.asynccontextmanager
    async def _streams(self):
        read_fd, write_fd = os.pipe()
        try:
            process = await anyio.open_process(
                self.argv,
                stdout=write_fd,
                stderr=self.stderr,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        to_session, read_stream = anyio.create_memory_object_stream(0)
        write_stream, from_session = anyio.create_memory_object_stream(0)
        deliver = _deliverer(asyncio.get_running_loop(), to_session)
        reader = threading.Thread(
            target=read_messages,
            args=(read_fd, self.max_message_bytes, deliver),
            name=f"external-stdout-{process.pid}",
            daemon=True,
        )
        reader.start()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_write_messages, process, from_session, to_session)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                    read_stream.close()
                    write_stream.close()
                tasks.cancel_scope.cancel()


def _deliverer(loop, to_session) -> Callable[[object], bool]:
    """From the reader thread: hand a message (or None: end of stream) to the session on its loop,
    waiting while it is busy. False once the session is gone (the rest is read and dropped)."""

    def deliver(message) -> bool:
        work = to_session.send(message) if message is not None else to_session.aclose()
        try:
            asyncio.run_coroutine_threadsafe(work, loop).result()
            return True
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError):
            work.close()  # never awaited if the loop is closed
            return False

    return deliver


def read_messages(fd: int, limit: int, deliver: Callable[[object], bool]) -> None:
    """Read newline-delimited JSON-RPC messages from `fd` until end of file, parsing and
    delivering each; a message over `limit` bytes is dropped (see `dropped`)."""
    pending, size, head, live = bytearray(), 0, b"", True
    try:
        while chunk := os.read(fd, READ_CHUNK):
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                piece = chunk[start:end]
                size += len(piece)
                if size <= limit:
                    pending += piece
                    message = parse(bytes(pending))
                else:
                    message = dropped(
                        head or bytes(pending[:EDGE]), (bytes(pending) + piece)[-EDGE:], size, limit
                    )
                if message is not None and live:
                    live = deliver(message)
                pending, size, head, start = bytearray(), 0, b"", end + 1
            rest = chunk[start:]
            size += len(rest)
            if size <= limit:
                pending += rest
            else:  # over the limit: keep only its first and last bytes
                head = head or bytes((pending + rest)[:EDGE])
                pending = bytearray((pending + rest)[-EDGE:])
    except OSError as exc:
        log.debug("reading an external server's stdout: %s", exc)
    finally:
        os.close(fd)
        if live:
            deliver(None)


def parse(line: bytes):
    """A message as the session takes it: a SessionMessage, or the parse error as a value."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    if not line.strip():
        return None
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        log.warning("an external server wrote a line that is not JSON-RPC: %s", str(exc)[:200])
        return exc


def dropped(head: bytes, tail: bytes, size: int, limit: int):
    """In place of a message over the limit: an error answering its request, if its id shows;
    else nothing (the request then runs into its timeout)."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    found = _HEAD_ID.match(head) or _TAIL_ID.search(tail)
    log.warning("an external server sent a message of %d bytes, over %d: dropped", size, limit)
    if found is None:
        return None
    raw = found.group(1)
    request_id = int(raw) if raw[:1] != b'"' else raw[1:-1].decode("utf-8", "replace")
    error = types.ErrorData(code=OVERSIZE, message=f"answer of more than {limit} bytes dropped", data=size)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


async def _write_messages(process, from_session, to_session) -> None:
    """Session messages to the child's stdin; a closed stdin ends the session's reading too."""
    try:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send((data + "\n").encode("utf-8"))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await to_session.aclose()


async def _stop(process) -> None:
    """Close the child's stdin, give it EXIT_GRACE_S to leave, then kill its process group."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE_S):
        while process.returncode is None:
            await anyio.sleep(0.05)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.returncode is not None:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        with anyio.move_on_after(EXIT_GRACE_S):
            await process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # what it started and left behind
