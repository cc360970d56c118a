"""Signing that lasts: Planetary Computer SAS tokens, fetched when a read needs them.

A catalog with `signing = "planetary-computer"` serves asset hrefs on Azure Blob Storage that
need a SAS token (`?st=...&se=...&sig=...`) to be read. Tokens expire (about 45 minutes on
some platforms, less on others), so a token baked into an href when the item was fetched
fails a long job half way. Here:

- hrefs are signed at read time: every open of a file (GDAL through `processing.access`, each
  dask task of an odc-stac load through `processing.odc_reader`) signs the plain href with the token
  cached for its storage container (one per collection on the Planetary Computer);
- tokens are cached per process and per (account, container) until shortly before they expire
  (`refresh_margin`: 60 s, or a tenth of the token's lifetime for short-lived tokens);
- a read refused with HTTP 403 (an expired or revoked signature) gets a new token, once, and
  is retried on a freshly opened file. Concurrent readers that fail with the same old token
  share one renewal.

`PlanetaryComputerSigner` holds configuration only (the token endpoint, the hosts to sign, the
timeout), so it pickles: dask workers in other processes sign with tokens they fetch
themselves. The endpoint is `sas_url` of the catalog's settings, else the planetary-computer
package's (`PC_SDK_SAS_URL`, default https://planetarycomputer.microsoft.com/api/sas/v1/token);
the subscription key, if any, is the package's (`PC_SDK_SUBSCRIPTION_KEY`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import CatalogUnavailable

if TYPE_CHECKING:
    from ..settings import CatalogConfig, Settings

log = logging.getLogger(__name__)

BLOB_HOSTS = (".blob.core.windows.net",)
PUBLIC_HOSTS = ("ai4edatasetspublicassets.blob.core.windows.net",)  # thumbnails: never signed
MAX_MARGIN_S = 60.0


@dataclass(frozen=True)
class Token:
    value: str  # the query string: "st=...&se=...&sig=..."
    expires_at: float  # time.time() seconds
    fetched_at: float

    def fresh(self, now: float | None = None) -> bool:
        """Still usable for a while: more than the refresh margin left."""
        now = time.time() if now is None else now
        return self.expires_at - now > refresh_margin(self.expires_at - self.fetched_at)


def refresh_margin(lifetime_s: float) -> float:
    """Renew a token this long before it expires: 60 s, or a tenth of a short lifetime."""
    return min(MAX_MARGIN_S, max(0.0, lifetime_s) / 10)


class TokenCache:
    """Tokens of one process, by (token endpoint, account, container)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[tuple[str, str, str], Token] = {}
        self._renewing: dict[tuple[str, str, str], threading.Lock] = {}
        self._retired: dict[str, None] = {}  # tokens replaced by newer ones (the last few hundred)
        self.fetches = 0  # tokens fetched (for tests and logs)

    def get(self, signer: PlanetaryComputerSigner, account: str, container: str) -> Token:
        key = (signer.token_url, account, container)
        with self._lock:
            token = self._tokens.get(key)
            guard = self._renewing.setdefault(key, threading.Lock())
        if token is not None and token.fresh():
            return token
        with guard:  # one fetch per container at a time; the others wait and reuse it
            with self._lock:
                token = self._tokens.get(key)
            if token is not None and token.fresh():
                return token
            token = signer.fetch(account, container)
            self._store(key, token)
            return token

    def renew(self, signer: PlanetaryComputerSigner, account: str, container: str, used: str | None) -> Token:
        """A new token, unless the cached one is already another than `used` (renewed meanwhile)."""
        key = (signer.token_url, account, container)
        with self._lock:
            guard = self._renewing.setdefault(key, threading.Lock())
        with guard:
            with self._lock:
                token = self._tokens.get(key)
            if token is not None and used is not None and token.value != used and token.fresh():
                return token
            token = signer.fetch(account, container)
            self._store(key, token)
            return token

    def _store(self, key: tuple[str, str, str], token: Token) -> None:
        with self._lock:
            old = self._tokens.get(key)
            if old is not None and old.value != token.value:
                self._retired[old.value] = None
                while len(self._retired) > 256:
                    del self._retired[next(iter(self._retired))]
            self._tokens[key] = token
            self.fetches += 1

    def stale(self, value: str) -> bool:
        """Whether the token `value` (one this process fetched) is expired or about to be, or
        was replaced already (by another reader that found it so)."""
        with self._lock:
            if value in self._retired:
                return True
            token = next((t for t in self._tokens.values() if t.value == value), None)
        return token is not None and not token.fresh()

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()
            self._retired.clear()


TOKENS = TokenCache()  # per process: a dask worker process has its own


_SAS_KEY = re.compile(r"^(st|se|sp|sv|sr|sig|si|spr|ss|srt|sdd|sk(oid|tid|t|e|s|v))$", re.IGNORECASE)


def strip_token(href: str) -> str:
    """`href` without SAS query parameters (other parameters kept)."""
    parts = urlsplit(href)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _SAS_KEY.match(k)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def token_in(href: str) -> str | None:
    """The SAS query of a signed href (for renewing exactly the token that failed)."""
    parts = urlsplit(href)
    sas = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if _SAS_KEY.match(k)]
    return urlencode(sas) if sas else None


