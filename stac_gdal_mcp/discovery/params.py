"""Turn loose search input (as an agent or a person writes it) into one checked form.

Each helper raises a typed InvalidArgument subclass whose message says how to fix the input.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidArgument, InvalidBBox, InvalidDatetime, InvalidFilter


def as_list(value: str | list[str] | None, name: str) -> list[str] | None:
    """Accept a list of strings, a comma-separated string or the list as JSON text."""
    if value is None:
        return None
    value = json_text(value, name)
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidArgument(f'{name} must be a list of strings, e.g. ["a", "b"]')
    return value or None


def json_text(
    value: Any,
    name: str,
    *,
    always: bool = False,
    hint: str = "",
    kind: str = "JSON text",
    error: type[InvalidArgument] = InvalidArgument,
) -> Any:
    """An array or object argument that arrived as JSON text (as some MCP clients and LLM hosts
    send them), parsed; any other value is returned as it is. Text is parsed when it starts
    with `[` or `{`, or always with `always=True` (for arguments that have no text form of their
    own). The one place such text is parsed, for the library and the MCP tools alike."""
    if not isinstance(value, str) or not (always or value.lstrip().startswith(("[", "{"))):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise error(f"{name} is not valid {kind} ({where}){'; ' + hint if hint else ''}") from None


def bbox(value: Any) -> list[float] | None:
    """[west, south, east, north] in WGS84 degrees (a 6-number 3D bbox is also accepted)."""
    if value is None:
        return None
    value = json_text(value, "bbox", error=InvalidBBox)
    if isinstance(value, str):
        try:
            value = [float(v) for v in value.replace(" ", "").split(",")]
        except ValueError:
            raise InvalidBBox(f"bbox '{value}' is not four comma-separated numbers") from None
    if not isinstance(value, (list, tuple)) or len(value) not in (4, 6):
        raise InvalidBBox(f"bbox must have 4 numbers [west, south, east, north] (got {value!r})")
    try:
        b = [float(v) for v in value]
    except (TypeError, ValueError):
        raise InvalidBBox(f"bbox values must be numbers (got {value!r})") from None
    w, s, e, n = (b[0], b[1], b[3], b[4]) if len(b) == 6 else b
    if not (-180 <= w <= 180 and -180 <= e <= 180):
        raise InvalidBBox(f"bbox longitudes must be within [-180, 180] (got west={w}, east={e})")
    if not (-90 <= s <= 90 and -90 <= n <= 90):
        raise InvalidBBox(f"bbox latitudes must be within [-90, 90] (got south={s}, north={n})")
    if s > n:
        raise InvalidBBox(
            f"bbox south ({s}) is greater than north ({n}); order is [west, south, east, north]"
        )
    if w > e:
        raise InvalidBBox(
            f"bbox west ({w}) is greater than east ({e}); order is [west, south, east, north] "
            "(an area crossing the antimeridian must be split into two searches)"
        )
    return b


def intersects(value: Any) -> dict | None:
    """A GeoJSON geometry (dict or JSON text), checked with shapely."""
    if value is None:
        return None
    value = json_text(value, "intersects", always=True, hint="give a GeoJSON geometry object")
    if isinstance(value, dict) and value.get("type") == "Feature":
        value = value.get("geometry")
    try:
        from shapely.geometry import shape

        geom = shape(value)
    except Exception as exc:
        raise InvalidArgument(f"intersects is not a valid GeoJSON geometry: {exc}") from None
    if geom.is_empty or not geom.is_valid:
        raise InvalidArgument("intersects geometry is empty or invalid (self-intersecting?)")
    minx, miny, maxx, maxy = geom.bounds
    if minx < -180 or maxx > 180 or miny < -90 or maxy > 90:
        raise InvalidArgument("intersects coordinates must be WGS84 longitude/latitude")
    return value


def _instant(text: str) -> datetime | None:
    text = text.strip()
    if text in ("", ".."):
        return None
    try:
        if len(text) == 4 and text.isdigit():
            return datetime(int(text), 1, 1, tzinfo=UTC)
        if len(text) == 7:
            return datetime.fromisoformat(text + "-01").replace(tzinfo=UTC)
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidDatetime(
            f"'{text}' is not a date or RFC 3339 datetime; use e.g. 2024-06-01, "
            "2024-06-01T10:00:00Z, or an interval 2024-06-01/2024-06-30 (open: ../2024-06-30)"
        ) from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _end_of(text: str, dt: datetime) -> datetime:
    """A bare date as the end of an interval means the whole day (month, year)."""
    text = text.strip()
    if len(text) == 10:
        return dt.replace(hour=23, minute=59, second=59, microsecond=999999)
    if len(text) == 7:
        from calendar import monthrange

        return dt.replace(
            day=monthrange(dt.year, dt.month)[1], hour=23, minute=59, second=59, microsecond=999999
        )
    if len(text) == 4:
        return dt.replace(month=12, day=31, hour=23, minute=59, second=59, microsecond=999999)
    return dt


def datetime_interval(value: str | None) -> tuple[datetime | None, datetime | None] | None:
    """Parse an instant or interval into (start, end), inclusive, UTC; None means open."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidDatetime("datetime must be a non-empty string such as 2024-06-01/2024-06-30")
    parts = value.split("/")
    if len(parts) > 2:
        raise InvalidDatetime(f"datetime '{value}' has more than one '/'")
    if len(parts) == 1:
        start = _instant(parts[0])
        if start is None:
            raise InvalidDatetime("a single datetime cannot be open ('..')")
        return start, _end_of(parts[0], start)
    start, end = _instant(parts[0]), _instant(parts[1])
    if end is not None:
        end = _end_of(parts[1], end)
    if start is None and end is None:
        raise InvalidDatetime("datetime interval '../..' is open at both ends; give at least one date")
    if start and end and start > end:
        raise InvalidDatetime(f"datetime interval '{value}' ends before it starts")
    return start, end


