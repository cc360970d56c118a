"""The parameter types operations declare their fields with, and the groups that travel together.

Each type carries its description (and bounds): an operation's field is declared once, with one
of these or its own `Annotated[..., Field(...)]`, and every face (the tools' schemas, the
Session's signatures and help) reads it from there.

The search's parameter types and `json_text` (an array or object parameter also accepted as
JSON text, and its portable schema) are `discovery.arguments`'; the `search` group's names and
types are search_items' (`discovery.query.ItemSearch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, Field, PrivateAttr, WithJsonSchema

from ..discovery import params
from ..discovery.arguments import json_text
from ..processing.requests import (  # the load group's declaration; the parts other operations take
    SEARCH_DESCRIPTION,
    AssetRef,
    Load,
    SearchGroup,
    search_object,
)
from ..processing.requests import AoiArg as AoiArg
from ..processing.requests import AssetArg as AssetArg
from ..processing.requests import CollectionIdArg as CollectionIdArg
from ..processing.requests import CrsArg as CrsArg
from ..processing.requests import HrefArg as HrefArg
from ..processing.requests import ItemIdArg as ItemIdArg
from ..processing.requests import LoadMaxItemsArg as LoadMaxItemsArg
from ..processing.requests import MaskCloudsArg as MaskCloudsArg
from ..processing.requests import ResolutionArg as ResolutionArg
from ..processing.requests import SearchArg as SearchArg
from ..processing.requests import search_group as search_group
from ..processing.requests import search_kwargs as search_kwargs
from .base import Operation

if TYPE_CHECKING:
    from ..core import Core

# --- the `search` object of the analysis tools ---------------------------------------------------


class _SearchOrItems(SearchGroup, total=False):
    """The `search` object (`SearchGroup`), or explicit `items` (cloud_cover_stats)."""

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


SearchOrItemsArg = Annotated[
    _SearchOrItems | None,
    search_object(tuple(_SearchOrItems.__annotations__)),
    WithJsonSchema(
        {
            "type": "object",
            "description": SEARCH_DESCRIPTION + '; or {"items": [{"collection_id": .., "item_id": ..}]}',
        }
    ),
]


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

MaxItemsArg = Annotated[int | None, Field(ge=1, description="items at most (default 50)")]
MinValidArg = Annotated[float, Field(ge=0, le=1, description="least valid share of a zone; 0: all")]
QuicklookArg = Annotated[bool, Field(description="also return a PNG of the output")]


DryRunArg = Annotated[bool, Field(description="estimate only")]
BBoxArg = json_text(
    Annotated[list[float], Field(min_length=4, max_length=4)] | None,
    "[west, south, east, north] in bbox_crs",
)
BBoxCrsArg = Annotated[str, Field(description="CRS of bbox")]
OutputNameArg = Annotated[str | None, Field(description="file name; default: generated")]


class OnAsset(Operation, AssetRef):
    """The group of an operation on one asset: its fields are `processing.requests.AssetRef`'s -
    `href`, or `collection_id` + `item_id` + `asset` in `catalog`, as the tools name it; in the
    library also `source` (an href, a STAC item dict or pystac.Item, an ItemSummary,
    `(collection_id, item_id)`, an `AssetRef` or an `AssetSource`) with `asset` -, declared there
    once. `plan(core)` resolves it once (href policy, signing)."""

    positional: ClassVar[tuple[str, ...]] = ("source", "asset")

    _input: Any = PrivateAttr(None)

    @property
    def ref(self) -> AssetRef:
        """The input as the tools name it: the call's `AssetRef` fields, as one."""
        return AssetRef.model_construct(**{name: getattr(self, name) for name in AssetRef.model_fields})

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


class OverArea(Operation, Load):
    """The group of an operation over an area: its fields are `processing.requests.Load`'s -
    `aoi`, the `search` that finds its items there (with its catalog), and how they are loaded
    (`mask_clouds`, `resolution`, `crs`, `max_items`; in the library also `gdal_options`) -,
    declared there once; the call is its own odc-stac load (`load`)."""

    positional: ClassVar[tuple[str, ...]] = ("aoi",)

    @property
    def load(self) -> Load:
        """The odc-stac load of the items the search finds over the AOI: the call itself."""
        return self
