"""GDAL's own words about a failed read: `capture_gdal_messages` collects the GDAL warnings and
errors rasterio logs for the current thread, `diagnose` turns them into a reason in words.

A low module (it imports nothing of the package but settings types and `redact`), so that both
`processing.access` and `signing` use it without importing each other.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .redact import MaskingFilter, masked

if TYPE_CHECKING:
    from ..settings import Settings

_capture = threading.local()
_handler_installed = False
_handler_lock = threading.Lock()


class _GdalMessages(logging.Filter):
    """On the "rasterio._err" logger (whose level is lowered to INFO, where rasterio logs GDAL's
    errors): hands every record to the captures of its thread, and lets through only what the
    "rasterio" logger's own level would have let through."""

    def filter(self, record: logging.LogRecord) -> bool:
        stack = getattr(_capture, "stack", None)
        if stack:
            with contextlib.suppress(Exception):
                stack[-1].append(record.getMessage())
        MaskingFilter().filter(record)  # a signed href (a SAS token) never reaches the log
        return record.levelno >= logging.getLogger("rasterio").getEffectiveLevel()


def _install_handler() -> None:
    global _handler_installed
    with _handler_lock:
        if not _handler_installed:
            logger = logging.getLogger("rasterio._err")
            logger.addFilter(_GdalMessages())
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)
            _handler_installed = True


@contextlib.contextmanager
def capture_gdal_messages() -> Iterator[list[str]]:
    """Collect the GDAL messages (warnings and errors) logged by this thread inside the block."""
    _install_handler()
    stack = getattr(_capture, "stack", None)
    if stack is None:
        stack = _capture.stack = []
    messages: list[str] = []
    stack.append(messages)
    try:
        yield messages
    finally:
        # by identity: list.remove compares contents, and two captures may hold equal lists
        del stack[max(i for i, m in enumerate(stack) if m is messages)]
        if stack:
            stack[-1].extend(messages)  # an outer capture sees them too


_HTTP_CODE = re.compile(r"HTTP error code: (\d+)|response_code=(\d+)|HTTP response code: (\d+)")
_SHORT = re.compile(r"got (\d+) bytes, expected (\d+)")
_CURL = re.compile(r"CURL error: ([^;]+)")


@dataclass
class ReadFailure:
    reason: str
    retryable: bool  # worth retrying on a fresh dataset (GDAL did not retry it itself)


def diagnose(messages: list[str], exc: BaseException | None, settings: Settings | None = None) -> ReadFailure:
    """Why a read failed, in words, from GDAL's messages and the exception."""
    text = " ".join([*messages, str(exc or "")])
    retried = sum("Retrying again" in m for m in messages)
    after = " (after retrying)" if retried else ""
    codes = [int(next(g for g in m.groups() if g)) for m in _HTTP_CODE.finditer(text)]
    failed = [c for c in codes if c not in (200, 206)]
    timeout = settings.network.timeout_s if settings is not None else None
    if failed and failed[-1] != 0:
        code = failed[-1]
        if code == 403:
            from .netguard import recent_refusal

            if why := recent_refusal():  # the in-process proxy refused the connection: say why
                return ReadFailure(f"a connection was refused by the network policy ({why})", retryable=False)
        return ReadFailure(f"the server answered HTTP {code}{after}", retryable=code >= 500 and not retried)
    if failed or "timed out" in text.lower():  # code 0: no HTTP answer at all
        within = f" within {timeout:g} s" if timeout else ""
        return ReadFailure(
            f"the server did not answer{within} (timed out or the connection failed){after}",
            retryable=not retried,
        )
    curl = _CURL.search(text)
    if curl:
        return ReadFailure(f"the connection failed ({curl.group(1).strip()}){after}", retryable=not retried)
    short = _SHORT.search(text)
    if codes or short or "Decoding error" in text:
        got = f" ({short.group(1)} of {short.group(2)} bytes)" if short else ""
        return ReadFailure(f"the connection was closed before the whole answer arrived{got}", retryable=True)
    return ReadFailure(masked(exc or "unknown GDAL error", limit=500), retryable=False)
