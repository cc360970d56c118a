"""What a part's footer statistics say of its rows, so that a search leaves out the parts that
cannot hold a match beyond what their names say (snapshot_layout.py), and its count takes the
parts whose every row matches from their footers' row counts (`all_inside`): the extent of the
part's `bbox` column, the [min, max] of each top-level number column (`eo:cloud_cover`, ...) and
of each bbox side, and which of those columns hold no null, from its row groups' statistics, read
when the files are checked (snapshot_files.py).

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


def ranges(footer: pq.FileMetaData) -> tuple[dict[str, tuple[float, float] | None], list[str]]:
    """column -> (min, max) of its values (None: every value null) for the top-level plain
    number columns and the bbox sides (`bbox.xmin`, ...) whose every row group has statistics
    (at most MAX_COLUMNS of them); and those of them that hold no null."""
    out: dict[str, tuple[float, float] | None] = {}
    filled = []
    for i in range(footer.num_columns):
        column = footer.schema.column(i)
        if ("." in column.path and column.path not in BOX) or column.physical_type not in NUMBERS:
            continue
        if column.logical_type.type not in ("NONE", "INT"):
            continue  # timestamps, decimals: their statistics are not plain numbers
        found, nulls = _range(footer, i)
        if found is not False:
            out[column.path] = found
            if not nulls:
                filled.append(column.path)
        if len(out) == MAX_COLUMNS:
            break
    return out, filled


def _range(footer: pq.FileMetaData, i: int) -> tuple:
    """((min, max) of column `i`, None when all null, False when a statistic is missing;
    whether it may hold a null)."""
    low = high = None
    nulls = False
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        stats = group.column(i).statistics
        if stats is None:
            return False, True
        nulls = nulls or not stats.has_null_count or stats.null_count != 0
        if not stats.has_min_max:
            if stats.null_count != group.num_rows:
                return False, True
            continue
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    return (None if low is None else (low, high)), nulls


def id_range(footer: pq.FileMetaData) -> tuple[str, str] | None:
    """(least, greatest) of the `id` column from the row groups' statistics (Parquet orders
    strings by their UTF-8 bytes, as Python orders str); None when a statistic is missing or the
    column is not a string."""
    index = {footer.schema.column(i).path: i for i in range(footer.num_columns)}
    at = index.get("id")
    if at is None or footer.schema.column(at).logical_type.type != "STRING":
        return None
    found, _ = _range(footer, at)
    return found or None


def holds_any(ids: tuple[str, str] | None, wanted: list[str] | None) -> bool:
    """Whether a part whose item ids span `ids` (None: unknown) may hold one of `wanted` (None:
    any id)."""
    return not wanted or ids is None or any(ids[0] <= i <= ids[1] for i in wanted)


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
    """property -> (low, high) of a comparison (`plain`'s, open or closed alike); {} otherwise."""
    found = plain({"op": op, "args": args}) if op != "and" else None
    return {name: (low, high) for name, (low, _, high, _) in (found or {}).items()}


def plain(condition: dict | None) -> dict[str, tuple] | None:
    """property -> (low, low excluded, high, high excluded) (None: open) when the CQL2-JSON
    `condition` is nothing but an `and` of comparisons of a property with a number, so that a
    row meets it exactly when each property lies in its interval; None otherwise ({} for no
    condition). A part whose every value lies inside holds only matches (`all_inside`)."""
    if condition is None:
        return {}
    if not isinstance(condition, dict) or not isinstance(condition.get("args"), list):
        return None
    op, args = condition.get("op"), condition["args"]
    if op == "and":
        out: dict = {}
        for arg in args:
            found = plain(arg)
            if found is None:
                return None
            for name, bound in found.items():
                out[name] = _narrowest(out.get(name, (None, False, None, False)), bound)
        return out
    if op == "between" and len(args) == 3 and _name(args[0]) and all(_number(a) for a in args[1:]):
        return {_name(args[0]): (args[1], False, args[2], False)}
    if op not in ("<", "<=", ">", ">=", "=") or len(args) != 2:
        return None
    name, value = _name(args[0]), args[1]
    if name is None or not _number(value):  # a number on the left: the comparison turned round
        name, value = _name(args[1]), args[0]
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    if name is None or not _number(value):
        return None
    low = (value, op == ">") if op in (">", ">=", "=") else (None, False)
    high = (value, op == "<") if op in ("<", "<=", "=") else (None, False)
    return {name: (*low, *high)}


def _narrowest(a: tuple, b: tuple) -> tuple:
    """The intersection of two (low, excluded, high, excluded) intervals."""
    low = a[:2] if b[0] is None or (a[0] is not None and (a[0], a[1]) >= (b[0], b[1])) else b[:2]
    high = a[2:] if b[2] is None or (a[2] is not None and (a[2], not a[3]) <= (b[2], not b[3])) else b[2:]
    return (*low, *high)


def all_inside(columns: dict, filled, area: tuple | None, wanted: dict) -> bool:
    """Whether every row of a part of column ranges `columns` (bbox sides included, those in
    `filled` without null) meets the search: each row's bbox inside the search bbox `area`
    (west, south, east, north; None: anywhere), as the bbox test of a row surely inside reads it
    (parquet_search.Plan.sure: a footprint lies inside its bbox), and its values in the `wanted`
    intervals (`plain`)."""
    if area is not None:
        if not set(BOX) <= set(filled):
            return False
        for name, low, high in zip(BOX, area[:2] * 2, area[2:] * 2, strict=True):
            found = columns.get(name)
            if found is None or found[0] < low or found[1] > high:
                return False
    for name, (low, low_out, high, high_out) in wanted.items():
        found = columns.get(name)
        if found is None or name not in filled:
            return False
        if low is not None and (found[0] < low or (low_out and found[0] == low)):
            return False
        if high is not None and (found[1] > high or (high_out and found[1] == high)):
            return False
    return True


def can_hold(
    box: tuple | None,
    columns: dict,
    area: tuple[float, float, float, float] | None,
    wanted: dict[str, tuple],
    filled=(),
    nulls: bool = False,
) -> bool:
    """Whether a part of extent `box` and column ranges `columns` may hold a row meeting the
    search `area` (west, south, east, north; None: anywhere) and the `wanted` bounds. `nulls`: a
    null meets the bounds too (a value ranked first descending, parquet_threshold.py), so a part
    whose column may hold one (not in `filled`) may hold a match."""
    if area is not None and box is not None and area[0] <= area[2]:
        west, south, east, north = area
        if box[0] > east or box[2] < west or box[1] > north or box[3] < south:
            return False
    for name, (low, high) in wanted.items():
        if name not in columns or (nulls and name not in filled):
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
