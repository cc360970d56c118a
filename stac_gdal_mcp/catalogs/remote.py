"""Remote STAC APIs: the one place that talks HTTP to them (`RemoteCatalog.request`: the href
policy on every hop, redirects, a deadline per attempt, retries, an answer-size cap). Every
failure becomes a core error (`CatalogUnavailable`, `NotFound`, ...) with a message that says
what to do, and that shows URLs and quoted answers only through `redact.masked`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import posixpath
import re
import threading
import time
from collections.abc import Iterable
from functools import cached_property
from urllib.parse import quote, unquote, urljoin, urlsplit

from ..errors import (
    AccessDenied,
    CatalogUnavailable,
    CollectionNotFound,
    InvalidArgument,
    ItemNotFound,
    NotFound,
    StacGdalMcpError,
    Unreachable,
)
from ..models import SearchFeatures
from ..settings import CatalogConfig, Settings
from ..stac import link_href
from .paging import prepared_url
from .redact import mask_library_logs, masked, masked_url, remember
from .security import network_policy
from .security import shown as quoted

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
RETRY_STATUS = (429, 500, 502, 503, 504)
MAX_ANSWER_BYTES = 64 * 1024**2  # one catalog answer
_CHUNK = 64 * 1024
_PLAIN_HEADERS = {"accept", "accept-language", "content-type", "user-agent"}  # not secrets


class _Deadline(Exception):
    """The whole-request deadline passed."""


def _version() -> str:
    from .._version import __version__

    return __version__


def _backoff(attempt: int, retry_after: str | None = None) -> float:
    if retry_after:
        with contextlib.suppress(ValueError):
            return min(max(float(retry_after), 0.0), 30.0)
    return min(0.5 * 2**attempt, 8.0)


def _effective_path(path: str) -> str:
    """The path a server acts on: percent-decoded, dot segments resolved."""
    decoded = unquote(path)
    normal = posixpath.normpath(decoded) if decoded else "/"
    return normal + ("/" if decoded.endswith("/") and normal != "/" else "")


def url_under(url: str, root: str) -> bool:
    """Whether `url` is `root` or below it: same scheme, host and port, and a path under the
    root's path once percent-decoding and dot segments are resolved (so that `../` or `%2e%2e/`
    cannot climb out)."""
    try:
        a, b = urlsplit(url), urlsplit(root)
        a_port, b_port = a.port, b.port
    except ValueError:
        return False
    default = {"http": 80, "https": 443}
    if (a.scheme.lower(), (a.hostname or "").lower(), a_port or default.get(a.scheme.lower())) != (
        b.scheme.lower(),
        (b.hostname or "").lower(),
        b_port or default.get(b.scheme.lower()),
    ):
        return False
    if a.username or a.password:
        return False
    base = _effective_path(b.path).rstrip("/")
    path = _effective_path(a.path)
    return path == base or path.startswith(base + "/") or (base == "" and path.startswith("/"))


def path_segment(value: str, what: str) -> str:
    """`value` (a collection or item id) as one percent-encoded URL path segment; ids that would
    name another path ('.', '..', anything with '/' once decoded) are refused."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string")
    decoded = value
    for _ in range(3):  # %252e%252e -> %2e%2e -> ..
        decoded = unquote(decoded)
    if decoded in (".", "..") or "/" in decoded or "\\" in decoded or any(ord(c) < 32 for c in decoded):
        shown = quoted(value, 80)
        raise InvalidArgument(
            f"{what} {shown} is not a valid id: ids have no '/', '\\' or control characters and are not '.' or '..'"
        )
    return quote(value, safe="")


def _proxy_refusal(exc: Exception) -> str:
    """The network guard's reason, from a requests ProxyError ("... 403 Refused by network
    policy: <reason>')"), or the error itself."""
    text = str(exc)
    marker = "Refused by network policy: "
    if marker in text:
        return masked(text.split(marker, 1)[1].split("'", 1)[0].split('"', 1)[0].rstrip(")"))
    return _short(text)


# Conformance classes, matched by pattern so that every spec version counts.
_CONFORMANCE = {
    "item_search": r"/item-search$",
    "filter_cql2_text": r"/cql2-text$",
    "filter_cql2_json": r"/cql2-json$",
    "query": r"/item-search#query$",
    "sort": r"/item-search#sort$",
    "fields": r"/item-search#fields$",
    "collection_search": r"/collection-search$",
    "free_text": r"(collection-search#free-text|/free-text)$",
    "aggregation": r"aggregation",
}


