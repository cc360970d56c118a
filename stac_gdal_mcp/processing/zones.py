"""The zones of a zonal statistics call, read once at the edge: polygons in WGS84 with an id each.

Accepted forms: a GeoJSON FeatureCollection, a Feature, a list of Features, a bare (Multi)Polygon
geometry, any of them as JSON text, or the path of a workspace file (GeoJSON, GeoPackage,
GeoParquet; read with geopandas through pyogrio / pyarrow and brought to WGS84).

A zone's id is its `id_property` (when given: every feature must have it), else the feature's
`id`, else its position. Ids must be unique. An invalid polygon (a self-crossing or unclosed
ring) is repaired with shapely's `make_valid`, keeping its polygonal parts, and a note says so; a
geometry with no area (a point, a line, a ring that repairs to nothing) is refused, naming the
feature.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument

MAX_ZONES = 1_000_000
FILE_SUFFIXES = (".geojson", ".json", ".gpkg", ".parquet", ".geoparquet")


@dataclass(frozen=True)
class Zones:
    """Polygons (shapely, EPSG:4326) with their ids, in the order given, and the notes of reading them."""

    ids: tuple
    geometries: tuple
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.ids)

    def search_area(self):
        """A simple polygon over every zone, for finding items: the union of the zones' bounding
        boxes, or their convex hull when that union has many vertices."""
        import shapely
        from shapely.geometry import box

        boxes = shapely.union_all([box(*g.bounds) for g in self.geometries])
        if shapely.get_num_coordinates(boxes) > 200:
            return boxes.convex_hull
        return boxes


def read_zones(geometries: Any, *, id_property: str | None = None, roots: list[Path] | None = None) -> Zones:
    """`geometries` in any accepted form (see the module docstring) as `Zones`. `roots`: the folders
    a file may be read from (the workspace, local catalogs' folders); None: no file is read."""
    features = _features(geometries, roots)
    if not features:
        raise InvalidArgument("geometries is empty; give a GeoJSON FeatureCollection, Feature or geometry")
    if len(features) > MAX_ZONES:
        raise InvalidArgument(f"geometries has {len(features):,} features; at most {MAX_ZONES:,} are allowed")
    ids, shapes, notes = [], [], []
    for index, feature in enumerate(features):
        zone_id = _zone_id(feature, index, id_property)
        shape, note = _polygonal(feature.get("geometry"), zone_id)
        ids.append(zone_id)
        shapes.append(shape)
        if note:
            notes.append(note)
    if len(set(ids)) != len(ids):
        from collections import Counter

        twice = [i for i, n in Counter(ids).items() if n > 1]
        raise InvalidArgument(
            f"zone ids must be unique; repeated: {', '.join(map(str, twice[:5]))}"
            + ("" if id_property else "; name a property that identifies the zones with id_property")
        )
    return Zones(tuple(ids), tuple(shapes), tuple(notes))


def _features(geometries: Any, roots: list[Path] | None) -> list[dict]:
    """The features of any accepted form (a file is read with geopandas)."""
    if isinstance(geometries, (str, Path)):
        text = str(geometries).strip()
        if text.startswith(("{", "[")):
            try:
                geometries = json.loads(text)
            except ValueError as exc:
                raise InvalidArgument(f"geometries is not valid JSON ({exc})") from None
        else:
            return _read_file(text, roots)
    if isinstance(geometries, dict):
        kind = geometries.get("type")
        if kind == "FeatureCollection":
            return list(geometries.get("features") or [])
        if kind == "Feature":
            return [geometries]
        if kind in ("Polygon", "MultiPolygon", "GeometryCollection"):
            return [{"type": "Feature", "geometry": geometries, "properties": {}}]
        raise InvalidArgument(
            f"geometries of type {kind!r}: give a FeatureCollection, a Feature, a list of Features or a "
            "(Multi)Polygon"
        )
    if isinstance(geometries, (list, tuple)):
        if not all(isinstance(f, dict) and f.get("type") == "Feature" for f in geometries):
            raise InvalidArgument("geometries as a list must be a list of GeoJSON Features")
        return list(geometries)
    raise InvalidArgument(
        "geometries must be GeoJSON (a FeatureCollection, Feature, list of Features or geometry), "
        "as an object or JSON text, or the path of a GeoJSON/GeoPackage/GeoParquet file in the workspace"
    )


def _read_file(path: str, roots: list[Path] | None) -> list[dict]:
    from ..catalogs.security import check_local_path

    if roots is None:
        raise InvalidArgument("geometries names a file, but no folder is allowed here; give GeoJSON")
    candidate = Path(path).expanduser()
    resolved = check_local_path(candidate if candidate.is_absolute() else roots[0] / candidate, roots)
    if resolved.suffix.lower() not in FILE_SUFFIXES:
        raise InvalidArgument(
            f"geometries file '{resolved.name}' is not GeoJSON, GeoPackage or GeoParquet "
            f"({', '.join(FILE_SUFFIXES)})"
        )
    if not resolved.is_file():
        raise InvalidArgument(f"geometries file '{resolved.name}' was not found in the workspace")
    import geopandas

    try:
        if resolved.suffix.lower() in (".parquet", ".geoparquet"):
            frame = geopandas.read_parquet(resolved)
        else:
            frame = geopandas.read_file(resolved, engine="pyogrio")
    except Exception as exc:  # a broken file: one line naming it
        raise InvalidArgument(f"geometries file '{resolved.name}' cannot be read: {exc}") from None
    if frame.crs is not None and not frame.crs.equals("EPSG:4326"):
        frame = frame.to_crs("EPSG:4326")
    # (default=str: a file's other columns may hold times, which JSON has no type for)
    return json.loads(frame.to_json(drop_id=False, default=str)).get("features") or []


def _zone_id(feature: dict, index: int, id_property: str | None):
    properties = feature.get("properties") or {}
    if id_property:
        if properties.get(id_property) is None:
            raise InvalidArgument(f"feature {index} has no property '{id_property}' (id_property)")
        return properties[id_property]
    found = feature.get("id")
    return found if found is not None else index


def _polygonal(geometry: dict | None, zone_id):
    """(shapely polygon or multipolygon, note or None) for one feature's geometry."""
    import shapely
    from shapely.geometry import shape

    if not geometry:
        raise InvalidArgument(f"zone {zone_id!r} has no geometry")
    try:
        geom = shape(geometry)
    except Exception as exc:  # unclosed rings, too few points, bad nesting
        raise InvalidArgument(f"zone {zone_id!r}: its geometry cannot be read ({exc})") from None
    note = None
    if not geom.is_valid:
        reason = shapely.is_valid_reason(geom)
        geom = _polygons_of(shapely.make_valid(geom))
        note = f"zone {zone_id!r}: invalid geometry ({reason}) repaired with make_valid"
    else:
        geom = _polygons_of(geom)
    if geom is None or geom.is_empty or geom.area == 0:
        raise InvalidArgument(
            f"zone {zone_id!r} has no area ({geometry.get('type')}); zones must be polygons or multipolygons"
        )
    west, south, east, north = geom.bounds
    if west < -180 or east > 180 or south < -90 or north > 90:
        raise InvalidArgument(f"zone {zone_id!r} is not in WGS84 longitude/latitude (bounds {geom.bounds})")
    return geom, note


def _polygons_of(geom):
    """The polygonal parts of a geometry (a repaired ring may add lines or points), or None."""
    from shapely.geometry import MultiPolygon, Polygon

    if isinstance(geom, (Polygon, MultiPolygon)):
        return geom
    parts = []
    for part in getattr(geom, "geoms", []):
        found = _polygons_of(part)
        if found is not None:
            parts += list(getattr(found, "geoms", [found]))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else MultiPolygon(parts)
