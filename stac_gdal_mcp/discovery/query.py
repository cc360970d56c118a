"""The arguments of an item search: as callers give them (`SearchArgs`) and checked (`Search`).

`SearchArgs` is the one definition of the search arguments that the analysis functions
(cloud cover, loads, time series, composites) pass on to a search over their area; `Search`
is the checked form every search path uses (the API planner, local catalogs, cursors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ..catalogs.security import shown
from ..errors import InvalidArgument
from . import params as p


class SearchArgs(TypedDict, total=False):
    """Search arguments as a caller gives them (the same words as STAC API item search).

    collections: collection ids (a list, or comma-separated text)
    datetime: an RFC 3339 instant or interval, e.g. "2024-06-01/2024-08-31"
    ids: item ids
    query: the query extension, e.g. {"platform": {"eq": "sentinel-2a"}}
    filter: CQL2 text or JSON, e.g. "eo:cloud_cover < 10"
    filter_lang: "cql2-text" or "cql2-json" (default: guessed from filter)
    sortby: e.g. "eo:cloud_cover" or "-datetime" (newest first)
    max_cloud_cover: the scene's eo:cloud_cover at most this percentage
    """

    collections: list[str] | str | None
    datetime: str | None
    ids: list[str] | None
    query: dict[str, Any] | None
    filter: str | dict[str, Any] | None
    filter_lang: Literal["cql2-text", "cql2-json"] | None
    sortby: str | list[str | dict[str, str]] | None
    max_cloud_cover: float | None


SEARCH_ARGS: tuple[str, ...] = tuple(SearchArgs.__annotations__)


class SearchKeywords(SearchArgs, total=False):
    """Every item search argument, the area too: what `search_items` takes besides its catalog,
    limit, cursor and detail (bbox: [west, south, east, north]; intersects: a GeoJSON geometry)."""

    bbox: list[float] | str | None
    intersects: dict[str, Any] | str | None


SEARCH_KEYWORDS: tuple[str, ...] = tuple(SearchKeywords.__annotations__)


def check_names(values: dict, names: tuple[str, ...] = SEARCH_ARGS, others: tuple[str, ...] = ()) -> None:
    """Refuse a name of `values` that is not one of `names` (the search arguments), with the list
    of those there are and the nearest names (of `names` and `others`, the caller's own); the
    names refused are shown on one line (at most five)."""
    import difflib

    unknown = sorted(set(values) - set(names) - set(others), key=str)
    if unknown:
        listed = ", ".join(shown(name, 40) for name in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        near = [m for n in unknown[:5] for m in difflib.get_close_matches(str(n), [*names, *others], n=2)]
        hint = f"; did you mean {' or '.join(repr(m) for m in dict.fromkeys(near))}?" if near else ""
        raise InvalidArgument(
            f"unknown search argument{'s' if len(unknown) > 1 else ''} {listed}{more}; "
            f"the search arguments are {', '.join(names)}{hint}"
        )


def search_args(values: dict[str, Any]) -> SearchArgs:
    """The search arguments among `values` (None left out); refuses any other name."""
    check_names(values)
    return SearchArgs(**{k: v for k, v in values.items() if v is not None})  # type: ignore[typeddict-item]


@dataclass
class Search:
    """The checked search: every argument in one normal form."""

    collections: list[str] | None = None
    bbox: list[float] | None = None
    intersects: dict | None = None
    datetime: str | None = None
    ids: list[str] | None = None
    query: dict | None = None
    filter: dict | None = None  # CQL2-JSON
    sortby: list[dict] | None = None
    max_cloud_cover: float | None = None

    def keywords(self) -> SearchKeywords:
        """This search as `search_items` takes it (checking it again gives the same search)."""
        args = {k: v for k, v in self.__dict__.items() if v is not None}
        if self.filter is not None:
            args["filter_lang"] = "cql2-json"
        return SearchKeywords(**args)  # type: ignore[typeddict-item]

    def cql2_conditions(self) -> list[dict]:
        """query, filter and max_cloud_cover as CQL2-JSON conditions."""
        out = []
        if self.query:
            out.append(p.query_as_cql2(self.query))
        if self.filter:
            out.append(self.filter)
        if self.max_cloud_cover is not None:
            out.append(cloud_cover_condition(self.max_cloud_cover))
        return out


def cloud_cover_condition(value: float) -> dict:
    return {"op": "<=", "args": [{"property": "eo:cloud_cover"}, value]}


def and_all(conditions: list[dict]) -> dict | None:
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"op": "and", "args": conditions}


def check_search(
    collections=None,
    bbox=None,
    intersects=None,
    datetime=None,
    ids=None,
    query=None,
    filter=None,
    filter_lang=None,
    sortby=None,
    max_cloud_cover=None,
) -> Search:
    """Check and normalise the search arguments (one error naming what is wrong)."""
    if bbox is not None and intersects is not None:
        raise InvalidArgument("give either bbox or intersects, not both")
    expr = p.cql2_filter(filter, filter_lang)
    return Search(
        collections=p.as_list(collections, "collections"),
        bbox=p.bbox(bbox),
        intersects=p.intersects(intersects),
        datetime=p.datetime_param(datetime),
        ids=p.as_list(ids, "ids"),
        query=p.query(query),
        filter=None if expr is None else expr.to_json(),
        sortby=p.sortby(sortby),
        max_cloud_cover=p.max_cloud_cover(max_cloud_cover),
    )
