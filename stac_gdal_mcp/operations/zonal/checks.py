"""Zones and the checks every source of them passes (inline GeoJSON: `zones`, files:
`files`): vertices per zone (limits.max_zone_vertices), finite coordinates, invalid polygons
repaired with shapely's `make_valid` (a note says so), no area refused, WGS84 bounds, one id
type (text when text and numbers are mixed), unique ids. Messages quote ids shortened.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from numbers import Number

from ...catalogs.security import shown
from ...errors import InvalidArgument, LimitExceeded

NOTES_KEPT = 5  # notes kept; then one note counts the rest


@dataclass
class Notes:
    """Notes as a call answers them, the one way they are capped: each once, the first NOTES_KEPT
    kept, the rest counted in one last note (a call's zone checks, a region's groups)."""

    kept: list[str] = dataclasses.field(default_factory=list)
    more: int = 0

    def add(self, notes) -> None:
        for note in notes:
            if note in self.kept:
                continue
            if len(self.kept) < NOTES_KEPT:
                self.kept.append(note)
            else:
                self.more += 1

    def listed(self) -> list[str]:
        return [*self.kept, *([f"... and {self.more:,} more such notes"] if self.more else [])]

    @classmethod
    def of(cls, notes) -> list[str]:
        """`notes`, capped."""
        capped = cls()
        capped.add(notes)
        return capped.listed()


@dataclass(frozen=True)
class Zones:
    """Polygons (shapely, EPSG:4326) with their ids, in the order given, and the notes of reading them."""

    ids: tuple
    geometries: tuple
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.ids)

    def __reduce__(self):
        """Pickled with the geometries as one array of WKB (as shapely pickles each one, with
        its SRID), written and read at once: a dask cluster is sent a group's zones."""
        import numpy as np
        import shapely

        shapes = np.empty(len(self.geometries), dtype=object)
        shapes[:] = self.geometries
        return (_unpickled, (self.ids, shapely.to_wkb(shapes, include_srid=True), self.notes))

    def search_area(self):
        """A simple polygon over every zone, for finding items: the union of the zones' bounding
        boxes, or their convex hull when that union has many vertices (worked out once: a
        per-day call asks it per day, and it takes most of a second for 10,000 zones)."""
        return self._search_area

    def bounds(self) -> tuple[float, float, float, float]:
        """The box of every zone (WGS84): the search area's bounds, without its union."""
        import shapely

        return tuple(float(v) for v in shapely.total_bounds(list(self.geometries)))

    @functools.cached_property
    def _search_area(self):
        import shapely

        b = shapely.bounds(list(self.geometries))
        boxes = shapely.union_all(shapely.box(b[:, 0], b[:, 1], b[:, 2], b[:, 3]))
        if shapely.get_num_coordinates(boxes) > 200:
            return boxes.convex_hull
        return boxes


def _unpickled(ids: tuple, wkb, notes: tuple) -> Zones:
    import shapely

    return Zones(ids, tuple(shapely.from_wkb(wkb)), notes)


def shown_id(zone_id) -> str:
    """A zone id in a message: a number as it is, text quoted and shortened."""
    return shown(zone_id) if isinstance(zone_id, str) else str(zone_id)


def default_limits(limits):
    """`limits` (the settings' limits), or their defaults when None."""
    if limits is None:
        from ...settings import LimitSettings

        return LimitSettings()
    return limits


def checked_id(value, index: int, what: str):
    """A zone id as given when it is text or a finite number; else a one-line refusal."""
    if isinstance(value, str) or (
        isinstance(value, Number) and not isinstance(value, bool) and math.isfinite(value)
    ):
        return value.item() if hasattr(value, "item") else value
    kind = type(value).__name__
    raise InvalidArgument(
        f"feature {index}: {what} is {shown(kind, 40)}; a zone id must be text or a number "
        "(name another property with id_property)"
    )


