"""The one redaction rule for every URL and message that leaves the server (results, errors,
notes, resources, logs), as odc-stac's `_sanitize` masks GDAL options before printing:

- a URL's userinfo (`https://user:pass@host` -> `https://***@host`);
- query parameters that look like secrets: any name with token, key, sig(nature), password,
  secret, credential, auth or session in it, every `X-Amz-*` and `X-Goog-*` field, and the
  fields of an Azure SAS (`st`, `se`, `sp`, `sv`, ...) when it is signed (`sig`);
- `Authorization: Bearer ...`-like values, `token=...`/`api_key: ...` pairs in free text, and
  token shapes that are secrets wherever they appear (JWTs, AWS key ids, GitHub/Slack tokens);
- every configured secret value (catalog header values, `remember`ed here once resolved).

`masked(text)` applies all of these to free text (catalog error bodies are masked, then cut to
a length); `masked_url(url)` to one URL. `mask_library_logs()` puts the same rule on the
loggers of the libraries that print URLs (urllib3's request lines, GDAL's messages through
rasterio), and `MaskingFilter` on any handler.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"
# words that make a name (a flag, a key of a pair) a secret's
SECRET_WORD = (
    r"(?:token|secret|passw(?:or)?d|pwd|api[-_]?key|apikey|access[-_]?key|private[-_]?key|"
    r"auth\w*|credential\w*|bearer)"
)
_SECRET_PARAM = re.compile(rf"(?i)^(?:x-amz-.*|x-goog-.*|key|code|sig|signature|.*{SECRET_WORD}.*)$")
_SAS_FIELD = re.compile(r"(?i)^(st|se|sp|sv|sr|sig|si|spr|ss|srt|sdd|skoid|sktid|skt|ske|sks|skv)$")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s\"'<>`|]*[^\s\"'<>`|:;,.)]")  # no trailing ':' or '.'
# token=abc, api_key: abc, "password": "abc" (JSON), --token abc
_PAIR = re.compile(
    rf"(?i)(\b[\w.-]*{SECRET_WORD}[\w.-]*\b[\"']?\s*[=:]\s*[\"']?|--?[\w.-]*{SECRET_WORD}[\w.-]*\s+)"
    r"(\"[^\"]*\"|'[^']*'|[^\s\"',;&}]*[^\s\"',;&}:.])"
)
_SCHEME_VALUE = re.compile(r"(?i)\b(bearer|basic|token|sharedkey|sas)\s+[\w.~+/=:-]+")
_KNOWN_TOKEN = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_\w{16,}|xox[abpr]-[\w-]{8,}"
    r"|AKIA[0-9A-Z]{16}|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*)"
)

_secrets: set[str] = set()
_lock = threading.Lock()


def remember(values: Iterable[str | None]) -> None:
    """Mask these configured values (header values, keys) wherever they appear from now on."""
    with _lock:
        _secrets.update(v for v in values if v and len(v) >= 4)


def masked_url(url: str) -> str:
    """`url` with its userinfo and secret-looking query values masked (the names stay)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return _free_text(url)
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}" if host is not None or port else f"{MASK}@"
    query = parts.query
    if query:
        fields = parse_qsl(query, keep_blank_values=True)
        signed = any(name.lower() == "sig" for name, _ in fields)
        if any(_secret_param(name, signed) for name, _ in fields):
            query = "&".join(
                f"{part.split('=', 1)[0]}={MASK}"
                if _secret_param(_name(part), signed) and "=" in part
                else part
                for part in query.split("&")
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _name(part: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(part.split("=", 1)[0])


def _secret_param(name: str, signed: bool) -> bool:
    return bool(_SECRET_PARAM.match(name)) or (signed and bool(_SAS_FIELD.match(name)))


def _free_text(text: str, secrets: Iterable[str] = ()) -> str:
    with _lock:
        known = sorted(_secrets | {v for v in secrets if v and len(v) >= 4}, key=len, reverse=True)
    for value in known:
        text = text.replace(value, MASK)
    text = _SCHEME_VALUE.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _PAIR.sub(lambda m: m.group(1) + MASK, text)
    return _KNOWN_TOKEN.sub(MASK, text)


def masked(text: object, limit: int | None = None, secrets: Iterable[str] = ()) -> str:
    """`text` with every URL in it passed through `masked_url` and every secret-looking value
    (and each of `secrets`) masked; then, with `limit`, on one line and at most `limit` characters."""
    text = _URL.sub(lambda m: masked_url(m.group(0)), str(text))
    text = _free_text(text, secrets)
    if limit is not None:
        text = " ".join(text.split())
        text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text


class MaskingFilter(logging.Filter):
    """Masks a log record's message (formatted with its arguments) before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: leave it to logging
            return True
        shown = masked(message)
        if shown != message:
            record.msg, record.args = shown, None
        return True


# Loggers of the libraries that put URLs in their lines: urllib3's "GET /path?query" lines,
# GDAL's messages (signed hrefs) as rasterio logs them.
LIBRARY_LOGGERS = (
    "urllib3.connectionpool",
    "urllib3.connection",
    "urllib3.poolmanager",
    "urllib3.util.retry",
    "requests",
    "rasterio._err",
    "rasterio._env",
    "rasterio._base",
    "rasterio.session",
)
_installed = False


def mask_library_logs() -> None:
    """Put `MaskingFilter` on the loggers of LIBRARY_LOGGERS (once; a filter on a logger sees
    the records logged there, whatever handler they reach)."""
    global _installed
    with _lock:
        if _installed:
            return
        for name in LIBRARY_LOGGERS:
            logging.getLogger(name).addFilter(MaskingFilter())
        _installed = True
