"""One checked way out: a small forward proxy, in this process, through which GDAL (curl) and the
catalog client make every outgoing connection when the network policy refuses some addresses.

Why a proxy: GDAL 3.10 follows HTTP redirects inside curl, with no option to stop or inspect
them, and resolves host names again at connect time. Checking a URL before handing it to GDAL
therefore proves nothing about where the bytes come from: the server may answer the check and
redirect the next range request to 127.0.0.1, or its DNS may change in between (rebinding).
Through `GDAL_HTTP_PROXY`/`GDAL_HTTPS_PROXY`, curl asks this proxy for every connection - the
first request and every redirect hop alike - and the proxy resolves the host itself, checks
every address against `security.NetworkPolicy` and connects to the address it checked. A refused
target gets `403` with the reason (in the status line, which curl and urllib3 quote).

- HTTPS (and any CONNECT): the tunnel is checked when it is opened; TLS stays end to end.
- Plain HTTP: one request per connection (`Connection: close` both ways), so that every request
  - and so every redirect hop - is a new, checked connection.

Not used when the policy allows every address (`network.allow_private_hosts = true`: nothing to
check), nor when the environment names an outbound proxy (HTTPS_PROXY, ...): the operator's
proxy then makes the connections, and only the check before each request remains. The
`no_proxy`/`NO_PROXY` variables would make curl bypass this proxy for the hosts they name, so
they are removed from the environment when the proxy starts (logged).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from collections import deque
from urllib.parse import urlsplit

from ..errors import AccessDenied, Unreachable
from .security import NetworkPolicy, network_policy

log = logging.getLogger(__name__)

_HEAD_LIMIT = 64 * 1024  # a request or response head larger than this is refused
_CHUNK = 256 * 1024
_IDLE_S = 600.0  # a tunnel with no traffic either way for this long is closed
_HOP_HEADERS = (b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"te")


class GuardProxy:
    """A forward proxy on 127.0.0.1 (a free port) that connects only where `policy` allows."""

    def __init__(self, policy: NetworkPolicy, connect_timeout_s: float = 10.0):
        self.policy = policy
        self.connect_timeout_s = connect_timeout_s
        self.refused: deque[tuple[float, str]] = deque(maxlen=100)  # (time.monotonic(), reason)
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"netguard-{self.port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="netguard-conn", daemon=True).start()

    # -- one client connection -----------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            client.settimeout(self.connect_timeout_s + 30)
            head, rest = _read_head(client)
            if head is None:
                return
            line, _, headers = head.partition(b"\r\n")
            parts = line.split(b" ")
            if len(parts) != 3:
                _answer(client, 400, "Bad Request")
                return
            method, target, version = parts
            if method.upper() == b"CONNECT":
                host, port = _split_authority(target.decode("latin-1"), None)
                upstream = self._connect(client, host, port)
                if upstream is None:
                    return
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
                _splice(client, upstream, rewrite_response=False)
                return
            url = urlsplit(target.decode("latin-1"))
            if url.scheme.lower() != "http" or not url.hostname:
                _answer(client, 400, "Bad Request: only absolute http:// URLs and CONNECT")
                return
            upstream = self._connect(client, url.hostname, url.port or 80)
            if upstream is None:
                return
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            kept = [
                h
                for h in headers.split(b"\r\n")
                if h and h.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS
            ]
            request = b"\r\n".join([b"%s %s %s" % (method, path.encode("latin-1"), version), *kept])
            upstream.sendall(request + b"\r\nConnection: close\r\n\r\n" + rest)
            _splice(client, upstream, rewrite_response=True)
        except (OSError, ValueError, UnicodeError) as exc:
            log.debug("netguard connection ended: %s", exc)
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()

    def _connect(self, client: socket.socket, host: str, port: int | None) -> socket.socket | None:
        """A socket connected to an address of `host` the policy allows; None (after answering
        the client) when refused or unreachable."""
        if port is None:
            _answer(client, 400, "Bad Request: no port")
            return None
        try:
            infos = self.policy.resolve(host, port)
        except AccessDenied as exc:
            reason = str(exc).split(". Set network", 1)[0]
            self.refused.append((time.monotonic(), f"{host}:{port}: {reason}"))
            log.warning("refused a connection to %s:%s: %s", host, port, reason)
            _answer(client, 403, f"Refused by network policy: {reason}")
            return None
        except Unreachable as exc:
            _answer(client, 502, f"Bad Gateway: {exc}")
            return None
        error: OSError | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sock.settimeout(self.connect_timeout_s)
            try:
                sock.connect(address)  # the address that was checked, not the name again
                sock.settimeout(None)
                return sock
            except OSError as exc:
                error = exc
                sock.close()
        _answer(client, 502, f"Bad Gateway: cannot connect to {host}:{port} ({error})")
        return None


def _read_head(sock: socket.socket) -> tuple[bytes | None, bytes]:
    """(the head up to the blank line, the bytes read past it); (None, b"") on EOF/too large."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(8192)
        if not chunk or len(data) > _HEAD_LIMIT:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _split_authority(text: str, default: int | None) -> tuple[str, int | None]:
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    return host, int(port) if port else default


