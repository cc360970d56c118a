"""stac-geoparquet files read over HTTP range requests (`url = "https://…/items.parquet"`), for
DuckDB and pyarrow: an fsspec filesystem (`RangeFileSystem`, protocol `stacgp`) whose files are
a catalog's URLs, read through the catalogs' one guarded HTTP client (http.py, as STAC APIs
are): the network policy checked on the URL and on every redirect hop, the configured headers
sent only to URLs under the catalog's `url` (or the common folder of its `urls`),
`network.timeout_s` for each request as a whole and `network.max_retries` retries of connection
errors and HTTP 429/5xx. Messages show the URL only through `redact.masked_url`.

- A file's version is asked with `Range: bytes=0-0`: the answer's Content-Range gives the size,
  its ETag and Last-Modified the version. A server that answers with the whole file (200) does
  not serve ranges, and is refused in one line rather than downloaded whole for every query.
- A footer is checked from the file's last FOOTER_READ bytes, one request (as pyarrow and DuckDB
  read it), the rest of a longer footer in a second once its length is within bounds; not kept
  (DuckDB keeps the footers of the parts a search opens, parsed).
- The bytes DuckDB reads are fetched in blocks of BLOCK, kept per catalog (least recently used
  out first, evicted before a block is added past the bound) for the life of the version: on
  disk (disk_blocks.py, read back from the system's page cache; blocks side by side there read
  in one piece), and those the disk does not keep in one memory map made once (block_store.py:
  no heap memory churned by the threads reading): its bound, `cache_bytes`, is a share of
  `limits.query_memory_mb` (1/CACHE_SHARE; DuckDB's own memory limit is the rest,
  geoparquet.py), so what a query's reads hold stays within that budget. Every answer's size
  and validators are compared with the version's; a file changed meanwhile fails that query in
  one line and is read afresh by the next. The small files a search opened are then copied
  whole (local_copies.py), and DuckDB reads the copies itself.
- Versions are asked again only of what was read, after a search and beside the next one
  (`Freshness`): the files DuckDB opened, REVALIDATE_S after they were last asked (a walk over
  one part of 780 asks one URL, not 780); every URL SWEEP_S after the last sweep (a part no
  search opened may have changed its time span). A search waits for them only when the last
  sweep is STALE_S old, so no search uses a version asked more than STALE_S before it started;
  a change found makes the next search ask every version first and read the changed files afresh.
- DuckDB opens each file two to four times a query: an open is a plain read-only file object
  (`RangeFile`, its position each thread's own), not fsspec's buffered file, whose open cost
  0.2-0.5 ms of Python (a count over 780 parts: 1,562 opens, 0.2-0.4 s).
- No listing: a glob over HTTP is refused.
"""

from __future__ import annotations

import io
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import cached_property, lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from fsspec.spec import AbstractFileSystem

from ..errors import (
    AccessDenied,
    CatalogUnavailable,
    GeoparquetError,
    NotFound,
    StacGdalMcpError,
)
from ..settings import CatalogConfig, Settings
from .block_store import BlockStore
from .disk_blocks import DiskBlocks
from .http import GuardedHttp
from .local_copies import LocalCopies
from .redact import masked, masked_url
from .snapshot_files import footer_length

PROTOCOL = "stacgp"
BLOCK = 64 * 1024  # bytes fetched and cached together
CACHE_SHARE = 4  # the blocks kept per catalog: 1/CACHE_SHARE of limits.query_memory_mb
FOOTER_READ = 64 * 1024  # a file's last bytes read first: its footer, most often whole
REVALIDATE_S = 5.0  # the version of a file DuckDB opened is asked again after this long ...
SWEEP_S = 30.0  # ... every file's after this long (after a search, not holding it)
STALE_S = 60.0  # a search waits for every file's version when the last sweep is this old


