"""Property-based fuzzing of every tool from its own input schema.

Arguments are drawn with hypothesis-jsonschema from each tool's `inputSchema` (so they are what
a client may legitimately send, types and constraints included) and sent through an in-memory
fastmcp Client to a server on the bundled sample catalog. For every call:

- no internal error (fastmcp's bare "Error calling tool 'x'" masks an unexpected exception),
- an error is one line, without a traceback, a pydantic report or a server path (the install
  folder, the absolute workspace path),
- an answer arrives within CALL_TIMEOUT_S and the server still answers afterwards,

and after the run nothing is half-written in the workspace (nothing but the store's marker in
`.tmp/`, every output file with its record and every record with its file).

The normal suite runs QUICK_EXAMPLES calls per tool; `pytest -m fuzz tests/test_fuzz.py` runs
SLOW_EXAMPLES per tool (thousands of calls in all). Problems are collected for the whole run and
reported together, grouped by message.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
import types
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import DISCOVERY_TOOLS
from hypothesis import HealthCheck, given, settings
from hypothesis_jsonschema import _from_schema, from_schema

import stac_gdal_mcp
from stac_gdal_mcp.operations import OPERATIONS

# the unit lane: a few calls per tool (FUZZ_QUICK_EXAMPLES); the long lane (-m fuzz): FUZZ_EXAMPLES
QUICK_EXAMPLES = int(os.environ.get("FUZZ_QUICK_EXAMPLES", "5"))
SLOW_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "400"))
CALL_TIMEOUT_S = 120

# every operation's tool (a new operation is fuzzed as soon as it is registered), and the others
TOOLS = (*DISCOVERY_TOOLS, *OPERATIONS, "list_outputs", "delete_output", "save_search", "list_extensions")


# hypothesis-jsonschema 0.23 draws object properties with hypothesis' internal `many` through an
# API (`elements.more()`) that hypothesis 6.1xx replaced by iteration; adapt it for that module.
class _ManyCompat:
    def __init__(self, *args, **kwargs):
        from hypothesis.internal.conjecture import utils

        self._many = utils.many(*args, **kwargs)
        self._many.__enter__()
        self._elements = iter(self._many)

    def more(self) -> bool:
        if next(self._elements, StopIteration) is StopIteration:
            self._many.__exit__(None, None, None)
            return False
        return True

    def reject(self, why=None) -> None:
        self._many.reject(why)


if not hasattr(__import__("hypothesis.internal.conjecture.utils").internal.conjecture.utils.many, "more"):
    _from_schema.cu = types.SimpleNamespace(many=_ManyCompat)


class Harness:
    """A server and a connected client on an event loop in a thread of their own, so that
    hypothesis (synchronous) can call tools."""

    def __init__(self, workspace: Path, *, catalog: Path | None = None, **settings):
        from fastmcp import Client

        from stac_gdal_mcp.server import build_server
        from stac_gdal_mcp.settings import load_settings

        self.workspace = workspace
        self.settings = load_settings(
            workspace=workspace,
            builtin_catalogs=False,
            default_catalog="sample",
            catalogs=[
                {
                    "id": "sample",
                    "path": str(catalog or Path(stac_gdal_mcp.__file__).parent / "data/sample/catalog.json"),
                }
            ],
            **{
                "network": {"allow_private_hosts": False, "timeout_s": 5, "max_retries": 0},
                "limits": {"job_timeout_s": 60},
                **settings,  # (a section given here replaces the one above whole)
            },
        )
        self.mcp = build_server(self.settings)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = Client(self.mcp)
        self._run(self.client.__aenter__())
        self.tools = {t.name: t for t in self._run(self.client.list_tools())}

    def _run(self, coroutine, timeout: float = CALL_TIMEOUT_S):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, name: str, arguments: dict):
        return self._run(self.client.call_tool(name, arguments, raise_on_error=False))

    def alive(self) -> bool:
        """The server still answers (tools/list: the in-memory transport has no ping)."""
        return bool(self._run(self.client.list_tools(), timeout=30))

    def close(self) -> None:
        try:
            self._run(self.client.__aexit__(None, None, None), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = Harness(tmp_path_factory.mktemp("fuzz") / "workspace")
    yield h
    h.close()


def _server_paths(harness: Harness) -> list[str]:
    package = Path(stac_gdal_mcp.__file__).resolve().parent
    return [
        str(harness.workspace.resolve()),
        str(harness.workspace),
        str(package),
        str(package.parent),
        sys.prefix,
    ]


_PYDANTIC = re.compile(r"validation errors? for|errors\.pydantic\.dev|Input should be .*\[type=")


def problems_of(harness: Harness, name: str, arguments: dict, result) -> list[str]:
    """What is wrong with one call's result (empty: nothing)."""
    found = []
    texts = [c.text for c in result.content if getattr(c, "text", None) is not None]
    joined = "\n".join(texts)
    if "Traceback (most recent call last)" in joined:
        found.append("traceback in the result")
    if result.is_error:
        text = texts[0] if texts else ""
        if re.fullmatch(r"Error calling tool '[^']*'\.?", text.strip()) or not text.strip():
            found.append(f"internal error: {text!r}")
        if "\n" in text:
            found.append(f"multi-line error: {text[:200]!r}")
        if _PYDANTIC.search(text):
            found.append(f"pydantic report: {text[:200]!r}")
        if len(text) > 2000:
            found.append(f"error of {len(text)} characters")
        for path in _server_paths(harness):
            if path and path in text:
                found.append(f"server path in the error: {text[:300]!r}")
                break
    return found


