"""What every client reads first, `tools/list`: portable schemas and a small listing.

Portability: the rules of the MCP Inspector 2.x schema lint (`--strict`; Inspector 2.12's
schemaLint: `type-union`, `remote-ref`, `untyped-schema`, `boolean-schema`), applied to every
subschema, plus what hosts that map tool schemas onto a single-type dialect (Gemini's function
declarations, the OpenAPI 3.0 subset) need: no `null` anywhere, no `$ref`/`$defs`, every
parameter described and listed with one JSON type (an `anyOf` of single-type branches only for
a parameter of two shapes). The check is tested on schemas that break each rule, so it cannot
pass by checking nothing.

Size: the compact JSON of the tools/list answer as it goes over the wire, every tool counted
(zonal_stats and save_search included).
"""

import json

import pytest
from fastmcp import Client

# the Inspector's subschema positions (schemaLint.ts)
SUBSCHEMA = ("items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
             "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema")  # fmt: skip
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SUBSCHEMA_MAPS = (
    "properties",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "$defs",
    "definitions",
)
BOOLEAN_ALLOWED = {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
CONSTRAINING = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema",
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
    "required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains",
    "additionalItems", "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
    "unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
    "$recursiveRef",
}  # fmt: skip

# the whole tools/list answer, compact JSON: 21,426 B with compare_periods and threshold_area
# taking mask_clouds, min_valid_fraction, resolution (and compare_periods threshold) as tools
LIMIT_BYTES = 21 * 1024


def _children(node: dict, path: str):
    for key in SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield sub, f"{path}.{key}.{name}", key
    for key in SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield sub, f"{path}.{key}[{i}]", key
    for key in SUBSCHEMA:
        if key in node:
            yield node[key], f"{path}.{key}", key


def portability_findings(schema, path: str = "", keyword: str | None = None) -> list[str]:
    """Every place `schema` breaks a rule (see the module docstring), as 'path: rule'."""
    if isinstance(schema, bool):
        return [] if keyword in BOOLEAN_ALLOWED else [f"{path}: boolean schema"]
    if not isinstance(schema, dict):
        return [f"{path}: not a schema"]
    found = []
    kind = schema.get("type")
    if isinstance(kind, list):
        found.append(f"{path}: type is a list {kind}")
    if kind == "null" or None in (schema.get("enum") or []):
        found.append(f"{path}: null")
    if "$ref" in schema or "$defs" in schema or "definitions" in schema:
        found.append(f"{path}: $ref/$defs")
    if keyword != "not" and not (
        CONSTRAINING & set(schema) or ("if" in schema and {"then", "else"} & set(schema))
    ):
        found.append(f"{path}: untyped (accepts anything)")
    for child, child_path, child_keyword in _children(schema, path):
        found += portability_findings(child, child_path, child_keyword)
    return found


def parameter_findings(tool: dict) -> list[str]:
    """Per parameter: a description, and one JSON type (or an anyOf of single-type branches)."""
    found = []
    for name, prop in tool["inputSchema"].get("properties", {}).items():
        where = f"{tool['name']}.{name}"
        if not str(prop.get("description") or "").strip():
            found.append(f"{where}: no description")
        branches = prop.get("anyOf", [prop])
        if not all(isinstance(b.get("type"), str) for b in branches) or "oneOf" in prop:
            found.append(f"{where}: not one JSON type")
    return found


@pytest.fixture(scope="module")
def listing(tmp_path_factory):
    """The tools/list answer as a client receives it (by alias, as on the wire), on a 2026-07-28
    or a handshake-era connection, whichever is larger."""
    import asyncio

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    mcp = build_server(load_settings(workspace=tmp_path_factory.mktemp("schemas") / "workspace"))

    async def listed(mode: str):
        async with Client(mcp, mode=mode) as client:
            answer = await client.session.list_tools()
        return answer.model_dump(mode="json", by_alias=True, exclude_none=True)

    # the larger of the two eras' listings: a handshake-era one names each task tool's `execution`
    return max((asyncio.run(listed(mode)) for mode in ("auto", "legacy")), key=_size)


def test_the_check_finds_each_broken_rule():
    broken = {
        "type": "object",
        "properties": {
            "a": {"type": ["array", "string"], "description": "a"},
            "b": {"anyOf": [{"type": "number"}, {"type": "null"}], "description": "b"},
            "c": {"$ref": "#/$defs/C"},
            "d": {"description": "only words"},
            "e": {"type": "array", "items": True, "description": "e"},
            "f": {"type": "string", "enum": ["x", None], "description": "f"},
        },
        "$defs": {"C": {"type": "object"}},
    }
    found = portability_findings(broken)
    for expected in (
        ".properties.a: type is a list",
        ".properties.b.anyOf[1]: null",
        ".properties.c: $ref",
        ".properties.d: untyped",
        ".properties.e.items: boolean schema",
        ".properties.f: null",
        ": $ref/$defs",
    ):
        assert any(f.startswith(expected) for f in found), (expected, found)
    tool = {"name": "t", "inputSchema": broken}
    assert {"t.c: no description", "t.c: not one JSON type", "t.a: not one JSON type"} <= set(
        parameter_findings(tool)
    )
    ok = {"type": "object", "properties": {"x": {"type": "string", "description": "x"}}}
    assert portability_findings(ok) == [] and parameter_findings({"name": "t", "inputSchema": ok}) == []


def test_every_tool_schema_is_portable(listing):
    tools = listing["tools"]
    assert len(tools) >= 16
    found = [
        f"{t['name']} {kind}{f}"
        for t in tools
        for kind in ("inputSchema", "outputSchema")
        if kind in t
        for f in portability_findings(t[kind])
    ]
    assert found == []
    assert [f for t in tools for f in parameter_findings(t)] == []
    assert all(t.get("description", "").strip() for t in tools)


def test_array_and_object_parameters_list_one_type(listing):
    props = {t["name"]: t["inputSchema"]["properties"] for t in listing["tools"]}
    assert {k: v for k, v in props["search_items"]["bbox"].items() if k != "description"} == {
        "type": "array",
        "items": {"type": "number"},
    }
    assert props["composite"]["search"]["type"] == "object"
    assert props["composite"]["bands"]["type"] == "array"
    assert props["search_items"]["filter"]["type"] == "string"  # CQL2 text; an object is accepted
    assert [b["type"] for b in props["cloud_cover_stats"]["aoi"]["anyOf"]] == ["array", "object"]


def _size(value) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def test_tools_list_is_small(listing):
    """The whole answer, zonal_stats and save_search included, within the limit; every tool
    described."""
    size = _size(listing)
    assert {"zonal_stats", "save_search"} <= {t["name"] for t in listing["tools"]}
    assert all(t.get("description") for t in listing["tools"])
    assert size <= LIMIT_BYTES, f"tools/list is {size:,} bytes"
