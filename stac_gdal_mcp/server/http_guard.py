"""Host and Origin checks for the streamable-HTTP transport (DNS rebinding, cross-site pages).

A web page can make a browser send requests to a server on the user's machine: directly (its
`Origin` is the page's site) or, after DNS rebinding, under a name of its own that now resolves
to 127.0.0.1 (its `Host` is that name). The MCP transport specification asks servers to validate
`Origin` on every request and to bind to loopback; this middleware validates both headers before
anything else runs (sessions, the token check, tools):

- `Host` must name a loopback host (localhost, 127.0.0.1, [::1], any port), the address the
  server is bound to, or an entry of `network.http_allowed_hosts` ("name" or "name:port").
- `Origin`, when present, must be a loopback origin (http(s)://localhost|127.0.0.1|[::1], any
  port) or an entry of `network.http_allowed_origins`. `Origin: null` (sandboxed frames, file
  pages, some redirects) is always refused, and so is a request with more than one Origin.
  Requests without `Origin` are not from a browser page and pass (the token still applies).

A refused request gets 403 with a JSON-RPC error naming the header and the setting to change.
The checks apply with a token too: a token does not make a foreign page's request legitimate.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _split_host(value: str) -> tuple[str, int | None] | None:
    """'name', 'name:port', '[v6]', '[v6]:port' -> (lower-case name, port); None if malformed."""
    value = value.strip().lower()
    if not value:
        return None
    try:
        if value.startswith("["):
            name, _, rest = value[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") and rest[1:] else None
            if rest and not rest.startswith(":"):
                return None
            return name, port
        if value.count(":") > 1:  # a bare IPv6 address
            ipaddress.ip_address(value)
            return value, None
        name, _, port = value.partition(":")
        return name, int(port) if port else None
    except ValueError:
        return None


def _is_loopback(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _normal_origin(origin: str) -> str | None:
    """'scheme://host[:port]' in one spelling (default port dropped), None if not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + (f":{port}" if port and port != _DEFAULT_PORTS[scheme] else "")


class HostOriginGuard:
    """ASGI middleware: refuse requests whose Host or Origin is not allowed (see the module)."""

    def __init__(self, app, allowed_hosts=(), allowed_origins=()):
        self.app = app
        self.allowed_hosts = [h for h in (_split_host(v) for v in allowed_hosts) if h is not None]
        self.allowed_origins = {o for o in (_normal_origin(v) for v in allowed_origins) if o}

    async def __call__(self, scope, receive, send):
        if scope.get("type") not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        reason = self.refusal(scope, headers)
        if reason is None:
            await self.app(scope, receive, send)
            return
        log.warning("refused an HTTP request: %s", reason)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": f"Forbidden: {reason}"}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope, headers: list[tuple[str, str]]) -> str | None:
        hosts = [v for k, v in headers if k == "host"]
        if len(hosts) != 1:
            return "the request must carry exactly one Host header"
        host = _split_host(hosts[0])
        if host is None or not self._host_allowed(scope, *host):
            return (
                f"Host {json.dumps(hosts[0][:100])} is not allowed (DNS rebinding protection); "
                "use localhost/127.0.0.1, or add the name to network.http_allowed_hosts"
            )
        origins = [v for k, v in headers if k == "origin"]
        if not origins:
            return None
        if len(origins) > 1:
            return "the request carries more than one Origin header"
        origin = origins[0].strip()
        if origin.lower() == "null":
            return "Origin 'null' is not allowed (sandboxed or file pages cannot call this server)"
        normal = _normal_origin(origin)
        if normal is None or not self._origin_allowed(normal):
            return (
                f"Origin {json.dumps(origin[:100])} is not allowed; pages from other sites cannot "
                "call this server (add the origin to network.http_allowed_origins to allow it)"
            )
        return None

    def _host_allowed(self, scope, name: str, port: int | None) -> bool:
        if _is_loopback(name):
            return True
        server = scope.get("server")
        if server and server[0]:
            bound = str(server[0]).lower().strip("[]")
            try:
                specific = not ipaddress.ip_address(bound).is_unspecified
            except ValueError:
                specific = True
            if specific and name == bound:
                return True
        return any(name == h and (p is None or p == port) for h, p in self.allowed_hosts)

    def _origin_allowed(self, origin: str) -> bool:
        if origin in self.allowed_origins:
            return True
        host = _split_host(urlsplit(origin).netloc)
        return host is not None and _is_loopback(host[0])


def guard_middleware(settings):
    """The Starlette Middleware entry for `settings` (its network.http_allowed_* lists)."""
    from starlette.middleware import Middleware

    network = settings.network
    return Middleware(
        HostOriginGuard,
        allowed_hosts=list(network.http_allowed_hosts),
        allowed_origins=list(network.http_allowed_origins),
    )


def guarded_server(settings, *args, **kwargs):
    """A FastMCP server (arguments as FastMCP's) whose every HTTP app (`http_app()`, and so
    `run(transport="http")`) checks Host and Origin first, for `settings`."""
    from fastmcp import FastMCP

    class GuardedFastMCP(FastMCP):
        def http_app(self, *args, middleware=None, **kwargs):
            guard = guard_middleware(settings)
            return super().http_app(*args, middleware=[guard, *(middleware or [])], **kwargs)

    return GuardedFastMCP(*args, **kwargs)
