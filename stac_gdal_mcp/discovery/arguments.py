"""Annotated parameter types: a parameter's type with its description and bounds, the one place
they are spelled; every face (tool schemas, the Session's signatures and help) reads them from
there. The search's own are here (`discovery.query.ItemSearch` is made of them); the operations'
are in `operations/params.py`.

Portable schemas: each parameter is listed with one JSON type (`"type": "array"`, never a list
of types such as `["array", "string"]`, which hosts that map schemas onto a single-type dialect
reject), and without `$ref`. The one exception is a parameter that takes two JSON shapes (an
AOI: a bbox array or a GeoJSON object): an `anyOf` of single-type branches, no `null`.

JSON text is accepted too, by a documented coercion rather than by the schema: some clients
send array and object arguments as JSON text, `bbox="[13.5, 45.8, 13.7, 45.9]"`. A parameter
declared with `json_text` has a pydantic `BeforeValidator` that parses a string with
`params.json_text` (the parser the library uses) before the value is checked against its type,
so the coercion is part of the parameter's type and nothing else sees the text.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, Field, ValidationInfo

from . import params

_OUTER = ("title", "description", "examples")


def _one_schema(schema: dict, listed: str | None) -> dict:
    """The schema of `schema`'s alternatives (an `anyOf`, or one schema) that a client sees: the
    one of JSON type `listed`, or (None) those that are neither text nor null - one schema, or an
    `anyOf` of single-type branches when two shapes remain (array or object)."""
    outer = {key: schema.pop(key) for key in _OUTER if key in schema}
    options = [dict(o) for o in schema["anyOf"]] if set(schema) == {"anyOf"} else [schema]
    if listed is None:
        kept = [o for o in options if o.get("type") not in ("string", "null")]
    else:
        kept = [o for o in options if o.get("type") == listed]
    if not kept:
        raise TypeError(f"no {listed or 'array or object'} type among {options}")
    return {**kept[0], **outer} if len(kept) == 1 else {"anyOf": kept, **outer}


class _Listed:
    """The parameter's JSON schema as a client sees it (`_one_schema`)."""

    def __init__(self, listed: str | None):
        self.listed = listed

    def __get_pydantic_json_schema__(self, core_schema, handler):
        return _one_schema(dict(handler(core_schema)), self.listed)


def admits_text(tp) -> bool:
    """Whether the type `tp` has a text form of its own (`str` among its alternatives)."""
    if get_origin(tp) in (Union, types.UnionType):
        return any(admits_text(arg) for arg in get_args(tp))
    return tp is str


def json_text(tp, description: str, *, listed: str | None = None):
    """`tp` (an array or object type, optionally `| str` or `| None`), also accepted as JSON text.

    The schema lists one JSON type: `listed` ("array", "object" or "string"), by default the
    array or object type of `tp`. When `tp` has no text form of its own, a string is parsed by
    the core parser before the value is checked against `tp`; bad JSON text is an error naming
    the parameter. When it has one (`| str`: comma-separated ids, CQL2 text), the text goes to
    the core function as it is, which tells JSON text (starting with `[` or `{`) from its own
    form with the same parser; `description` then says what the text form is. Constraints go
    inside `tp`, on the type they constrain: `Annotated[list[float], Field(min_length=4)] | None`.
    """
    if admits_text(tp):
        return Annotated[tp, _Listed(listed), Field(description=description)]

    def parse(value: Any, info: ValidationInfo) -> Any:
        return params.json_text(value, info.field_name or "argument", always=True)

    return Annotated[tp, BeforeValidator(parse), _Listed(listed), Field(description=description)]


CatalogArg = Annotated[str | None, Field(description="catalog id")]
CatalogsArg = json_text(
    list[str] | str | None, 'catalog id; several: comma-separated ("*": all)', listed="string"
)
CollectionsArg = json_text(list[str] | str | None, 'collection ids, e.g. ["sentinel-2-l2a"]')
BBoxWgs84Arg = json_text(list[float] | None, "[west, south, east, north], WGS84")
IntersectsArg = json_text(dict[str, Any] | None, "GeoJSON geometry (WGS84), instead of bbox")
DatetimeArg = Annotated[str | None, Field(description="instant or interval: 2024-06-01/2024-06-30, 2024-06")]
IdsArg = json_text(list[str] | None, "item ids")
QueryArg = json_text(dict[str, Any] | None, 'query extension: {"platform": {"eq": "sentinel-2a"}}')
FilterArg = json_text(
    str | dict[str, Any] | None, 'CQL2 text: "eo:cloud_cover < 10" (or CQL2-JSON)', listed="string"
)
FilterLangArg = Annotated[Literal["cql2-text", "cql2-json"] | None, Field(description="default: guessed")]
SortbyArg = json_text(
    str | list[str | dict[str, str]] | None,
    '"eo:cloud_cover", "-datetime" (desc), "a,b"; or [{field, direction}]',
    listed="string",
)
MaxCloudArg = Annotated[
    float | None, Field(ge=0, le=100, description="scene eo:cloud_cover at most (percent)")
]
PageLimitArg = Annotated[int | None, Field(ge=1, description="items per page")]
CursorArg = Annotated[str | None, Field(description="the previous call's next_cursor")]
DetailArg = Annotated[Literal["summary", "full", "count"], Field(description="summary: a table")]
FieldsArg = json_text(
    list[str] | dict[str, list[str]] | str | None,
    '["id", "datetime"]; "-x": all but x',
    listed="array",
)
