"""The one HTTP client of the catalogs (`GuardedHttp`): STAC API requests (remote.py) and the
range reads of stac-geoparquet files served over HTTP (httpfs.py) both go through it, and so keep
the same guards:

- the network policy (security.py) checked on the URL and on every redirect hop, which are
  followed here (at most MAX_REDIRECTS), and every connection made through the network guard
  (netguard.py) where the policy refuses some addresses;
- the configured headers (Authorization, ...) sent only to URLs under the catalog's root
  (`url_under`: scheme, host, port and a path prefix, dot segments resolved);
- `network.timeout_s` for each attempt as a whole (connect, status line, headers and body): the
  attempt's sockets are shut down when it passes (http_deadline.py), so a server dripping its
  headers or its body a byte at a time fails at the deadline, not once per read;
- connection errors, bodies cut part-way and HTTP 429/5xx retried `network.max_retries` times
  with backoff (honouring Retry-After, capped at 30 s); connect timeouts and the deadline not;
- each failure a core error (`AccessDenied` for a refused address, `CatalogUnavailable`
  otherwise) whose message the caller words (`unavailable(url, why)`), quoting URLs and answers
  only through `redact.masked`.
"""

from __future__ import annotations

import contextlib
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import unquote, urljoin, urlsplit

from ..errors import AccessDenied, CatalogUnavailable, Unreachable
from ..settings import CatalogConfig, Settings
from .paging import prepared_url
from .redact import mask_library_logs, masked, masked_url, remember
from .security import network_policy

MAX_REDIRECTS = 5
REDIRECT_STATUS = (301, 302, 303, 307, 308)
RETRY_STATUS = (429, 500, 502, 503, 504)
MAX_ANSWER_BYTES = 64 * 1024**2  # one catalog answer
_CHUNK = 64 * 1024
_PLAIN_HEADERS = {"accept", "accept-language", "content-type", "user-agent"}  # not secrets


class _Deadline(Exception):
    """The attempt's deadline passed."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: the URL that gave it (the last redirect hop), its status, its headers
    (case-insensitive) and its body (empty for a redirect, and for a range request not answered
    with 206: a server that ignores Range would send the whole file)."""

    url: str
    status: int
    headers: dict
    body: bytes


