"""How big one answer may be: the byte budget of the entries of one answer
(`limits.max_result_bytes`), strings cut with a marker, ids and names quoted short.

A catalog decides how large its items are; an agent's context does not grow with them. Every
listing of items (summaries or full, one catalog or several) takes its entries through a
`ResultBudget`: entries are added while they fit, the first always (so paging advances), and an
entry that alone is larger than the whole budget is cut down (`fit`) with a note.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

ID_CHARS = 100  # an id or a name in an answer or a message
TEXT_CHARS = 2000  # any other string in a summary (signed hrefs are long)
RESERVE = 16 * 1024  # bytes of an answer left for its notes, cursor and counts
FIT_CHARS = (4096, 1024, 256, 64)  # string lengths tried, in turn, on an entry over the budget
SKELETON = ("type", "stac_version", "id", "collection", "bbox")


def cut(text: str, limit: int = ID_CHARS) -> str:
    """`text`, or its first `limit` characters and a marker saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit:,} more characters cut]"


def cut_strings(value: Any, limit: int) -> Any:
    """`value` (JSON) with every string, and every object key, longer than `limit` cut."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, dict):
        return {cut(str(k), limit): cut_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cut_strings(v, limit) for v in value]
    return value


def json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str))


class ResultBudget:
    """The bytes of entries one answer may carry (the one byte budget of every answer: item
    pages, a zonal table's rows and zones). `shape` turns a feature into the entry the answer
    carries (a summary; by default the feature itself), so the budget counts what is sent. Past
    the budget `take` says no and the caller stops with `note` and a cursor there. `room`: the
    bytes for the entries (default: max_bytes less RESERVE, at least half of it)."""

    def __init__(
        self,
        max_bytes: int | None,
        shape: Callable[[dict], Any] | None = None,
        full: bool = True,
        *,
        room: int | None = None,
        separator: int = 0,
    ):
        self.max_bytes = max_bytes
        self.room = (
            room if room is not None or max_bytes is None else max(max_bytes - RESERVE, max_bytes // 2)
        )
        self.separator = separator  # bytes counted between two entries (a list's comma)
        self.shape = shape
        self.full = full
        self.used = 0
        self.cut = False
        self.shrunk: list[str] = []

    def take(self, feature: dict) -> bool:
        if self.room is None:
            return True
        size = json_size(self.shape(feature) if self.shape is not None else feature) + self.separator
        if self.used and self.used + size > self.room:
            self.cut = True
            return False
        self.used += size
        return True

    def fit(self, entry: Any) -> Any:
        """`entry` as the answer carries it: whole when it fits the budget, else with its strings
        cut shorter and shorter until it does (at worst only its id, collection and bbox)."""
        if self.room is None or json_size(entry) <= self.room or not isinstance(entry, dict):
            return entry
        self.shrunk.append(cut(str(entry.get("id")), ID_CHARS))
        for limit in FIT_CHARS:
            smaller = cut_strings(entry, limit)
            if json_size(smaller) <= self.room:
                return smaller
        return cut_strings({k: entry[k] for k in SKELETON if k in entry}, FIT_CHARS[-1])

    @property
    def notes(self) -> list[str]:
        out = []
        if self.cut:
            out.append(self.note)
        if self.shrunk:
            out.append(
                f"item(s) {', '.join(self.shrunk)} alone exceeded limits.max_result_bytes="
                f"{self.max_bytes:,} bytes: long strings in them are cut, marked '…[N more characters cut]'"
            )
        return out

    @property
    def note(self) -> str:
        return (
            f"answers are capped at limits.max_result_bytes={self.max_bytes:,} bytes: fewer items than "
            "the limit were returned; use next_cursor for the rest"
            + (", or detail='summary'" if self.full else "")
        )
