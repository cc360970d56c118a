"""Which items of different catalogs are the same acquisition, and the merge order.

Two items are the same acquisition when
  1. their `platform`s are equal (case, `_` and spaces ignored: `LANDSAT_9` = `landsat-9`), and
  2. their datetimes are at most `DEDUP_SECONDS` (5 s) apart, and
  3. their tiles are equal when both items name one - the MGRS tile for Sentinel-2
     (`s2:mgrs_tile`, `mgrs:utm_zone` + `mgrs:latitude_band` + `mgrs:grid_square`, or
     `grid:code` `MGRS-...`), the WRS-2 path/row for Landsat (`landsat:wrs_path` +
     `landsat:wrs_row`, or `grid:code` `WRS2-...`) - or, when either names none, their bboxes
     overlap by at least `MIN_OVERLAP` (half) of the smaller one.
An item without platform or datetime is never merged with another. Neighbouring Sentinel-2
tiles of one datatake share platform and datetime and overlap by about 10 km: the tile (or the
overlap threshold) tells them apart.

`order` compares two items by a STAC sortby (datetimes as instants, missing values last).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ..catalogs.bounds import ID_CHARS
from ..errors import InvalidCursor
from ..stac import item_datetime

DEDUP_SECONDS = 5.0
MIN_OVERLAP = 0.5  # of the smaller bbox, when a tile is not known
DATETIME_FIELDS = ("datetime", "start_datetime", "end_datetime", "created", "updated")


def epoch(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _platform(props: dict) -> str | None:
    value = props.get("platform")
    if not isinstance(value, str) or not value.strip():
        return None
    return _compact("-".join(value.strip().lower().replace("_", " ").split()))


def _compact(key: str) -> str:
    """`key`, or for one longer than any real platform or tile name its digest (equal keys stay
    equal, and a cursor that remembers it stays small)."""
    if len(key) <= ID_CHARS:
        return key
    import hashlib

    return "sha1:" + hashlib.sha1(key.encode("utf-8", "replace")).hexdigest()


def _tile(props: dict) -> str | None:
    """'MGRS:33TUL' or 'WRS2:190/028' from the properties catalogs use, or None."""
    tile = props.get("s2:mgrs_tile")
    zone, band, square = (props.get(k) for k in ("mgrs:utm_zone", "mgrs:latitude_band", "mgrs:grid_square"))
    if not tile and zone is not None and band and square:
        try:
            tile = f"{int(zone):02d}{band}{square}"
        except (TypeError, ValueError):
            tile = None
    code = props.get("grid:code")
    if not tile and isinstance(code, str) and code.upper().startswith("MGRS-"):
        tile = code[5:]
    if tile:
        return _compact(f"MGRS:{str(tile).upper().lstrip('T')}")
    path, row = props.get("landsat:wrs_path"), props.get("landsat:wrs_row")
    if (path is None or row is None) and isinstance(code, str) and code.upper().startswith("WRS2-"):
        digits = code[5:]
        path, row = digits[:3], digits[3:]
    try:
        return f"WRS2:{int(path):03d}/{int(row):03d}" if path is not None and row is not None else None
    except (TypeError, ValueError):
        return None


@dataclass
class Facts:
    """What de-duplication compares (see the module docstring)."""

    platform: str | None
    t: float | None
    tile: str | None
    bbox: list[float] | None
    stream: int

    @classmethod
    def of(cls, item: dict, stream: int) -> Facts:
        props = item.get("properties") or {}
        bbox = item.get("bbox")
        if isinstance(bbox, list) and len(bbox) in (4, 6):
            bbox = [round(float(v), 5) for v in (bbox[:2] + bbox[3:5] if len(bbox) == 6 else bbox)]
        else:
            bbox = None
        return cls(_platform(props), epoch(item_datetime(item)), _tile(props), bbox, stream)

    def as_list(self) -> list:
        return [self.platform, self.t, self.tile, self.bbox, self.stream]

    @classmethod
    def from_list(cls, value: Any) -> Facts:
        try:
            platform, t, tile, bbox, stream = value
            return cls(platform, None if t is None else float(t), tile, bbox, int(stream))
        except (TypeError, ValueError):
            raise InvalidCursor("cursor is malformed: seen") from None


def _boxes(b: list[float]) -> list[tuple[float, float, float, float]]:
    w, s, e, n = b
    return [(w, s, e, n)] if w <= e else [(w, s, 180.0, n), (-180.0, s, e, n)]  # antimeridian


def _area(boxes) -> float:
    return sum(max(0.0, e - w) * max(0.0, n - s) for w, s, e, n in boxes)


def bbox_overlap(a: list[float] | None, b: list[float] | None) -> float:
    """Intersection of two WGS84 bboxes as a fraction of the smaller one (0 when unknown)."""
    if not a or not b:
        return 0.0
    ba, bb = _boxes(a), _boxes(b)
    inter = 0.0
    for w1, s1, e1, n1 in ba:
        for w2, s2, e2, n2 in bb:
            inter += max(0.0, min(e1, e2) - max(w1, w2)) * max(0.0, min(n1, n2) - max(s1, s2))
    smaller = min(_area(ba), _area(bb))
    return inter / smaller if smaller > 0 else 0.0


def same_acquisition(a: Facts, b: Facts, seconds: float = DEDUP_SECONDS) -> bool:
    """The rule of the module docstring."""
    if not a.platform or a.platform != b.platform or a.t is None or b.t is None:
        return False
    if abs(a.t - b.t) > seconds:
        return False
    if a.tile and b.tile:
        return a.tile == b.tile
    return bbox_overlap(a.bbox, b.bbox) >= MIN_OVERLAP


# --------------------------------------------------------------------------- ordering


def _sort_value(item: dict, name: str) -> Any:
    if name in ("id", "collection"):
        return item.get(name)
    value = item_datetime(item) if name == "datetime" else (item.get("properties") or {}).get(name)
    if name in DATETIME_FIELDS:
        return epoch(value)
    return value


def _compare(a: Any, b: Any) -> int:
    if a == b:
        return 0
    try:
        return -1 if a < b else 1
    except TypeError:  # mixed types: order by type name, deterministically
        return -1 if (type(a).__name__, str(a)) < (type(b).__name__, str(b)) else 1


def order(sortby: list[dict], a: tuple[dict, int], b: tuple[dict, int]) -> int:
    """-1 when item a (of stream a[1]) comes before item b; missing values last."""
    for key in sortby:
        va, vb = _sort_value(a[0], key["field"]), _sort_value(b[0], key["field"])
        if va is None and vb is None:
            continue
        if va is None or vb is None:
            return 1 if va is None else -1
        c = _compare(va, vb)
        if c:
            return c if key["direction"] == "asc" else -c
    return (a[1] > b[1]) - (a[1] < b[1])