@dataclass(frozen=True)
class Version:
    """One version of a file at `url`: its size and validators (the cache key of its blocks)."""

    url: str
    size: int
    etag: str | None
    modified: str | None  # Last-Modified, as sent

    def same(self, headers) -> bool:
        """Whether an answer's validators are this version's (the ETag where both have one)."""
        etag, modified = headers.get("ETag"), headers.get("Last-Modified")
        if self.etag and etag:
            return etag == self.etag
        return not (self.modified and modified) or modified == self.modified


def checked_url(catalog_id: str, url: str) -> str:
    """`url`, unless its path is a glob (HTTP has no listing to expand it)."""
    if any(c in urlsplit(url).path for c in "*["):
        raise GeoparquetError(
            f"catalog '{catalog_id}': {masked_url(url)} is a glob, and HTTP has no listing to expand "
            "it; give one file's URL, or download the files and give a folder or glob path"
        )
    return url


class RangeReader:
    """HTTP range reads of a catalog's files through its guarded client, with a block cache.
    `failure` is the last error a read raised (DuckDB reports it as its own, without its kind);
    `changed` is set when an answer showed the file changed."""

    def __init__(self, config: CatalogConfig, settings: Settings):
        self.catalog_id = config.id
        self.settings = settings
        self.http = GuardedHttp(config, settings, (config.url or "").rstrip("/"), self._why)
        self.failure: StacGdalMcpError | None = None
        self.changed = False
        self._lock = threading.Lock()
        self.bound = cache_bytes(settings)
        self.blocks = BlockStore(self.bound, BLOCK)  # the blocks kept, in one memory map ...
        self.disk = DiskBlocks(  # ... and on disk, unlinked (disk_blocks.py)
            Path(settings.workspace).expanduser() / "cache" / "http-blocks",
            settings.limits.http_disk_cache_mb * 1024**2,
            BLOCK,
        )
        self.copies = LocalCopies(  # whole copies of the small files searches open (local_copies.py)
            self,
            Path(settings.workspace).expanduser() / "cache" / "http-copies",
            settings.limits.http_copies_mb * 1024**2,
        )
        self._fetching: dict[tuple[Version, int], threading.Event] = {}
        self._opened: set[str] = set()  # URLs DuckDB opened since their version was asked

    def version(self, url: str) -> Version:
        headers, _ = self._get(url, 0, 0)
        size = _content_range(headers.get("Content-Range"))[2]
        return Version(url, size, headers.get("ETag"), headers.get("Last-Modified"))

    def opened(self, url: str) -> None:
        with self._lock:
            self._opened.add(url)

    def take_opened(self) -> list[str]:
        """The URLs opened since the last call (their versions to ask again)."""
        with self._lock:
            taken, self._opened = sorted(self._opened), set()
        return taken

    def footer(self, version: Version, checked) -> bytes:
        """The footer of `version` and the 8 bytes that end the file, not cached: its last
        FOOTER_READ bytes in one request; `checked(length)` is called with the footer's length
        (from those 8 bytes) before the rest of a longer footer is read."""
        size = version.size
        _, tail = self._get(version.url, max(0, size - FOOTER_READ), size - 1, version) if size else ({}, b"")
        length = footer_length(tail)
        checked(length)
        if length + 8 > len(tail) and len(tail) < size:
            start = max(0, size - length - 8)
            tail = self._get(version.url, start, size - len(tail) - 1, version)[1] + tail
        return tail[-(length + 8) :] if length else tail

    def read(self, version: Version, start: int, end: int) -> bytes:
        """Bytes `start`..`end` (exclusive) of `version`: blocks from the cache, those another
        thread is fetching waited for, the others fetched (one request per run of blocks)."""
        end = min(end, version.size)
        if end <= start:
            return b""
        first, last = start // BLOCK, (end - 1) // BLOCK
        if self.disk.held:  # all on disk, in a row: read in one piece
            kept = self.disk.span(
                [(version, b) for b in range(first, last + 1)], start - first * BLOCK, end - start
            )
            if kept is not None:
                return kept
        got: dict[int, bytes | memoryview] = {}
        pinned: list[int] = []  # the store's slots read in place, pinned until joined
        try:
            while len(got) <= last - first:
                mine, others = self._claim(version, range(first, last + 1), got, pinned)
                try:
                    self._fetch(version, mine, got)
                finally:
                    self._release(version, mine)
                for event in others:  # then taken from the cache (or fetched here if that failed)
                    event.wait(self.settings.network.timeout_s)
            parts = [memoryview(got[b]) for b in range(first, last + 1)]
            parts[-1] = parts[-1][: end - last * BLOCK]  # (the first may be the last too)
            parts[0] = parts[0][start - first * BLOCK :]
            return b"".join(parts)  # the one copy of the bytes read
        finally:
            if pinned:
                with self._lock:
                    self.blocks.release(pinned)

    def _fetch(self, version: Version, blocks: list[int], got: dict) -> None:
        """Blocks claimed by this thread into `got`: those kept on disk read back (not copied into
        memory), the others fetched (one request per run) and kept on disk, or in memory when the
        disk tier does not keep them (off, full of blocks being read, or failed): what is on disk
        is read from the system's page cache, not held twice."""
        kept = self.disk.get([(version, b) for b in blocks]) if self.disk.held else {}
        got.update((b, kept[version, b]) for b in blocks if (version, b) in kept)
        for lo, hi in _runs([b for b in blocks if b not in got]):
            _, data = self._get(version.url, lo * BLOCK, min((hi + 1) * BLOCK, version.size) - 1, version)
            view = memoryview(data)
            for b in range(lo, hi + 1):
                got[b] = view[(b - lo) * BLOCK : (b - lo + 1) * BLOCK]
                if not self.disk.put((version, b), got[b]):
                    self._keep((version, b), got[b])

    def _claim(self, version: Version, blocks: range, got: dict, pinned: list[int]) -> tuple[list[int], list]:
        """Blocks not in `got` yet: cached ones put there (views of the store's slots, added to
        `pinned`); (blocks to fetch here, now marked as being fetched; events of those another
        thread is fetching)."""
        mine, others = [], []
        with self._lock:
            for b in blocks:
                key = (version, b)
                if b in got:
                    continue
                kept = self.blocks.take(key)
                if kept is not None:
                    pinned.append(kept[0])
                    got[b] = kept[1]
                elif key in self._fetching:
                    others.append(self._fetching[key])
                else:
                    self._fetching[key] = threading.Event()
                    mine.append(b)
        return mine, others

    def _release(self, version: Version, blocks: list[int]) -> None:
        with self._lock:
            for b in blocks:
                self._fetching.pop((version, b)).set()

    def _keep(self, key: tuple[Version, int], block: bytes | memoryview) -> None:
        """Keep a copy of `block` (not a view of the answer it came in, which would stay whole)
        in the block store, the least recently used block dropped first when it is full."""
        with self._lock:
            self.blocks.put(key, block)

    def _get(self, url: str, first: int, last: int, version: Version | None = None) -> tuple[dict, bytes]:
        """Bytes `first`..`last` (inclusive) of `url` through the guarded client: (answer headers,
        body) of a 206 answer, or the one-line error another answer means."""
        answer = self.http.get_range(url, first, last)
        return answer.headers, self._body(
            url, answer.status, answer.headers, answer.body, (first, last), version
        )

    def _body(self, url: str, status: int, headers: dict, body: bytes, asked: tuple, version) -> bytes:
        """The body of a range answer, or the one-line error its status means."""
        shown, first, last = masked_url(url), *asked
        if status == 206:
            start, _end, size = _content_range(headers.get("Content-Range"))
            if start != first or len(body) < min(last, size - 1) - first + 1:
                raise CatalogUnavailable(self._why(url, f"the answer to bytes {first}-{last} was cut short"))
            if version is not None and (size != version.size or not version.same(headers)):
                self.changed = True
                raise GeoparquetError(
                    f"catalog '{self.catalog_id}': {shown} changed while it was read (size, ETag or "
                    "Last-Modified differ); search again to read the new version"
                )
            return body
        if status == 200:
            raise GeoparquetError(
                f"catalog '{self.catalog_id}': the server of {shown} does not answer HTTP range "
                "requests (it sent the whole file); download the file and give its path"
            )
        if status == 404:
            raise NotFound(f"catalog '{self.catalog_id}': {shown} was not found (HTTP 404)")
        if status == 416:
            self.changed = version is not None
            raise GeoparquetError(f"catalog '{self.catalog_id}': {shown} is empty or shorter than it was")
        if status in (401, 403):
            raise AccessDenied(f"catalog '{self.catalog_id}': {shown} refused access (HTTP {status})")
        raise CatalogUnavailable(self._why(url, f"HTTP {status}"))

    def _why(self, url: str, what: str) -> str:
        return (
            f"catalog '{self.catalog_id}': reading {masked_url(url)} failed: {masked(what, limit=200)}; "
            "try again later"
        )


