"""Security policy: which URLs and local paths a request may touch, and output names.

- Remote: http(s) and s3 only. Hosts that resolve to loopback, private, link-local (including
  169.254.169.254), reserved, multicast or unspecified addresses are refused unless
  `network.allow_private_hosts` is true. No `file://`, no `/vsi*` prefixes, no GDAL
  connection strings.
- Local: only inside the allowed roots (the workspace and local catalogs' folders), after
  resolving `..` and symlinks.
- Output names: a single plain file name, never a path.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

from .errors import AccessDenied, InvalidArgument, Unreachable

REMOTE_SCHEMES = ("http", "https", "s3")
_GDAL_PREFIX = re.compile(r"^(/vsi[a-z0-9_]*/|[A-Za-z0-9_]+:(?!//))", re.IGNORECASE)
_OUTPUT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _address_is_private(addr: str) -> bool:
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def check_host(host: str, *, allow_private: bool) -> None:
    """Refuse hosts that are, or resolve to, non-public addresses."""
    if allow_private:
        return
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise Unreachable(f"cannot resolve host '{host}' ({exc}); check the URL and the network") from None
    for info in infos:
        addr = info[4][0]
        if _address_is_private(addr):
            raise AccessDenied(
                f"host '{host}' resolves to the non-public address {addr}; refused. "
                "Set network.allow_private_hosts = true to allow loopback/private hosts."
            )


def check_url(url: str, *, allow_private: bool) -> str:
    """Return `url` if the policy allows reading it, else raise AccessDenied."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument("href must be a non-empty string")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in REMOTE_SCHEMES:
        raise AccessDenied(f"URL scheme '{scheme or '(none)'}' is not allowed; use http(s):// or s3:// URLs")
    if scheme == "s3":
        if not parts.netloc:
            raise InvalidArgument(f"s3 URL '{url}' has no bucket")
        return url
    if not parts.hostname:
        raise InvalidArgument(f"URL '{url}' has no host")
    check_host(parts.hostname, allow_private=allow_private)
    return url


def check_local_path(path: str | Path, roots: list[Path]) -> Path:
    """Resolve `path` (following `..` and symlinks) and require it to lie inside one of `roots`."""
    text = str(path)
    if text.lower().startswith("file:") or _GDAL_PREFIX.match(text):
        raise AccessDenied(f"'{text}' is not allowed: give an http(s)/s3 URL or a path inside the workspace")
    resolved = Path(text).expanduser().resolve()
    for root in roots:
        root = root.resolve()
        if resolved == root or root in resolved.parents:
            return resolved
    allowed = ", ".join(str(r) for r in roots) or "(none)"
    raise AccessDenied(f"path '{text}' is outside the allowed folders ({allowed})")


def check_output_name(name: str) -> str:
    """An output name is one plain file name: letters, digits, '.', '_' and '-'."""
    if not _OUTPUT_NAME.match(name or "") or name in (".", "..") or ".." in name:
        raise InvalidArgument(
            f"output_name '{name}' is not allowed: use 1-128 letters, digits, '.', '_' or '-' (no folders)"
        )
    return name
