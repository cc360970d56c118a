"""Every line on stdin gets an answer.

The MCP SDK's stdio transport parses each line into a JSON-RPC message and, when that fails
(not JSON, JSON nested deeper than its parser allows, JSON that is not a JSON-RPC message),
hands the exception to the server, which only logs it: the client, waiting for the answer to
its request, waits for ever. `answer_every_line()` wraps the transport so that such a line gets
the JSON-RPC 2.0 error it calls for instead:

- not JSON: -32700 Parse error, id null;
- JSON that is too deep for the parser, or not a valid JSON-RPC message: -32600 Invalid
  Request, with the request's id when it can be read from the top level of the line (so the
  client's pending request ends), else null.

Nothing else changes: valid messages pass through untouched, in order.
"""

from __future__ import annotations

import contextlib
import logging
import re

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_SCAN_LIMIT = 1_000_000  # characters of a bad line searched for its id
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def top_level_id(text: str) -> str | int | None:
    """The value of the `"id"` member of the outermost JSON object in `text`, if it is a string
    or an integer and can be found by a linear scan (no parsing, so any depth is fine)."""
    text = text[:_SCAN_LIMIT]
    depth, i, n = 0, 0, len(text)
    expect_key = False
    while i < n:
        char = text[i]
        if char == '"':
            end, value = _string_end(text, i)
            if end < 0:
                return None
            if depth == 1 and expect_key and value == "id":
                j = end
                while j < n and text[j] in " \t\r\n":
                    j += 1
                if j < n and text[j] == ":":
                    return _value_at(text, j + 1)
            expect_key = False
            i = end
            continue
        if char in "{[":
            depth += 1
            expect_key = char == "{" and depth == 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 1:
            expect_key = True
        i += 1
    return None


def _string_end(text: str, start: int) -> tuple[int, str]:
    """(index after the closing quote, the raw string content) of the string at `start`."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1, text[start + 1 : i]
        i += 1
    return -1, ""


def _value_at(text: str, i: int) -> str | int | None:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    if i < len(text) and text[i] == '"':
        end, value = _string_end(text, i)
        return value if end > 0 and "\\" not in value else None
    match = _NUMBER.match(text, i)
    if match and re.fullmatch(r"-?\d+", match.group(0)):
        return int(match.group(0))
    return None


def error_for(exc: Exception):
    """The JSON-RPC error message answering a line that failed to parse as `exc`."""
    from mcp_types import ErrorData, JSONRPCError

    errors = []
    with contextlib.suppress(Exception):
        errors = exc.errors(include_url=False)  # pydantic ValidationError
    first = errors[0] if errors else {}
    line = first.get("input") if isinstance(first.get("input"), str) else None
    if first.get("type") == "json_invalid":
        message = str(first.get("msg") or "invalid JSON")
        if "recursion limit" in message:
            request_id = top_level_id(line) if line else None
            code, text = INVALID_REQUEST, "Invalid Request: the message is nested too deeply"
        else:
            request_id, code, text = None, PARSE_ERROR, f"Parse error: {message}"
    else:
        request_id = None
        for error in errors:
            value = error.get("input")
            if isinstance(value, dict) and isinstance(value.get("id"), (str, int)):
                request_id = value["id"]
                break
        code, text = INVALID_REQUEST, "Invalid Request: not a valid JSON-RPC 2.0 message"
    if isinstance(request_id, bool):
        request_id = None
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=text))


def _blank(exc: Exception) -> bool:
    with contextlib.suppress(Exception):
        line = exc.errors(include_url=False)[0].get("input")
        return isinstance(line, str) and not line.strip()
    return False


@contextlib.asynccontextmanager
async def _answering(original):
    """`original` (the SDK's stdio_server) with unparseable lines answered, not passed on."""
    import anyio
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    async with original() as (read_stream, write_stream):
        forward, filtered = create_context_streams(0)

        async def pump() -> None:
            async with forward:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        if _blank(item):
                            continue  # an empty line is no message: nothing to answer
                        answer = error_for(item)
                        log.warning(
                            "answered an unreadable message with JSON-RPC error %s: %s",
                            answer.error.code,
                            answer.error.message,
                        )
                        await write_stream.send(SessionMessage(answer))
                        continue
                    await forward.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield filtered, write_stream
            finally:
                tg.cancel_scope.cancel()


def answer_every_line() -> None:
    """Make fastmcp's stdio transport (for this process) answer every line it cannot read."""
    from fastmcp.server.mixins import transport

    original = transport.stdio_server
    if getattr(original, "_answers_every_line", False):
        return

    def stdio_server():
        return _answering(original)

    stdio_server._answers_every_line = True
    transport.stdio_server = stdio_server