# the versions asked after searches, every catalog's in turn (joined at exit, not cut off)
_ASKING = ThreadPoolExecutor(1, thread_name_prefix="http-versions")


class Freshness:
    """When a catalog's versions are asked again: `expired` (the search waits for every
    version: none asked yet, or the last sweep STALE_S old), and `after_search`, which asks
    those due (the opened files' after REVALIDATE_S, every file's after SWEEP_S) in a thread of
    their own while the answer goes back: a search no longer waits for 780 versions (0.8-1 s
    here, a round trip each over a real network), and a change is seen by the search after
    the check that finds it. `ask(every)` asks them (every: all files) and says whether one
    changed; an error leaves the times as they were (the next search asks again)."""

    def __init__(self):
        self.checked = self.swept = float("-inf")  # time.monotonic() when asked
        self._lock = threading.Lock()
        self._asking: Future | None = None

    def expired(self, now: float) -> bool:
        return now - self.swept > STALE_S

    def asked(self, at: float, every: bool) -> None:
        """The versions (every file's, or the opened ones') were asked from `at` on."""
        self.checked = at
        if every:
            self.swept = at

    def after_search(self, ask) -> None:
        now = time.monotonic()
        every = now - self.swept > SWEEP_S
        with self._lock:
            if (self._asking is not None and not self._asking.done()) or not (
                every or now - self.checked > REVALIDATE_S
            ):
                return
            self._asking = _ASKING.submit(self._ask, ask, every)

    def _ask(self, ask, every: bool) -> None:
        started = time.monotonic()
        try:
            ask(every)
        except Exception:  # the next search asks again and reports what fails
            return
        self.asked(started, every)

    def wait(self, timeout: float | None = None) -> None:
        """Until the versions being asked are known (tests, benchmarks)."""
        if self._asking is not None:
            wait([self._asking], timeout)