def _fuzz(harness: Harness, name: str, examples: int) -> dict[str, list[str]]:
    """Run `examples` generated calls of tool `name`; {problem: [arguments, ...]}."""
    tool = harness.tools[name]
    found: dict[str, list[str]] = defaultdict(list)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=examples <= QUICK_EXAMPLES,  # the quick lane is the same every run
    )
    @given(from_schema(getattr(tool, "input_schema", None) or tool.inputSchema))
    def call(arguments):
        shown = json.dumps(arguments, default=str)[:300]
        try:
            result = harness.call(name, arguments)
        except TimeoutError:
            found[f"no answer within {CALL_TIMEOUT_S} s"].append(shown)
            return
        except Exception as exc:  # the client itself failed: the server broke the protocol
            found[f"call failed: {type(exc).__name__}: {str(exc)[:200]}"].append(shown)
            return
        for problem in problems_of(harness, name, arguments, result):
            found[_shape(problem)].append(shown)
        if not harness.alive():
            found["server did not answer afterwards"].append(shown)

    call()
    return dict(found)


def _shape(problem: str) -> str:
    """A problem with the details that vary per call (numbers, quoted values) blurred, so that
    one kind of problem is reported once."""
    return re.sub(r"'[^']*'|\d+(\.\d+)?", "…", problem)[:300]


def _workspace_consistent(harness: Harness) -> list[str]:
    problems = []
    tmp = harness.workspace / ".tmp"
    if tmp.is_dir():
        left = [p.name for p in tmp.iterdir() if not p.name.endswith(".alive")]
        if left:
            problems.append(f"left in .tmp: {left[:10]}")
    outputs = harness.workspace / "outputs"
    records = harness.workspace / "records"
    files = {p.name for p in outputs.iterdir()} if outputs.is_dir() else set()
    recorded = {p.name for p in records.iterdir()} if records.is_dir() else set()
    if len(files) != len(recorded):
        problems.append(f"{len(files)} output files but {len(recorded)} records")
    listed = harness.call("list_outputs", {})
    if listed.is_error:
        problems.append(f"list_outputs failed: {listed.content[0].text}")
    return problems


def _report(name: str, found: dict[str, list[str]]) -> str:
    lines = [f"{name}: {len(found)} kind(s) of problem"]
    for problem, calls in sorted(found.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(calls)} x {problem}\n      e.g. {calls[0]}")
    return "\n".join(lines)


def test_every_tool_is_fuzzed(harness):
    assert set(harness.tools) == set(TOOLS), "add new tools to TOOLS (or remove gone ones)"


@pytest.mark.parametrize("name", TOOLS)
def test_fuzz_quick(harness, name):
    found = _fuzz(harness, name, QUICK_EXAMPLES)
    assert not found, _report(name, found)
    assert not _workspace_consistent(harness)


@pytest.mark.fuzz
@pytest.mark.parametrize("name", TOOLS)
def test_fuzz_long(harness, name):
    found = _fuzz(harness, name, SLOW_EXAMPLES)
    assert not found, _report(name, found)
    assert not _workspace_consistent(harness)
