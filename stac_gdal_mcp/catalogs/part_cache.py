"""What each part's footer says (`Facts`: its schema, rows, time span, bbox extent, number
columns' ranges and which of them hold no null, whether every row has a datetime, whether
a row may have a start_datetime..end_datetime range, the range of its item ids), kept in a small JSON file per catalog
(`<workspace>/cache/parts/<catalog id>.json`), so that a new catalog on the same files - the
server started again - reads no footer of a part that has not changed (snapshot_files.py).

An entry is found by the file's version: its path, modification time and size on disk; its URL,
size and ETag or Last-Modified over HTTP (a URL whose server sends neither is not kept: its size
alone does not tell a changed file). A file that cannot be read or parsed as this module writes
it is taken as empty (the footers are read again and the file rewritten); it is written whole
under a new name and renamed into place (`files.write_atomic`), so a reader never sees half of it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import write_atomic

if TYPE_CHECKING:
    import pyarrow as pa

FORMAT = 3
MAX_BYTES = 64 * 1024**2  # a larger cache file is not read (10^8 items in 780 parts: about 0.4 MB)


@dataclass(frozen=True)
class Facts:
    """What a part's footer says, as a search uses it."""

    schema: pa.Schema
    rows: int
    span: tuple | None  # (earliest start, latest end) of its items' times, None: unknown
    box: tuple | None  # (west, south, east, north) of its rows' bbox, None: unknown
    ranges: dict  # number column (and bbox side) -> (min, max), None: every value null
    dated: bool  # every row has a datetime
    filled: frozenset  # the columns of `ranges` without a null
    ranged: bool  # a row may have both start_datetime and end_datetime
    ids: tuple | None = None  # (least, greatest) of its item ids, None: unknown


def cache_path(workspace: Path, catalog_id: str) -> Path:
    return Path(workspace).expanduser() / "cache" / "parts" / f"{catalog_id}.json"


def key(version: Any) -> str | None:
    """The cache key of a file's version (a (path, mtime_ns, size) stamp or an httpfs.Version);
    None for a URL whose server sent no validator."""
    if isinstance(version, tuple):
        return json.dumps(list(version))
    if not (version.etag or version.modified):
        return None
    return json.dumps([version.url, version.size, version.etag, version.modified])


def load(path: Path | None) -> dict[str, Facts]:
    """The entries of the cache file at `path` by key; {} when there is none or it is damaged."""
    import pyarrow as pa

    try:
        if path is None or path.stat().st_size > MAX_BYTES:
            return {}
        doc = json.loads(path.read_text())
        if doc.get("format") != FORMAT:
            return {}
        schemas = {
            h: pa.ipc.read_schema(pa.py_buffer(base64.b64decode(b))) for h, b in doc["schemas"].items()
        }
        return {k: _facts(schemas, entry) for k, entry in doc["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, pa.ArrowException):
        return {}


def save(path: Path | None, entries: list[tuple[str | None, Facts]]) -> None:
    """Write the cache file at `path` with `entries` (key, facts), those without a key left out;
    a failure to write is not an error (the footers are read again next time)."""
    if path is None:
        return
    schemas: dict[str, str] = {}
    files = {}
    for name, facts in entries:
        if name is None:
            continue
        raw = facts.schema.serialize().to_pybytes()
        digest = hashlib.sha256(raw).hexdigest()[:32]
        schemas.setdefault(digest, base64.b64encode(raw).decode())
        span = [w.isoformat() for w in facts.span] if facts.span is not None else None
        files[name] = [
            digest,
            facts.rows,
            span,
            facts.box,
            facts.ranges,
            facts.dated,
            sorted(facts.filled),
            facts.ranged,
            facts.ids,
        ]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"format": FORMAT, "schemas": schemas, "files": files}))
    except OSError:
        pass


def _facts(schemas: dict, entry: list) -> Facts:
    digest, rows, span, box, ranges, dated, filled, ranged, ids = entry
    return Facts(
        schemas[digest],
        int(rows),
        tuple(datetime.fromisoformat(w) for w in span) if span is not None else None,
        tuple(float(v) for v in box) if box is not None else None,
        {name: tuple(found) if found is not None else None for name, found in ranges.items()},
        bool(dated),
        frozenset(str(name) for name in filled),
        bool(ranged),
        tuple(str(i) for i in ids) if ids is not None else None,
    )
