"""Paging cursors are tamper-proof: signed by the session that made them, every field checked, and
anything else refused with one line - through the library and through the MCP tools alike.
(Sample catalog, no services.)"""

from __future__ import annotations

import base64
import json

import pytest
from fastmcp import Client

from stac_gdal_mcp import Session
from stac_gdal_mcp.catalogs.cursors import MAX_CURSOR_CHARS, Cursors
from stac_gdal_mcp.errors import InvalidCursor
from stac_gdal_mcp.server import build_server

AOI = [13.55, 45.85, 13.75, 45.98]


@pytest.fixture
def session(tmp_path):
    with Session(default_catalog="sample", workspace=tmp_path / "ws") as session:
        yield session


def first_page(session):
    return session.search(collections=["sentinel-2-l2a"], bbox=AOI, limit=2)


def payload(cursor: str) -> dict:
    text = cursor.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def test_a_cursor_pages_through_without_gaps_or_duplicates(session):
    everything = session.search(collections=["sentinel-2-l2a"], bbox=AOI, limit=50).ids
    paged = [i for page in first_page(session).pages() for i in page.ids]
    assert paged == everything and len(everything) > 2


@pytest.mark.parametrize(
    "change, words",
    [
        ({"offset": -1}, "offset -1 is not between 0 and"),
        ({"offset": 10**9}, "offset 1000000000 is not between 0 and"),
        ({"offset": 6}, "offset 6 is not between 0 and 5"),  # past the end of this search (5 items)
        ({"offset": "2"}, "offset '2' is not between 0 and"),
        ({"offset": True}, "offset True is not between"),
        ({"search": "everything"}, "cursor is malformed: search has the wrong type"),
        ({"search": {"planet": "mars"}}, "cursor is malformed: search"),
    ],
)
def test_fields_of_a_signed_cursor_are_checked(session, change, words):
    """Even a cursor with a valid signature (made here with the session's own codec) is checked
    field by field: a bug elsewhere cannot become an out-of-range read."""
    state = {
        k: v for k, v in payload(first_page(session).next_cursor).items() if k not in ("v", "kind", "catalog")
    }
    forged = session.core.cursors.encode("items", "sample", {**state, **change})
    with pytest.raises(InvalidCursor, match=words.replace("(", r"\(")):
        session.search(cursor=forged)


def test_a_cursor_for_another_catalog_or_listing_is_refused(session):
    cursor = first_page(session).next_cursor
    other = session.core.cursors.encode("items", "earth-search", payload(cursor))
    with pytest.raises(InvalidCursor, match="belongs to catalog 'earth-search', not 'sample'"):
        session.search(cursor=other)
    collections = session.core.cursors.encode("collections", "sample", {"offset": 1})
    with pytest.raises(InvalidCursor, match="continues a collections listing, not a items listing"):
        session.search(cursor=collections)
    with pytest.raises(InvalidCursor, match="continues a items listing"):
        session.collections(cursor=cursor)


@pytest.mark.parametrize("where", ["payload", "tag"])
def test_a_bit_flipped_cursor_is_refused(session, where):
    cursor = first_page(session).next_cursor
    text, tag = cursor.split(".")
    if where == "payload":
        raw = bytearray(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        raw[raw.index(b'"offset":2') + 9] ^= 0x01  # "offset":2 -> "offset":3
        text = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    else:
        tag = ("A" if tag[0] != "A" else "B") + tag[1:]
    with pytest.raises(InvalidCursor, match="not produced by this server"):
        session.search(cursor=f"{text}.{tag}")


def test_cursors_of_another_session_and_garbage_are_refused(session, tmp_path):
    with Session(default_catalog="sample", workspace=tmp_path / "other") as other:
        foreign = first_page(other).next_cursor
    unsigned = foreign.split(".")[0]  # what cursors looked like before they were signed
    for cursor in (foreign, unsigned, "bm90IGEgY3Vyc29y", "a.b.c", "x" * (MAX_CURSOR_CHARS + 1), "ü.ü"):
        with pytest.raises(InvalidCursor) as info:
            session.search(cursor=cursor)
        assert "\n" not in str(info.value)
        assert "not produced by this server" in str(info.value)


def test_the_codec_alone():
    codec = Cursors(key=b"k" * 32)
    cursor = codec.encode("collections", "cat", {"offset": 3})
    assert codec.decode(cursor, "collections", "cat")["offset"] == 3
    assert Cursors(key=b"k" * 32).decode(cursor, "collections", "cat")["offset"] == 3  # same key: same codec
    with pytest.raises(InvalidCursor):
        Cursors(key=b"j" * 32).decode(cursor, "collections", "cat")
    with pytest.raises(InvalidCursor):
        codec.decode(None, "collections", "cat")


async def test_forged_cursors_are_one_line_tool_errors(tmp_path):
    session = Session(default_catalog="sample", workspace=tmp_path / "ws")
    good = first_page(session).next_cursor
    state = {k: v for k, v in payload(good).items() if k not in ("v", "kind", "catalog")}
    negative = session.core.cursors.encode("items", "sample", {**state, "offset": -5})
    flipped = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
    async with Client(build_server(session=session)) as client:
        for cursor, words in (
            (negative, "offset -5 is not between 0 and 5"),
            (flipped, "not produced by this server"),
            (good, None),
        ):
            result = await client.call_tool("search_items", {"cursor": cursor}, raise_on_error=False)
            if words is None:
                assert not result.is_error and result.structured_content["returned"] == 3
            else:
                text = result.content[0].text
                assert result.is_error and words in text and "\n" not in text
        collections = await client.call_tool("list_collections", {"limit": 1})
        result = await client.call_tool(
            "list_collections",
            {"cursor": collections.structured_content.get("next_cursor") + "x"},
            raise_on_error=False,
        )
        assert result.is_error and "not produced by this server" in result.content[0].text
    session.close()
