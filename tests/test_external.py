"""External MCP servers over stdio: real child processes (tests/external_servers/echo_server.py,
started as a .py script, through `sh -c`, as a .sh script and as an executable), namespaced
tools/resources/prompts end to end through a fastmcp Client, minimal environment, cwd,
validation, crashes, result size bounds and redaction of secrets."""

import json
import logging
import os
import shutil
import sys
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from stac_gdal_mcp.errors import ConfigError
from stac_gdal_mcp.server import build_server, build_server_parts
from stac_gdal_mcp.server.extensions import ExtensionError
from stac_gdal_mcp.settings import CHILD_ENV_VARS, load_settings

pytestmark = pytest.mark.testbed  # starts external MCP servers as subprocesses

SERVERS = Path(__file__).parent / "external_servers"
ECHO = SERVERS / "echo_server.py"
SECRET = "sUp3r-s3cret-Value-0042"  # a value in our environment that must never reach a child or a log
TOKEN = "tok-4f9a8b7c6d5e4f3a2b1c"  # a token on a command line


def settings_with(tmp_path, *servers, **overrides):
    return load_settings(workspace=tmp_path / "workspace", external_servers=list(servers), **overrides)


def listed(result) -> dict:
    return {e["name"]: e for e in result.structured_content["extensions"]}


def entries(build, mcp) -> dict:
    """The extensions of a server made with the `build` fixture, by name."""
    return {e.name: e for e in build.parts(mcp).extensions.entries()}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_python_script_server_tools_resources_prompts_end_to_end(build, tmp_path, mode):
    mcp = build(settings_with(tmp_path, {"name": "echo", "script": str(ECHO)}))
    async with Client(mcp, mode=mode) as client:
        names = {t.name for t in await client.list_tools()}
        namespaced = {f"echo_{tool}" for tool in ("echo", "environment", "big", "crash")}
        assert namespaced | {"list_extensions", "search_items"} <= names
        assert "echo" not in names  # only under its namespace

        result = await client.call_tool("echo_echo", {"text": "hello stac"})
        assert result.content[0].text == "hello stac"
        assert result.structured_content == {"result": "hello stac"}

        resources = {str(r.uri) for r in await client.list_resources()}
        templates = {t.uri_template for t in await client.list_resource_templates()}
        assert "echo://echo/greeting" in resources
        assert "echo://echo/items/{item_id}" in templates
        assert (await client.read_resource("echo://echo/greeting"))[0].text == "hello from echo"
        assert (await client.read_resource("echo://echo/items/42"))[0].text == "item 42"

        prompt = await client.get_prompt("echo_summarize", {"topic": "STAC"})
        assert prompt.messages[0].content.text == "Summarize STAC in one line."

        info = listed(await client.call_tool("list_extensions", {}))["echo"]
    assert info["kind"] == "external_server" and info["status"] == "running" and info["error"] is None
    assert info["source"] == "script echo_server.py"  # no folders, no arguments
    assert "echo_echo" in info["tools"] and "echo_summarize" in info["prompts"]
    assert set(info["resources"]) == {
        "echo://echo/greeting",
        "echo://echo/items/{item_id}",
        "echo://echo/big/{n_bytes}",
    }


async def test_server_through_sh_c_with_cwd(build, tmp_path):
    workdir = tmp_path / "terrain-home"
    workdir.mkdir()
    shutil.copy(ECHO, workdir / "server.py")
    server = {
        "name": "terrain",
        "cmd": ["sh", "-c", f"exec '{sys.executable}' server.py"],
        "cwd": str(workdir),
    }
    mcp = build(settings_with(tmp_path, server))
    async with Client(mcp) as client:
        assert (await client.call_tool("terrain_echo", {"text": "via sh"})).content[0].text == "via sh"
        cwd = await client.call_tool("terrain_working_directory", {})
    assert Path(cwd.content[0].text).resolve() == workdir.resolve()
    assert entries(build, mcp)["terrain"].source == "sh (2 arguments not shown)"


