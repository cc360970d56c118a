"""Turn loose search input (as an agent or a person writes it) into one checked form.

Each helper raises a typed InvalidArgument subclass whose message says how to fix the input.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidArgument, InvalidBBox, InvalidDatetime, InvalidFilter

# Bounds on every structured argument (array/object, or its JSON text), checked before any work:
# a CQL2-JSON `not` nested thousands deep, a nested `query` or GeometryCollection, or an array of
# millions of numbers would otherwise keep a worker (and the libraries under it) busy for minutes.
MAX_DEPTH = 64  # nested arrays/objects; CQL2 trees, GeoJSON and queries need far fewer
MAX_NODES = 200_000  # values in one argument (numbers, strings, arrays, objects)
MAX_TEXT = 4_000_000  # characters of one JSON or CQL2 text argument
MAX_STRING = 100_000  # characters of one string inside an argument


def check_structure(value: Any, name: str, *, error: type[InvalidArgument] = InvalidArgument) -> Any:
    """`value` if it is within MAX_DEPTH, MAX_NODES and MAX_STRING; else `error` in one line.
    Iterative (no recursion) and linear in the size of `value`."""
    if not isinstance(value, (dict, list, tuple, str)):
        return value
    stack = [(value, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise error(f"{name} is too large: more than {MAX_NODES:,} values; send a smaller argument")
        if isinstance(node, str):
            if len(node) > MAX_STRING:
                raise error(f"{name} has a string longer than {MAX_STRING:,} characters")
            continue
        if isinstance(node, dict):
            children = [*node.keys(), *node.values()]
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            raise error(f"{name} is nested more than {MAX_DEPTH} levels deep; flatten it")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple, str)))
        nodes += sum(1 for child in children if not isinstance(child, (dict, list, tuple, str)))
    return value


def _text_depth(text: str) -> int:
    """The deepest nesting of [ and { outside JSON strings (a linear scan, before parsing)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


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
        return check_structure(value, name, error=error)
    if len(value) > MAX_TEXT:
        raise error(f"{name} is too large: more than {MAX_TEXT:,} characters; send a smaller argument")
    if _text_depth(value) > MAX_DEPTH:
        raise error(f"{name} is nested more than {MAX_DEPTH} levels deep; flatten it")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise error(f"{name} is not valid {kind} ({where}){'; ' + hint if hint else ''}") from None
    except RecursionError:
        raise error(f"{name} is nested more than {MAX_DEPTH} levels deep; flatten it") from None
    return check_structure(parsed, name, error=error)


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
        raise InvalidBBox(
            f"bbox latitudes must be within [-90, 90] (got south={s}, north={n})" + latitude_first_hint(b)
        )
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
    if isinstance(value, str):
        _check_cql2_text(value)
    try:
        expr = cql2.Expr(value)
        check_structure(expr.to_json(), "filter", error=InvalidFilter)
    except InvalidFilter:
        raise
    except Exception as exc:
        raise InvalidFilter(
            f'filter is not valid CQL2 ({_first_line(exc)}); example: "eo:cloud_cover < 20 AND '
            "platform = 'sentinel-2a'\""
        ) from None
    return expr


_NOT = re.compile(r"\bNOT\b", re.IGNORECASE)


def _check_cql2_text(text: str) -> None:
    """CQL2 text within MAX_STRING characters, at most MAX_DEPTH parentheses deep and with at most
    MAX_DEPTH NOTs (each may nest), checked by a linear scan before cql2 parses it."""
    if len(text) > MAX_STRING:
        raise InvalidFilter(f"filter is too large: more than {MAX_STRING:,} characters")
    depth = deepest = 0
    outside: list[str] = []
    in_string = False
    for char in text:
        if char == "'":
            in_string = not in_string  # '' inside a literal toggles twice: still right
        elif not in_string:
            outside.append(char)
            if char == "(":
                depth += 1
                deepest = max(deepest, depth)
            elif char == ")":
                depth -= 1
    nots = len(_NOT.findall("".join(outside)))
    if deepest > MAX_DEPTH or nots > MAX_DEPTH:
        raise InvalidFilter(f"filter is nested more than {MAX_DEPTH} levels deep; flatten it")


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
        for op, operand in ops.items():
            if op not in _QUERY_OPS:
                raise InvalidFilter(
                    f"query operator '{op}' on '{prop}' is unknown; use one of {', '.join(_QUERY_OPS)}"
                )
            operands = operand if op == "in" and isinstance(operand, list) else [operand]
            if not all(isinstance(v, (str, int, float, bool)) or v is None for v in operands):
                raise InvalidFilter(
                    f"query['{prop}']['{op}'] must be a string, a number or a boolean"
                    + (" (or a list of them for 'in')" if op == "in" else "")
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


def page_limit(limit: Any, detail: str, limits, notes: list[str]) -> int:
    """How many items one answer holds: `limit` (default limits.page_size) checked and capped at
    limits.max_items with a note; `detail` checked on the way."""
    if detail not in ("summary", "full", "count"):
        raise InvalidArgument("detail must be 'summary', 'full' or 'count'")
    if limit is None:
        return limits.page_size
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be a positive integer (got {repr(limit)[:40]})")
    if limit > limits.max_items:
        notes.append(
            f"limit {limit} capped at limits.max_items={limits.max_items}; use next_cursor for the rest"
        )
        return limits.max_items
    return limit


def latitude_first_hint(box: list[float] | None) -> str:
    """For a search that matched nothing, or a bbox whose latitudes are out of range: a note when
    `box` also reads as [south, west, north, east] (latitude first), the usual slip; "" otherwise."""
    if not box or len(box) != 4:
        return ""
    south, west, north, east = box
    if (
        all(abs(v) <= 90 for v in (south, north))
        and all(abs(v) <= 180 for v in (west, east))
        and south < north
        and west < east
    ):
        return (
            f"; bbox is [west, south, east, north]: if {list(box)} was meant as [south, west, north, "
            f"east] (latitude first), search with bbox={[west, south, east, north]}"
        )
    return ""
