"""The arguments of an item search, declared once (`ItemSearch`), and their checked form (`Search`).

`ItemSearch` is a pydantic model whose annotated fields (`arguments.py`: type, description,
bounds) are search_items' parameters - the only place they are spelled. From it are made: the
search_items tool's schema (server/tools/discovery.py), `Session.search`'s signature and help,
the names a typo is matched against ("did you mean"), the groups the other callers take
(`SEARCH_ARGS`: the `search` object of the analysis operations; `SEARCH_KEYWORDS`: those and the
area) and the checked `Search`: each field marked `Checked` is one of its attributes, in the
field's order, its value the check's normal form.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, ConfigDict

from ..catalogs.security import shown
from ..errors import InvalidArgument
from . import params as p
from .arguments import (
    BBoxWgs84Arg,
    CatalogsArg,
    CollectionsArg,
    CursorArg,
    DatetimeArg,
    DetailArg,
    FieldsArg,
    FilterArg,
    FilterLangArg,
    IdsArg,
    IntersectsArg,
    MaxCloudArg,
    PageLimitArg,
    QueryArg,
    SortbyArg,
)


class Checked:
    """In a field's Annotated metadata: the field is an attribute of the checked `Search`, its
    value `check(value, *the values of also)`; `first`: checked before the others (its error is
    the one given when several arguments are wrong)."""

    def __init__(self, check, *also: str, first: bool = False):
        self.check, self.also, self.first = check, also, first


def _cql2_json(value, filter_lang):
    expr = p.cql2_filter(value, filter_lang)
    return None if expr is None else expr.to_json()


class ItemSearch(BaseModel):
    """search_items' parameters (and `Session.search`'s): the catalog(s), the search arguments of
    STAC API item search, and how the page is answered."""

    model_config = ConfigDict(extra="forbid")

    catalog: CatalogsArg = None
    collections: Annotated[CollectionsArg, Checked(lambda v: p.as_list(v, "collections"))] = None
    bbox: Annotated[BBoxWgs84Arg, Checked(p.bbox)] = None
    intersects: Annotated[IntersectsArg, Checked(p.intersects)] = None
    datetime: Annotated[DatetimeArg, Checked(p.datetime_param)] = None
    ids: Annotated[IdsArg, Checked(lambda v: p.as_list(v, "ids"))] = None
    query: Annotated[QueryArg, Checked(p.query)] = None
    filter: Annotated[FilterArg, Checked(_cql2_json, "filter_lang", first=True)] = None  # CQL2-JSON
    filter_lang: FilterLangArg = None
    sortby: Annotated[SortbyArg, Checked(p.sortby)] = None
    max_cloud_cover: Annotated[MaxCloudArg, Checked(p.max_cloud_cover)] = None
    limit: PageLimitArg = None
    cursor: CursorArg = None
    detail: DetailArg = "summary"
    fields: FieldsArg = None

    @classmethod
    def of(cls, **values: Any) -> ItemSearch:
        """The search as a caller gives it, values unchecked (the core checks them once, into a
        `Search`, per catalog: collection names are each catalog's); a name that is none of the
        fields is refused with the nearest ones."""
        check_names(values, tuple(cls.model_fields))
        return cls.model_construct(**values)

    def keywords(self) -> dict[str, Any]:
        """Its search arguments and area (SEARCH_KEYWORDS), as given."""
        return {name: getattr(self, name) for name in SEARCH_KEYWORDS}


def _checks() -> dict[str, Checked]:
    """Field name -> its `Checked`, for the fields of the checked `Search`, in order."""
    out = {}
    for name, info in ItemSearch.model_fields.items():
        for marker in info.metadata:
            if isinstance(marker, Checked):
                out[name] = marker
    return out


CHECKS = _checks()
AREA: tuple[str, ...] = ("bbox", "intersects")  # the area: the analysis operations' own argument
#: What says how the found items are answered, not which: search_items' and Session.search's own.
PAGE: tuple[str, ...] = ("catalog", "limit", "cursor", "detail", "fields")
SEARCH_ARGS: tuple[str, ...] = tuple(n for n in ItemSearch.model_fields if n not in (*AREA, *PAGE))
SEARCH_KEYWORDS: tuple[str, ...] = (*SEARCH_ARGS, *AREA)

#: The search arguments as a caller gives them (a notebook's `**search`, a load's `search`), and
#: with the area: typed dicts made from the fields.
SearchArgs = TypedDict(  # type: ignore[misc]
    "SearchArgs", {n: ItemSearch.model_fields[n].annotation for n in SEARCH_ARGS}, total=False
)
SearchKeywords = TypedDict(  # type: ignore[misc]
    "SearchKeywords", {n: ItemSearch.model_fields[n].annotation for n in SEARCH_KEYWORDS}, total=False
)


def check_names(values: dict, names: tuple[str, ...] = SEARCH_ARGS, others: tuple[str, ...] = ()) -> None:
    """Refuse a name of `values` that is not one of `names` (the search arguments), with the list
    of those there are and the nearest names (of `names` and `others`, the caller's own); the
    names refused are shown on one line (at most five)."""
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


class _Checked:
    """What the checked search does (its attributes are the fields marked `Checked`)."""

    def keywords(self) -> SearchKeywords:
        """This search as `search_items` takes it (checking it again gives the same search)."""
        args = {k: v for k, v in self.__dict__.items() if v is not None}
        if args.get("filter") is not None:
            args["filter_lang"] = "cql2-json"
        return SearchKeywords(**args)  # type: ignore[typeddict-item]

    def cql2_conditions(self) -> list[dict]:
        """query, filter and max_cloud_cover as CQL2-JSON conditions."""
        out = []
        if self.query:  # type: ignore[attr-defined]
            out.append(p.query_as_cql2(self.query))  # type: ignore[attr-defined]
        if self.filter:  # type: ignore[attr-defined]
            out.append(self.filter)  # type: ignore[attr-defined]
        if self.max_cloud_cover is not None:  # type: ignore[attr-defined]
            out.append(cloud_cover_condition(self.max_cloud_cover))  # type: ignore[attr-defined]
        return out


#: The checked search: every argument in one normal form (collections, bbox, intersects,
#: datetime, ids, query, filter as CQL2-JSON, sortby as [{field, direction}], max_cloud_cover).
Search = dataclasses.make_dataclass(
    "Search", [(name, Any, None) for name in CHECKS], bases=(_Checked,), namespace={"__module__": __name__}
)


def cloud_cover_condition(value: float) -> dict:
    return {"op": "<=", "args": [{"property": "eo:cloud_cover"}, value]}


def and_all(conditions: list[dict]) -> dict | None:
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"op": "and", "args": conditions}


def check_search(**values: Any) -> Search:  # type: ignore[valid-type]
    """Check and normalise the search arguments `values` (SEARCH_KEYWORDS) into a `Search`: one
    error naming what is wrong."""
    check_names(values, SEARCH_KEYWORDS)
    if values.get("bbox") is not None and values.get("intersects") is not None:
        raise InvalidArgument("give either bbox or intersects, not both")
    order = sorted(CHECKS.items(), key=lambda named: not named[1].first)
    checked = {name: c.check(values.get(name), *(values.get(a) for a in c.also)) for name, c in order}
    return Search(**{name: checked[name] for name in CHECKS})
