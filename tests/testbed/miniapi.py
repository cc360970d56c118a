"""A deliberately minimal STAC API for tests of what pgstac does not show: an API with item
search only (no filter, query or sort), and failure modes (HTTP 429/503 a number of times,
slow answers). It serves real HTTP on 127.0.0.1 and pages with `next` links (GET, offset token).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ITEM_SEARCH_ONLY = [
    "https://api.stacspec.org/v1.0.0/core",
    "https://api.stacspec.org/v1.0.0/item-search",
    "https://api.stacspec.org/v1.0.0/collections",
]


class MiniAPI:
    def __init__(self, items: list[dict], collections: list[dict]):
        self.items = items
        self.collections = collections
        self.fail_next: list[int] = []  # statuses to answer, one per request, before serving
        self.delay_s = 0.0
        self.requests = 0
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"api": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def root(self) -> dict:
        return {
            "type": "Catalog",
            "id": "mini",
            "description": "minimal API",
            "stac_version": "1.0.0",
            "conformsTo": ITEM_SEARCH_ONLY,
            "links": [
                {"rel": "self", "href": self.url},
                {"rel": "data", "href": f"{self.url}/collections"},
                {"rel": "search", "href": f"{self.url}/search", "method": "GET"},
            ],
        }

    def search(self, params: dict[str, str]) -> dict:
        out = self.items
        if "collections" in params:
            wanted = params["collections"].split(",")
            out = [i for i in out if i["collection"] in wanted]
        if "ids" in params:
            wanted = params["ids"].split(",")
            out = [i for i in out if i["id"] in wanted]
        if "bbox" in params:
            w, s, e, n = (float(v) for v in params["bbox"].split(","))
            out = [
                i
                for i in out
                if not (i["bbox"][0] > e or i["bbox"][2] < w or i["bbox"][1] > n or i["bbox"][3] < s)
            ]
        limit = int(params.get("limit", 10))
        offset = int(params.get("token", 0))
        page = out[offset : offset + limit]
        links = []
        if offset + limit < len(out):
            query = {k: v for k, v in params.items() if k != "token"}
            query["token"] = str(offset + limit)
            links.append(
                {
                    "rel": "next",
                    "href": f"{self.url}/search?" + "&".join(f"{k}={v}" for k, v in query.items()),
                }
            )
        return {"type": "FeatureCollection", "features": page, "links": links, "numberMatched": len(out)}


class _Handler(BaseHTTPRequestHandler):
    api: MiniAPI

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        api = self.api
        with api._lock:
            api.requests += 1
            status = api.fail_next.pop(0) if api.fail_next else None
        if api.delay_s:
            time.sleep(api.delay_s)
        if status:
            return self._send(status, {"code": "Unavailable", "description": "try later"}, retry_after="0")
        parts = urlsplit(self.path)
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path.rstrip("/")
        if path == "":
            return self._send(200, api.root())
        if path == "/conformance":
            return self._send(200, {"conformsTo": ITEM_SEARCH_ONLY})
        if path == "/collections":
            return self._send(200, {"collections": api.collections, "links": []})
        if path.startswith("/collections/"):
            cid = path.split("/")[2]
            found = [c for c in api.collections if c["id"] == cid]
            if found:
                return self._send(200, found[0])
        if path == "/search":
            return self._send(200, api.search(params))
        return self._send(404, {"code": "NotFound", "description": path})

    def _send(self, status: int, body: dict, retry_after: str | None = None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)


@contextlib.contextmanager
def serve_mini_api(items: list[dict], collections: list[dict]):
    api = MiniAPI(items, collections)
    api._thread.start()
    try:
        yield api
    finally:
        api._httpd.shutdown()
        api._httpd.server_close()
