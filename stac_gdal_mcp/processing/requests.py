"""The parameter groups that travel together, built once at the edge and passed down (as
odc-stac passes `RasterLoadParams`): `AssetRef`, how a caller names one input, and `Load`, an
odc-stac load over an area. The search arguments inside a load are `discovery.query.SearchArgs`.

The operations declare their parameters once, as the fields of their classes
(`operations/base.py`); the groups there (`operations/params.py`: `OnAsset`, `OverArea`) build
these from their fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core import Core
    from ..discovery.query import SearchArgs
    from .access import AssetSource


@dataclass(frozen=True)
class AssetRef:
    """One input as the MCP tools name it: `href`, or `collection_id` + `item_id` + `asset` (a key
    or a band common name) in `catalog`."""

    href: str | None = None
    collection_id: str | None = None
    item_id: str | None = None
    asset: str | None = None
    catalog: str | None = None

    @property
    def given(self) -> bool:
        """Whether any of href, collection_id, item_id names an input."""
        return any(v is not None for v in (self.href, self.collection_id, self.item_id))

    def resolve(self, core: Core) -> AssetSource:
        """The input resolved: href policy applied, signed where its catalog needs it."""
        from .access import resolve_input

        return resolve_input(
            core,
            href=self.href,
            collection_id=self.collection_id,
            item_id=self.item_id,
            asset=self.asset,
            catalog=self.catalog,
        )


@dataclass(frozen=True)
class Load:
    """An odc-stac load over `aoi` (a WGS84 bbox or GeoJSON geometry): the items a search with
    `search` finds in `catalog` (at most `max_items`), cloud-masked with `mask_clouds`, on a grid
    of `crs` / `resolution` (default: the items'), with `gdal_options` added to the reads."""

    aoi: Any
    search: SearchArgs = field(default_factory=dict)  # type: ignore[assignment]
    catalog: str | None = None
    mask_clouds: bool = True
    resolution: float | None = None
    crs: str | None = None
    max_items: int | None = None
    gdal_options: dict[str, str] | None = None

    def parameters(self, **operation: Any) -> dict:
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
            **self.search,
        )
        return {k: v for k, v in values.items() if v is not None}