def features_from_conformance(conforms_to: Iterable[str]) -> SearchFeatures:
    uris = list(conforms_to)
    found = {name: any(re.search(pattern, uri) for uri in uris) for name, pattern in _CONFORMANCE.items()}
    # A filter extension without the item-search#filter class is not usable for search.
    if not any(re.search(r"item-search#filter$|/filter$", u) for u in uris):
        found["filter_cql2_text"] = found["filter_cql2_json"] = False
    return SearchFeatures(**found)


class RemoteCatalog:
    """A STAC API, spoken to with `requests` (see `request` for redirects, deadlines, retries)."""

    kind = "api"

    def __init__(self, config: CatalogConfig, settings: Settings):
        self.config = config
        self.settings = settings
        self.policy = network_policy(settings)
        self._lock = threading.Lock()
        self._root: dict | None = None

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def url(self) -> str:
        return self.config.url.rstrip("/")

    @cached_property
    def session(self):
        import requests

        from .netguard import requests_proxies

        mask_library_logs()  # urllib3's request lines carry query strings
        session = requests.Session()
        session.headers["User-Agent"] = f"stac-gdal-mcp/{_version()}"
        proxies = requests_proxies(self.settings)
        if proxies:  # every connection through the checking proxy (see netguard.py)
            session.proxies.update(proxies)
            session.trust_env = False
        return session

    @cached_property
    def _auth_headers(self) -> dict[str, str]:
        headers = self.config.resolved_headers()
        # masked wherever they would be shown (an error body echoing them, a log line)
        remember(v for k, v in headers.items() if k.lower() not in _PLAIN_HEADERS)
        return headers

    def check_url(self, url: str) -> str:
        return self.policy.check_url(url)

    def under_root(self, url: str) -> bool:
        """Whether `url` lies inside the catalog's configured root (scheme, host, port and path
        prefix, after resolving dot segments): only such requests carry the configured headers."""
        return url_under(url, self.url)

    def request(self, href: str, method: str = "GET", body: dict | None = None) -> dict:
        """GET (with `body` as query parameters) or POST (`body` as JSON) and return the JSON.

        Redirects are followed here, each hop checked by the network policy like the first URL
        and at most MAX_REDIRECTS of them; the configured headers (Authorization, ...) go only
        to URLs under the catalog's root. `network.timeout_s` bounds each attempt as a whole
        (connect, headers and body), not one read; connection failures and HTTP 429/5xx are
        retried `network.max_retries` times with backoff (honouring Retry-After), timeouts not.
        """
        url, method = href, method.upper()
        params, payload = (body, None) if method == "GET" else (None, body)
        for _hop in range(MAX_REDIRECTS + 1):
            try:
                self.check_url(url)
            except Unreachable as exc:
                raise CatalogUnavailable(self._unavailable(str(exc))) from None
            except AccessDenied as exc:
                raise AccessDenied(f"catalog '{self.id}': {masked(exc)}") from None
            status, headers, content = self._send(url, method, params, payload)
            location = headers.get("Location")
            if status in (301, 302, 303, 307, 308) and location:
                url = urljoin(prepared_url(url, params), location)
                params = None  # the Location is the whole next URL
                if status == 303 or (status in (301, 302) and method == "POST"):
                    method, payload = "GET", None
                continue
            return self._json(url, status, content)
        raise CatalogUnavailable(
            self._unavailable(f"more than {MAX_REDIRECTS} redirects from {masked_url(href)}")
        )

    def _send(self, url: str, method: str, params, payload) -> tuple[int, dict, bytes]:
        """One request with retries: (status, headers, body)."""
        import requests

        network = self.settings.network
        headers = dict(self._auth_headers) if self.under_root(prepared_url(url, params)) else {}
        attempts = 1 + network.max_retries
        for attempt in range(attempts):
            try:
                status, answer_headers, content = self._attempt(url, method, params, payload, headers)
            except _Deadline:
                raise CatalogUnavailable(
                    self._unavailable(f"Timeout: no complete answer within {network.timeout_s:g} s")
                ) from None
            except requests.exceptions.ProxyError as exc:
                raise AccessDenied(f"catalog '{self.id}': {_proxy_refusal(exc)}") from None
            except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
                if isinstance(exc, requests.exceptions.ConnectTimeout) or attempt == attempts - 1:
                    raise CatalogUnavailable(
                        self._unavailable(f"{type(exc).__name__}: {_short(str(exc))}")
                    ) from None
                time.sleep(_backoff(attempt))
                continue
            except requests.exceptions.RequestException as exc:
                raise CatalogUnavailable(
                    self._unavailable(f"{type(exc).__name__}: {_short(str(exc))}")
                ) from None
            if status in RETRY_STATUS and attempt < attempts - 1:
                time.sleep(_backoff(attempt, answer_headers.get("Retry-After")))
                continue
            return status, answer_headers, content
        raise AssertionError("unreachable")

    def _attempt(self, url, method, params, payload, headers) -> tuple[int, dict, bytes]:
        """One HTTP exchange under a deadline of network.timeout_s for the whole of it."""
        timeout = self.settings.network.timeout_s
        deadline = time.monotonic() + timeout
        response = self.session.request(
            method,
            url,
            params=params,
            json=payload,
            headers=headers,
            timeout=(min(timeout, 10.0), timeout),
            allow_redirects=False,
            stream=True,
        )
        with response:
            if response.status_code in (301, 302, 303, 307, 308):
                return response.status_code, dict(response.headers), b""
            chunks, size = [], 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Deadline()
                with contextlib.suppress(Exception):  # bound the next recv by what is left
                    response.raw.connection.sock.settimeout(max(0.05, min(left, timeout)))
                try:
                    chunk = response.raw.read1(_CHUNK, decode_content=True)
                except Exception as exc:
                    if time.monotonic() >= deadline or "timed out" in str(exc).lower():
                        raise _Deadline() from None
                    raise
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise CatalogUnavailable(
                        self._unavailable(f"the answer is larger than {MAX_ANSWER_BYTES // 1024**2} MiB")
                    )
                chunks.append(chunk)
            return response.status_code, dict(response.headers), b"".join(chunks)

    def _json(self, url: str, status: int, content: bytes) -> dict:
        text = content.decode("utf-8", "replace")
        if status == 404:
            raise NotFound(f"{masked_url(url)} was not found in catalog '{self.id}' (HTTP 404)")
        if status in (400, 422):
            raise StacGdalMcpError(
                f"catalog '{self.id}' rejected the request (HTTP {status}): {_short(text)}"
            )
        if status >= 400:
            raise CatalogUnavailable(self._unavailable(f"HTTP {status}: {_short(text)}"))
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise CatalogUnavailable(self._unavailable("the answer was not JSON")) from None
        if not isinstance(value, dict):
            raise CatalogUnavailable(self._unavailable("the answer was not a JSON object"))
        return value

    def _unavailable(self, why: str) -> str:
        return (
            f"catalog '{self.id}' ({masked_url(self.url)}) is unavailable: {masked(why)}. "
            "Try again later, or use another catalog"
        )

    @property
    def root(self) -> dict:
        with self._lock:  # tool calls run in threads: fetch the landing page once
            if self._root is None:
                self._root = self.request(self.url)
            return self._root

    @property
    def conforms_to(self) -> list[str]:
        conf = self.root.get("conformsTo")
        if conf is None:
            conf = self.request(f"{self.url}/conformance").get("conformsTo", [])
        return conf

    @property
    def features(self) -> SearchFeatures:
        return features_from_conformance(self.conforms_to)

    def link(self, rel: str, default: str) -> str:
        return link_href(self.root, rel) or f"{self.url}/{default}"

    def collection_url(self, collection_id: str) -> str:
        return f"{self.url}/collections/{path_segment(collection_id, 'collection_id')}"

    def item_url(self, collection_id: str, item_id: str) -> str:
        return f"{self.collection_url(collection_id)}/items/{path_segment(item_id, 'item_id')}"

    def collection(self, collection_id: str) -> dict:
        url = self.collection_url(collection_id)
        try:
            return self.request(url)
        except NotFound:
            raise CollectionNotFound(
                f"collection {quoted(collection_id, 80)} not found in catalog '{self.id}'"
            ) from None

    def item(self, collection_id: str, item_id: str) -> dict:
        url = self.item_url(collection_id, item_id)  # checks both ids first
        self.collection(collection_id)
        try:
            item = self.request(url)
        except NotFound:
            raise ItemNotFound(
                f"item {quoted(item_id, 80)} not found in collection {quoted(collection_id, 80)} "
                f"of catalog '{self.id}'"
            ) from None
        return self.sign(item)

    def sign(self, item: dict) -> dict:
        """Sign asset hrefs where the catalog needs it (Planetary Computer SAS tokens, cached per
        container; processing signs again at read time, see signing.py)."""
        from .signing import signer_for

        signer = signer_for(self.config, self.settings)
        return item if signer is None else signer.sign_item(item)


def _short(text: str, n: int = 300) -> str:
    """`text` (an answer's body, an exception) as a message may quote it: masked, then cut."""
    return masked(text, limit=n)
