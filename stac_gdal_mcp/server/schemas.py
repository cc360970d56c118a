"""Small schemas for `tools/list`: an agent's context and a client's validation time.

Every tool's schemas are sent to the model once per session, and a client checks each structured
result against the tool's `outputSchema` (the `mcp` SDK walks the whole schema with jsonschema, per
item of a list). So the schemas the server lists are made small and cheap:

- `input_schema`: pydantic's `title` keys and `"additionalProperties": true` dropped, and an
  optional argument whose default is null listed without the default and the null type (leaving
  it out says the same), a boolean whose default is false without `"default": false`; arguments
  are described and checked as before. Every parameter keeps
  one JSON type, also beside an enum (portable schemas: see tools/args.py).
- no `_meta` of fastmcp's own when it says nothing (`{"fastmcp": {"tags": []}}`, 31 bytes a tool).
- no `output_schema`: the tool answers with structured content (a JSON object, as MCP's
  structuredContent always is) and the same JSON as text. `{"type": "object"}` would say nothing more
  than that while costing 32 bytes a tool, and a schema of bare field names (`{"items": {}, ...}`)
  would check nothing while costing 2.4 KB. A tool's
  description names what it returns, the docs' tool reference lists each result's fields
  (`RESULT_FIELDS`, kept when the tool is registered), and the precise shapes are the pydantic
  models in `stac_gdal_mcp.models`.
"""

from __future__ import annotations

import functools
from typing import Any

# tool name -> (the result's top-level field names, what else it may answer): for the docs
RESULT_FIELDS: dict[str, tuple[list[str], str | None]] = {}


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


def result_fields(model: type, *alternatives: type) -> tuple[list[str], str | None]:
    """For the docs (`RESULT_FIELDS`): the names of the pydantic `model`'s top-level fields as
    serialized, read from the model class (no JSON schema is generated: a faster start), and what
    else the tool may answer (`alternatives`, e.g. the Estimate of a dry run)."""
    by_alias = model.model_config.get("serialize_by_alias", False)
    names = [
        (field.serialization_alias or field.alias or name) if by_alias else name
        for name, field in model.model_fields.items()
    ]
    others = " or ".join(a.__name__ for a in alternatives)
    return [*names, *model.model_computed_fields], (
        f"{model.__name__}; with dry_run=true: {others}" if others else None
    )


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


def _without_null_default(prop: dict) -> dict:
    """An optional argument whose default is null, without `"default": null` and without its
    null type: leaving the argument out says the same (the tool still accepts an explicit null).
    A boolean whose default is false loses `"default": false` too (left out, it is false)."""
    if prop.get("type") == "boolean" and prop.get("default") is False:
        return {k: v for k, v in prop.items() if k != "default"}
    if "default" not in prop or prop["default"] is not None:
        return prop
    prop = {k: v for k, v in prop.items() if k != "default"}
    kind = prop.get("type")
    if isinstance(kind, list) and "null" in kind:
        kinds = [k for k in kind if k != "null"]
        prop["type"] = kinds[0] if len(kinds) == 1 else kinds
    if isinstance(prop.get("enum"), list):
        prop["enum"] = [v for v in prop["enum"] if v is not None]
    alternatives = prop.get("anyOf")
    if isinstance(alternatives, list):
        alternatives = [a for a in alternatives if a != {"type": "null"}]
        if len(alternatives) == 1:
            del prop["anyOf"]
            prop = {**alternatives[0], **prop}
        else:
            prop["anyOf"] = alternatives
    return prop


def compact_input_schema(schema: dict) -> dict:
    """Titles dropped; no `"default": null` (nor the null type) on optional arguments. (A
    scalar-or-null argument is a type list only on the way: the null type goes with the null
    default, so every listed parameter has one JSON type - portable, see tools/args.py.)"""
    schema = strip_titles(schema)
    props = schema.get("properties")
    if isinstance(props, dict):
        schema["properties"] = {
            name: _without_null_default(_collapse_nullable(p)) for name, p in props.items()
        }
    return schema


def compact_tool(mcp, name: str) -> None:
    """Make the listed input schema of the tool `name`, just registered on `mcp`, small (in place)."""
    from fastmcp.tools import Tool

    components = getattr(getattr(mcp, "_local_provider", None), "_components", {})
    for tool in list(components.values()):
        if isinstance(tool, Tool) and tool.name == name:
            tool.parameters = compact_input_schema(tool.parameters)
            tool.__class__ = _lean_meta_class(type(tool))


class _LeanMeta:
    """A tool whose listed `_meta` leaves out fastmcp's `{"fastmcp": {"tags": []}}` (no tags, no
    version: nothing a client can use; 31 bytes on every tool of every tools/list)."""

    def get_meta(self) -> dict | None:
        meta = super().get_meta()
        if meta.get("fastmcp") == {"tags": []}:
            meta = {k: v for k, v in meta.items() if k != "fastmcp"}
        return meta or None


@functools.cache
def _lean_meta_class(cls: type) -> type:
    return type(cls.__name__, (_LeanMeta, cls), {"__module__": cls.__module__})
