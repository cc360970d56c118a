"""Result shapes shared by the library and the server's tools. JSON only: no arrays in here."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
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
    """One asset of a summary; in JSON `roles` is left out when it is ["data"] or empty, `bands`
    when empty (and, in an ItemSummary, when the asset's key is its one band's name: `"red": {}`)."""

    roles: list[str] = Field(default=["data"], description='asset roles; left out when ["data"] or none')
    bands: list[str] = Field(default=[], description="band common names (e.g. red, nir)")

    @model_serializer(mode="wrap")
    def _compact(self, handler):  # an agent reads hundreds of these: no default noise
        out = handler(self)
        if out.get("roles") in (["data"], []):
            del out["roles"]
        if not out.get("bands"):
            out.pop("bands", None)
        return out


class ItemSummary(Model):
    """A compact item (<= 5% of the item). In JSON, fields without a value are left
    out (so are the metadata files among the assets: get_item lists them); an asset's `bands`
    when its one band's name is the asset's key or begins it (`"red": {}`
    is the red band, so is `"red-jp2": {}`); and the roles most of the assets share are given
    once, as `asset_roles`, each asset naming its `roles` only when they differ (an asset without
    `roles` has `asset_roles`, or ["data"] when there is none)."""

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
        assets = out.get("assets") or {}
        for key, asset in assets.items():
            bands = asset.get("bands") if isinstance(asset, dict) else None
            if bands and len(bands) == 1 and key.startswith(bands[0]):
                del asset["bands"]
        common = common_roles(a.roles for a in self.assets.values())
        if common:
            for key, asset in assets.items():
                roles = self.assets[key].roles
                if roles == common:
                    asset.pop("roles", None)
                elif not roles or roles == ["data"]:
                    asset["roles"] = list(roles)  # said, since it is not asset_roles
            out = {**{k: v for k, v in out.items() if k != "assets"}, "asset_roles": common, "assets": assets}
        return out


def most_shared(values):
    """The value at least two of `values` share, most often (None when none is shared; empty
    values are not counted)."""
    import json
    from collections import Counter

    counts = Counter(json.dumps(v) for v in values if v)
    if not counts:
        return None
    value, n = counts.most_common(1)[0]
    return json.loads(value) if n >= 2 else None


def common_roles(roles_lists) -> list[str] | None:
    """The roles list most assets have (`roles_lists`: each asset's), when at least two share it
    and it is not ["data"] (the default) - None otherwise."""
    roles = most_shared(list(r) for r in roles_lists)
    return roles if roles != ["data"] else None


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
    matched_is: str | None = Field(
        None, description="how `matched` was counted (detail='count'): exact, the catalog's count, at least"
    )


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


#: The key of a result's `MapLayer` in its `_meta` (the server replaces it by the map's view).
MAP_LAYER_META = "stac-gdal-mcp/map-layer"
#: The key of the map's view in a result's `_meta` (sent to a host that declares MCP Apps).
MAP_VIEW_META = "stac-gdal-mcp/map-view"


class MapLayer(Model):
    """What a result draws on the map, made by the result itself: the scenes' footprints (item
    summaries as JSON, with their geometry when full items), the zones (a zone layer: `stat`,
    `expression`, GeoJSON `features` with their geometry), rasters shown at their bbox (an output,
    a preview, a composite, a change between two periods), a cloud ranking and a time series. A
    tool sends it beside its answer in the result's `_meta`, not in the text or structured content
    an agent reads; the map's view is built from it (maps/view.py). An image is named by its index
    among the answer's images."""

    footprints: list[dict[str, Any]] = []
    zones: dict[str, Any] | None = None
    rasters: list[dict[str, Any]] = Field(
        [],
        description="id, title, bbox (WGS84; none: the call's AOI), geometry, image (its picture's index)",
    )
    ranking: list[dict[str, Any]] | None = Field(
        None,
        description="a cloud ranking's rows in its order: id, collection, datetime, clear_fraction, "
        "cloud_fraction, nodata_fraction, scene_cloud_cover, error",
    )
    series: list[dict[str, Any]] = Field(
        [], description="time series at the call's AOI: expression, reducer, days, image (the chart's index)"
    )
    area: dict[str, Any] | None = Field(
        None,
        description="the call's area (`map_area`): bbox (WGS84), geometry (the polygon given, else None)",
    )
    notes: list[str] = Field([], description="the answer's notes")
    catalog: str | None = Field(
        None,
        description="the catalog a ranking's items were found in, as its call named it (None: the "
        "default): where the map searches the footprints its rows lack",
    )

    @classmethod
    def of_items(cls, items, **fields: Any) -> MapLayer:
        """The footprints of a page of items (summaries, or full STAC items: only what a
        footprint shows is kept of them), with the layer's other `fields` (area, notes)."""
        return cls(footprints=[_footprint_of(i) for i in items], **fields)

    def over(self, area: dict[str, Any] | None) -> MapLayer:
        """The layer drawn at a call's `area` (`map_area`); a layer that holds its area's bbox
        already (a ranking: the bounds of the AOI it measured) keeps it, with the area's polygon."""
        if self.area is not None:
            area = {"bbox": self.area["bbox"], "geometry": area["geometry"] if area else None}
        return self.model_copy(update={"area": area})

    def as_meta(self) -> dict[str, Any]:
        """The layer as a result's `_meta` carries it."""
        return {MAP_LAYER_META: self.model_dump(mode="json", exclude_defaults=True)}


