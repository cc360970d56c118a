"""Argument types shared by tools: the search arguments of search_items, the one `search` object
the analysis tools take (`SearchArg`), the catalog id, the asset reference, and `json_text`, the
one way a tool declares an array or object parameter. One definition, so every tool describes
them alike, and briefly: every tool's schema is sent to the model each session.

Portable schemas: each parameter is listed with one JSON type (`"type": "array"`,
never a list of types such as `["array", "string"]`, which hosts that map tool schemas onto a
single-type dialect - Gemini's function declarations - reject), and without `$ref`. The one
exception is a parameter that takes two JSON shapes (an AOI: a bbox array or a GeoJSON object):
an `anyOf` of single-type branches, no `null`.

JSON text is still accepted, by a documented coercion in the server rather than by the schema:
some MCP clients and LLM hosts (MCP Inspector CLI 0.15, several agents) send array and object
arguments as JSON text, `bbox="[13.5, 45.8, 13.7, 45.9]"`. A parameter declared with `json_text`
has a pydantic `BeforeValidator` that parses a string with the core's `discovery.params.json_text`
(the same parser the library uses) before the value is checked against its type - fastmcp
validates a tool's arguments with pydantic, so the coercion is part of the parameter's type and
nothing else sees the text. The server's instructions tell the model that JSON text is accepted.
"""

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, ConfigDict, Field, ValidationInfo, WithJsonSchema
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from ...discovery import params
from ...discovery.query import SEARCH_ARGS, check_names
from ...errors import InvalidArgument

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


def _admits_text(tp) -> bool:
    if get_origin(tp) in (Union, types.UnionType):
        return any(_admits_text(arg) for arg in get_args(tp))
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
    if _admits_text(tp):
        return Annotated[tp, _Listed(listed), Field(description=description)]

    def parse(value: Any, info: ValidationInfo) -> Any:
        return params.json_text(value, info.field_name or "argument", always=True)

    return Annotated[tp, BeforeValidator(parse), _Listed(listed), Field(description=description)]


CatalogArg = Annotated[str | None, Field(description="catalog id")]
CollectionsArg = json_text(list[str] | str | None, 'collection ids, e.g. ["sentinel-2-l2a"]')
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
    sortby: str | list[str | dict[str, str]] | None
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
            area = [name for name in ("bbox", "intersects") if name in value]
            if area:
                raise InvalidArgument(
                    f"'{area[0]}' is not part of `search`: the area is the tool's own argument "
                    "(save_search: `bbox`; cloud_cover_stats, time_series, composite: `aoi`; "
                    "zonal_stats: `geometries`)"
                )
            check_names(value, names)
        return value

    return BeforeValidator(check)


SEARCH_DESCRIPTION = "search_items' arguments (catalog, collections, datetime, filter...)"
SearchArg = Annotated[
    _Search | None,
    _search_object(tuple(_Search.__annotations__)),
    WithJsonSchema({"type": "object", "description": SEARCH_DESCRIPTION}),
]
SearchOrItemsArg = Annotated[
    _SearchOrItems | None,
    _search_object(tuple(_SearchOrItems.__annotations__)),
    WithJsonSchema(
        {
            "type": "object",
            "description": SEARCH_DESCRIPTION + '; or {"items": [{"collection_id": .., "item_id": ..}]}',
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
    Field(description="URL or workspace path (or collection_id+item_id+asset)"),
]
CollectionIdArg = Annotated[str | None, Field(description="collection id")]
ItemIdArg = Annotated[str | None, Field(description="item id")]
AssetArg = Annotated[str | None, Field(description="asset key or band: red, nir, scl, visual...")]

DryRunArg = Annotated[bool, Field(description="true: estimate only, write nothing")]
