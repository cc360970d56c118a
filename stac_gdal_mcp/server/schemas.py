"""Small schemas for `tools/list` (issue 14): an agent's context and a client's validation time.

Every tool's schemas are sent to the model once per session, and a client checks each structured
result against the tool's `outputSchema` (the `mcp` SDK walks the whole schema with jsonschema, per
item of a list). So the schemas the server lists are made small and cheap:

- `input_schema`: pydantic's `title` keys and `"additionalProperties": true` dropped, a scalar-or-null
  argument typed `{"type": [T, "null"]}` instead of an `anyOf`; arguments are described and
  checked as before.
- `output_schema`: the result's top-level fields with their JSON types and descriptions; nested
  objects and lists are typed loosely (`object`, `array`), their element model named in the
  description. A nullable field is `{"type": ["string", "null"]}`, never an `anyOf`. The precise
  shapes are the pydantic models in `stac_gdal_mcp.models` (and the docs' tool reference).
"""

from __future__ import annotations

from typing import Any

_SIMPLE = {"string", "number", "integer", "boolean", "null", "object", "array"}


def strip_titles(schema: Any) -> Any:
    """`schema` without pydantic's `title` keys (a property named "title" is kept) and without
    `"additionalProperties": true` (the default)."""
    if isinstance(schema, list):
        return [strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "additionalProperties" and value is True:  # the default: says nothing
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strip_titles(prop) for name, prop in value.items()}
        else:
            out[key] = strip_titles(value)
    return out


def _ref_name(schema: dict) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _loose(prop: dict) -> dict:
    """One field: its JSON type(s), no nested structure; the element model named in the description."""
    alternatives = prop.get("anyOf") or prop.get("oneOf") or [prop]
    kinds: list[str] = []
    models: list[str] = []
    for alt in alternatives:
        name = _ref_name(alt)
        kind = "object" if name else alt.get("type", "")
        if "enum" in alt or "const" in alt:
            kind = kind or "string"
        if name:
            models.append(name)
        if kind == "array":
            item = alt.get("items") or {}
            item_names = [_ref_name(i) for i in item.get("anyOf", [item])]
            models += [n for n in item_names if n]
        for k in kind if isinstance(kind, list) else [kind]:
            if k in _SIMPLE and k not in kinds:
                kinds.append(k)
    out: dict[str, Any] = {}
    if kinds:
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
    if models:  # the element model's name; field descriptions stay in the models and the docs
        out["description"] = " or ".join(dict.fromkeys(models))
    return out


def compact_output_schema(schema: dict | None) -> dict | None:
    """A result schema cut to its top-level fields (see the module docstring); None stays None."""
    if not schema or "x-fastmcp-wrap-result" in schema:
        return schema
    defs = schema.get("$defs") or {}

    def resolve(s: dict) -> dict:
        name = _ref_name(s)
        return defs.get(name, s) if name else s

    alternatives = [resolve(s) for s in schema.get("anyOf") or schema.get("oneOf") or []] or [schema]
    main = alternatives[0]  # a union (result or dry-run Estimate): the result's fields, the rest named
    props = {name: _loose(prop) for name, prop in (main.get("properties") or {}).items()}
    out: dict[str, Any] = {"type": "object", "properties": props}
    if len(alternatives) > 1:
        others = [a.get("title") for a in alternatives[1:] if a.get("title")]
        out["description"] = f"{main.get('title', 'result')}; with dry_run=true: {' or '.join(others)}"
    required = [name for name in props if name in set(main.get("required") or [])]
    if required and len(alternatives) == 1:
        out["required"] = required
    return out


def _collapse_nullable(prop: dict) -> dict:
    """`anyOf: [{"type": T, ...}, {"type": "null"}]` as `{"type": [T, "null"], ...}` (cheaper, shorter)."""
    alternatives = prop.get("anyOf")
    if not isinstance(alternatives, list) or len(alternatives) != 2:
        return prop
    others = [a for a in alternatives if a != {"type": "null"}]
    if len(others) != 1 or len(alternatives) - len(others) != 1:
        return prop
    (alt,) = others
    kind = alt.get("type")
    if not isinstance(kind, str) or kind in ("array", "object") or "description" in alt:
        return prop
    merged = {k: v for k, v in prop.items() if k != "anyOf"}
    merged.update(alt)
    merged["type"] = [kind, "null"]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return merged


def compact_input_schema(schema: dict) -> dict:
    """Titles dropped; a scalar-or-null argument as a type list instead of an `anyOf`."""
    schema = strip_titles(schema)
    props = schema.get("properties")
    if isinstance(props, dict):
        schema["properties"] = {name: _collapse_nullable(p) for name, p in props.items()}
    return schema


def compact_tool(mcp, name: str) -> None:
    """Make the listed schemas of the tool `name`, just registered on `mcp`, small (in place)."""
    from fastmcp.tools import Tool

    components = getattr(getattr(mcp, "_local_provider", None), "_components", {})
    for tool in list(components.values()):
        if isinstance(tool, Tool) and tool.name == name:
            tool.parameters = compact_input_schema(tool.parameters)
            tool.output_schema = compact_output_schema(tool.output_schema)
