"""Band math for the loads: an index name (ndvi, ndwi, nbr, ndbi), a band, or a formula of band
names, parsed safely with `ast` (only names, numbers, + - * / ** and parentheses; nothing is
`eval`-ed) and evaluated on numpy, dask or xarray arrays alike."""

from __future__ import annotations

import ast
from typing import Any

from ..errors import InvalidArgument

INDICES = {
    "ndvi": "(nir - red) / (nir + red)",
    "ndwi": "(green - nir) / (green + nir)",
    "nbr": "(nir - swir22) / (nir + swir22)",
    "ndbi": "(swir16 - nir) / (swir16 + nir)",
}

_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


def parse_expression(expression: str) -> tuple[str, ast.Expression, list[str]]:
    """(text, parsed tree, band names) for 'ndvi', '(nir-red)/(nir+red)' or a band name.

    Only band names, numbers, + - * / ** and parentheses are allowed."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidArgument("expression must be an index name (ndvi, ndwi, nbr, ndbi), a band or a formula")
    text = INDICES.get(expression.strip().lower(), expression.strip())
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise InvalidArgument(
            f"expression '{expression}' is not a formula; example: (nir - red) / (nir + red)"
        ) from None
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
    return text, tree, names


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
        left, right = value(node.left), value(node.right)
        op = type(node.op)
        if op is ast.Add:
            return left + right
        if op is ast.Sub:
            return left - right
        if op is ast.Mult:
            return left * right
        if op is ast.Div:
            return left / right
        return left**right

    return value(tree)
