"""The parameter groups that travel together, parsed once at the edge and passed down (as
odc-stac passes `RasterLoadParams`): `AssetRef`, how a caller names one input, and `Load`, an
odc-stac load over an area - whose fields (the input's names; the AOI, the `search` object, how
the items are loaded) are declared here once: an operation on one asset is an `AssetRef`, one
over an area a `Load` (`operations.params.OnAsset` and `OverArea` derive from them), and its
tool's parameters, its Session method's keywords and its checks are those fields.

The `search` object's names and types are search_items' (`discovery.query.ItemSearch`); its
search arguments, parsed, are `discovery.query.SearchArgs`.
"""

from __future__ import annotations

from functools import cached_property
from types import NoneType
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from ..discovery import params
from ..discovery.arguments import CatalogArg, admits_text, json_text
from ..discovery.query import SEARCH_ARGS, ItemSearch, SearchArgs, check_names, search_args
from ..errors import InvalidArgument

if TYPE_CHECKING:
    from ..core import Core
    from .access import AssetSource

LIBRARY_ONLY = "library only"  # in a field's Annotated metadata: a Session keyword, no tool parameter


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
SearchGroup = TypedDict(  # type: ignore[misc]
    "SearchGroup", {"catalog": str | None, **{n: _as_group_takes(n) for n in SEARCH_ARGS}}, total=False
)
SearchGroup.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]


def search_object(names: tuple[str, ...]):
    """The check of a `search` object whose names are `names`."""

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
    SearchGroup | None,
    search_object(tuple(SearchGroup.__annotations__)),
    WithJsonSchema({"type": "object", "description": SEARCH_DESCRIPTION}),
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
LoadMaxItemsArg = Annotated[int | None, Field(ge=1, description="items at most (default 100)")]
ResolutionArg = Annotated[float | None, Field(gt=0, description="pixel size, CRS units; default native")]
MaskCloudsArg = Annotated[bool, Field(description="drop cloudy pixels (item masks)")]
CrsArg = Annotated[str | None, Field(description="output CRS, e.g. EPSG:32633; default: the items'")]


# --- the asset reference of inspect_asset, reproject_asset, convert_asset, preview ---------------

HrefArg = Annotated[
    str | None,
    Field(description="URL, workspace path, or collection_id+item_id+asset"),
]
CollectionIdArg = Annotated[str | None, Field(description="collection id")]
ItemIdArg = Annotated[str | None, Field(description="item id")]
AssetArg = Annotated[str | None, Field(description="asset key or band: red, scl, visual...")]


class AssetRef(BaseModel):
    """One input as a caller names it: `href`, or `collection_id` + `item_id` + `asset` (a key
    or a band common name) in `catalog`, as the MCP tools name it; in the library also `source`,
    any Python object naming it (resolved by `operations.inputs`). The fields are the parameters
    of every operation on one asset, declared here only (`operations.params.OnAsset` derives
    from it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    source: Annotated[Any, LIBRARY_ONLY, Field(description="the input, as a Python object")] = None
    href: HrefArg = None
    collection_id: CollectionIdArg = None
    item_id: ItemIdArg = None
    asset: AssetArg = None
    catalog: CatalogArg = None

    @property
    def given(self) -> bool:
        """Whether any of href, collection_id, item_id names an input."""
        return any(v is not None for v in (self.href, self.collection_id, self.item_id))

    def resolve(self, core: Core) -> AssetSource:
        """The input the tools' names give, resolved: href policy applied, signed where its
        catalog needs it."""
        from .access import resolve_input

        return resolve_input(
            core,
            href=self.href,
            collection_id=self.collection_id,
            item_id=self.item_id,
            asset=self.asset,
            catalog=self.catalog,
        )


class Load(BaseModel):
    """An odc-stac load over `aoi` (a WGS84 bbox or GeoJSON geometry): the items its `search`
    object finds (in its catalog, at most `max_items`), cloud-masked with `mask_clouds`, on a grid
    of `crs` / `resolution` (default: the items'), with `gdal_options` added to the reads. The
    fields are the parameters of every operation over an area, declared here only (in this
    order in its tool's schema and its Session method's signature). Built unchecked
    (`model_construct`) where the values are checked already (Session.load, a period of
    compare_periods)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

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
    def _searched(self) -> tuple[str | None, SearchArgs]:
        catalog, _, search = search_group(self.search)
        return catalog, search

    @property
    def catalog(self) -> str | None:
        """The catalog the `search` object names (None: the default one)."""
        return self._searched[0]

    @property
    def search_args(self) -> SearchArgs:
        """The `search` object's search arguments, parsed once."""
        return self._searched[1]

    def record_parameters(self, **operation: Any) -> dict:
        """The parameters an output record lists (those given; None left out): the AOI, the
        operation's own, then the load's and the search arguments."""
        values = dict(
            aoi=self.aoi,
            **operation,
            mask_clouds=self.mask_clouds,
            resolution=self.resolution,
            crs=self.crs,
            catalog=self.catalog,
            max_items=self.max_items,
            **self.search_args,
        )
        return {k: v for k, v in values.items() if v is not None}
