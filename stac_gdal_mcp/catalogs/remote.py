"""Remote STAC APIs (`RemoteCatalog`): their landing page, conformance, collections and items,
and `request`, which every page of a search or listing goes through. The HTTP itself is the
catalog's guarded client (http.py: the href policy on every hop, redirects, a deadline per
attempt, retries, an answer-size cap). Every failure becomes a core error
(`CatalogUnavailable`, `NotFound`, ...) with a message that says what to do, and that shows URLs
and quoted answers only through `redact.masked`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, unquote

from ..errors import (
    CatalogUnavailable,
    CollectionNotFound,
    InvalidArgument,
    ItemNotFound,
    NotFound,
    StacGdalMcpError,
)
from ..models import SearchFeatures
from ..settings import CatalogConfig, Settings
from ..stac import link_href
from .http import GuardedHttp
from .redact import masked, masked_url
from .security import shown as quoted


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
    """A STAC API, spoken to through its guarded HTTP client (`http`)."""

    kind = "api"

    def __init__(self, config: CatalogConfig, settings: Settings):
        self.config = config
        self.settings = settings
        self.http = GuardedHttp(config, settings, self.url, lambda _url, why: self._unavailable(why))
        self._lock = threading.Lock()
        self._root: dict | None = None

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def url(self) -> str:
        return self.config.url.rstrip("/")

    def request(self, href: str, method: str = "GET", body: dict | None = None) -> dict:
        """GET (with `body` as query parameters) or POST (`body` as JSON) and return the JSON
        object, through the catalog's guarded client (http.py: the network policy on every
        redirect hop, the configured headers under the catalog's root only, `network.timeout_s`
        for each attempt as a whole, retries of connection errors and HTTP 429/5xx)."""
        answer = self.http.request(href, method, body)
        return self._json(answer.url, answer.status, answer.body)

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
