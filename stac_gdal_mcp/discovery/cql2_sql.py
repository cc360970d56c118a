"""CQL2-JSON as a parameterised DuckDB SQL condition, for catalogs searched in SQL (stac-geoparquet).

    where = to_sql(expr, column)   # column(name) -> SQL expression of that property
    where.sql, where.params        # "("eo:cloud_cover" <= ?)", [20.0]
    where.exact                    # False: a spatial operator was relaxed (see below)

cql2's own `Expr.to_sql()` writes PostgreSQL (`= SOME(ARRAY[...])`, PostGIS `st_*` functions)
with the literals inlined; DuckDB here has no spatial extension (it is downloaded from the
network on first use), so this translation is ours, every literal a `?` parameter.

Supported: comparisons, and/or/not, like, in, between, isNull, casei/accenti, + - * /,
t_intersects/t_before/t_after/t_disjoint and s_intersects. Anything else is refused in one line
naming it. `s_intersects` is relaxed to a bbox overlap (a superset; under `not`, to FALSE, so the
negation stays a superset) and `exact` is False: the caller tests the rows found again with
`cql2.Expr.matches`, so the answer is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any

from ..errors import InvalidFilter

Column = Callable[[str], str]

_COMPARE = {"=": "=", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_ARITHMETIC = {"+", "-", "*", "/"}
_TEMPORAL = {"t_intersects", "t_before", "t_after", "t_disjoint"}
_ARITY = {  # arguments each operator takes (CQL2); and/or take one or more
    **dict.fromkeys([*_COMPARE, *_ARITHMETIC, *_TEMPORAL, "like", "in", "s_intersects"], 2),
    **dict.fromkeys(["not", "isnull", "casei", "accenti"], 1),
    "between": 3,
}


@dataclass
class Where:
    """A SQL condition, its parameters, and whether it is the filter exactly (no relaxed part)."""

    sql: str = "TRUE"
    params: list[Any] = field(default_factory=list)
    exact: bool = True


def to_sql(expr: dict, column: Column) -> Where:
    """The CQL2-JSON `expr` as a DuckDB condition; `column(name)` maps a property to SQL (and
    raises when there is no such column)."""
    out = Where()
    out.sql = _Translator(column, out).node(expr, positive=True)
    return out


def instant(value: Any) -> datetime:
    """A CQL2 timestamp or date literal (or RFC 3339 text) as an aware datetime."""
    if isinstance(value, dict):
        value = value.get("timestamp", value.get("date"))
    if not isinstance(value, str):
        raise InvalidFilter(f"filter: {value!r} is not a timestamp or a date")
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), time(), tzinfo=UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidFilter(f"filter: '{value}' is not a timestamp or a date") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _end_instant(value: Any) -> datetime:
    """The last instant a literal covers: a date means its whole day."""
    start = instant(value)
    text = value.get("date") if isinstance(value, dict) else value
    if isinstance(text, str) and len(text) == 10:
        return start.replace(hour=23, minute=59, second=59, microsecond=999999)
    return start


class _Translator:
    def __init__(self, column: Column, out: Where):
        self.column = column
        self.out = out

    def param(self, value: Any) -> str:
        self.out.params.append(value)
        return "?"

    def node(self, node: Any, positive: bool) -> str:
        """A boolean node. `positive`: under an even number of `not` (relaxations must widen)."""
        if isinstance(node, bool):
            return "TRUE" if node else "FALSE"
        if not isinstance(node, dict) or "op" not in node:
            raise InvalidFilter(f"filter: {str(node)[:80]} is not a condition")
        op, args = str(node["op"]).lower(), _args(node)
        if op in ("and", "or"):
            parts = [self.node(a, positive) for a in args]
            return "(" + f" {op.upper()} ".join(parts) + ")"
        if op == "not":
            return f"(NOT {self.node(args[0], not positive)})"
        if op in _COMPARE:
            return f"({self.value(args[0])} {_COMPARE[op]} {self.value(args[1])})"
        if op == "like":
            return f"({self.value(args[0])} LIKE {self.value(args[1])} ESCAPE '\\')"
        if op == "between":
            return f"({self.value(args[0])} BETWEEN {self.value(args[1])} AND {self.value(args[2])})"
        if op == "in":
            listed = args[1] if isinstance(args[1], list) else [args[1]]
            return f"({self.value(args[0])} IN ({', '.join(self.value(v) for v in listed)}))"
        if op == "isnull":
            return f"({self.value(args[0])} IS NULL)"
        if op in _TEMPORAL:
            return self.temporal(op, args)
        if op == "s_intersects":
            return self.spatial(args, positive)
        raise InvalidFilter(
            f"filter operator '{node['op']}' is not supported on stac-geoparquet catalogs; they take "
            "comparisons, and/or/not, like, in, between, isNull, casei, accenti, + - * /, "
            "s_intersects, t_intersects, t_before, t_after and t_disjoint"
        )

    def value(self, node: Any) -> str:
        """A scalar: a property, a literal, or casei/accenti/arithmetic of those."""
        if isinstance(node, dict):
            if "property" in node:
                return self.column(str(node["property"]))
            if "timestamp" in node or "date" in node:
                return self.param(instant(node))
            op = str(node.get("op", "")).lower()
            if op in _ARITY:
                _args(node)
            if op == "casei":
                return f"lower({self.value(node['args'][0])})"
            if op == "accenti":
                return f"strip_accents({self.value(node['args'][0])})"
            if op in _ARITHMETIC:
                left, right = node["args"]
                return f"({self.value(left)} {op} {self.value(right)})"
            raise InvalidFilter(f"filter: '{node.get('op', str(node)[:60])}' cannot be used as a value here")
        if isinstance(node, (str, int, float, bool)) or node is None:
            return self.param(node)
        raise InvalidFilter(f"filter: {str(node)[:80]} cannot be used as a value here")

    def interval(self, node: Any) -> tuple[Any, Any]:
        """(start, end) of a temporal argument, each SQL text or a `datetime` to pass as a
        parameter: a property (its item interval when it is `datetime`), an instant or an
        interval (".." is open)."""
        if isinstance(node, dict) and "property" in node:
            name = str(node["property"]).removeprefix("properties.")
            if name == "datetime":
                return self.column("datetime"), self.column("end_datetime")
            sql = self.column(name)
            return sql, sql
        if isinstance(node, dict) and "interval" in node:
            bounds = node["interval"]
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise InvalidFilter(
                    f"filter: an interval is [start, end] ('..' open), not {str(bounds)[:80]}"
                )
            start, end = bounds
            return (
                "'-infinity'::TIMESTAMPTZ" if start == ".." else instant(start),
                "'infinity'::TIMESTAMPTZ" if end == ".." else _end_instant(end),
            )
        return instant(node), _end_instant(node)

    def temporal(self, op: str, args: list) -> str:
        """The operator's SQL; literals become parameters in the order they are written."""
        (a_start, a_end), (b_start, b_end) = self.interval(args[0]), self.interval(args[1])
        if op == "t_before":
            terms = [a_end, " < ", b_start]
        elif op == "t_after":
            terms = [a_start, " > ", b_end]
        else:
            terms = [a_start, " <= ", b_end, " AND ", a_end, " >= ", b_start]
        sql = "".join(self.param(t) if isinstance(t, datetime) else t for t in terms)
        return f"({sql})" if op != "t_disjoint" else f"(NOT ({sql}))"

    def spatial(self, args: list, positive: bool) -> str:
        """s_intersects(geometry, literal): the bbox overlap (a superset) under `positive`,
        FALSE (a subset) under `not`; the caller tests the rows exactly afterwards."""
        prop, literal = args
        if not (isinstance(prop, dict) and prop.get("property") == "geometry"):
            prop, literal = literal, prop
        if not (isinstance(prop, dict) and prop.get("property") == "geometry"):
            raise InvalidFilter("filter: s_intersects needs the item's geometry and a geometry literal")
        self.out.exact = False
        if not positive:
            return "FALSE"
        west, south, east, north = _bounds(literal)
        box = self.column("bbox")
        return (
            f"({box}.xmin <= {self.param(east)} AND {box}.xmax >= {self.param(west)} "
            f"AND {box}.ymin <= {self.param(north)} AND {box}.ymax >= {self.param(south)})"
        )


def _args(node: dict) -> list:
    """The arguments of an operator node, as many as it takes (else one line, as STAC APIs say)."""
    op, args = str(node["op"]).lower(), node.get("args")
    args = [] if args is None else args
    if not isinstance(args, list):
        raise InvalidFilter(f"filter: the args of '{op[:40]}' must be a list")
    wanted = _ARITY.get(op)
    if op in ("and", "or") and not args:
        raise InvalidFilter(f"filter: '{op}' takes one or more arguments, got none")
    if wanted is not None and len(args) != wanted:
        raise InvalidFilter(f"filter: '{op}' takes {wanted} argument{'s' * (wanted > 1)}, got {len(args)}")
    return args


def _bounds(literal: Any) -> tuple[float, float, float, float]:
    if isinstance(literal, dict) and "bbox" in literal:
        b = [float(v) for v in literal["bbox"]]
        return (b[0], b[1], b[3], b[4]) if len(b) == 6 else (b[0], b[1], b[2], b[3])
    try:
        from shapely.geometry import shape

        return shape(literal).bounds
    except Exception:
        raise InvalidFilter(f"filter: {str(literal)[:80]} is not a GeoJSON geometry or a bbox") from None
