"""What a part's footer statistics say of its rows, so that a search leaves out the parts that
cannot hold a match beyond what their names say (snapshot_layout.py): the extent of the part's
`bbox` column, and the [min, max] of each top-level number column (`eo:cloud_cover`, ...), both
from its row groups' statistics, read when the files are checked (snapshot_files.py).

A search's bounds on those columns come from the plain part of its CQL2: comparisons of a
property with a number (`<`, `<=`, `>`, `>=`, `=`, `between`) joined by `and` at the top. Any
other condition bounds nothing, so a part is left out only when it provably holds no match (a
null value matches no comparison, so a part of nulls may be left out too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow.parquet as pq

BOX = ("bbox.xmin", "bbox.ymin", "bbox.xmax", "bbox.ymax")
NUMBERS = ("INT32", "INT64", "FLOAT", "DOUBLE")
MAX_COLUMNS = 64  # number columns whose range is kept a part


def extent(footer: pq.FileMetaData) -> tuple[float, float, float, float] | None:
    """(west, south, east, north) of every row's bbox, from the row groups' statistics; None
    where a statistic is missing (or the file has no bbox struct)."""
    index = {footer.schema.column(i).path: i for i in range(footer.num_columns)}
    if not all(name in index for name in BOX):
        return None
    lows, highs = [[], []], [[], []]
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for k, name in enumerate(BOX):
            stats = group.column(index[name]).statistics
            if stats is None or not stats.has_min_max:
                return None
            (lows if k < 2 else highs)[k % 2].append(stats.min if k < 2 else stats.max)
    if not lows[0]:
        return None
    return min(lows[0]), min(lows[1]), max(highs[0]), max(highs[1])


def ranges(footer: pq.FileMetaData) -> dict[str, tuple[float, float] | None]:
    """column -> (min, max) of its values (None: every value null) for the top-level plain
    number columns whose every row group has statistics (at most MAX_COLUMNS of them)."""
    out: dict[str, tuple[float, float] | None] = {}
    for i in range(footer.num_columns):
        column = footer.schema.column(i)
        if "." in column.path or column.physical_type not in NUMBERS:
            continue
        if column.logical_type.type not in ("NONE", "INT"):
            continue  # timestamps, decimals: their statistics are not plain numbers
        found = _range(footer, i)
        if found is not False:
            out[column.path] = found
        if len(out) == MAX_COLUMNS:
            break
    return out


def _range(footer: pq.FileMetaData, i: int):
    """(min, max) of column `i`, None when all null, False when a statistic is missing."""
    low = high = None
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        stats = group.column(i).statistics
        if stats is None:
            return False
        if not stats.has_min_max:
            if stats.null_count != group.num_rows:
                return False
            continue
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    return None if low is None else (low, high)


def bounds(condition: dict | None) -> dict[str, tuple[float | None, float | None]]:
    """property -> [low, high] (None: open) that every match's value lies in, from the top-level
    `and` of comparisons with a number in the CQL2-JSON `condition`; {} when it says nothing."""
    if not isinstance(condition, dict):
        return {}
    op, args = condition.get("op"), condition.get("args")
    if not isinstance(args, list):
        return {}
    if op == "and":
        out: dict = {}
        for arg in args:
            for name, (low, high) in bounds(arg).items():
                was = out.get(name, (None, None))
                out[name] = (_pick(max, was[0], low), _pick(min, was[1], high))
        return out
    return _compared(op, args)


def _compared(op, args: list) -> dict:
    if op == "between" and len(args) == 3 and _name(args[0]) and all(_number(a) for a in args[1:]):
        return {_name(args[0]): (args[1], args[2])}
    if op not in ("<", "<=", ">", ">=", "=") or len(args) != 2:
        return {}
    name, value = _name(args[0]), args[1]
    if name is None or not _number(value):  # a number on the left: the comparison turned round
        name, value = _name(args[1]), args[0]
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    if name is None or not _number(value):
        return {}
    return {name: (value if op in (">", ">=", "=") else None, value if op in ("<", "<=", "=") else None)}


def can_hold(
    box: tuple | None,
    columns: dict,
    area: tuple[float, float, float, float] | None,
    wanted: dict[str, tuple],
) -> bool:
    """Whether a part of extent `box` and column ranges `columns` may hold a row meeting the
    search `area` (west, south, east, north; None: anywhere) and the `wanted` bounds."""
    if area is not None and box is not None and area[0] <= area[2]:
        west, south, east, north = area
        if box[0] > east or box[2] < west or box[1] > north or box[3] < south:
            return False
    for name, (low, high) in wanted.items():
        if name not in columns:
            continue
        found = columns[name]
        if found is None:  # every value null: no comparison holds
            return False
        if (low is not None and found[1] < low) or (high is not None and found[0] > high):
            return False
    return True


def _pick(fn, a, b):
    return b if a is None else a if b is None else fn(a, b)


def _name(arg) -> str | None:
    if isinstance(arg, dict) and isinstance(arg.get("property"), str) and len(arg) == 1:
        return arg["property"].removeprefix("properties.")
    return None


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value
