"""A Range-capable HTTP server for COGs that counts what it serves.

    with serve_directory(tmp_path) as srv:
        rasterio.open(f"{srv.url}/scene.tif")     # GDAL reads it via /vsicurl/
        srv.stats()["bytes"]                      # bytes of file data sent so far

Python's http.server ignores Range headers; GDAL needs them to read only the parts of a COG
it wants. Supported: GET and HEAD, `Range: bytes=a-b`, `bytes=a-`, `bytes=-n` (206 with
Content-Range), 416 for a range that starts past the end. For a multi-range request only the
first range is served (a legal answer). Nothing is written to stdout.
"""

from __future__ import annotations

import contextlib
import logging
import mimetypes
import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

logger = logging.getLogger(__name__)

CHUNK = 64 * 1024
_RANGE = re.compile(r"^\s*(\d*)\s*-\s*(\d*)\s*$")


@dataclass
class _PathStats:
    requests: int = 0
    bytes: int = 0
    ranges: int = 0


class _Server(ThreadingHTTPServer):
    # the socket's listen backlog: with the default 5, a burst of concurrent connections (many
    # items read at once) overflows it and the kernel drops SYNs - a 1 s retransmission each
    request_queue_size = 256


class RangeServer:
    """A running server: `url`, `directory`, `delay_s`, `stats()`, `reset_stats()`."""

    def __init__(self, directory: Path, delay_s: float = 0.0, nodelay: bool = False):
        self.directory = Path(directory).resolve()
        self.delay_s = delay_s
        self._lock = threading.Lock()
        self._paths: dict[str, _PathStats] = {}
        # every request for an existing file, in order (bounded): (path, Range header, bytes sent)
        self._log: deque[list] = deque(maxlen=100_000)
        # nodelay: TCP_NODELAY on each connection, as production HTTP servers set it. Without it
        # (the default, as before), an answer's body waits behind its separately written headers
        # until the client's delayed ACK (~40 ms on Linux) whenever the body is shorter than a
        # segment: a 16 KB COG header read then costs delay_s + ~40 ms, at random.
        handler = type(
            "Handler", (_RangeHandler,), {"range_server": self, "disable_nagle_algorithm": nodelay}
        )
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name=f"rangeserver-{port}", daemon=True
        )

    def start(self) -> RangeServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def stats(self) -> dict:
        """Totals and per-path counts: {"requests", "bytes", "paths": {"/x.tif": {...}}}.

        `requests` counts every GET/HEAD (including 404s), `bytes` only file data sent,
        `ranges` the requests answered with 206.
        """
        with self._lock:
            paths = {
                path: {"requests": s.requests, "bytes": s.bytes, "ranges": s.ranges}
                for path, s in self._paths.items()
            }
        return {
            "requests": sum(p["requests"] for p in paths.values()),
            "bytes": sum(p["bytes"] for p in paths.values()),
            "paths": paths,
        }

    def reset_stats(self) -> None:
        with self._lock:
            self._paths.clear()
            self._log.clear()

    def request_log(self) -> list[tuple[str, str | None, int]]:
        """Requests for existing files since the last reset, in order: (path, Range header or
        None, bytes sent). 404 and 416 answers are counted in stats() but not listed here."""
        with self._lock:
            return [tuple(entry) for entry in self._log]

    def _count(self, path: str, *, requests: int = 0, nbytes: int = 0, ranges: int = 0) -> None:
        with self._lock:
            s = self._paths.setdefault(path, _PathStats())
            s.requests += requests
            s.bytes += nbytes
            s.ranges += ranges


@contextlib.contextmanager
def serve_directory(
    directory: str | os.PathLike, delay_s: float = 0.0, nodelay: bool = False
) -> Iterator[RangeServer]:
    """Serve `directory` on 127.0.0.1 (free port) until the block ends.

    delay_s: sleep this long before answering each request (simulates network latency).
    nodelay: set TCP_NODELAY on connections (no Nagle/delayed-ACK stall of short answers).
    """
    server = RangeServer(Path(directory), delay_s=delay_s, nodelay=nodelay).start()
    try:
        yield server
    finally:
        server.close()


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """(first, last) byte positions for a `Range` header, inclusive.

    None: header not understood, serve the whole file (RFC 9110 allows ignoring it).
    "unsatisfiable": answer 416.
    """
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or not spec:
        return None
    match = _RANGE.match(spec.split(",")[0])
    if not match or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":  # suffix: the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return max(size - n, 0), size - 1
    start = int(first)
    if last != "" and int(last) < start:
        return None  # invalid syntax: ignore the header
    if start >= size:
        return "unsatisfiable"
    end = size - 1 if last == "" else min(int(last), size - 1)
    return start, end


class _RangeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as GDAL/curl expect
    timeout = 30  # close idle keep-alive connections
    range_server: RangeServer  # set on the per-server subclass

    def log_message(self, format: str, *args) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def _file(self, url_path: str) -> Path | None:
        root = self.range_server.directory
        target = (root / unquote(url_path).lstrip("/")).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return None
        return target

    def _respond(self, send_body: bool) -> None:
        srv = self.range_server
        url_path = urlsplit(self.path).path
        srv._count(url_path, requests=1)
        if srv.delay_s:
            time.sleep(srv.delay_s)
        path = self._file(url_path)
        if path is None:
            self._send_empty(HTTPStatus.NOT_FOUND)
            return
        size = path.stat().st_size
        header = self.headers.get("Range")
        wanted = parse_range(header, size) if header else None
        if wanted == "unsatisfiable":
            self._send_empty(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, f"bytes */{size}")
            return
        first, last = wanted if wanted else (0, size - 1)
        length = last - first + 1 if size else 0
        self.send_response(HTTPStatus.PARTIAL_CONTENT if wanted else HTTPStatus.OK)
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self.send_header("Content-Type", content_type)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        self.send_header("Last-Modified", self.date_time_string(int(path.stat().st_mtime)))
        if wanted:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if wanted:
            srv._count(url_path, ranges=1)
        # Counted and logged before the bytes go out: a client that has read them all may ask for
        # stats() at once, before this thread would have come back from the last write.
        entry = [url_path, header, length if send_body else 0]
        with srv._lock:
            srv._log.append(entry)
        sent = self._copy(url_path, path, first, length) if send_body and length else 0
        entry[2] = sent

    def _copy(self, url_path: str, path: Path, offset: int, length: int) -> int:
        srv, sent = self.range_server, 0
        with open(path, "rb") as f:
            f.seek(offset)
            while sent < length:
                chunk = f.read(min(CHUNK, length - sent))
                if not chunk:
                    break
                srv._count(url_path, nbytes=len(chunk))
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):  # not sent: not counted
                    srv._count(url_path, nbytes=-len(chunk))
                    self.close_connection = True
                    break
                sent += len(chunk)
        return sent

    def _send_empty(self, status: HTTPStatus, content_range: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.send_header("Accept-Ranges", "bytes")
        if content_range:
            self.send_header("Content-Range", content_range)
        self.end_headers()