def datetime_param(value: str | None) -> str | None:
    """The interval as the RFC 3339 string a STAC API expects."""
    interval = datetime_interval(value)
    if interval is None:
        return None

    def fmt(dt: datetime | None) -> str:
        return ".." if dt is None else dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    return f"{fmt(interval[0])}/{fmt(interval[1])}"


def cql2_filter(value: str | dict | None, filter_lang: str | None = None):
    """Parse a CQL2 filter (text or JSON) into a `cql2.Expr`, with a clear error."""
    if value is None:
        return None
    import cql2

    if filter_lang not in (None, "cql2-text", "cql2-json"):
        raise InvalidFilter(f"filter_lang must be 'cql2-text' or 'cql2-json' (got '{filter_lang}')")
    value = json_text(
        value, "filter", always=filter_lang == "cql2-json", kind="CQL2 JSON", error=InvalidFilter
    )
    try:
        expr = cql2.Expr(value)
        expr.to_json()
    except Exception as exc:
        raise InvalidFilter(
            f'filter is not valid CQL2 ({_first_line(exc)}); example: "eo:cloud_cover < 20 AND '
            "platform = 'sentinel-2a'\""
        ) from None
    return expr


QUERY_EXAMPLE = 'query must be a JSON object such as {"eo:cloud_cover": {"lt": 20}}'
_QUERY_OPS = {"eq": "=", "neq": "<>", "lt": "<", "lte": "<=", "gt": ">", "gte": ">=", "in": "in"}


def query(value: dict | str | None) -> dict | None:
    """The STAC query extension: {"eo:cloud_cover": {"lt": 20}, "platform": {"eq": "x"}}."""
    if value is None:
        return None
    value = json_text(value, "query", always=True, hint=QUERY_EXAMPLE, error=InvalidFilter)
    if not isinstance(value, dict):
        raise InvalidFilter(QUERY_EXAMPLE)
    for prop, ops in value.items():
        if not isinstance(ops, dict) or not ops:
            raise InvalidFilter(f"query['{prop}'] must be an object of operators, e.g. {{\"lt\": 20}}")
        for op in ops:
            if op not in _QUERY_OPS:
                raise InvalidFilter(
                    f"query operator '{op}' on '{prop}' is unknown; use one of {', '.join(_QUERY_OPS)}"
                )
    return value


def query_as_cql2(value: dict) -> dict:
    """The query extension as a CQL2-JSON expression (for APIs or local search without it)."""
    args = []
    for prop, ops in value.items():
        for op, operand in ops.items():
            args.append({"op": _QUERY_OPS[op], "args": [{"property": prop}, operand]})
    return args[0] if len(args) == 1 else {"op": "and", "args": args}


def sortby(value: str | list | None) -> list[dict] | None:
    """'-eo:cloud_cover,datetime' or [{"field": ..., "direction": "asc"|"desc"}]."""
    if value is None:
        return None
    value = json_text(value, "sortby")
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    out = []
    for entry in value:
        if isinstance(entry, str):
            direction = "desc" if entry.startswith("-") else "asc"
            field = entry.lstrip("+-")
            if " " in field:
                field, _, word = field.partition(" ")
                direction = "desc" if word.strip().lower() == "desc" else "asc"
        elif isinstance(entry, dict) and "field" in entry:
            field, direction = entry["field"], str(entry.get("direction", "asc")).lower()
        else:
            raise InvalidArgument(
                "sortby entries are 'field', '-field' or {\"field\": ..., \"direction\": ...}"
            )
        if direction not in ("asc", "desc") or not field:
            raise InvalidArgument(f"sortby direction must be asc or desc (got {direction!r})")
        if field.startswith("properties."):
            field = field[len("properties.") :]
        out.append({"field": field, "direction": direction})
    return out or None


def max_cloud_cover(value: float | None) -> float | None:
    if value is None:
        return None
    if not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise InvalidArgument(f"max_cloud_cover must be a percentage between 0 and 100 (got {value!r})")
    return float(value)


def _first_line(exc: Exception) -> str:
    """cql2's parser errors are multi-line pictures: keep the position and what was expected."""
    lines = [l.strip() for l in str(exc).strip().splitlines() if l.strip().strip("|").strip()]
    where = next((l.lstrip("-> ") for l in lines if l.startswith("-->")), None)
    expected = next((l.lstrip("= ") for l in lines if l.startswith("= ")), None)
    if where or expected:
        return ", ".join(x for x in (f"at line:column {where}" if where else None, expected) if x)
    return lines[0][:200] if lines else type(exc).__name__
