"""Hostile expressions get a clear error at once and never freeze the server.

`9**9**9` as a Python integer power holds the interpreter lock for minutes: the whole server
(every thread, the event loop) would stop. Expected values are computed with plain numpy.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from helpers import scaled

from stac_gdal_mcp.errors import InvalidArgument
from stac_gdal_mcp.processing.expressions import MAX_CHARS, MAX_DEPTH, MAX_NODES, evaluate, parse_expression

HOSTILE = {
    "huge power": "nir + 9**9**9",
    "huge literal": "nir + " + "9" * 400,
    "overflowing float": "nir * 1e308 * 10",
    "division by zero": "nir + 1/0",
    "complex root": "nir + (-8)**0.5",
    "too long": "nir" + " + 1" * (MAX_CHARS // 4 + 1),
    "too many parts": "+".join(["nir"] * (MAX_NODES // 2 + 1)),
    "too deep": "-" * (MAX_DEPTH + 5) + "nir",
    "deep parentheses": "(" * 5000 + "nir" + ")" * 5000,
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_expressions_are_refused_at_once(text):
    start = time.monotonic()
    with pytest.raises(InvalidArgument) as info:
        parse_expression(text)
    assert time.monotonic() - start < scaled(0.5)
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


@pytest.mark.parametrize(
    "text, expected",
    [
        ("(nir - red) / (nir + red)", lambda nir, red: (nir - red) / (nir + red)),
        ("nir * 2**3 - 1/4", lambda nir, red: nir * 8 - 0.25),
        ("-(-nir) + red ** 2", lambda nir, red: nir + red**2),
        ("2 ** -1 * nir", lambda nir, red: 0.5 * nir),
        ("ndvi", lambda nir, red: (nir - red) / (nir + red)),
    ],
)
def test_ordinary_expressions_keep_their_value(text, expected):
    rng = np.random.default_rng(1)
    nir, red = rng.uniform(0.1, 1, 50), rng.uniform(0.1, 1, 50)
    _, tree, names = parse_expression(text)
    assert set(names) <= {"nir", "red"}
    np.testing.assert_allclose(evaluate(tree, {"nir": nir, "red": red}), expected(nir, red))


async def test_time_series_with_a_huge_power_answers_and_the_server_lives(make_settings, build):
    settings = make_settings(default_catalog="sample")
    aoi = [13.55, 45.85, 13.75, 45.98]
    async with Client(build(settings)) as client:
        start = time.monotonic()
        call = client.call_tool("time_series", {"aoi": aoi, "expression": "nir + 9**9**9"})
        with pytest.raises(ToolError, match="too large"):
            await asyncio.wait_for(call, scaled(10))
        assert time.monotonic() - start < scaled(5)
        catalogs = await asyncio.wait_for(client.call_tool("list_catalogs", {}), scaled(5))
        assert catalogs.structured_content is not None
