"""Security policy: which URLs and local paths a request may touch, and output names.

- Remote: http(s) and s3 only. A host is refused when it is, or resolves to, an address that is
  not a public unicast address: every block of the IANA IPv4 and IPv6 special-purpose address
  registries (loopback, private, shared 100.64.0.0/10, link-local with 169.254.169.254,
  benchmarking, documentation, reserved 240.0.0.0/4, ULA, discard, ...), multicast, and IPv6
  outside 2000::/3. Addresses that embed an IPv4 address (IPv4-mapped ::ffff:0:0/96, NAT64
  64:ff9b::/96) are judged by the embedded address; 6to4 and Teredo are refused. The checks are
  skipped when `network.allow_private_hosts` is true; `network.allowed_private_hosts` names
  single hosts (or host:port) that may be non-public. No `file://`, no `/vsi*` prefixes, no GDAL
  connection strings.
- Redirects: every hop is checked like the first URL (see `catalogs.py` and `netguard.py`).
- Local: only inside the allowed roots (the workspace and local catalogs' folders), after
  resolving `..` and symlinks.
- Output names: a single plain file name, never a path.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import AccessDenied, InvalidArgument, Unreachable

REMOTE_SCHEMES = ("http", "https", "s3")
_GDAL_PREFIX = re.compile(r"^(/vsi[a-z0-9_]*/|[A-Za-z0-9_]+:(?!//))", re.IGNORECASE)
_OUTPUT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def shown(value, limit: int = 120) -> str:
    """`value` quoted for a message: on one line (control characters escaped), at most `limit`
    characters - text from a request never breaks or floods an error line."""
    text = str(value)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


# --- which addresses are public ---------------------------------------------------------------
#
# The IANA IPv4 and IPv6 Special-Purpose Address Registries (as of 2025), plus multicast. Every
# block is refused, including the few the registry marks globally reachable (anycast relays,
# AS112 sinks): no STAC API or COG host lives there. Python's `is_global` is consulted as well,
# so a block the running Python knows and this table does not is refused too.
_V4_SPECIAL = {
    "0.0.0.0/8": "'this network' (RFC 791)",
    "10.0.0.0/8": "private (RFC 1918)",
    "100.64.0.0/10": "shared address space (RFC 6598; cloud metadata services live here)",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local (cloud metadata at 169.254.169.254)",
    "172.16.0.0/12": "private (RFC 1918)",
    "192.0.0.0/24": "IETF protocol assignments (RFC 6890)",
    "192.0.2.0/24": "documentation (TEST-NET-1)",
    "192.31.196.0/24": "AS112-v4 (RFC 7535)",
    "192.52.193.0/24": "AMT (RFC 7450)",
    "192.88.99.0/24": "6to4 relay anycast (deprecated)",
    "192.168.0.0/16": "private (RFC 1918)",
    "192.175.48.0/24": "AS112 direct delegation (RFC 7534)",
    "198.18.0.0/15": "benchmarking (RFC 2544)",
    "198.51.100.0/24": "documentation (TEST-NET-2)",
    "203.0.113.0/24": "documentation (TEST-NET-3)",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved (RFC 1112)",
    "255.255.255.255/32": "limited broadcast",
}
_V6_SPECIAL = {
    "::/128": "unspecified",
    "::1/128": "loopback",
    "64:ff9b:1::/48": "local-use IPv4/IPv6 translation (RFC 8215)",
    "100::/64": "discard-only (RFC 6666)",
    "100:0:0:1::/64": "dummy prefix (RFC 9780)",
    "2001::/32": "Teredo (RFC 4380)",
    "2001::/23": "IETF protocol assignments (RFC 2928)",
    "2001:db8::/32": "documentation (RFC 3849)",
    "2002::/16": "6to4 (RFC 3056)",
    "2620:4f:8000::/48": "AS112 direct delegation (RFC 7534)",
    "3fff::/20": "documentation (RFC 9637)",
    "5f00::/16": "segment routing (RFC 9602)",
    "fc00::/7": "unique-local (RFC 4193)",
    "fe80::/10": "link-local",
    "fec0::/10": "site-local (deprecated)",
    "ff00::/8": "multicast",
}
_V4_BLOCKS = [(ipaddress.ip_network(n), why) for n, why in _V4_SPECIAL.items()]
_V6_BLOCKS = [(ipaddress.ip_network(n), why) for n, why in _V6_SPECIAL.items()]
_V6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def non_public_reason(addr: str) -> str | None:
    """Why `addr` (an IPv4 or IPv6 address, optionally with a %zone) is not a public unicast
    address, or None when it is one. Embedded IPv4 addresses are judged on their own."""
    try:
        ip = ipaddress.ip_address(addr.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = None
        if ip.ipv4_mapped is not None:
            embedded, form = ip.ipv4_mapped, "IPv4-mapped"
        elif ip in _NAT64:
            embedded, form = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
        if embedded is not None:
            inner = non_public_reason(str(embedded))
            return f"{form} form of {embedded}, {inner}" if inner else None
        for net, why in _V6_BLOCKS:
            if ip in net:
                return why
        if ip not in _V6_GLOBAL_UNICAST:
            return "outside the IPv6 global unicast space 2000::/3"
    else:
        for net, why in _V4_BLOCKS:
            if ip in net:
                return why
    if ip.is_multicast:
        return "multicast"
    if not ip.is_global:
        return "not globally reachable (IANA special-purpose registry)"
    return None


def _host_port(text: str) -> tuple[str, int | None]:
    """'host', 'host:port', '[v6]', '[v6]:port' or a bare IPv6 address -> (host, port)."""
    text = text.strip().lower()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:] else None
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, int(port)
    return text, None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class NetworkPolicy:
    """Where outgoing requests may go. `allow_private`: anything; else only public addresses,
    plus the `allowed` (host, port or None) pairs, matched by name or, for IP entries, by the
    address a name resolved to."""

    allow_private: bool = False
    allowed: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def from_settings(cls, settings) -> NetworkPolicy:
        network = getattr(settings, "network", settings)
        entries = getattr(network, "allowed_private_hosts", None) or ()
        return cls(bool(network.allow_private_hosts), tuple(_host_port(e) for e in entries))

    @property
    def allows_everything(self) -> bool:
        return self.allow_private

    def _listed(self, host: str, port: int | None, addr: str | None = None) -> bool:
        host = host.lower().strip("[]")
        for entry, entry_port in self.allowed:
            if entry_port is not None and entry_port != port:
                continue
            if entry == host:
                return True
            if addr is not None and _is_ip(entry) and ipaddress.ip_address(entry) == _ip(addr):
                return True
        return False

    def refusal(self, host: str, port: int | None, addr: str) -> str | None:
        """Why connecting to `addr` (which `host` resolved to) is refused, or None."""
        if self.allow_private:
            return None
        why = non_public_reason(addr)
        if why is None or self._listed(host, port, addr):
            return None
        if _is_ip(host) and _ip(host) == _ip(addr):
            return f"address {addr} is {why}, a non-public address; refused"
        return f"host '{host}' resolves to {addr} ({why}), a non-public address; refused"

    def resolve(self, host: str, port: int | None) -> list[tuple]:
        """getaddrinfo results for (host, port) after checking every address; raises
        AccessDenied naming the first refused address, Unreachable when it does not resolve."""
        host = host.strip("[]")
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise Unreachable(
                f"cannot resolve host {shown(host)} ({reason}); check the URL and the network"
            ) from None
        for info in infos:
            why = self.refusal(host, port, info[4][0])
            if why is not None:
                raise AccessDenied(
                    f"{why}. Set network.allow_private_hosts = true, or list the host in "
                    "network.allowed_private_hosts, to allow it"
                )
        return infos

    def check_url(self, url: str) -> str:
        """Return `url` if the policy allows reading it, else raise AccessDenied."""
        if not isinstance(url, str) or not url.strip():
            raise InvalidArgument("href must be a non-empty string")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InvalidArgument(f"URL {shown(url)} is not valid: {exc}") from None
        scheme = parts.scheme.lower()
        if scheme not in REMOTE_SCHEMES:
            raise AccessDenied(
                f"URL scheme {shown(scheme or '(none)', 40)} is not allowed; use http(s):// or s3:// URLs"
            )
        if scheme == "s3":
            if not parts.netloc:
                raise InvalidArgument(f"s3 URL {shown(url)} has no bucket")
            return url
        if not parts.hostname:
            raise InvalidArgument(f"URL {shown(url)} has no host")
        if not self.allow_private:
            self.resolve(parts.hostname, port or (443 if scheme == "https" else 80))
        return url


def _ip(addr: str):
    return ipaddress.ip_address(addr.split("%", 1)[0])


def network_policy(settings) -> NetworkPolicy:
    """The NetworkPolicy of a Settings (or its `network` section)."""
    return NetworkPolicy.from_settings(settings)


def check_url(url: str, *, allow_private: bool | None = None, policy: NetworkPolicy | None = None) -> str:
    """Return `url` if the policy allows reading it, else raise AccessDenied. Pass `policy`
    (`network_policy(settings)`), or just `allow_private` (no per-host allow-list)."""
    if policy is None:
        policy = NetworkPolicy(bool(allow_private))
    return policy.check_url(url)


def relative_label(path: str | Path, roots: list[Path]) -> str:
    """`path` as a message names it: relative to the root it is written under (the workspace:
    what list_outputs shows), else as given - never the server's own folders."""
    text = str(path)
    for root in roots:
        for form in (str(root), str(Path(root).expanduser().resolve())):
            if text == form:
                return "."
            if text.startswith(form.rstrip("/") + "/"):
                return text[len(form.rstrip("/")) + 1 :]
    return text


