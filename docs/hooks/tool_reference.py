"""mkdocs hook: the tool reference page (tools.md), generated at build time from the server itself.

The server is built on the offline `sample` catalog with a throw-away workspace and listed
through fastmcp's in-memory Client — the same `tools/list`, `resources/list`,
`resources/templates/list` and `prompts/list` answers a host gets — so the page cannot drift
from the schemas. `STAC_GDAL_MCP_*` variables of the shell that runs mkdocs are ignored.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
from unittest import mock

PAGE = "tools.md"
ENV_PREFIX = "STAC_GDAL_MCP_"


async def _listings(server) -> dict:
    from fastmcp import Client

    async with Client(server) as client:
        return {
            "tools": await client.list_tools(),
            "resources": await client.list_resources(),
            "templates": await client.list_resource_templates(),
            "prompts": await client.list_prompts(),
        }


def server_listings() -> dict:
    """What the server built by `build_server(load_settings(default_catalog="sample", ...))` lists."""
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    clean_env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    with tempfile.TemporaryDirectory() as workspace, mock.patch.dict(os.environ, clean_env, clear=True):
        server = build_server(load_settings(default_catalog="sample", workspace=workspace))
        return asyncio.run(_listings(server))


# --- rendering -------------------------------------------------------------------------------


def _text(value: str | None) -> str:
    """Agent-facing text as Markdown: `<` and `>` outside code spans escaped, so they print."""
    parts = re.split(r"(`[^`]*`)", value or "")
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def _summary(description: str | None) -> str:
    """The first sentence of the first paragraph."""
    paragraph = " ".join((description or "").strip().split("\n\n")[0].split())
    return re.split(r"(?<=[.?!])\s", paragraph, maxsplit=1)[0]


def _cell(value: str | None) -> str:
    return _text(value).replace("|", "\\|").replace("\n", " ").strip() or "—"


def _type(schema: dict) -> str:
    """A JSON schema as a short type: `number[]`, `"summary" | "full"`, alternatives joined by *or*."""
    if "$ref" in schema:  # a named model: its name says more than "object"
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in schema or "oneOf" in schema:
        alternatives = [s for s in schema.get("anyOf", schema.get("oneOf")) if s.get("type") != "null"]
        rendered = []
        for alt in alternatives:
            kind = _type(alt)
            # e.g. bbox: number[] or a string "the same value as JSON text"
            rendered.append(f"{kind} ({alt['description']})" if alt.get("description") else kind)
        return " *or* ".join(rendered) or "null"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):  # e.g. bbox: number[] or a string (its JSON text)
        return " *or* ".join(_type({**schema, "type": k}) for k in kind)
    if kind == "array":
        item = _type(schema.get("items", {}))
        return f"{item[:-1]}[]`" if re.fullmatch(r"`\w+(\[\])*`", item) else f"array of {item}"
    bounds = [
        f"{sign} {schema[key]}"
        for key, sign in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("exclusiveMaximum", "<"),
        )
        if key in schema
    ]
    return f"`{kind}`" + (f" ({', '.join(bounds)})" if bounds else "")


def _parameters_table(schema: dict) -> list[str]:
    props = schema.get("properties") or {}
    if not props:
        return ["*No parameters.*", ""]
    required = set(schema.get("required") or [])
    head = "| name | type | default | description |"
    lines = [head, "| --- " * head.count(" | ") + "| --- |"]
    for name, prop in props.items():
        if name in required:
            default = "**required**"
        elif "default" in prop:
            default = f"`{json.dumps(prop['default'])}`"
        else:
            default = "—"
        lines.append(f"| `{name}` | {_type(prop)} | {default} | {_cell(prop.get('description'))} |")
    return [*lines, ""]


_HINTS = (
    ("read_only_hint", "read-only"),
    ("destructive_hint", "destructive"),
    ("idempotent_hint", "idempotent"),
    ("open_world_hint", "open world"),
)


def _tool(tool) -> list[str]:
    lines = [f"## {tool.name}", ""]
    if tool.title:
        lines += [f"*{_text(tool.title)}*", ""]
    lines += [_text(tool.description), ""]
    annotations = tool.annotations.model_dump() if tool.annotations else {}
    hints = [
        f"{label}: **{'yes' if annotations[key] else 'no'}**"
        for key, label in _HINTS
        if annotations.get(key) is not None
    ]
    if hints:
        lines += ["Annotations: " + " · ".join(hints), ""]
    ui = ((tool.meta or {}).get("ui") or {}).get("resourceUri")
    if ui:
        lines += [f"Hosts with MCP Apps show the result in `{ui}` (see [the map app](map-app.md)).", ""]
    lines += ["**Parameters**", "", *_parameters_table(tool.input_schema)]
    from stac_gdal_mcp.server.schemas import RESULT_FIELDS

    fields, alternatives = RESULT_FIELDS.get(tool.name, ([], None))
    if fields:  # kept when the tool was registered (server/schemas.py)
        lines += [f"Result fields (structured content): {', '.join(f'`{name}`' for name in fields)}", ""]
        if alternatives:
            lines += [f"Result: {_text(alternatives)}", ""]
    return lines


def render(listings: dict) -> str:
    tools = listings["tools"]
    lines = [
        "# Tool reference",
        "",
        "Generated when the site is built, from the `tools/list`, `resources/list`,",
        "`resources/templates/list` and `prompts/list` answers of the server on the bundled `sample`",
        "catalog (see `docs/hooks/tool_reference.py`). Array and object parameters also accept the",
        "same value as JSON text, for hosts that send every argument as a string.",
        "",
        "| tool | what it does |",
        "| --- | --- |",
    ]
    lines += [f"| [{t.name}](#{t.name}) | {_cell(_summary(t.description))} |" for t in tools]
    lines.append("")
    for tool in tools:
        lines += _tool(tool)
    lines += ["## Resources", "", "| URI | name | MIME type | description |", "| --- | --- | --- | --- |"]
    for r in listings["resources"]:
        lines.append(f"| `{r.uri}` | {r.name} | `{r.mime_type or ''}` | {_cell(r.description)} |")
    lines += ["", "## Resource templates", ""]
    lines += ["| URI template | name | MIME type | description |", "| --- | --- | --- | --- |"]
    for r in listings["templates"]:
        lines.append(f"| `{r.uri_template}` | {r.name} | `{r.mime_type or ''}` | {_cell(r.description)} |")
    lines += ["", "## Prompts", ""]
    for p in listings["prompts"]:
        lines += [f"### {p.name}", "", _text(p.description), ""]
        args = p.arguments or []
        if args:
            lines += ["| argument | required | description |", "| --- | --- | --- |"]
            lines += [
                f"| `{a.name}` | {'yes' if a.required else 'no'} | {_cell(a.description)} |" for a in args
            ]
            lines.append("")
    return "\n".join(lines) + "\n"


# --- the mkdocs hook -------------------------------------------------------------------------


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render(server_listings())))
    return files