def cache_bytes(settings: Settings) -> int:
    """The bytes of blocks a catalog keeps: 1/CACHE_SHARE of limits.query_memory_mb (128 MiB of
    the default 512)."""
    return settings.limits.query_memory_mb * 1024**2 // CACHE_SHARE


def _runs(blocks: list[int]) -> list[tuple[int, int]]:
    """Sorted block numbers as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for b in blocks:
        if runs and runs[-1][1] == b - 1:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))
    return runs


def _content_range(header: str | None) -> tuple[int, int, int]:
    """(first, last, size) of a `Content-Range: bytes a-b/size` header; (-1, -1, -1) without one."""
    try:
        unit, _, spec = (header or "").partition(" ")
        span, _, size = spec.partition("/")
        first, _, last = span.partition("-")
        if unit.lower() == "bytes":
            return int(first), int(last), int(size)
    except ValueError:
        pass
    return -1, -1, -1


class RangeFileSystem(AbstractFileSystem):
    """The files of one version of a catalog, read with `RangeReader`: DuckDB reads URL `n` of
    `versions` as `stacgp://n.parquet` (no listing; `open`, `info`, `modified` only)."""

    protocol = PROTOCOL
    cachable = False  # one instance per catalog version, not shared by fsspec
    # a file's name as DuckDB reads it, in SQL, from the `filename` of a local copy's rows or its own
    FILENAME = f"'{PROTOCOL}://' || parse_filename(filename)"

    def __init__(self, reader: RangeReader, versions: list[Version]):
        super().__init__()
        self.reader = reader
        self.versions = {f"{n}.parquet": v for n, v in enumerate(versions)}
        self._opened: set[str] = set()  # names DuckDB opened since the last copy_opened
        self._lock = threading.Lock()

    def native(self, path: str) -> str:
        """The path DuckDB reads the file `path` (`stacgp://n.parquet`) by: its local copy where
        there is one (local_copies.py: read natively, not through this filesystem), else `path`."""
        name = self._strip_protocol(path)
        version = self.versions.get(name)
        copy = None if version is None else self.reader.copies.path(name, version)
        if copy is None:
            return path
        self.reader.opened(version.url)  # its version asked again after the search, as when opened
        return copy

    def copy_opened(self) -> None:
        """Local copies asked of the files opened since the last call (local_copies.py)."""
        with self._lock:
            opened, self._opened = self._opened, set()
        self.reader.copies.want([(name, self.versions[name]) for name in sorted(opened)])

    @cached_property
    def sources(self) -> dict[str, str]:
        """URL -> the path read_parquet reads it by."""
        return {v.url: f"{PROTOCOL}://{name}" for name, v in self.versions.items()}

    def version(self, path: str) -> Version:
        name = self._strip_protocol(path)
        if name not in self.versions:
            raise FileNotFoundError(path)
        return self.versions[name]

    def footer(self, path: str, checked) -> bytes:
        """The footer of the file at `path` and its last 8 bytes (`RangeReader.footer`)."""
        return self.reader.footer(self.version(path), checked)

    def info(self, path, **kwargs) -> dict:
        return {"name": self._strip_protocol(path), "size": self.version(path).size, "type": "file"}

    def ls(self, path, detail=True, **kwargs) -> list:
        found = [self.info(path)] if self._strip_protocol(path) in self.versions else []
        return found if detail else [f["name"] for f in found]

    def glob(self, path, **kwargs) -> list[str]:
        return [p for p in [self._strip_protocol(path)] if p in self.versions]

    def modified(self, path) -> datetime:
        return _modified(self.version(path).modified)

    def open(self, path, mode="rb", **kwargs) -> RangeFile:
        """A `RangeFile` (not fsspec's buffered file: DuckDB opens each part two to four times a
        query, and fsspec's open and buffered file cost 0.2-0.5 ms of Python each, most of a
        page's time over 780 parts)."""
        if mode != "rb":
            raise PermissionError(f"{path} is read-only")
        version = self.version(path)
        self.reader.opened(version.url)
        with self._lock:
            self._opened.add(self._strip_protocol(path))
        return RangeFile(self.reader, version)

    _open = open


@lru_cache(maxsize=4096)
def _modified(sent: str | None) -> datetime:
    """A Last-Modified header as a datetime (the epoch without one), parsed once."""
    try:
        return parsedate_to_datetime(sent) if sent else datetime(1970, 1, 1, tzinfo=UTC)
    except (TypeError, ValueError):
        return datetime(1970, 1, 1, tzinfo=UTC)


class RangeFile(io.RawIOBase):
    """One file of a RangeFileSystem, read-only: each read is `RangeReader.read` (blocks,
    cached) at the calling thread's own position (DuckDB's threads share one file object and
    read in two calls, `seek` then `read`, between which another thread may seek elsewhere)."""

    def __init__(self, reader: RangeReader, version: Version):
        super().__init__()
        self.reader, self.version, self.size = reader, version, version.size
        self._where = threading.local()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return getattr(self._where, "loc", 0)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.tell(), io.SEEK_END: self.size}[whence]
        self._where.loc = max(0, base + offset)
        return self._where.loc

    def read(self, size: int | None = -1) -> bytes:
        start = self.tell()
        end = self.size if size is None or size < 0 else min(self.size, start + size)
        try:
            data = self.reader.read(self.version, start, end)
        except StacGdalMcpError as exc:
            self.reader.failure = exc
            raise
        self._where.loc = start + len(data)
        return data

    readall = read

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)
