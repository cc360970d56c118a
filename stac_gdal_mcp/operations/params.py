"""The parameter types operations declare their fields with, and the groups that travel together.

Each type carries its description (and bounds): an operation's field is declared once, with one
of these or its own `Annotated[..., Field(...)]`, and every face (the tools' schemas, the
Session's signatures and help) reads it from there.

The search's parameter types and `json_text` (an array or object parameter also accepted as
JSON text, and its portable schema) are `discovery.arguments`'; the `search` group's names and
types are search_items' (`discovery.query.ItemSearch`).
"""

from __future__ import annotations

from functools import cached_property
from types import NoneType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Union, get_args

from pydantic import BeforeValidator, ConfigDict, Field, PrivateAttr, WithJsonSchema
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from ..discovery import params
from ..discovery.arguments import (
    CatalogArg,
    admits_text,
    json_text,
)
from ..discovery.query import SEARCH_ARGS, ItemSearch, SearchArgs, check_names, search_args
from ..errors import InvalidArgument
from ..processing.requests import AssetRef, Load
from .base import LIBRARY_ONLY, Operation

if TYPE_CHECKING:
    from ..core import Core

# --- the `search` object of the analysis tools ---------------------------------------------------


def _as_group_takes(name: str) -> Any:
    """search_items' type of the search argument `name` as the `search` object takes it: its
    bounds kept, and text search_items would parse as JSON (ids, query) passed to the core as it
    is, which parses it as it does for search_items (comma-separated ids, JSON text)."""
    info = ItemSearch.model_fields[name]
    tp, kept = info.annotation, [m for m in info.metadata if not isinstance(m, BeforeValidator)]
    if len(kept) < len(info.metadata) and not admits_text(tp):
        tp = Union[(*(a for a in get_args(tp) if a is not NoneType), str, NoneType)]
    return Annotated[(tp, *kept)] if kept else tp


#: The `search` object as the analysis tools check it: search_items' `catalog` (one id) and
#: search arguments (`discovery.query.SEARCH_ARGS`), typed as search_items types them.
_Search = TypedDict(  # type: ignore[misc]
    "_Search", {"catalog": str | None, **{n: _as_group_takes(n) for n in SEARCH_ARGS}}, total=False
)
_Search.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]


class _SearchOrItems(_Search, total=False):
    """`_Search`, or explicit `items` (cloud_cover_stats)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    items: Annotated[
        list[dict[str, Any]] | None,
        BeforeValidator(lambda value: _items(params.json_text(value, "search.items", always=True))),
    ]


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


def recorded(call: Operation, first: dict, *, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """What an output record lists of a checked call (None left out): `first`, what was worked
    out of the call once (the zones' count, the expression as measured ...), then the call's
    other fields in their order but those `leave_out` names (read into `first`), then its
    `search` group's catalog and search arguments."""
    catalog, _, search = search_group(getattr(call, "search", None))
    skip = {*first, *leave_out, "search"}
    fields = {name: getattr(call, name) for name in type(call).model_fields if name not in skip}
    values = {**first, **fields, "catalog": catalog, **search}
    return {k: v for k, v in values.items() if v is not None}


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
