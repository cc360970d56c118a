"""Opaque, signed cursors for paged listings (item searches and collection lists).

A cursor is `<payload>.<tag>`: the payload is base64url JSON holding where the next page starts
(plus which listing and catalog it belongs to), the tag an HMAC-SHA256 of the payload under a
key of the `Cursors` object that made it (one per library `Session`, random). A cursor that was
altered, made by another `Session` (another process, or before a restart), or meant for another
listing or catalog is refused with one line; the fields of a genuine one are checked again before
use (`offset`, `page_skip`), so a bug elsewhere cannot turn into an out-of-range read.

A server has one `Session` for all its clients, so a cursor is good in every MCP connection of
the same server process: one HTTP session's cursor pages on in another (tests/test_transports.py).
That is by design, not an oversight: a cursor holds only where a public listing goes on (the
search arguments and the catalog's next page), which any client of the server can ask for
itself, and on connections of the protocol's 2026-07-28 revision (every request its own
connection, what current clients negotiate by default) there is no session to bind it to.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import Any, Literal

from ..errors import InvalidCursor

Kind = Literal["items", "collections"]
VERSION = 2
MAX_CURSOR_CHARS = 65536  # a cursor holds one page request (an intersects geometry at most)
MAX_OFFSET = 10_000_000  # items or collections of a local catalog, a generous bound
MAX_PAGE_SKIP = 100_000  # features already used from one API page
_TAG_BYTES = 16

NOT_OURS = (
    "cursor was not produced by this server for this listing (altered, or from before a restart); "
    "pass the next_cursor of the previous result unchanged, or start again without cursor"
)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Cursors:
    """Makes and checks the cursors of one session (`key`: random unless given)."""

    def __init__(self, key: bytes | None = None):
        self._key = key or secrets.token_bytes(32)

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_TAG_BYTES]

    def encode(self, kind: Kind, catalog: str, state: dict[str, Any]) -> str:
        """The cursor continuing listing `kind` of `catalog` from `state` (JSON values)."""
        payload = json.dumps(
            {**state, "v": VERSION, "kind": kind, "catalog": catalog}, separators=(",", ":"), sort_keys=True
        ).encode()
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def decode(self, cursor: Any, kind: Kind, catalog: str) -> dict[str, Any]:
        """The state of a cursor made by `encode(kind, catalog, ...)`; InvalidCursor otherwise."""
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS or cursor.count(".") != 1:
            raise InvalidCursor(NOT_OURS)
        payload_text, tag_text = cursor.split(".")
        try:
            payload, tag = _unb64(payload_text), _unb64(tag_text)
        except (binascii.Error, ValueError):
            raise InvalidCursor(NOT_OURS) from None
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise InvalidCursor(NOT_OURS)
        try:
            state = json.loads(payload)
        except ValueError:  # pragma: no cover - we signed it, so we wrote it
            raise InvalidCursor(NOT_OURS) from None
        if not isinstance(state, dict) or state.get("v") != VERSION:
            raise InvalidCursor(NOT_OURS)
        if state.get("kind") != kind:
            raise InvalidCursor(
                f"cursor continues a {state.get('kind')} listing, not a {kind} listing; "
                "pass it back to the call that returned it"
            )
        if state.get("catalog") != catalog:
            raise InvalidCursor(
                f"cursor belongs to catalog '{state.get('catalog')}', not '{catalog}'; pass the same catalog"
            )
        return state


def offset(state: dict[str, Any], *, total: int | None = None, name: str = "offset") -> int:
    """`state[name]` as a position in a list of `total` entries: an integer, 0 <= it <= total."""
    value = state.get(name)
    upper = MAX_OFFSET if total is None else min(total, MAX_OFFSET)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= upper:
        raise InvalidCursor(f"cursor is malformed: {name} {value!r} is not between 0 and {upper}")
    return value


def page_skip(value: Any) -> int:
    """The number of features of an API page already used: an integer, 0 <= it <= MAX_PAGE_SKIP."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PAGE_SKIP:
        raise InvalidCursor(f"cursor is malformed: skip {value!r} is not between 0 and {MAX_PAGE_SKIP}")
    return value


def checked(state: dict[str, Any], key: str, kinds: type | tuple[type, ...], *, optional: bool = True) -> Any:
    """`state[key]` if it is of `kinds` (or missing/None when `optional`); InvalidCursor otherwise."""
    value = state.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kinds):
        raise InvalidCursor(f"cursor is malformed: {key} has the wrong type")
    return value
