"""Band math for the loads: an index name (ndvi, ndwi, nbr, ndbi), a band, or a formula of band
names, parsed safely with `ast` (only names, numbers, + - * / ** and parentheses; nothing is
`eval`-ed) and evaluated on numpy, dask or xarray arrays alike.

Bounded before any work: at most MAX_CHARS characters, MAX_NODES syntax nodes and MAX_DEPTH
levels of nesting; numbers are floats, and the constant parts are folded once in float
arithmetic, refusing what overflows (`9**9**9` would otherwise be a Python integer power that
holds the interpreter lock, and so the whole server, for minutes)."""

from __future__ import annotations

import ast
import math
from typing import Any

from ..errors import InvalidArgument

INDICES = {
    "ndvi": "(nir - red) / (nir + red)",
    "ndwi": "(green - nir) / (green + nir)",
    "nbr": "(nir - swir22) / (nir + swir22)",
    "ndbi": "(swir16 - nir) / (swir16 + nir)",
}

_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
MAX_CHARS = 500
MAX_NODES = 200
MAX_DEPTH = 30
MAX_CONSTANT = 1e30  # a folded constant larger than this is refused


def parse_expression(expression: str) -> tuple[str, ast.Expression, list[str]]:
    """(text, parsed tree, band names) for 'ndvi', '(nir-red)/(nir+red)' or a band name.

    Only band names, numbers, + - * / ** and parentheses are allowed."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidArgument("expression must be an index name (ndvi, ndwi, nbr, ndbi), a band or a formula")
    text = INDICES.get(expression.strip().lower(), expression.strip())
    if len(text) > MAX_CHARS:
        raise InvalidArgument(f"expression is {len(text)} characters long; at most {MAX_CHARS} are allowed")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        raise InvalidArgument(
            f"expression '{expression}' is not a formula; example: (nir - red) / (nir + red)"
        ) from None
    except (RecursionError, MemoryError):
        raise InvalidArgument(f"expression is nested too deeply; at most {MAX_DEPTH} levels") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise InvalidArgument(f"expression has {nodes} parts; at most {MAX_NODES} are allowed")
    if _depth(tree) > MAX_DEPTH:
        raise InvalidArgument(f"expression is nested too deeply; at most {MAX_DEPTH} levels")
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in names:
                names.append(node.id)
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                raise InvalidArgument(f"expression '{expression}': only numbers may appear as constants")
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, _OPERATORS):
                raise InvalidArgument(f"expression '{expression}': only + - * / ** are allowed")
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise InvalidArgument(f"expression '{expression}': only + - * / ** are allowed")
        elif not isinstance(node, (ast.Expression, ast.Load, *_OPERATORS, ast.USub, ast.UAdd)):
            raise InvalidArgument(
                f"expression '{expression}': only band names, numbers, + - * / ** and parentheses are allowed"
            )
    if not names:
        raise InvalidArgument(f"expression '{expression}' names no band")
    return text, ast.Expression(body=_fold(tree.body, expression)), names


def _depth(node: ast.AST) -> int:
    """Nesting depth, without recursion (a deep tree must not exhaust the stack here)."""
    deepest, todo = 0, [(node, 1)]
    while todo:
        current, level = todo.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        todo.extend((child, level + 1) for child in ast.iter_child_nodes(current))
    return deepest


def _fold(node: ast.AST, expression: str) -> ast.AST:
    """`node` with every constant sub-expression replaced by its float value (refused if it
    overflows, divides by zero or exceeds MAX_CONSTANT). Depth is bounded by parse_expression."""
    if isinstance(node, ast.Constant):
        return ast.Constant(_check(lambda: float(node.value), expression))
    if isinstance(node, ast.UnaryOp):
        operand = _fold(node.operand, expression)
        if isinstance(operand, ast.Constant):
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            return ast.Constant(sign * operand.value)
        return ast.UnaryOp(op=node.op, operand=operand)
    if isinstance(node, ast.BinOp):
        left, right = _fold(node.left, expression), _fold(node.right, expression)
        if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
            a, b = left.value, right.value
            return ast.Constant(_check(lambda: _apply(type(node.op), a, b), expression))
        return ast.BinOp(left=left, op=node.op, right=right)
    return node


def _check(compute, expression: str) -> float:
    try:
        value = compute()
    except (OverflowError, ZeroDivisionError, ValueError):
        value = math.inf
    if isinstance(value, complex) or not math.isfinite(value) or abs(value) > MAX_CONSTANT:
        raise InvalidArgument(
            f"expression '{expression[:80]}': a constant part is too large or undefined "
            f"(numbers must stay within +-{MAX_CONSTANT:g}); use band names with small numbers"
        )
    return value


def _apply_arrays(op: type, left, right):
    if op is ast.Pow:
        return left**right
    return _apply(op, left, right)


def _apply(op: type, a, b):
    if op is ast.Add:
        return a + b
    if op is ast.Sub:
        return a - b
    if op is ast.Mult:
        return a * b
    if op is ast.Div:
        return a / b
    return math.pow(a, b)


def evaluate(tree: ast.Expression, bands: dict[str, Any]):
    """The value of a parsed expression with band arrays (numpy, dask or xarray)."""

    def value(node):
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Name):
            return bands[node.id]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        return _apply_arrays(type(node.op), value(node.left), value(node.right))

    return value(tree)
