"""A fault-injecting HTTP server: a Range-capable file server that misbehaves on request.

    with serve_faults(tmp_path) as srv:
        srv.set_fault("/scene.tif", Stall(seconds=60))        # one path
        srv.set_fault(None, ServerError(after=3))             # every other path
        rasterio.open(f"{srv.url}/scene.tif")                 # GDAL reads it via /vsicurl/
        srv.stats()["paths"]["/scene.tif"]                    # requests, bytes, ranges, faults
        srv.clear_faults()

It serves a directory like `rangeserver.RangeServer` (GET, HEAD and POST -- POST answers like GET
and ignores the body, so a STAC API `POST /search` can be faked with a `search` file; `Range:
bytes=a-b`, `a-`, `-n`; 206 with Content-Range; 416; only the first of several ranges) and, for
a path that has a fault, lets the fault answer instead. A fault applies to the exact URL path
(query string ignored) or, set for `None`, to every path without a fault of its own.

Each fault is a small class with `respond(handler, request) -> bool`: it may answer the
request itself (return True) or let it be served normally (return False), e.g. for the first
`after` requests. `request` (a `Request`) carries the path, the file, the byte range and a
per-fault counter; the handler has helpers to send a normal file answer (`send_file`) or a body
(`send_body`), optionally cut short or dripped. Adding a mode is writing one such class.

Modes:

Every mode also takes `after`, `from_byte` and `times` (see `Fault`). All arguments are keywords.

- `Stall(seconds, after=0)`: say nothing for `seconds` (past the client's timeout), then close.
- `ServerError(status=500)`: answer `status`.
- `AbortMidBody(after=0, fraction=0.5)`: send the headers with the full Content-Length, then
  `fraction` of the body, then close the socket.
- `WrongLength(after=0, extra=1000)`: declare `extra` more bytes in Content-Length than are
  sent (negative: fewer), then close.
- `Drip(interval_s=2.0, after=0)`: send the answer one byte every `interval_s` seconds (a
  per-read timeout never fires; only a whole-request deadline does).
- `DripHeaders(interval_s=1.0, after=0)`: send the status line and headers one byte every
  `interval_s` seconds (each read gets a byte in time; only a whole-request deadline fires).
- `Redirect(location, status=302, after=0, append_path=False)`: answer with a `Location`
  header, e.g. `http://127.0.0.1:PORT/x`, `http://[::1]/x`, `http://100.100.100.200/x`.
  `append_path` adds the request's path (and query) to `location`.
- `MalformedJSON(body=b'{"type": "FeatureCollection", "features": [')`: 200,
  `application/json`, a body that is not JSON.
- `LoopNext(pages=None)`: serve the JSON file with every `rel="next"` link (and a
  `next` link added where there is none) pointing back to the very URL requested, so a
  paging client that does not notice loops forever (`pages`: stop looping after that many).
- `Respond(status, body=b"", headers=None)`: any fixed answer.
- `EndlessPages(per_page=1, delay_s=0.0, template=None)`: an item search whose pages never
  end, each with new items and a new `next` link, and no `numberMatched` (`delay_s`: slow).

Stalls and drips end early when the server closes, so a test never waits for them.
Nothing is written to stdout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mimetypes
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from .rangeserver import CHUNK, parse_range

logger = logging.getLogger(__name__)


@dataclass
class Request:
    """What a fault sees of one request."""

    method: str
    path: str  # URL path, unquoted, without the query
    target: str  # the request target as sent (path and query)
    file: Path | None  # the file under the served directory, if there is one
    range: tuple[int, int] | None  # inclusive byte positions asked for, None for the whole file
    index: int  # 0 for the first request this fault saw, 1 for the next, ...

    @property
    def size(self) -> int:
        return self.file.stat().st_size if self.file else 0

    @property
    def length(self) -> int:
        """The number of bytes asked for: the range's, else the whole file's."""
        first, last = self.range or (0, self.size - 1)
        return last - first + 1


@dataclass(kw_only=True)
class Fault:
    """Base class. `respond` answers a request (True) or leaves it to the normal server (False).

    Every mode takes, as keywords:
    `after`: serve this many requests normally before the fault starts (0: at once);
    `from_byte`: only misbehave for Range requests starting at or after this byte (0: any
    request), e.g. the first tile's offset, so that a raster's header is read fine and its
    pixels are not;
    `times`: misbehave this many times, then serve normally again (None: for ever), a
    transient failure that a retry overcomes.
    """

    after: int = 0
    from_byte: int = 0
    times: int | None = None
    files_only: ClassVar[bool] = False  # a mode that answers with (part of) the file

    def applies(self, request: Request) -> bool:
        """Whether this request counts for the fault at all (`from_byte`); `index` counts only
        the requests it applies to."""
        return not self.from_byte or (request.range is not None and request.range[0] >= self.from_byte)

    def respond(self, handler: FaultHandler, request: Request) -> bool:
        if request.index < self.after or (self.files_only and request.file is None):
            return False
        if self.times is not None and request.index >= self.after + self.times:
            return False
        return self.inject(handler, request)

    def inject(self, handler: FaultHandler, request: Request) -> bool:
        raise NotImplementedError


@dataclass(kw_only=True)
class Stall(Fault):
    seconds: float = 60.0

    def inject(self, handler, request):
        handler.server_ref.wait(self.seconds)
        handler.close_connection = True
        return True


@dataclass(kw_only=True)
class ServerError(Fault):
    status: int = 500

    def inject(self, handler, request):
        handler.send_body(self.status, b"injected failure\n", "text/plain")
        return True


@dataclass(kw_only=True)
class AbortMidBody(Fault):
    fraction: float = 0.5
    files_only: ClassVar[bool] = True

    def inject(self, handler, request):
        handler.send_file(request, limit=int(request.length * self.fraction))
        handler.abort()
        return True


@dataclass(kw_only=True)
class WrongLength(Fault):
    """Claims `extra` bytes more (or, negative, fewer: and sends only those) than it sends."""

    extra: int = 1000
    files_only: ClassVar[bool] = True

    def inject(self, handler, request):
        declared = request.length + self.extra
        handler.send_file(request, declared=declared, limit=min(declared, request.length))
        handler.abort()
        return True


@dataclass(kw_only=True)
class Drip(Fault):
    interval_s: float = 2.0
    files_only: ClassVar[bool] = True

    def inject(self, handler, request):
        handler.send_file(request, drip_s=self.interval_s)
        return True


@dataclass(kw_only=True)
class DripHeaders(Fault):
    interval_s: float = 1.0

    def inject(self, handler, request):
        status = "206 Partial Content" if request.range else "200 OK"
        head = f"HTTP/1.1 {status}\r\nContent-Type: application/octet-stream\r\nX-Slow: {'x' * 200}\r\n"
        for byte in head.encode():
            if not handler._write(bytes([byte])) or handler.server_ref.wait(self.interval_s):
                break
        handler.close_connection = True
        return True


@dataclass(kw_only=True)
class Redirect(Fault):
    location: str = "http://127.0.0.1/"
    status: int = 302
    append_path: bool = False

    def inject(self, handler, request):
        location = self.location
        if self.append_path:
            location = location.rstrip("/") + request.target
        handler.send_body(self.status, b"", "text/plain", headers={"Location": location})
        return True


@dataclass(kw_only=True)
class MalformedJSON(Fault):
    body: bytes = b'{"type": "FeatureCollection", "features": ['

    def inject(self, handler, request):
        handler.send_body(200, self.body, "application/json")
        return True


@dataclass(kw_only=True)
class LoopNext(Fault):
    pages: int | None = None
    files_only: ClassVar[bool] = True

    def inject(self, handler, request):
        if self.pages is not None and request.index >= self.after + self.pages:
            return False
        page = json.loads(request.file.read_text())
        host = handler.headers.get("Host") or handler.server_ref.url.split("//", 1)[1]
        here = f"http://{host}{request.target}"
        links = [link for link in page.get("links", []) if link.get("rel") != "next"]
        links.append({"rel": "next", "href": here, "type": "application/geo+json", "method": "GET"})
        page["links"] = links
        handler.send_body(200, json.dumps(page).encode(), "application/geo+json")
        return True


@dataclass(kw_only=True)
class Respond(Fault):
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] | None = None

    def inject(self, handler, request):
        headers = dict(self.headers or {})
        content_type = headers.pop("Content-Type", "application/octet-stream")
        handler.send_body(self.status, self.body, content_type, headers=headers)
        return True


@dataclass(kw_only=True)
class EndlessPages(Fault):
    """An item search (or, with `key="collections"`, a collection list) whose pages never end:
    each answer holds `per_page` records never sent before (ids `endless-<n>`), a `next` link
    to a page not yet asked (`?page=<n+1>`) and no `numberMatched`; `delay_s` before each
    answer (a slow API)."""

    per_page: int = 1
    delay_s: float = 0.0
    template: dict | None = None  # the record each one is made from (id replaced)
    key: str = "features"  # where a page holds its records

    def inject(self, handler, request):
        if self.delay_s and handler.server_ref.wait(self.delay_s):
            return True  # the server is closing
        host = handler.headers.get("Host")
        first = request.index * self.per_page
        items = [{**(self.template or {}), "id": f"endless-{first + k}"} for k in range(self.per_page)]
        next_link = {"rel": "next", "href": f"http://{host}{request.path}?page={request.index + 1}"}
        page = {"type": "FeatureCollection", self.key: items, "links": [next_link]}
        handler.send_body(200, json.dumps(page).encode(), "application/geo+json")
        return True


_COUNTS = ("requests", "bytes", "ranges", "faults")  # per path


@dataclass
class _Slot:
    fault: Fault
    seen: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_index(self) -> int:
        with self.lock:
            self.seen += 1
            return self.seen - 1


class FaultServer:
    """A running server: `url`, `directory`, `set_fault`, `clear_faults`, `stats`, `close`."""

    def __init__(self, directory: Path):
        self.directory = Path(directory).resolve()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._faults: dict[str | None, _Slot] = {}
        self._paths: dict[str, Counter] = {}
        handler = type("Handler", (FaultHandler,), {"server_ref": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        host, port = self._httpd.server_address[:2]
        self.port = port
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name=f"faultserver-{port}", daemon=True
        )

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def wait(self, seconds: float) -> bool:
        """Sleep `seconds` or until the server closes (True then)."""
        return self._closing.wait(seconds)

    def set_fault(self, path: str | None, fault: Fault) -> None:
        """Make `path` (e.g. "/scene.tif"; None: every path without its own) misbehave."""
        with self._lock:
            self._faults[path] = _Slot(fault)

    def clear_faults(self, path: str | None = ...) -> None:  # type: ignore[assignment]
        """Remove the fault of `path`, or all faults when called without an argument."""
        with self._lock:
            if path is ...:
                self._faults.clear()
            else:
                self._faults.pop(path, None)

    def stats(self) -> dict:
        """{"requests", "bytes", "faults", "paths": {"/x.tif": {"requests", "bytes", "ranges",
        "faults"}}}: every request, file bytes sent, 206 answers, answers given by a fault."""
        with self._lock:
            paths = {path: dict(counts) for path, counts in self._paths.items()}
        return {
            "requests": sum(p["requests"] for p in paths.values()),
            "bytes": sum(p["bytes"] for p in paths.values()),
            "faults": sum(p["faults"] for p in paths.values()),
            "paths": paths,
        }

    def reset_stats(self) -> None:
        with self._lock:
            self._paths.clear()

    def _slot(self, path: str) -> _Slot | None:
        with self._lock:
            return self._faults.get(path) or self._faults.get(None)

    def _count(self, path: str, **counts: int) -> None:
        with self._lock:
            self._paths.setdefault(path, Counter(dict.fromkeys(_COUNTS, 0))).update(counts)


@contextlib.contextmanager
def serve_faults(directory: str | os.PathLike) -> Iterator[FaultServer]:
    """Serve `directory` on 127.0.0.1 (free port), with faults set by the test, until the block
    ends."""
    server = FaultServer(Path(directory)).start()
    try:
        yield server
    finally:
        server.close()


class FaultHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server_ref: FaultServer  # set on the per-server subclass

    def log_message(self, format: str, *args) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_HEAD(self) -> None:
        self._handle(send_body=False)

    def do_GET(self) -> None:
        self._handle(send_body=True)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._handle(send_body=True)

    # -- helpers for faults ------------------------------------------------------------------

    def send_body(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        """A complete answer with `body` (not sent for HEAD)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self._send_body and body:
            self._write(body)

    def send_file(
        self,
        request: Request,
        *,
        limit: int | None = None,
        declared: int | None = None,
        drip_s: float = 0.0,
    ) -> int:
        """The normal answer for `request`'s file and range; returns the file bytes sent.

        limit: send at most this many body bytes; declared: the Content-Length to claim;
        drip_s: send one byte every `drip_s` seconds.
        """
        assert request.file is not None
        size = request.size
        first, last = request.range or (0, size - 1)
        length = last - first + 1 if size else 0
        self.send_response(HTTPStatus.PARTIAL_CONTENT if request.range else HTTPStatus.OK)
        content_type = mimetypes.guess_type(request.file.name)[0] or "application/octet-stream"
        self.send_header("Content-Type", content_type)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length if declared is None else declared))
        self.send_header("Last-Modified", self.date_time_string(int(request.file.stat().st_mtime)))
        if request.range:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if request.range:
            self.server_ref._count(request.path, ranges=1)
        if not self._send_body or not length:
            return 0
        todo = length if limit is None else max(0, min(limit, length))
        sent = 0
        with open(request.file, "rb") as f:
            f.seek(first)
            while sent < todo:
                n = 1 if drip_s else min(CHUNK, todo - sent)
                chunk = f.read(n)
                if not chunk:
                    break
                # counted before it goes out: a client that has read it all may ask stats() at once
                self.server_ref._count(request.path, bytes=len(chunk))
                if not self._write(chunk):
                    self.server_ref._count(request.path, bytes=-len(chunk))
                    break
                sent += len(chunk)
                if drip_s and self.server_ref.wait(drip_s):
                    break
        return sent

    def abort(self) -> None:
        """Close the connection now (after whatever was sent)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)

    # -- internals -----------------------------------------------------------------------------

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return False

    def _handle(self, send_body: bool) -> None:
        self._send_body = send_body
        srv = self.server_ref
        target = self.path
        path = unquote(urlsplit(target).path)
        srv._count(path, requests=1)
        file = self._file(path)
        wanted = None
        header = self.headers.get("Range")
        if file is not None and header:
            wanted = parse_range(header, file.stat().st_size)
        slot = srv._slot(path)
        if slot is not None and wanted != "unsatisfiable":
            request = Request(self.command, path, target, file, wanted, -1)
            if slot.fault.applies(request):
                request.index = slot.next_index()
                srv._count(path, faults=1)  # counted before answering: a stall is seen at once
                if slot.fault.respond(self, request):
                    return
                srv._count(path, faults=-1)
        if file is None:
            self.send_body(HTTPStatus.NOT_FOUND, b"", "text/plain")
            return
        if wanted == "unsatisfiable":
            size = file.stat().st_size
            self.send_body(416, b"", "text/plain", headers={"Content-Range": f"bytes */{size}"})
            return
        self.send_file(Request(self.command, path, target, file, wanted, 0))

    def _file(self, url_path: str) -> Path | None:
        root = self.server_ref.directory
        target = (root / url_path.lstrip("/")).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return None
        return target


__all__ = [
    "AbortMidBody",
    "Drip",
    "DripHeaders",
    "Fault",
    "FaultServer",
    "LoopNext",
    "MalformedJSON",
    "Redirect",
    "Request",
    "Respond",
    "ServerError",
    "Stall",
    "WrongLength",
    "serve_faults",
]