def property_id(value, index: int, id_property: str):
    """A zone id from feature `index`'s property `id_property` (`value`: None when it has none),
    checked as `checked_id` does."""
    if value is None:
        raise InvalidArgument(f"feature {index} has no property {shown(id_property, 80)} (id_property)")
    return checked_id(value, index, f"its property {shown(id_property, 80)}")


def zones_of(ids: list, shapes, limits, *, id_property: str | None = None, unique: bool = True) -> Zones:
    """`Zones` of ids and shapely geometries (EPSG:4326) after the checks of the module docstring:
    vertices per zone, finite coordinates, repair, area, WGS84 bounds, one id type, unique ids."""
    import numpy as np
    import shapely

    limits = default_limits(limits)
    shapes = np.asarray(shapes, dtype=object)
    missing = np.flatnonzero(shapely.is_missing(shapes))
    if missing.size:
        raise InvalidArgument(f"zone {shown_id(ids[missing[0]])} has no geometry")
    vertices = shapely.get_num_coordinates(shapes)
    over = np.flatnonzero(vertices > limits.max_zone_vertices)
    if over.size:
        raise LimitExceeded(
            f"zone {shown_id(ids[over[0]])} has {int(vertices[over[0]]):,} vertices, more than "
            f"limits.max_zone_vertices={limits.max_zone_vertices:,}: simplify it"
        )
    coordinates, owner = shapely.get_coordinates(shapes, return_index=True)
    bad = ~np.isfinite(coordinates).all(axis=1)
    if bad.any():
        raise InvalidArgument(
            f"zone {shown_id(ids[owner[np.argmax(bad)]])} has a vertex that is not a finite number (NaN or Infinity)"
        )
    del coordinates, owner
    repaired, given = Notes(), shapes.copy()
    valid = shapely.is_valid(shapes)
    polygonal = np.isin(shapely.get_type_id(shapes), (3, 6))  # Polygon, MultiPolygon
    for index in np.flatnonzero(~valid | ~polygonal):
        geom = shapes[index]
        if not valid[index]:
            reason = shapely.is_valid_reason(geom)
            geom = shapely.make_valid(geom)
            repaired.add(
                [f"zone {shown_id(ids[index])}: invalid geometry ({reason}) repaired with make_valid"]
            )
        shapes[index] = _polygons_of(geom)
    notes = repaired.listed()
    area = shapely.area(shapes)
    empty = np.flatnonzero(np.isnan(area) | (area == 0))
    if empty.size:
        index = empty[0]
        raise InvalidArgument(
            f"zone {shown_id(ids[index])} has no area ({given[index].geom_type}); zones must be polygons or "
            "multipolygons"
        )
    bounds = shapely.bounds(shapes)
    outside = np.flatnonzero(
        (bounds[:, 0] < -180) | (bounds[:, 2] > 180) | (bounds[:, 1] < -90) | (bounds[:, 3] > 90)
    )
    if outside.size:
        index = outside[0]
        raise InvalidArgument(
            f"zone {shown_id(ids[index])} is not in WGS84 longitude/latitude "
            f"(bounds {[round(float(v), 6) for v in bounds[index]]})"
        )
    ids = one_id_type(ids)
    if unique:
        check_unique(ids, id_property)
    return Zones(tuple(ids), tuple(shapes), tuple(notes))


def one_id_type(ids: list) -> list:
    """Every id as text when some are text and others numbers (a table column has one type)."""
    texts = sum(isinstance(i, str) for i in ids)
    return [str(i) for i in ids] if 0 < texts < len(ids) else list(ids)


def check_unique(ids, id_property: str | None = None) -> None:
    import pandas as pd

    repeated = pd.Series(ids, dtype=object)
    repeated = repeated[repeated.duplicated()]
    if len(repeated):
        twice = list(dict.fromkeys(repeated))[:5]
        raise InvalidArgument(
            f"zone ids must be unique; repeated: {', '.join(shown(i, 60) for i in twice)}"
            + ("" if id_property else "; name a property that identifies the zones with id_property")
        )


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
