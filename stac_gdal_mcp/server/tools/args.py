"""Argument types shared by tools: the search arguments of search_items, the one `search` object
the analysis tools take (`SearchArg`), the catalog id, the asset reference, and `json_text`, the
one way a tool declares an array or object parameter. One definition, so every tool describes
them alike, and briefly: every tool's schema is sent to the model each session (issue 14).

Some MCP clients and LLM hosts (MCP Inspector CLI 0.15, several agents) send array and object
arguments as JSON text: `bbox="[13.5, 45.8, 13.7, 45.9]"`. A parameter declared with
`json_text` accepts that text too, says so in its schema by one more type
(`"type": ["array", "string"]`; the server's instructions say the string is JSON text), and has
it parsed by the core's `discovery.params.json_text`, the same parser the library uses.
"""

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, ConfigDict, Field, ValidationInfo, WithJsonSchema
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from ...discovery import params
from ...discovery.query import SEARCH_ARGS, check_names

_MERGEABLE = {"items", "minItems", "maxItems", "additionalProperties", "properties", "required"}


def _one_schema(schema: dict) -> dict:
    """The alternatives of `schema` (an `anyOf` of plain types) as one schema with a list of
    types, plus "string" (the JSON text): `{"type": ["array", "string"], "items": ...}`. Keywords
    such as `items` only apply to their own type, so the merged schema means the same."""
    outer = {key: schema.pop(key) for key in ("title", "description", "examples") if key in schema}
    options = [dict(o) for o in schema["anyOf"]] if set(schema) == {"anyOf"} else [schema]
    kinds: list[str] = []
    merged: dict[str, Any] = {}
    for option in options:
        kind = option.pop("type", None)
        for key, value in option.items():
            if key not in _MERGEABLE or merged.get(key, value) != value:  # cannot merge: keep anyOf
                return {"anyOf": [*options, {"type": "string"}], **outer}
            merged[key] = value
        for k in kind if isinstance(kind, list) else [kind]:
            if k and k not in kinds:
                kinds.append(k)
    if "string" not in kinds:
        kinds.insert(kinds.index("null") if "null" in kinds else len(kinds), "string")
    return {"type": kinds, **merged, **outer}


class _AlsoJsonText:
    """The parameter's JSON schema as one schema whose types include "string" (the JSON text)."""

    def __get_pydantic_json_schema__(self, core_schema, handler):
        return _one_schema(dict(handler(core_schema)))


def _admits_text(tp) -> bool:
    if get_origin(tp) in (Union, types.UnionType):
        return any(_admits_text(arg) for arg in get_args(tp))
    return tp is str


def json_text(tp, description: str):
    """`tp` (an array or object type, optionally `| str` or `| None`), also accepted as JSON text.

    When `tp` has no text form of its own, text is parsed by the core parser before the value
    is checked against `tp`; bad JSON text is an error naming the parameter. When it has one
    (`| str`: comma-separated ids, CQL2 text), the text goes to the core function as it is,
    which tells JSON text (starting with `[` or `{`) from its own form with the same parser;
    `description` then says what the text form is. Constraints go inside `tp`, on the type they
    constrain: `Annotated[list[float], Field(min_length=4)] | None`.
    """
    if _admits_text(tp):
        return Annotated[tp, _AlsoJsonText(), Field(description=description)]

    def parse(value: Any, info: ValidationInfo) -> Any:
        return params.json_text(value, info.field_name or "argument", always=True)

    return Annotated[tp, BeforeValidator(parse), _AlsoJsonText(), Field(description=description)]


CatalogArg = Annotated[str | None, Field(description="catalog id from list_catalogs")]
CollectionsArg = json_text(
    list[str] | str | None, 'collection ids, e.g. ["sentinel-2-l2a"], or comma-separated text'
)
DatetimeArg = Annotated[
    str | None, Field(description="RFC 3339 instant or interval, e.g. 2024-06-01/2024-06-30, 2024-06")
]
IdsArg = json_text(list[str] | None, "item ids")
QueryArg = json_text(dict[str, Any] | None, 'query extension, e.g. {"platform": {"eq": "sentinel-2a"}}')
FilterArg = json_text(str | dict[str, Any] | None, 'CQL2 text or JSON, e.g. "eo:cloud_cover < 10"')
FilterLangArg = Annotated[
    Literal["cql2-text", "cql2-json"] | None, Field(description="default: guessed from filter")
]
SortbyArg = json_text(
    str | list[str] | None,
    'e.g. "eo:cloud_cover", "-datetime" ("-": descending); a list or comma-separated',
)
MaxCloudArg = Annotated[
    float | None, Field(ge=0, le=100, description="scene eo:cloud_cover at most this percentage")
]


# --- the `search` object of the analysis tools ---------------------------------------------------


class _Search(TypedDict, total=False):
    """The `search` object as the analysis tools check it: search_items' `catalog` (one id) and
    search arguments (`discovery.query.SearchArgs`), typed as search_items types them; text forms
    (comma-separated ids, JSON text, CQL2 text) go to the core, which parses them as it does for
    search_items."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    catalog: str | None
    collections: list[str] | str | None
    datetime: str | None
    ids: list[str] | str | None
    query: dict[str, Any] | str | None
    filter: str | dict[str, Any] | None
    filter_lang: Literal["cql2-text", "cql2-json"] | None
    sortby: str | list[str] | None
    max_cloud_cover: Annotated[float, Field(ge=0, le=100)] | None


class _SearchOrItems(_Search, total=False):
    """`_Search`, or explicit `items` (cloud_cover_stats)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    items: Annotated[
        list[dict[str, str]] | None,
        BeforeValidator(lambda value: params.json_text(value, "search.items", always=True)),
    ]


assert tuple(_Search.__annotations__) == ("catalog", *SEARCH_ARGS)


def _search_object(names: tuple[str, ...]):
    def check(value: Any) -> Any:
        """JSON text parsed; an unknown name refused with the list of the names there are."""
        value = params.json_text(value, "search", always=True)
        if isinstance(value, dict):
            check_names(value, names)
        return value

    return BeforeValidator(check)


SEARCH_DESCRIPTION = (
    "which items, by search_items' arguments: catalog, collections, datetime, ids, query, filter, "
    "filter_lang, sortby, max_cloud_cover"
)
SearchArg = Annotated[
    _Search | None,
    _search_object(tuple(_Search.__annotations__)),
    WithJsonSchema({"type": ["object", "string"], "description": SEARCH_DESCRIPTION}),
]
SearchOrItemsArg = Annotated[
    _SearchOrItems | None,
    _search_object(tuple(_SearchOrItems.__annotations__)),
    WithJsonSchema(
        {
            "type": ["object", "string"],
            "description": SEARCH_DESCRIPTION + ', or {"items": [{"collection_id": ..., "item_id": ...}]}',
        }
    ),
]


def search_kwargs(search: dict | None) -> dict[str, Any]:
    """The `search` object as keyword arguments of a Session method - catalog, items and the
    search arguments are its keywords too (None values left out)."""
    return {k: v for k, v in (search or {}).items() if v is not None}


# --- the asset reference of inspect_asset, reproject_asset, convert_asset, preview ---------------

HrefArg = Annotated[
    str | None,
    Field(description="raster URL or workspace path; else collection_id + item_id + asset"),
]
CollectionIdArg = Annotated[str | None, Field(description="the item's collection")]
ItemIdArg = Annotated[str | None, Field(description="item id (from search_items)")]
AssetArg = Annotated[str | None, Field(description="asset key or band name: red, nir, scl, visual, B04...")]
