"""Argument types shared by tools: the search arguments of search_items, which the analysis
tools take too, and the catalog id. One definition, so every tool describes them alike."""

from typing import Annotated, Any, Literal

from pydantic import Field

CatalogArg = Annotated[
    str | None, Field(description="catalog id from list_catalogs; default: the configured default catalog")
]
CollectionsArg = Annotated[
    list[str] | str | None, Field(description='collection ids, e.g. ["sentinel-2-l2a"]')
]
DatetimeArg = Annotated[
    str | None, Field(description="RFC 3339 instant or interval: 2024-06-01/2024-06-30, ../2024-06-30")
]
IdsArg = Annotated[list[str] | None, Field(description="item ids")]
QueryArg = Annotated[
    dict[str, Any] | None, Field(description='query extension, e.g. {"platform": {"eq": "sentinel-2a"}}')
]
FilterArg = Annotated[
    str | dict[str, Any] | None, Field(description='CQL2 text or JSON, e.g. "eo:cloud_cover < 10"')
]
FilterLangArg = Annotated[
    Literal["cql2-text", "cql2-json"] | None, Field(description="default: guessed from filter")
]
SortbyArg = Annotated[
    str | list[str] | None,
    Field(description='e.g. "eo:cloud_cover" (ascending) or "-datetime" (newest first)'),
]
MaxCloudArg = Annotated[
    float | None, Field(ge=0, le=100, description="scene eo:cloud_cover at most this percentage")
]

# The names above as search_items spells them, for tools that pass a search on.
SEARCH_ARGS = (
    "collections",
    "datetime",
    "ids",
    "query",
    "filter",
    "filter_lang",
    "sortby",
    "max_cloud_cover",
)