@dataclass(frozen=True)
class PlanetaryComputerSigner:
    """Signs hrefs on the configured hosts with SAS tokens from `token_url` (picklable)."""

    token_url: str
    hosts: tuple[str, ...] = BLOB_HOSTS
    timeout_s: float = 10.0
    retries: int = 2
    catalog: str | None = None

    # which hrefs ------------------------------------------------------------------------------

    def applies(self, href: str) -> bool:
        parts = urlsplit(href)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host or host in PUBLIC_HOSTS:
            return False
        return any(host == h.lstrip(".") or (h.startswith(".") and host.endswith(h)) for h in self.hosts)

    @staticmethod
    def scope(href: str) -> tuple[str, str]:
        """(storage account, container) of an href: the first label of the host and the first
        path segment (https://<account>.blob.core.windows.net/<container>/...)."""
        parts = urlsplit(href)
        account = (parts.hostname or "").split(".")[0]
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) < 2:
            raise CatalogUnavailable(f"cannot sign {strip_token(href)}: it names no storage container")
        return account, segments[0]

    # signing ----------------------------------------------------------------------------------

    def sign(self, href: str) -> str:
        """`href` with a valid token (the cached one while it lasts); others unchanged."""
        if not self.applies(href):
            return href
        account, container = self.scope(href)
        return _with_token(strip_token(href), TOKENS.get(self, account, container).value)

    def should_renew(self, href: str, refused: bool) -> bool:
        """After a failed read of the signed `href`: renew when the server refused it (HTTP 403) or
        when its token has expired meanwhile (GDAL does not always report the 403: a plain range
        read that is refused looks like an empty answer)."""
        if not self.applies(href):
            return False
        used = token_in(href)
        return refused or (used is not None and TOKENS.stale(used))

    def renew(self, href: str) -> str:
        """`href` signed with a new token (after the server refused the one it carried)."""
        if not self.applies(href):
            return href
        account, container = self.scope(href)
        token = TOKENS.renew(self, account, container, token_in(href))
        log.info("renewed the SAS token for %s/%s (the server refused the old one)", account, container)
        return _with_token(strip_token(href), token.value)

    def sign_item(self, item: dict) -> dict:
        """A copy of `item` with the asset hrefs this signer applies to signed."""
        out = dict(item)
        out["assets"] = {
            key: (
                {**asset, "href": self.sign(asset["href"])} if isinstance(asset.get("href"), str) else asset
            )
            for key, asset in (item.get("assets") or {}).items()
        }
        return out

    # the token endpoint -------------------------------------------------------------------------

    def fetch(self, account: str, container: str) -> Token:
        """A new token from `{token_url}/{account}/{container}` (retrying 429 and 5xx)."""
        import urllib3

        url = f"{self.token_url.rstrip('/')}/{account}/{container}"
        headers = {}
        key = _subscription_key()
        if key:
            headers["Ocp-Apim-Subscription-Key"] = key
        retry = urllib3.util.Retry(
            total=self.retries, backoff_factor=0.5, status_forcelist=(429, 500, 502, 503, 504)
        )
        try:
            with urllib3.PoolManager(retries=retry, timeout=self.timeout_s) as http:
                response = http.request("GET", url, headers=headers)
            if response.status != 200:
                raise CatalogUnavailable(
                    f"could not get a SAS token for {account}/{container}: the token endpoint answered "
                    f"HTTP {response.status}"
                )
            body = json.loads(response.data)
            value, expiry = body["token"], body["msft:expiry"]
            expires_at = datetime.fromisoformat(str(expiry).replace("Z", "+00:00")).timestamp()
        except CatalogUnavailable:
            raise
        except (urllib3.exceptions.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise CatalogUnavailable(
                f"could not get a SAS token for {account}/{container} from {self.token_url}: "
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            ) from None
        return Token(value=str(value).lstrip("?"), expires_at=expires_at, fetched_at=time.time())


def _with_token(href: str, token: str) -> str:
    return f"{href}{'&' if urlsplit(href).query else '?'}{token}"


def _subscription_key() -> str | None:
    with contextlib.suppress(Exception):
        from planetary_computer.settings import Settings as PCSettings

        return PCSettings.get().subscription_key
    return None


def _default_token_url() -> str:
    with contextlib.suppress(Exception):
        from planetary_computer.settings import Settings as PCSettings

        if PCSettings.get().sas_url:
            return str(PCSettings.get().sas_url)
    return "https://planetarycomputer.microsoft.com/api/sas/v1/token"


def signer_for(config: CatalogConfig, settings: Settings | None = None) -> PlanetaryComputerSigner | None:
    """The signer of a catalog (None when its hrefs need no signing)."""
    if getattr(config, "signing", None) != "planetary-computer":
        return None
    hosts = tuple(getattr(config, "signed_hosts", None) or BLOB_HOSTS)
    timeout = settings.network.timeout_s if settings is not None else 10.0
    return PlanetaryComputerSigner(
        token_url=getattr(config, "sas_url", None) or _default_token_url(),
        hosts=hosts,
        timeout_s=float(timeout),
        catalog=config.id,
    )


def signers(settings: Settings) -> list[PlanetaryComputerSigner]:
    """The signers of every configured catalog that signs."""
    return [s for s in (signer_for(c, settings) for c in settings.catalogs) if s is not None]


def is_refused(messages: list[str], exc: BaseException | None = None) -> bool:
    """Whether a failed GDAL read was refused with HTTP 403 (an expired or bad signature)."""
    from .gdal_messages import diagnose

    return diagnose(messages, exc).reason.startswith("the server answered HTTP 403")
