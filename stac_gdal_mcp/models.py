"""Result shapes shared by the library and the server's tools. JSON only: no arrays in here."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class Model(BaseModel):
    """The one pydantic base of every result model: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class SearchFeatures(Model):
    """What a catalog can do, read from its conformance classes (or known for local catalogs)."""

    item_search: bool = False
    filter_cql2_text: bool = False
    filter_cql2_json: bool = False
    query: bool = False
    sort: bool = False
    fields: bool = False
    collection_search: bool = False
    free_text: bool = False
    aggregation: bool = False


class CatalogInfo(Model):
    id: str
    title: str | None = None
    url: str | None = None
    path: str | None = None
    kind: str = Field(description="'api' for a STAC API, 'local' for a static catalog/ItemCollection/NDJSON")
    signing: str | None = None
    reachable: bool | None = Field(None, description="checked only when asked (check_reachable=true)")
    error: str | None = None
    features: SearchFeatures | None = None


class CatalogList(Model):
    catalogs: list[CatalogInfo]


class AssetSummary(Model):
    """One asset of a summary; in JSON `roles` is left out when it is ["data"], `bands` when empty
    (and, in an ItemSummary, when the asset's key is its one band's name: `"red": {}`)."""

    roles: list[str] = Field(default=["data"], description='asset roles; left out when ["data"]')
    bands: list[str] = Field(default=[], description="band common names (e.g. red, nir)")

    @model_serializer(mode="wrap")
    def _compact(self, handler):  # an agent reads hundreds of these: no default noise (issue 14)
        out = handler(self)
        if out.get("roles") == ["data"]:
            del out["roles"]
        if not out.get("bands"):
            out.pop("bands", None)
        return out


class ItemSummary(Model):
    """A compact item (issue 14: <= 5% of the item). In JSON, fields without a value are left out,
    and an asset's `bands` when they are just the asset's key (`"red": {}` is the red band)."""

    id: str
    collection: str | None = None
    datetime: str | None = None
    cloud_cover: float | None = None
    bbox: list[float] | None = None
    platform: str | None = None
    gsd: float | None = None
    proj_code: str | None = None
    assets: dict[str, AssetSummary] = {}
    thumbnail: str | None = None

    @model_serializer(mode="wrap")
    def _compact(self, handler):
        out = {k: v for k, v in handler(self).items() if v is not None}
        for key, asset in (out.get("assets") or {}).items():
            if isinstance(asset, dict) and asset.get("bands") == [key]:
                del asset["bands"]
        return out


class SearchResult(Model):
    """One page of an item search: `items` (ItemSummary objects, or full STAC items as dicts
    with detail="full"), `returned` (items on this page), `matched` (all matching items, when the
    catalog counts them), `next_cursor` (pass it back as `cursor` for the next page; None on the
    last one) and `notes` (anything translated, done client-side or cut short)."""

    items: list[ItemSummary | dict[str, Any]]
    returned: int
    matched: int | None = None
    next_cursor: str | None = Field(None, description="pass back as `cursor` to get the next page")
    notes: list[str] = []


class CollectionSummary(Model):
    id: str
    title: str | None = None
    description: str | None = None
    spatial_extent: list[float] | None = None
    temporal_extent: list[str | None] | None = None
    license: str | None = None
    asset_keys: list[str] = []


class CollectionList(Model):
    collections: list[CollectionSummary]
    returned: int
    matched: int | None = None
    next_cursor: str | None = None
    notes: list[str] = []


class AssetDefinition(Model):
    title: str | None = None
    type: str | None = None
    roles: list[str] = []
    bands: list[str] = []
    gsd: float | None = None


class CollectionDetail(Model):
    id: str
    title: str | None = None
    description: str | None = None
    license: str | None = None
    spatial_extent: list[list[float]] | None = None
    temporal_extent: list[list[str | None]] | None = None
    summaries: dict[str, Any] = {}
    item_assets: dict[str, AssetDefinition] = {}
    providers: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    keywords: list[str] = []


class Queryable(Model):
    name: str
    type: str | None = None
    title: str | None = None
    description: str | None = None
    enum: list[Any] | None = None


class Queryables(Model):
    collection_id: str | None
    queryables: list[Queryable]
    notes: list[str] = []
