"""Checks of the values an operator sets that the server cannot work with unless they have one
form: the HTTP bearer token and the dask scheduler's address. Each returns the value or raises one
`ConfigError` line naming the setting (never echoing a token)."""

from __future__ import annotations

import re

from .errors import ConfigError

_TOKEN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header value carries as is


def checked_token(token: str, what: str = "--token") -> str:
    """The bearer token of the HTTP transport: non-blank, of visible ASCII characters, no spaces
    (a blank token protects nothing, and clients fail on the header it makes). Never echoed."""
    if not _TOKEN.fullmatch(token):
        problem = "is blank" if not token.strip() else "has spaces or characters a header cannot carry"
        raise ConfigError(f"{what} {problem}: use a long random string of visible ASCII characters")
    return token


# what dask.distributed connects to: [scheme://]host:port (a host name, IPv4, or [IPv6]), or an
# in-process scheduler's inproc:// address
_SCHEDULER = re.compile(
    r"(?:(?:tcp|tls|ws|wss|ucx)://)?(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])"
    r":(?P<port>[0-9]{1,5})/?|inproc://[\x21-\x7e]{1,200}"
)


def checked_scheduler(address: str) -> str:
    """`dask_scheduler` as dask.distributed takes it (`tcp://host:port`), or one line refusing
    it (shown shortened): an address that is not one would fail every call on the cluster."""
    found = _SCHEDULER.fullmatch(address)
    if found is None or not 0 < int(found.group("port") or 1) < 65536:
        shown = address if len(address) <= 60 else f"{address[:60]}... ({len(address):,} characters)"
        raise ConfigError(
            f"dask_scheduler {shown!r} is not a dask scheduler address: give tcp://host:port "
            "(or tls://, ws://, wss://, ucx://)"
        )
    return address
