"""Requests that get no answer: over stdio, a line that is not JSON, JSON
nested past the parser's limit, or JSON that is not a JSON-RPC message gets a JSON-RPC error
(-32700 with id null, or -32600 with the request's id when it can be read), and the server
keeps answering. Driven as raw lines on the stdin of a real `stac-gdal-mcp serve`."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from stac_gdal_mcp.server.stdio_guard import top_level_id

pytestmark = pytest.mark.testbed  # starts the server as a subprocess


class RawServer:
    def __init__(self, tmp_path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("STAC_GDAL_MCP_")}
        env.update(STAC_GDAL_MCP_WORKSPACE=str(tmp_path / "ws"), STAC_GDAL_MCP_DEFAULT_CATALOG="sample")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stac_gdal_mcp", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def send(self, line: bytes | str | dict) -> None:
        if isinstance(line, dict):
            line = json.dumps(line)
        if isinstance(line, str):
            line = line.encode()
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 20) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], deadline - time.monotonic())
            if ready:
                line = self.process.stdout.readline()
                assert line, "the server closed stdout"
                message = json.loads(line)
                if "method" in message and "id" not in message:
                    continue  # a notification (log message, list changed)
                return message
        raise AssertionError("no answer: the client would wait for ever")

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def server(tmp_path):
    raw = RawServer(tmp_path)
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
    )
    assert raw.receive()["id"] == 0
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield raw
    raw.close()


def _deep(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


BAD_LINES = [
    ("this is not json", -32700, None),
    ("{", -32700, None),
    (b"\xff\xfe\x00garbage", -32700, None),
    ('{"jsonrpc": "2.0", "id": 41, "method": "tools/list"', -32700, None),  # cut short
    (_deep(100_000), -32600, None),
    (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_items","arguments":{"query":'
        + _deep(300)
        + "}}}",
        -32600,
        7,
    ),
    ('{"jsonrpc":"2.0","id":"req-8","method":"x","params":' + _deep(500) + "}", -32600, "req-8"),
    ('{"jsonrpc":"2.0","id":9,"method":3}', -32600, 9),
    ('{"jsonrpc":"1.0","id":10,"method":"ping"}', -32600, 10),
    ("[1, 2, 3]", -32600, None),
    ("42", -32600, None),
]


def test_every_bad_line_gets_an_error_and_the_server_keeps_answering(server):
    for number, (line, code, request_id) in enumerate(BAD_LINES):
        server.send(line)
        answer = server.receive()
        assert answer["error"]["code"] == code, (line[:80], answer)
        assert answer["id"] == request_id, (line[:80], answer)
        assert "\n" not in answer["error"]["message"]
        server.send({"jsonrpc": "2.0", "id": 1000 + number, "method": "ping"})
        assert server.receive() == {"jsonrpc": "2.0", "id": 1000 + number, "result": {}}
    server.send("")  # a blank line is no message: no answer, and no harm
    server.send({"jsonrpc": "2.0", "id": 2000, "method": "tools/call", "params": {"name": "list_catalogs"}})
    answer = server.receive()
    assert answer["id"] == 2000 and not answer["result"].get("isError")


def test_nested_arguments_that_parse_get_a_tool_error(server):
    query: object = {"lt": 1}
    for _ in range(150):
        query = {"x": query}
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "search_items", "arguments": {"query": {"eo:cloud_cover": query}}},
        }
    )
    answer = server.receive()
    assert answer["id"] == 5 and answer["result"]["isError"]
    assert "nested more than" in answer["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"jsonrpc":"2.0","id":7,"method":"x"}', 7),
        ('{"id": "a\\"b", "x": 1}', None),  # escaped quotes in an id: not guessed
        ('{"id": "abc"}', "abc"),
        ('{"params": {"id": 5}, "id": 6}', 6),  # a nested "id" is not the request's
        ('{"params": {"id": 5}}', None),
        ('{"params": ["id", 5], "method": "x"}', None),
        ('{"key": "id", "other": 1}', None),  # "id" as a value
        ('{"id": 1.5}', None),
        ('{"id": null}', None),
        ("[" * 1000, None),
        ('{"a":' + "[" * 5000 + "]" * 5000 + ',"id":12}', 12),
    ],
)
def test_top_level_id(text, expected):
    assert top_level_id(text) == expected