def folders_pattern(roots) -> re.Pattern:
    """One pattern matching any of `roots` (as given and resolved, longest first) where it stands
    as a folder or leads a path under it (not a sibling such as "<root>2"), and where it starts a
    path (not inside another such as "/var<root>/x")."""
    forms = {f.rstrip("/") for r in roots for f in (str(r), str(Path(r).expanduser().resolve()))}
    alternatives = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True) if f)
    return re.compile(r"(?<![\w./-])" + f"(?:{alternatives or '(?!)'})" + r"(/|(?![\w-]|\.\w))")


def scrubbed(message: str, roots) -> str:
    """A library's message (pyogrio, pyarrow, GDAL quote the paths they opened) without the
    allowed folders' own paths: each is cut from the paths it leads, a folder alone is ".".
    `roots`: folders, or a pattern of them (`folders_pattern`)."""
    found = roots if isinstance(roots, re.Pattern) else folders_pattern(roots)
    return found.sub(lambda m: "" if m.group(1) else ".", message)


def check_local_path(path: str | Path, roots: list[Path], *, label: str | None = None) -> Path:
    """Resolve `path` (following `..` and symlinks) and require it to lie inside one of `roots`.
    Messages name the path as `label` (what the user gave), else relative to its root (see
    `relative_label`)."""
    text = str(path)
    label = label or relative_label(text, roots)
    if text.lower().startswith("file:") or _GDAL_PREFIX.match(text):
        raise AccessDenied(
            f"{shown(label)} is not allowed: give an http(s)/s3 URL or a path inside the workspace"
        )
    if "\x00" in text:
        raise InvalidArgument(f"path {shown(label)} contains a NUL character")
    try:
        resolved = Path(text).expanduser().resolve()
    except (RuntimeError, OSError, ValueError):  # "~nosuchuser", a name too long, a loop
        raise AccessDenied(
            f"path {shown(label)} cannot be resolved; give a path inside the workspace, or an http(s)/s3 URL"
        ) from None
    for root in roots:
        root = root.resolve()
        if resolved == root or root in resolved.parents:
            return resolved
    # (the folders are not named: messages show no server paths)
    raise AccessDenied(
        f"path {shown(label)} is outside the allowed folders (the workspace, local catalogs' folders); "
        "give a path inside the workspace, or an http(s)/s3 URL"
    )


def check_output_name(name: str) -> str:
    """An output name is one plain file name: letters, digits, '.', '_' and '-'."""
    if not _OUTPUT_NAME.match(name or "") or name in (".", "..") or ".." in name:
        raise InvalidArgument(
            f"output_name {shown(name)} is not allowed: use 1-128 letters, digits, '.', '_' or '-' (no folders)"
        )
    return name