def _footprint_of(item) -> dict[str, Any]:
    """What the map draws of an item: a summary without its assets, or of a full item its id,
    collection, bbox, geometry, datetime, cloud cover and thumbnail asset."""
    if isinstance(item, BaseModel):
        item = item.model_dump(mode="json")
    properties = {
        k: v for k, v in (item.get("properties") or {}).items() if k in ("datetime", "eo:cloud_cover")
    }
    thumbnail = (item.get("assets") or {}).get("thumbnail")
    return {
        **{k: v for k, v in item.items() if k in FOOTPRINT_KEYS and v is not None},
        **({"properties": properties} if properties else {}),
        **({"assets": {"thumbnail": {"href": thumbnail.get("href")}}} if isinstance(thumbnail, dict) else {}),
    }


def map_area(values: Mapping[str, Any], bounds: list[float] | None = None) -> dict[str, Any] | None:
    """The area a call is drawn at, from the values that name it (a call's fields, an output's
    parameters, a search's arguments): `{"bbox", "geometry"}` in WGS84 - `bounds` (with the
    polygon of `aoi`), else `aoi` (a bbox, or a polygon and its bbox), else `intersects` (a
    polygon), else `bbox` when `bbox_crs` is WGS84 or none; None when none of them places it.
    Arrays and objects may be JSON text."""
    aoi = json_value(values.get("aoi"))
    if as_bbox(bounds):
        return {"bbox": as_bbox(bounds), "geometry": polygonal(aoi)}
    if aoi is not None:
        if as_bbox(aoi):
            return {"bbox": as_bbox(aoi), "geometry": None}
        if polygonal(aoi) and geometry_bbox(aoi):
            return {"bbox": geometry_bbox(aoi), "geometry": aoi}
    intersects = polygonal(json_value(values.get("intersects")))
    if intersects and geometry_bbox(intersects):
        return {"bbox": geometry_bbox(intersects), "geometry": intersects}
    bbox, crs = as_bbox(json_value(values.get("bbox"))), values.get("bbox_crs")
    if bbox and (crs is None or str(crs).upper() in WGS84_NAMES):
        return {"bbox": bbox, "geometry": None}
    return None


WGS84_NAMES = ("EPSG:4326", "OGC:CRS84", "WGS84", "CRS84")
_JSON_TEXT = re.compile(r"^\s*[\[{]")


def is_number(v: Any) -> bool:
    """A finite int or float (no bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def json_value(value: Any) -> Any:
    """JSON text of an array or object parsed (left as it is when it is no JSON)."""
    if isinstance(value, str) and _JSON_TEXT.match(value):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def as_bbox(value: Any) -> list[float] | None:
    """A bbox of 4 numbers (of 6: its 2D part), else None."""
    if not isinstance(value, list) or not all(is_number(v) for v in value):
        return None
    if len(value) == 4:
        return list(value)
    if len(value) == 6:
        return [value[0], value[1], value[3], value[4]]
    return None


def polygonal(geom: Any) -> dict | None:
    """A GeoJSON Polygon or MultiPolygon, else None."""
    if (
        isinstance(geom, dict)
        and geom.get("type") in ("Polygon", "MultiPolygon")
        and isinstance(geom.get("coordinates"), list)
    ):
        return geom
    return None


def geometry_bbox(geom: Any) -> list[float] | None:
    """The bbox of a GeoJSON geometry's (or Feature's) coordinates, None when it has none."""
    if not isinstance(geom, dict):
        return None
    if geom.get("type") == "Feature":
        return geometry_bbox(geom.get("geometry"))
    xs: list[float] = []
    ys: list[float] = []

    def walk(c: Any) -> None:
        if not isinstance(c, list):
            return
        if len(c) >= 2 and is_number(c[0]) and is_number(c[1]):
            xs.append(c[0])
            ys.append(c[1])
            return
        for part in c:
            walk(part)

    walk(geom.get("coordinates"))
    return [min(xs), min(ys), max(xs), max(ys)] if xs else None


FOOTPRINT_KEYS = ("id", "collection", "datetime", "cloud_cover", "bbox", "geometry", "thumbnail")


class SearchAnswer(BaseModel):
    """A page of search_items as the agent reads it (the text is this, as JSON). detail="summary":
    a table - `columns`, and the `rows` under each of `collections` with what its items share
    (else one list `rows`); `item_uri`/`thumbnail`: URI templates. detail="full": `items`, full
    STAC items. Then `returned`, `matched` (`matched_is`: how it was counted), `next_cursor`,
    `notes`; federated: `catalogs`."""

    model_config = ConfigDict(extra="allow")

    columns: list[str] | None = None
    collections: dict[str, dict[str, Any]] | None = None
    rows: list[list[Any]] | None = None
    items: list[dict[str, Any]] | None = None
    returned: int | None = None
    matched: int | None = None
    matched_is: str | None = None
    next_cursor: str | None = Field(None, description="pass back as `cursor` for the next page")
    notes: list[str] | None = None
