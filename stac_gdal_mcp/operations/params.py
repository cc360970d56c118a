"""The parameter types operations declare their fields with, and the groups that travel together.

Each type carries its description (and bounds): an operation's field is declared once, with one
of these or its own `Annotated[..., Field(...)]`, and every face (the tools' schemas, the
Session's signatures and help) reads it from there.

Portable schemas: each parameter is listed with one JSON type (`"type": "array"`, never a list
of types such as `["array", "string"]`, which hosts that map schemas onto a single-type dialect
reject), and without `$ref`. The one exception is a parameter that takes two JSON shapes (an
AOI: a bbox array or a GeoJSON object): an `anyOf` of single-type branches, no `null`.

JSON text is accepted too, by a documented coercion rather than by the schema: some clients
send array and object arguments as JSON text, `bbox="[13.5, 45.8, 13.7, 45.9]"`. A parameter
declared with `json_text` has a pydantic `BeforeValidator` that parses a string with
`discovery.params.json_text` (the parser the library uses) before the value is checked against
its type, so the coercion is part of the parameter's type and nothing else sees the text.
"""

from __future__ import annotations

import types
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationInfo, WithJsonSchema
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from ..discovery import params
from ..discovery.query import SEARCH_ARGS, SearchArgs, check_names, search_args
from ..errors import InvalidArgument
from ..processing.requests import AssetRef, Load
from .base import LIBRARY_ONLY, Operation

if TYPE_CHECKING:
    from ..core import Core

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
        list[dict[str, Any]] | None,
        BeforeValidator(lambda value: _items(params.json_text(value, "search.items", always=True))),
    ]


assert tuple(_Search.__annotations__) == ("catalog", *SEARCH_ARGS)


def _items(value: Any) -> Any:
    """Search results or item summaries (a notebook's) as {collection_id, item_id} references."""
    from .inputs import item_refs

    if value is None or isinstance(value, str):
        return value
    return [v if isinstance(v, dict) else _ref(v) for v in item_refs(value)]


def _ref(item: Any) -> Any:
    from .inputs import item_ref

    collection_id, item_id = item_ref(item)
    return {"collection_id": collection_id, "item_id": item_id}


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


SEARCH_DESCRIPTION = "search_items' arguments: catalog, collections, datetime..."
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


def search_group(search: dict | None) -> tuple[str | None, list | None, SearchArgs]:
    """The `search` group parsed: its catalog, its explicit items (None: search) and the search
    arguments."""
    values = search_kwargs(search)
    catalog, items = values.pop("catalog", None), values.pop("items", None)
    return catalog, items, search_args(values)


# --- the area and the load of the analysis operations ----------------------------------------------

AoiArg = json_text(list[float] | dict[str, Any], "[west, south, east, north] or GeoJSON geometry, WGS84")
MaxItemsArg = Annotated[int | None, Field(ge=1, description="items at most (default 50)")]
LoadMaxItemsArg = Annotated[int | None, Field(ge=1, description="items at most (default 100)")]
ResolutionArg = Annotated[float | None, Field(gt=0, description="pixel size, CRS units; default native")]
MaskCloudsArg = Annotated[bool, Field(description="drop cloudy pixels (item masks)")]
MinValidArg = Annotated[float, Field(ge=0, le=1, description="least valid share of a zone; 0: all")]
CrsArg = Annotated[str | None, Field(description="output CRS, e.g. EPSG:32633; default: the items'")]
QuicklookArg = Annotated[bool, Field(description="also return a PNG of the output")]


# --- the asset reference of inspect_asset, reproject_asset, convert_asset, preview ---------------

HrefArg = Annotated[
    str | None,
    Field(description="URL, workspace path, or collection_id+item_id+asset"),
]
CollectionIdArg = Annotated[str | None, Field(description="collection id")]
ItemIdArg = Annotated[str | None, Field(description="item id")]
AssetArg = Annotated[str | None, Field(description="asset key or band: red, scl, visual...")]

DryRunArg = Annotated[bool, Field(description="estimate only")]
BBoxArg = json_text(
    Annotated[list[float], Field(min_length=4, max_length=4)] | None,
    "[west, south, east, north] in bbox_crs",
)
BBoxCrsArg = Annotated[str, Field(description="CRS of bbox")]
OutputNameArg = Annotated[str | None, Field(description="file name; default: generated")]


class OnAsset(Operation):
    """The group of an operation on one asset: `href`, or `collection_id` + `item_id` + `asset`
    in `catalog`, as the tools name it; in the library also `source` (an href, a STAC item dict
    or pystac.Item, an ItemSummary, `(collection_id, item_id)`, an `AssetRef` or an
    `AssetSource`) with `asset`. `plan(core)` resolves it once (href policy, signing)."""

    positional: ClassVar[tuple[str, ...]] = ("source", "asset")

    source: Annotated[Any, LIBRARY_ONLY, Field(description="the input, as a Python object")] = None
    href: HrefArg = None
    collection_id: CollectionIdArg = None
    item_id: ItemIdArg = None
    asset: AssetArg = None
    catalog: CatalogArg = None
    _input: Any = PrivateAttr(None)

    @property
    def ref(self) -> AssetRef:
        """The input as the tools name it."""
        return AssetRef(self.href, self.collection_id, self.item_id, self.asset, self.catalog)

    def plan(self, core: Core) -> OnAsset:
        """The call with its input resolved (`input`), once."""
        if self._input is None:
            self._input = self.resolve(core)
        return self

    def resolve(self, core: Core) -> Any:
        """The input resolved: one `AssetSource` (`inputs.resolve`)."""
        from .inputs import resolve

        return resolve(core, self.source, self.asset, self.ref)

    @property
    def input(self) -> Any:
        """The resolved input (after `plan`)."""
        return self._input


class OverArea(Operation):
    """The group of an operation over an area: `aoi`, the `search` that finds its items there
    (with its catalog), and how they are loaded (`mask_clouds`, `resolution`, `crs`,
    `max_items`; in the library also `gdal_options`), parsed once into `load`."""

    positional: ClassVar[tuple[str, ...]] = ("aoi",)

    aoi: AoiArg
    search: SearchArg = None
    mask_clouds: MaskCloudsArg = True
    resolution: ResolutionArg = None
    crs: CrsArg = None
    max_items: LoadMaxItemsArg = None
    gdal_options: Annotated[
        dict[str, str] | None, LIBRARY_ONLY, Field(description="GDAL options added to the reads")
    ] = None

    @cached_property
    def load(self) -> Load:
        """The odc-stac load of the items the search finds over the AOI."""
        catalog, _, search = search_group(self.search)
        return Load(
            self.aoi,
            search,
            catalog,
            self.mask_clouds,
            self.resolution,
            self.crs,
            self.max_items,
            self.gdal_options,
        )