def _answer(sock: socket.socket, status: int, reason: str) -> None:
    reason = " ".join(reason.split())[:400]
    body = (reason + "\n").encode("utf-8", "replace")
    phrase = reason.encode("latin-1", "replace")
    with contextlib.suppress(OSError):
        sock.sendall(
            b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (status, phrase, len(body), body)
        )


def _close_head(head: bytes) -> bytes:
    """A response head with its hop-by-hop headers replaced by `Connection: close`."""
    lines = head.split(b"\r\n")
    kept = [lines[0]] + [
        h for h in lines[1:] if h and h.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS
    ]
    return b"\r\n".join(kept) + b"\r\nConnection: close\r\n\r\n"


def _splice(client: socket.socket, upstream: socket.socket, *, rewrite_response: bool) -> None:
    """Copy bytes both ways until either side closes (or nothing moves for _IDLE_S). With
    `rewrite_response`, the first response head is rewritten by `_close_head`."""
    pending_head = b"" if rewrite_response else None
    with selectors.DefaultSelector() as sel:
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        while True:
            events = sel.select(timeout=_IDLE_S)
            if not events:
                return
            for key, _ in events:
                source, sink = key.fileobj, key.data
                data = source.recv(_CHUNK)
                if not data:
                    if pending_head:  # a head the server never finished
                        sink.sendall(pending_head)
                    return
                if source is upstream and pending_head is not None:
                    pending_head += data
                    if b"\r\n\r\n" not in pending_head:
                        if len(pending_head) > _HEAD_LIMIT:
                            return
                        continue
                    head, _, body = pending_head.partition(b"\r\n\r\n")
                    data, pending_head = _close_head(head) + body, None
                sink.sendall(data)


# -- one proxy per policy, for the life of the process ---------------------------------------------

_proxies: dict[NetworkPolicy, GuardProxy] = {}
_lock = threading.Lock()
_warned: set[str] = set()

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_NO_PROXY_VARS = ("no_proxy", "NO_PROXY")


def guard_proxy(settings) -> GuardProxy | None:
    """The running proxy for `settings`' network policy, started on first use; None when there is
    nothing to guard (every address allowed) or an outbound proxy is configured."""
    policy = network_policy(settings)
    if policy.allows_everything:
        return None
    with _lock:
        proxy = _proxies.get(policy)
        if proxy is not None:
            return proxy
        configured = [v for v in _PROXY_VARS if os.environ.get(v)]
        if configured:
            _warn_once(
                "outbound-proxy",
                "an outbound proxy is configured (%s): connections go through it, so redirects "
                "that GDAL follows are not checked hop by hop (see docs/security.md)",
                ", ".join(configured),
            )
            return None
        for var in _NO_PROXY_VARS:
            if os.environ.pop(var, None) is not None:
                _warn_once(
                    var, "removed %s from the environment: curl would bypass the checks for those hosts", var
                )
        timeout = getattr(getattr(settings, "network", settings), "timeout_s", 10.0)
        proxy = _proxies[policy] = GuardProxy(policy, connect_timeout_s=min(float(timeout), 10.0))
        log.debug("network guard proxy for %s listening on %s", policy, proxy.url)
        return proxy


def recent_refusal(within_s: float = 30.0) -> str | None:
    """The reason of the latest connection any guard proxy refused in the last `within_s`
    seconds, or None: GDAL reports a refused redirect only as "HTTP 403", and this says why
    (e.g. "100.100.100.200:80: address 100.100.100.200 is shared address space ..., a
    non-public address; refused")."""
    now = time.monotonic()
    with _lock:
        latest = max((r for p in _proxies.values() for r in p.refused), default=None)
    return latest[1] if latest and now - latest[0] <= within_s else None


def gdal_proxy_env(settings) -> dict[str, str]:
    """GDAL configuration options that send every curl connection through the guard proxy
    (empty when there is no proxy to use). Merged into `processing.access.gdal_env`."""
    scheduler = getattr(settings, "dask_scheduler", None)
    if scheduler and (urlsplit(scheduler).hostname or "") not in ("127.0.0.1", "localhost", "::1"):
        # the options travel in the dask graph to workers on other machines, which cannot
        # reach a proxy on our loopback: they read directly (see docs/security.md)
        _warn_once("dask", "reads on the dask cluster at %s are not guarded by the network proxy", scheduler)
        return {}
    proxy = guard_proxy(settings)
    if proxy is None:
        return {}
    return {"GDAL_HTTP_PROXY": proxy.url, "GDAL_HTTPS_PROXY": proxy.url}


def requests_proxies(settings) -> dict[str, str] | None:
    """`proxies` for a requests Session (None: connect directly)."""
    proxy = guard_proxy(settings)
    return None if proxy is None else {"http": proxy.url, "https": proxy.url}


def _warn_once(key: str, message: str, *args) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)