async def test_sh_script_and_executable_script(build, tmp_path):
    executable = tmp_path / "echo-server"
    executable.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{ECHO}' \"$@\"\n")
    executable.chmod(0o755)
    mcp = build(
        settings_with(
            tmp_path,
            {"name": "viash", "script": str(SERVERS / "echo_server.sh"), "env": {"PYTHON": sys.executable}},
            {"name": "viaexe", "script": str(executable)},
        )
    )
    async with Client(mcp) as client:
        assert (await client.call_tool("viash_echo", {"text": "a"})).content[0].text == "a"
        assert (await client.call_tool("viaexe_echo", {"text": "b"})).content[0].text == "b"
    assert entries(build, mcp)["viash"].source == "script echo_server.sh"
    assert entries(build, mcp)["viaexe"].source == f"script {executable.name}"


async def test_child_gets_a_minimal_environment_and_its_own_env(build, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("STAC_GDAL_MCP_TOKEN", SECRET)
    monkeypatch.setenv("TERRAIN_KEY", "terrain-key-value")
    server = {"name": "echo", "script": str(ECHO), "env": {"KEY": "env:TERRAIN_KEY", "REGION": "eu-west-1"}}
    mcp = build(settings_with(tmp_path, server))
    async with Client(mcp) as client:
        child_env = (await client.call_tool("echo_environment", {})).structured_content
    assert SECRET not in json.dumps(child_env)
    assert "AWS_SECRET_ACCESS_KEY" not in child_env and "STAC_GDAL_MCP_TOKEN" not in child_env
    assert child_env["KEY"] == "terrain-key-value" and child_env["REGION"] == "eu-west-1"
    assert child_env["PATH"] == os.environ["PATH"]
    # nothing but the minimal variables and the configured ones (Python itself may add LC_CTYPE)
    assert set(child_env) - set(CHILD_ENV_VARS) - {"KEY", "REGION"} <= {"LC_CTYPE"}


async def test_secrets_never_in_logs_errors_or_list_extensions(build, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG, logger="stac_gdal_mcp")
    monkeypatch.setenv("TERRAIN_KEY", SECRET)
    running = {
        "name": "echo",
        "cmd": [sys.executable, str(ECHO), "--token", TOKEN],
        "env": {"KEY": "env:TERRAIN_KEY"},
        "show_args": True,  # shown, with what looks secret masked
    }
    # this one fails at start, after printing its arguments and KEY to stderr
    crashing = {
        "name": "leaky",
        "cmd": [sys.executable, str(ECHO), "--crash-at-start", f"--api-key={TOKEN}"],
        "env": {"KEY": "env:TERRAIN_KEY"},
    }
    mcp = build(settings_with(tmp_path, running, crashing))
    async with Client(mcp) as client:
        shown = json.dumps((await client.call_tool("list_extensions", {})).structured_content)
        result = await client.call_tool("echo_fail", {"message": f"bad key {SECRET}"}, raise_on_error=False)
    info = entries(build, mcp)
    assert info["echo"].source == f"{sys.executable} {ECHO} --token ***"
    assert info["leaky"].source == f"{Path(sys.executable).name} (3 arguments not shown)"
    assert info["leaky"].status == "failed"
    assert info["leaky"].error.startswith("failed to start: ")
    assert "licence file missing" in info["leaky"].error  # the child's stderr is quoted ...
    assert "--api-key=*** KEY=***" in info["leaky"].error  # ... with the secrets masked
    for text in (shown, caplog.text, info["leaky"].error, info["leaky"].source):
        assert SECRET not in text and TOKEN not in text
    # a tool result is the server's own answer: it is passed on as it is
    assert result.is_error and SECRET in result.content[0].text


async def test_annotations_are_overridden(build, tmp_path):
    mcp = build(
        settings_with(
            tmp_path,
            {"name": "untrusted", "script": str(ECHO)},
            {"name": "trusted", "script": str(ECHO), "trusted": True},
        )
    )
    async with Client(mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
    # the server declares echo read-only and closed-world
    untrusted, trusted = tools["untrusted_echo"].annotations, tools["trusted_echo"].annotations
    assert (untrusted.read_only_hint, untrusted.destructive_hint, untrusted.open_world_hint) == (
        False,
        True,
        True,
    )
    assert (trusted.read_only_hint, trusted.open_world_hint) == (True, True)
    assert tools["trusted_crash"].annotations.read_only_hint is False  # it claims nothing: not read-only
    assert tools["untrusted_echo"].output_schema is None  # the server's output schema is not advertised
    assert "(From external server 'untrusted'.)" in tools["untrusted_echo"].description


async def test_oversize_results_are_truncated_with_a_note(build, tmp_path):
    limit = 4096
    mcp = build(settings_with(tmp_path, {"name": "echo", "script": str(ECHO), "max_result_bytes": limit}))
    expected = ("abcdefghij" * 1001)[:10_000]
    async with Client(mcp) as client:
        small = await client.call_tool("echo_big", {"n_bytes": 1000})
        big = await client.call_tool("echo_big", {"n_bytes": 10_000})
    assert small.content[0].text == expected[:1000] and small.structured_content == {
        "result": expected[:1000]
    }

    text, note = big.content[0].text, big.content[-1].text
    assert len(big.content) == 2
    assert text == expected[: len(text)] and len(text.encode()) <= limit
    assert len(text) == limit  # the text fills the budget (the structured copy is dropped)
    assert big.structured_content is None
    assert note.startswith("[truncated by stac-gdal-mcp: this answer from external server 'echo' was 20")
    assert note.endswith(
        f"over its limit of {limit} bytes (max_result_bytes); dropped: the structured content]"
    )


async def test_oversize_resource_is_truncated_with_a_note(build, tmp_path):
    limit = 2048
    mcp = build(settings_with(tmp_path, {"name": "echo", "script": str(ECHO), "max_result_bytes": limit}))
    async with Client(mcp) as client:
        small = await client.read_resource("echo://echo/big/100")
        big = await client.read_resource("echo://echo/big/5000")
    assert [c.text for c in small] == [("abcdefghij" * 10)]
    assert big[0].text == ("abcdefghij" * 500)[:limit]
    assert big[-1].text.startswith(
        "[truncated by stac-gdal-mcp: this answer from external server 'echo' was 5000 bytes"
    )


async def test_server_that_crashes_at_start_is_reported_and_skipped(build, tmp_path):
    mcp = build(
        settings_with(
            tmp_path,
            {"name": "broken", "cmd": [sys.executable, str(ECHO), "--crash-at-start"]},
            {"name": "echo", "script": str(ECHO)},
        )
    )
    async with Client(mcp) as client:
        names = {t.name for t in await client.list_tools()}
        info = listed(await client.call_tool("list_extensions", {}))
        assert (await client.call_tool("echo_echo", {"text": "still here"})).content[0].text == "still here"
    assert not any(n.startswith("broken_") for n in names)
    assert info["broken"]["status"] == "failed" and info["broken"]["tools"] == []
    assert info["broken"]["error"].startswith("failed to start: Connection closed (its stderr ended with: ")
    assert "licence file missing" in info["broken"]["error"]


def test_strict_mode_refuses_to_start_when_a_server_fails(tmp_path):
    settings = settings_with(
        tmp_path,
        {"name": "broken", "cmd": [sys.executable, str(ECHO), "--crash-at-start"]},
        plugins={"strict": True},
    )
    with pytest.raises(ExtensionError) as raised:
        build_server(settings)
    message = str(raised.value)
    assert message.startswith("strict plugin mode")
    assert "external server 'broken'" in message and "failed to start" in message


async def test_server_that_dies_mid_session(build, tmp_path, caplog):
    mcp = build(
        settings_with(tmp_path, {"name": "echo", "script": str(ECHO)}, {"name": "other", "script": str(ECHO)})
    )
    async with Client(mcp) as client:
        assert (await client.call_tool("echo_echo", {"text": "before"})).content[0].text == "before"
        died = await client.call_tool("echo_crash", {}, raise_on_error=False)
        assert died.is_error
        assert died.content[0].text == (
            "external server 'echo' is not available: it stopped during tool 'crash'; "
            "its tools are unavailable until stac-gdal-mcp restarts"
        )
        with pytest.raises(ToolError, match="external server 'echo' is not available"):
            await client.call_tool("echo_echo", {"text": "after"})
        with pytest.raises(Exception, match="external server 'echo' is not available"):
            await client.read_resource("echo://echo/greeting")
        # the other server and the core are unaffected
        assert (await client.call_tool("other_echo", {"text": "fine"})).content[0].text == "fine"
        info = listed(await client.call_tool("list_extensions", {}))
    assert info["echo"]["status"] == "died" and "echo_echo" in info["echo"]["tools"]
    assert info["other"]["status"] == "running"
    assert "Traceback" not in caplog.text


async def test_error_from_a_tool_is_passed_on_and_the_server_keeps_running(build, tmp_path):
    mcp = build(settings_with(tmp_path, {"name": "echo", "script": str(ECHO)}))
    async with Client(mcp) as client:
        result = await client.call_tool("echo_fail", {"message": "slope needs a DEM"}, raise_on_error=False)
        assert result.is_error and "slope needs a DEM" in result.content[0].text
        assert (await client.call_tool("echo_echo", {"text": "ok"})).content[0].text == "ok"
    assert entries(build, mcp)["echo"].status == "running"


async def test_a_call_that_takes_longer_than_timeout_s(build, tmp_path):
    mcp = build(settings_with(tmp_path, {"name": "echo", "script": str(ECHO), "timeout_s": 10}))
    async with Client(mcp) as client:
        result = await client.call_tool("echo_slow", {"seconds": 25}, raise_on_error=False)
        assert result.is_error
        assert result.content[0].text == "external server 'echo' did not answer tool 'slow' within 10 s"
        assert (await client.call_tool("echo_echo", {"text": "still up"})).content[0].text == "still up"


async def test_allow_list_limits_the_tools(build, tmp_path):
    mcp = build(
        settings_with(tmp_path, {"name": "echo", "script": str(ECHO), "tools": ["echo", "big", "slope"]})
    )
    async with Client(mcp) as client:
        names = {t.name for t in await client.list_tools() if t.name.startswith("echo_")}
    assert names == {"echo_echo", "echo_big"}
    assert entries(build, mcp)["echo"].error == "allow-listed tools not offered by the server: slope"


async def test_collision_with_a_core_tool_names_both(build, tmp_path):
    mcp = build(settings_with(tmp_path, {"name": "list", "script": str(ECHO)}))
    async with Client(mcp) as client:
        catalogs = await client.call_tool("list_catalogs", {})
    assert isinstance(catalogs.structured_content["catalogs"], list)
    assert catalogs.structured_content["catalogs"]  # the core tool, not the server's empty list
    info = entries(build, mcp)["list"]
    assert info.status == "failed"
    assert info.error.startswith(
        "tool 'list_catalogs' of external server 'list' (script echo_server.py) collides with 'list_catalogs' of a core tool"
    )


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"cmd": ["x"], "script": "y.py"},
            "external server 'bad': give exactly one of `cmd` (a command line as a list) or `script` (a path)",
        ),
        ({}, "external server 'bad': give exactly one of `cmd`"),
        ({"cmd": []}, "external server 'bad': `cmd` must be a non-empty list of non-blank strings"),
        (
            {"cmd": ["node", "  "]},
            "external server 'bad': `cmd` must be a non-empty list of non-blank strings",
        ),
        (
            {"cmd": ["no-such-program-4242"]},
            "external server 'bad': program 'no-such-program-4242' was not found on PATH",
        ),
        ({"cmd": ["./not-here"]}, "external server 'bad': ./not-here is not an executable file"),
        ({"script": "missing.py"}, "external server 'bad': script missing.py does not exist"),
        (
            {"script": "NOTEXEC"},
            "external server 'bad': script NOTEXEC is neither .py nor .sh and is not executable (chmod +x it)",
        ),
        (
            {"script": "x.py", "cwd": "/no/such/dir"},
            "external server 'bad': cwd /no/such/dir does not exist or is not a directory",
        ),
        (
            {"script": "x.py", "env": {"PORT": 8080}},
            "external server 'bad': env PORT must be a string, got int",
        ),
        (
            {"script": "x.py", "env": {"KEY": "env:UNSET_VAR_4242"}},
            "external server 'bad': env KEY needs environment variable UNSET_VAR_4242, which is not set",
        ),
        (
            {"url": "http://localhost:9000/mcp"},
            "external server 'bad': `url` is not supported; external servers are started over stdio with `cmd` or `script`",
        ),
        ({"script": "x.py", "colour": "blue"}, "external server 'bad': unknown key(s) colour"),
        ({"name": "9lives", "script": "x.py"}, "external server '9lives': name must start with a letter"),
        (
            {"name": "has space", "script": "x.py"},
            "external server 'has space': name must start with a letter",
        ),
    ],
)
def test_validation_errors(tmp_path, monkeypatch, entry, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print('never started')\n")
    (tmp_path / "NOTEXEC").write_text("#!/bin/sh\n")
    entry = {"name": "bad", **entry}
    parts = build_server_parts(settings_with(tmp_path, entry))
    info = {e.name: e for e in parts.extensions.entries()}[entry["name"]]
    assert info.status == "failed" and info.tools == []
    assert info.error.startswith(message)
    assert parts.extensions.host is None  # nothing was started
    with pytest.raises(ExtensionError, match="strict plugin mode"):
        build_server(settings_with(tmp_path, entry, plugins={"strict": True}))


def test_duplicate_names_are_refused(build, tmp_path):
    mcp = build(
        settings_with(tmp_path, {"name": "echo", "script": str(ECHO)}, {"name": "echo", "script": str(ECHO)})
    )
    kinds = [(e.name, e.status, e.error) for e in build.parts(mcp).extensions.entries()]
    assert ("echo", "failed", "external server 'echo': another external server has this name") in kinds
    assert ("echo", "running", None) in kinds


def test_cmd_must_be_a_list_in_the_file(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[[external_servers]]\nname = "terrain"\ncmd = "node server.js"\n')
    with pytest.raises(ConfigError, match=r"external_servers\.0\.cmd"):
        load_settings(config, workspace=tmp_path / "workspace")


async def test_configured_from_a_toml_file(build, tmp_path, monkeypatch):
    monkeypatch.setenv("TERRAIN_KEY", "from-our-env")
    config = tmp_path / "config.toml"
    config.write_text(
        "[[external_servers]]\n"
        'name = "terrain"\n'
        f"cmd = [{json.dumps(sys.executable)}, {json.dumps(str(ECHO))}]\n"
        'env = { KEY = "env:TERRAIN_KEY" }\n'
        f"cwd = {json.dumps(str(tmp_path))}\n"
        "timeout_s = 30\n"
        "trusted = false\n"
        'tools = ["echo", "environment", "working_directory"]\n'
    )
    mcp = build(load_settings(config, workspace=tmp_path / "workspace"))
    async with Client(mcp) as client:
        names = {t.name for t in await client.list_tools() if t.name.startswith("terrain_")}
        env = (await client.call_tool("terrain_environment", {})).structured_content
        cwd = (await client.call_tool("terrain_working_directory", {})).content[0].text
    assert names == {"terrain_echo", "terrain_environment", "terrain_working_directory"}
    assert env["KEY"] == "from-our-env" and Path(cwd) == tmp_path


async def test_through_the_stdio_cli_and_children_stop_with_it(tmp_path):
    """`stac-gdal-mcp serve` over stdio, as a host runs it: the external server works through
    it, and stops when it exits."""
    import asyncio

    from fastmcp.client.transports import StdioTransport

    config = tmp_path / "config.toml"
    config.write_text(
        f"workspace = {json.dumps(str(tmp_path / 'workspace'))}\n"
        "[[external_servers]]\n"
        'name = "echo"\n'
        f"script = {json.dumps(str(ECHO))}\n"
    )
    transport = StdioTransport(
        sys.executable,
        ["-m", "stac_gdal_mcp.cli", "serve", "--config", str(config)],
        env={"PYTHONPATH": str(Path(__file__).parent.parent)},
        keep_alive=False,
    )
    async with Client(transport) as client:
        assert (await client.call_tool("echo_echo", {"text": "over stdio"})).content[0].text == "over stdio"
        pid = (await client.call_tool("echo_process_id", {})).structured_content["result"]
        info = listed(await client.call_tool("list_extensions", {}))
    assert info["echo"]["status"] == "running"
    for _ in range(100):  # the child goes when our server goes
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"external server process {pid} still running after stac-gdal-mcp exited")


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["node", "server.js", "--token", "abc123"], "node server.js --token ***"),
        (
            ["node", "server.js", "--api-key=abc123", "--region", "eu"],
            "node server.js --api-key=*** --region eu",
        ),
        (["srv", "https://user:pa55@example.com/x"], "srv https://***@example.com/x"),
        (["srv", "--header", "Authorization: Bearer abc.def"], "srv --header 'Authorization: *** ***'"),
        (["sh", "-c", "exec srv --secret hunter22 TOKEN=xyz"], "sh -c 'exec srv --secret *** TOKEN=***'"),
        (["srv", "ghp_abcdefghijklmnopqrstuvwxyz012345"], "srv ***"),
        (["srv", "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"], "srv ***"),
        (
            ["srv", "/opt/terrain/a1b2c3d4e5f6a7b8c9d0e1f2a3b4.js", "--verbose"],
            "srv /opt/terrain/a1b2c3d4e5f6a7b8c9d0e1f2a3b4.js --verbose",
        ),
        (["srv", "--key-file", "/etc/k"], "srv --key-file /etc/k"),
        (["srv", "--user", "my-configured-value"], "srv --user ***"),
    ],
)
def test_command_lines_are_shown_without_secrets(argv, shown):
    from stac_gdal_mcp.server.extensions.redact import redact_argv

    assert redact_argv(argv, secrets=["my-configured-value"]) == shown


async def test_argv_secrets_are_masked_in_the_stderr_tail(build, tmp_path):
    """A child that dies printing its own argv (as a Python list: no 'flag value' spacing for
    a pattern to see) has the values of its secret flags masked in list_extensions' tail."""
    short = "hunter2-pw"  # short and not random-looking: only knowing it was an argv secret masks it
    crashing = {
        "name": "leaky",
        "cmd": [sys.executable, str(ECHO), "--crash-printing-argv", "--password", short, f"--token={TOKEN}"],
    }
    mcp = build(settings_with(tmp_path, crashing))
    async with Client(mcp) as client:
        shown = json.dumps((await client.call_tool("list_extensions", {})).structured_content)
    error = entries(build, mcp)["leaky"].error
    assert "fatal, started as" in error and "--crash-printing-argv" in error  # the tail is quoted
    for text in (error, shown):
        assert short not in text and TOKEN not in text
