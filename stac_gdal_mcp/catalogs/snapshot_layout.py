"""What a partitioned stac-geoparquet snapshot's file names say about its parts, so a search opens
only the parts that can hold its matches (the rest DuckDB prunes by row-group statistics).

Two published layouts are read:

- the Planetary Computer's: `<collection>.parquet/part-NNNN_<start>_<end>.parquet`, a folder per
  collection, each part holding the items whose datetime is in [start, end);
- hive folders `key=value` (rustac, DuckDB, pyarrow): `collection=…`, `year=…`, `month=…`,
  the year and month those of the items' datetime (start_datetime where it is null).

A part is left out only when it provably holds no match: its name says another collection, or
the time of its items (from its footer's statistics, read when the files are checked; else from
its name) lies wholly before or after the search's interval. A part whose name and footer say
nothing is always read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import PurePosixPath

_PC_PART = re.compile(r"^part-\d+_(?P<start>[0-9T:\-]+Z?)_(?P<end>[0-9T:\-]+Z?)\.parquet$", re.IGNORECASE)


@dataclass(frozen=True)
class Part:
    """What a part's path says: its collection, and the [start, end) of its items' datetimes."""

    collection: str | None = None
    start: datetime | None = None
    end: datetime | None = None


@lru_cache(maxsize=65536)
def part(path: str) -> Part:
    """What `path` (a file path or URL) says of its part, in either layout (kept: a search asks
    it of every part)."""
    names = PurePosixPath(path.split("?", 1)[0].replace("\\", "/")).parts
    hive = dict(n.split("=", 1) for n in names[:-1] if "=" in n)
    collection = hive.get("collection")
    start = end = None
    year, month = _number(hive.get("year")), _number(hive.get("month"))
    if year is not None and 1 <= year <= 9998:
        if month is not None and 1 <= month <= 12:
            start, end = _utc(year, month), _utc(year + month // 12, month % 12 + 1)
        else:
            start, end = _utc(year, 1), _utc(year + 1, 1)
    named = _PC_PART.match(names[-1]) if names else None
    if named is not None:
        start, end = _instant(named["start"]), _instant(named["end"])
        if start is None or end is None:
            start = end = None
        if collection is None and len(names) > 1 and names[-2].lower().endswith(".parquet"):
            collection = names[-2][: -len(".parquet")]
    return Part(collection, start, end)


def can_match(
    found: Part,
    collections: list[str] | None,
    start: datetime | None,
    end: datetime | None,
    span: tuple | None,
) -> bool:
    """Whether a part can hold items of `collections` meeting [start, end] (None: open). `span`:
    (earliest start, latest end) of its items from its footer's statistics, None if unknown;
    where it is known it decides, as the name's range only bounds `datetime` (pgstac reads an
    item's time as its start_datetime..end_datetime where it has both)."""
    if collections and found.collection is not None and found.collection not in collections:
        return False
    low, high = span if span is not None else (found.start, found.end)
    if end is not None and low is not None and aware(low) > end:
        return False
    if span is None:  # a name's [start, end): the items' datetimes are before `end`
        return not (start is not None and high is not None and aware(high) <= start)
    return not (start is not None and high is not None and aware(high) < start)


def aware(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and len(text) <= 4 else None


def _utc(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _instant(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text.rstrip("Zz"))
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when
