"""A tiny MCP server for the tests of external servers (run as a child over stdio).

Flags: --crash-at-start: exit before serving, after writing to stderr a message that quotes
its arguments and the KEY variable (so tests can check that secrets are redacted from it);
--crash-printing-argv: exit before serving, after writing its argv as Python shows a list.
"""

import os
import sys
import time

if "--crash-at-start" in sys.argv:
    print("echo server: cannot start, licence file missing", file=sys.stderr)
    print(f"echo server: args {' '.join(sys.argv[1:])} KEY={os.environ.get('KEY', '-')}", file=sys.stderr)
    sys.exit(2)

if "--crash-printing-argv" in sys.argv:
    print(f"echo server: fatal, started as {sys.argv!r}", file=sys.stderr)
    sys.exit(2)

from fastmcp import FastMCP

mcp = FastMCP("echo")


@mcp.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool(annotations={"readOnlyHint": True})
def environment() -> dict[str, str]:
    """The server's whole environment."""
    return dict(os.environ)


@mcp.tool
def process_id() -> int:
    """The server's process id."""
    return os.getpid()


@mcp.tool
def working_directory() -> str:
    """The server's current directory."""
    return os.getcwd()


@mcp.tool
def big(n_bytes: int) -> str:
    """A string of n_bytes ASCII characters: 'abcdefghij' repeated."""
    return ("abcdefghij" * (n_bytes // 10 + 1))[:n_bytes]


@mcp.tool
def flood(n_bytes: int) -> str:
    """Write n_bytes of log lines to stderr, then answer."""
    line = "echo server: " + "x" * 86 + "\n"
    for _ in range(n_bytes // len(line) + 1):
        sys.stderr.write(line)
    sys.stderr.flush()
    return "flooded"


@mcp.tool
def fail(message: str) -> str:
    """Raise an error with this message."""
    raise ValueError(message)


@mcp.tool
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"


@mcp.tool
def crash() -> str:
    """Exit the process at once, in the middle of the call."""
    os._exit(3)


@mcp.tool
def catalogs() -> list[str]:
    """Nothing; served under the name 'list' this becomes list_catalogs, a core tool's name."""
    return []


@mcp.resource("echo://greeting")
def greeting() -> str:
    """A fixed greeting."""
    return "hello from echo"


@mcp.resource("echo://items/{item_id}")
def item(item_id: str) -> str:
    """An item by id."""
    return f"item {item_id}"


@mcp.resource("echo://big/{n_bytes}")
def big_resource(n_bytes: str) -> str:
    """A text resource of n_bytes ASCII characters, like the tool big."""
    n = int(n_bytes)
    return ("abcdefghij" * (n // 10 + 1))[:n]


@mcp.prompt
def summarize(topic: str) -> str:
    """Ask for a summary."""
    return f"Summarize {topic} in one line."


if __name__ == "__main__":
    mcp.run(show_banner=False, log_level="WARNING")
