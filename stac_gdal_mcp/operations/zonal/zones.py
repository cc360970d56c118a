"""The zones of a zonal statistics call, read once at the edge: polygons in WGS84 with an id each.

Accepted forms: a GeoJSON FeatureCollection, a Feature, a list of Features, a bare (Multi)Polygon
geometry, any of them as JSON text, or the path of a workspace file (GeoJSON, GeoPackage,
FlatGeobuf, GeoParquet: read in chunks by `files`, brought to WGS84).

Bounds, checked before the work they bound (limits.*, docs/configuration.md): GeoJSON given
inline is at most `max_geometries_bytes` and `max_geometries_depth` levels deep, measured before
it is parsed (text) or walked (an object); a call has at most `max_zones` zones (a file's count
is taken from its metadata before any geometry is read); one zone has at most
`max_zone_vertices` vertices. A vertex that is not a finite number (NaN, Infinity) is refused.

A zone's id is its `id_property` (when given: every feature must have it), else the feature's
`id`, else its position. Ids are text or numbers; when some are text and others numbers (ids on
some features only), every id is taken as text, so that the table has one id type. Ids must be
unique. An invalid polygon (a self-crossing or unclosed ring) is repaired with shapely's
`make_valid`, keeping its polygonal parts, and a note says so; a geometry with no area (a point,
a line, a ring that repairs to nothing) is refused, naming the feature. Every message quotes
ids, property names and paths shortened (`security.shown`), paths relative to the workspace.
The checks every source passes are in `checks` (`Zones`, `zones_of`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...catalogs.security import shown
from ...errors import InvalidArgument, LimitExceeded, StacGdalMcpError
from .checks import Zones, checked_id, default_limits, property_id, shown_id, zones_of

__all__ = ["Zones", "read_zones", "shown_id"]


def read_zones(geometries: Any, **options) -> Zones:
    """`geometries` in any accepted form (see the module docstring) as `Zones`. Options:
    `id_property`; `roots`, the folders a file may be read from (the workspace, local catalogs'
    folders; None: no file is read); `limits`, the settings' limits (defaults when None); `job`,
    which stops a long file read (time limit, cancellation) between chunks.

    A refusal hands back the memory its reading took before it is raised: the error leaves
    without the frames of the reading (their arrays: a 10^6-vertex zone's coordinates, copies
    and repairs), and the C heap is trimmed (`trimmed_heap`) - glibc keeps what threads freed
    (eight refused 10^6-vertex files left the server ~180 MB larger)."""
    try:
        return _read_zones(geometries, **options)
    except StacGdalMcpError as exc:
        refused = exc.with_traceback(None)
        refused.__cause__ = refused.__context__ = None
    trimmed_heap()
    raise refused


def trimmed_heap() -> None:
    """Return the C heap's free pages to the system (glibc's `malloc_trim`; elsewhere nothing)."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def _read_zones(
    geometries: Any,
    *,
    id_property: str | None = None,
    roots: list[Path] | None = None,
    limits=None,
    job=None,
) -> Zones:
    limits = default_limits(limits)
    if id_property is not None and not isinstance(id_property, str):
        raise InvalidArgument("id_property must be the name of a property (text)")
    if isinstance(geometries, Path) or (
        isinstance(geometries, str) and not geometries.strip().startswith(("{", "["))
    ):
        from .files import read_zone_file

        if roots is None:
            raise InvalidArgument("geometries names a file, but no folder is allowed here; give GeoJSON")
        return read_zone_file(str(geometries).strip(), roots, limits, id_property=id_property, job=job)
    features = _features(geometries, limits)
    if not features:
        raise InvalidArgument("geometries is empty; give a GeoJSON FeatureCollection, Feature or geometry")
    if len(features) > limits.max_zones:
        raise LimitExceeded(
            f"geometries has {len(features):,} features; at most limits.max_zones={limits.max_zones:,}"
        )
    ids = [_feature_id(f, i, id_property) for i, f in enumerate(features)]
    shapes = [_shape(f.get("geometry"), zone_id) for f, zone_id in zip(features, ids)]
    return zones_of(ids, shapes, limits, id_property=id_property)


# --- inline GeoJSON: measured before it is parsed -------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _text_depth(text: str) -> int:
    """How deep the brackets of JSON `text` nest (strings left out), without parsing it."""
    import numpy as np

    data = np.frombuffer(_STRING.sub("", text).encode(), dtype=np.uint8)
    step = np.isin(data, (ord("["), ord("{"))).astype(np.int64) - np.isin(data, (ord("]"), ord("}")))
    return int(step.cumsum().max(initial=0))