class GuardedHttp:
    """HTTP for one catalog: its requests session, its configured headers (sent under `root`
    only) and its network policy; failures worded by `unavailable(url, why)`."""

    def __init__(
        self, config: CatalogConfig, settings: Settings, root: str, unavailable: Callable[[str, str], str]
    ):
        self.config = config
        self.settings = settings
        self.root = root
        self.policy = network_policy(settings)
        self.unavailable = unavailable

    @cached_property
    def session(self):
        import requests

        from .netguard import requests_proxies

        mask_library_logs()  # urllib3's request lines carry query strings
        from .http_deadline import WatchedAdapter

        session = requests.Session()
        for scheme in ("http://", "https://"):  # every connection under the attempt's deadline
            session.mount(scheme, WatchedAdapter())
        session.headers["User-Agent"] = f"stac-gdal-mcp/{_version()}"
        proxies = requests_proxies(self.settings)
        if proxies:  # every connection through the checking proxy (see netguard.py)
            session.proxies.update(proxies)
            session.trust_env = False
        return session

    @cached_property
    def auth_headers(self) -> dict[str, str]:
        headers = self.config.resolved_headers()
        # masked wherever they would be shown (an error body echoing them, a log line)
        remember(v for k, v in headers.items() if k.lower() not in _PLAIN_HEADERS)
        return headers

    def request(self, href: str, method: str = "GET", body: dict | None = None) -> Answer:
        """GET (with `body` as query parameters) or POST (`body` as JSON); a 303 (and a 301 or
        302 after a POST) continues as a GET of the Location, as browsers do."""
        method = method.upper()
        params, payload = (body, None) if method == "GET" else (None, body)
        return self._follow(href, method, params, payload, None)

    def get_range(self, url: str, first: int, last: int) -> Answer:
        """GET bytes `first`..`last` (inclusive) of `url`; the body only of a 206 answer."""
        return self._follow(url, "GET", None, None, (first, last))

    def _follow(self, href: str, method: str, params, payload, span) -> Answer:
        """The request, redirects followed with the policy checked on every hop."""
        url = href
        for _hop in range(MAX_REDIRECTS + 1):
            try:
                self.policy.check_url(url)
            except AccessDenied as exc:
                raise AccessDenied(f"catalog '{self.config.id}': {masked(exc)}") from None
            except Unreachable as exc:
                raise CatalogUnavailable(self.unavailable(url, str(exc))) from None
            answer = self._send(url, method, params, payload, span)
            location = answer.headers.get("Location")
            if answer.status not in REDIRECT_STATUS or not location:
                return answer
            url = urljoin(prepared_url(url, params), location)
            params = None  # the Location is the whole next URL
            if answer.status == 303 or (answer.status in (301, 302) and method == "POST"):
                method, payload = "GET", None
        why = f"more than {MAX_REDIRECTS} redirects from {masked_url(href)}"
        raise CatalogUnavailable(self.unavailable(href, why))

    def _send(self, url: str, method: str, params, payload, span) -> Answer:
        """One request with retries."""
        import requests

        network = self.settings.network
        headers = dict(self.auth_headers) if url_under(prepared_url(url, params), self.root) else {}
        if span is not None:
            headers["Range"] = f"bytes={span[0]}-{span[1]}"
        attempts = 1 + network.max_retries
        for attempt in range(attempts):
            final = attempt == attempts - 1
            try:
                answer = self._attempt(url, method, params, payload, headers, span)
            except _Deadline:
                why = f"Timeout: no complete answer within {network.timeout_s:g} s"
                raise CatalogUnavailable(self.unavailable(url, why)) from None
            except requests.exceptions.ProxyError as exc:
                raise AccessDenied(f"catalog '{self.config.id}': {_proxy_refusal(exc)}") from None
            except requests.exceptions.RequestException as exc:
                transient = isinstance(
                    exc, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError)
                ) and not isinstance(exc, requests.exceptions.ConnectTimeout)
                if final or not transient:
                    why = f"{type(exc).__name__}: {masked(exc, limit=300)}"
                    raise CatalogUnavailable(self.unavailable(url, why)) from None
                time.sleep(_backoff(attempt))
                continue
            if answer.status in RETRY_STATUS and not final:
                time.sleep(_backoff(attempt, answer.headers.get("Retry-After")))
                continue
            return answer
        raise AssertionError("unreachable")

    def _attempt(self, url: str, method: str, params, payload, headers: dict, span) -> Answer:
        """One exchange within network.timeout_s as a whole: connect, headers and body (a
        connection still busy at the deadline is shut down, http_deadline.py)."""
        import requests

        from .http_deadline import deadline

        timeout = self.settings.network.timeout_s
        with deadline(timeout) as watch:
            try:
                answer = self._exchange(url, method, params, payload, headers, span, watch.at)
            except requests.exceptions.RequestException:
                if watch.expired:
                    raise _Deadline() from None
                raise
            if watch.expired:  # a body cut by the shutdown may look complete
                raise _Deadline()
            return answer

    def _exchange(self, url: str, method: str, params, payload, headers: dict, span, until: float) -> Answer:
        timeout = max(0.05, until - time.monotonic())
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
            status = response.status_code
            if status in REDIRECT_STATUS or (span is not None and status != 206):
                return Answer(url, status, response.headers, b"")
            limit = MAX_ANSWER_BYTES if span is None else span[1] - span[0] + 1
            body = _read(response, until, limit, decode=span is None)
            if len(body) > limit:
                raise CatalogUnavailable(self.unavailable(url, f"the answer is larger than {_amount(limit)}"))
            return Answer(url, status, response.headers, body)


def _read(response, deadline: float, limit: int, decode: bool) -> bytes:
    """The body, at most `limit` + 1 bytes (one more says it is too large), each read waiting
    at most for what is left until `deadline`. A read that fails otherwise is a requests
    ConnectionError (retried as requests' own)."""
    import requests

    chunks, size = [], 0
    while size <= limit:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Deadline()
        with contextlib.suppress(Exception):  # bound the next recv by what is left
            response.raw.connection.sock.settimeout(max(0.05, left))
        try:
            chunk = response.raw.read1(min(_CHUNK, limit + 1 - size), decode_content=decode)
        except Exception as exc:
            if time.monotonic() >= deadline or "timed out" in str(exc).lower():
                raise _Deadline() from None
            raise requests.exceptions.ConnectionError(str(exc)) from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _amount(size: int) -> str:
    return f"{size // 1024**2} MiB" if size % 1024**2 == 0 else f"{size:,} bytes"


def _version() -> str:
    from .._version import __version__

    return __version__


def _backoff(attempt: int, retry_after: str | None = None) -> float:
    if retry_after:
        with contextlib.suppress(ValueError):
            return min(max(float(retry_after), 0.0), 30.0)
    return min(0.5 * 2**attempt, 8.0)


def _proxy_refusal(exc: Exception) -> str:
    """The network guard's reason, from a requests ProxyError ("... 403 Refused by network
    policy: <reason>')"), or the error itself."""
    text = str(exc)
    marker = "Refused by network policy: "
    if marker in text:
        return masked(text.split(marker, 1)[1].split("'", 1)[0].split('"', 1)[0].rstrip(")"))
    return masked(text, limit=300)


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
