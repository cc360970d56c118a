"""Argument types shared by tools: the search arguments of search_items, which the analysis
tools take too (`with_search_args`), the catalog id, and `json_text`, the one way a tool
declares an array or object parameter. One definition, so every tool describes them alike.

Some MCP clients and LLM hosts (MCP Inspector CLI 0.15, several agents) send array and object
arguments as JSON text: `bbox="[13.5, 45.8, 13.7, 45.9]"`. A parameter declared with
`json_text` accepts that text too, says so in its schema (a string alternative in `anyOf`), and
has it parsed by the core's `discovery.params.json_text`, the same parser the library uses.
"""

import functools
import inspect
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, Field, ValidationInfo

from ...discovery import params
from ...discovery.query import SEARCH_ARGS

JSON_TEXT = "the same value as JSON text"


class _AlsoJsonText:
    """Lists the JSON-text string among the parameter's alternatives in its JSON schema: one flat
    `anyOf` (value types, then the string, then null), the description at the top."""

    def __init__(self, text: str):
        self.text = text

    def __get_pydantic_json_schema__(self, core_schema, handler):
        schema = dict(handler(core_schema))
        outer = {key: schema.pop(key) for key in ("title", "description", "examples") if key in schema}
        options = [dict(o) for o in schema["anyOf"]] if set(schema) == {"anyOf"} else [schema]
        strings = [o for o in options if o.get("type") == "string"]
        if strings:  # the parameter has a text form of its own (comma-separated, CQL2 text)
            strings[0]["description"] = self.text
        else:
            nulls = [o for o in options if o.get("type") == "null"]
            options = [o for o in options if o.get("type") != "null"]
            options += [{"type": "string", "description": self.text}, *nulls]
        return {"anyOf": options, **outer}


def _admits_text(tp) -> bool:
    if get_origin(tp) in (Union, types.UnionType):
        return any(_admits_text(arg) for arg in get_args(tp))
    return tp is str


def json_text(tp, description: str, *, text: str = JSON_TEXT):
    """`tp` (an array or object type, optionally `| str` or `| None`), also accepted as JSON text.

    When `tp` has no text form of its own, text is parsed by the core parser before the value
    is checked against `tp`; bad JSON text is an error naming the parameter. When it has one
    (`| str`: comma-separated ids, CQL2 text), the text goes to the core function as it is,
    which tells JSON text (starting with `[` or `{`) from its own form with the same parser;
    `text` then describes the string alternative. Constraints go inside `tp`, on the type they
    constrain: `Annotated[list[float], Field(min_length=4)] | None`.
    """
    if _admits_text(tp):
        return Annotated[tp, _AlsoJsonText(text), Field(description=description)]

    def parse(value: Any, info: ValidationInfo) -> Any:
        return params.json_text(value, info.field_name or "argument", always=True)

    return Annotated[tp, BeforeValidator(parse), _AlsoJsonText(text), Field(description=description)]


CatalogArg = Annotated[
    str | None, Field(description="catalog id from list_catalogs; default: the configured default catalog")
]
CollectionsArg = json_text(
    list[str] | str | None,
    'collection ids, e.g. ["sentinel-2-l2a"]',
    text="comma-separated collection ids, or the same list as JSON text",
)
DatetimeArg = Annotated[
    str | None, Field(description="RFC 3339 instant or interval: 2024-06-01/2024-06-30, ../2024-06-30")
]
IdsArg = json_text(list[str] | None, "item ids")
QueryArg = json_text(dict[str, Any] | None, 'query extension, e.g. {"platform": {"eq": "sentinel-2a"}}')
FilterArg = json_text(
    str | dict[str, Any] | None,
    'CQL2 text or JSON, e.g. "eo:cloud_cover < 10"',
    text="CQL2 text, or CQL2 JSON as JSON text",
)
FilterLangArg = Annotated[
    Literal["cql2-text", "cql2-json"] | None, Field(description="default: guessed from filter")
]
SortbyArg = json_text(
    str | list[str] | None,
    'e.g. "eo:cloud_cover" (ascending) or "-datetime" (newest first)',
    text='comma-separated fields ("-" for descending), or the same list as JSON text',
)
MaxCloudArg = Annotated[
    float | None, Field(ge=0, le=100, description="scene eo:cloud_cover at most this percentage")
]

# The search arguments (`discovery.query.SearchArgs`), as every tool declares them.
SEARCH_PARAMETERS = {
    "collections": CollectionsArg,
    "datetime": DatetimeArg,
    "ids": IdsArg,
    "query": QueryArg,
    "filter": FilterArg,
    "filter_lang": FilterLangArg,
    "sortby": SortbyArg,
    "max_cloud_cover": MaxCloudArg,
}
assert tuple(SEARCH_PARAMETERS) == SEARCH_ARGS


def with_search_args(fn):
    """A tool function whose parameter `search` stands for the search arguments: the tool takes
    them one by one (in `search`'s place, typed and described as in search_items, default None)
    and the function receives them as one dict, `search`."""
    signature = inspect.signature(fn)
    parameters = list(signature.parameters.values())
    at = [p.name for p in parameters].index("search")
    expanded = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=tp)
        for name, tp in SEARCH_PARAMETERS.items()
    ]
    signature = signature.replace(parameters=[*parameters[:at], *expanded, *parameters[at + 1 :]])

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        values = signature.bind(*args, **kwargs).arguments
        search = {name: values.pop(name, None) for name in SEARCH_PARAMETERS}
        return await fn(**values, search=search)

    annotations = {k: v for k, v in fn.__annotations__.items() if k != "search"}
    wrapper.__signature__ = signature
    wrapper.__annotations__ = {**annotations, **SEARCH_PARAMETERS}
    del wrapper.__wrapped__  # the signature above is the tool's, not fn's
    return wrapper