def _too_deep(limits) -> InvalidArgument:
    return InvalidArgument(
        f"geometries nests deeper than limits.max_geometries_depth={limits.max_geometries_depth} levels "
        "(GeoJSON needs about 8; a GeometryCollection inside another adds levels): give plain Features"
    )


def _too_large(size: str, limits) -> LimitExceeded:
    return LimitExceeded(
        f"geometries given inline is {size}, more than limits.max_geometries_bytes="
        f"{limits.max_geometries_bytes:,}: write the zones to a file in the workspace (GeoParquet, "
        "GeoPackage, FlatGeobuf) and name it"
    )


def _checked_object(value: Any, limits) -> None:
    """Walk a parsed object (no recursion) to its depth and size, stopping past either limit."""
    budget = limits.max_geometries_bytes
    stack, nodes = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        if depth > limits.max_geometries_depth:
            raise _too_deep(limits)
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            nodes += len(item) if isinstance(item, str) else 1
            if nodes > budget:
                raise _too_large(f"over {budget:,} bytes", limits)
            continue
        nodes += 2
        stack.extend((child, depth + 1) for child in children)
    size = len(json.dumps(value, separators=(",", ":"), default=str).encode())
    if size > budget:
        raise _too_large(f"{size:,} bytes", limits)


def _features(geometries: Any, limits) -> list[dict]:
    """The features of inline GeoJSON (an object or JSON text), its size and depth checked first."""
    if isinstance(geometries, str):
        text = geometries.strip()
        if len(text.encode()) > limits.max_geometries_bytes:
            raise _too_large(f"{len(text.encode()):,} bytes", limits)
        if _text_depth(text) > limits.max_geometries_depth:
            raise _too_deep(limits)
        try:
            geometries = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(f"geometries is not valid JSON ({shown(exc, 200)})") from None
    else:
        _checked_object(geometries, limits)
    if isinstance(geometries, dict):
        kind = geometries.get("type")
        if kind == "FeatureCollection":
            found = geometries.get("features") or []
            if not isinstance(found, list) or not all(isinstance(f, dict) for f in found):
                raise InvalidArgument("geometries: a FeatureCollection's features must be a list of Features")
            return found
        if kind == "Feature":
            return [geometries]
        if kind in ("Polygon", "MultiPolygon", "GeometryCollection"):
            return [{"type": "Feature", "geometry": geometries, "properties": {}}]
        raise InvalidArgument(
            f"geometries of type {shown(kind, 40)}: give a FeatureCollection, a Feature, a list of "
            "Features or a (Multi)Polygon"
        )
    if isinstance(geometries, (list, tuple)):
        if not all(isinstance(f, dict) and f.get("type") == "Feature" for f in geometries):
            raise InvalidArgument("geometries as a list must be a list of GeoJSON Features")
        return list(geometries)
    raise InvalidArgument(
        "geometries must be GeoJSON (a FeatureCollection, Feature, list of Features or geometry), "
        "as an object or JSON text, or the path of a GeoJSON/GeoPackage/FlatGeobuf/GeoParquet file "
        "in the workspace"
    )


def _feature_id(feature: dict, index: int, id_property: str | None):
    properties = feature.get("properties") or {}
    if not isinstance(properties, dict):
        raise InvalidArgument(f"feature {index}: its properties must be an object")
    if id_property:
        return property_id(properties.get(id_property), index, id_property)
    found = feature.get("id")
    return index if found is None else checked_id(found, index, "its id")


def _shape(geometry, zone_id):
    """A shapely geometry of one feature's GeoJSON geometry (checked by `zones_of`)."""
    from shapely.geometry import shape

    if not geometry:
        raise InvalidArgument(f"zone {shown_id(zone_id)} has no geometry")
    if not isinstance(geometry, dict):
        raise InvalidArgument(f"zone {shown_id(zone_id)}: its geometry must be a GeoJSON object")
    try:
        return shape(geometry)
    except Exception as exc:  # unclosed rings, too few points, bad nesting, null coordinates
        raise InvalidArgument(
            f"zone {shown_id(zone_id)}: its geometry cannot be read ({shown(exc, 200)})"
        ) from None
