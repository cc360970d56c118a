"""Named catalogs: remote STAC APIs and local catalogs, with HTTP config, retries, signing and auth.

This is the one place that talks HTTP to STAC APIs. Every failure becomes a core error
(`CatalogUnavailable`, `NotFound`, ...) with a message that says what to do.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

from .errors import (
    CatalogUnavailable,
    CollectionNotFound,
    ConfigError,
    ItemNotFound,
    NotFound,
    StacGdalMcpError,
    Unreachable,
)
from .models import CatalogInfo, SearchFeatures
from .security import check_url
from .settings import CatalogConfig, Settings

log = logging.getLogger(__name__)

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
    """A STAC API, opened lazily with pystac-client."""

    kind = "api"

    def __init__(self, config: CatalogConfig, settings: Settings):
        self.config = config
        self.settings = settings
        self._lock = threading.Lock()
        self._root: dict | None = None

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def url(self) -> str:
        return self.config.url.rstrip("/")

    @cached_property
    def stac_io(self):
        from pystac_client.stac_api_io import StacApiIO
        from urllib3.util.retry import Retry

        retry = Retry(
            total=self.settings.network.max_retries,
            backoff_factor=0.5,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=None,
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        return StacApiIO(
            headers=self.config.resolved_headers(),
            timeout=self.settings.network.timeout_s,
            max_retries=retry,
        )

    def check_url(self, url: str) -> str:
        return check_url(url, allow_private=self.settings.network.allow_private_hosts)

    def request(self, href: str, method: str = "GET", body: dict | None = None) -> dict:
        """GET (with `body` as query parameters) or POST (`body` as JSON) and return the JSON."""
        from pystac_client.exceptions import APIError

        try:
            self.check_url(href)
        except Unreachable as exc:
            raise CatalogUnavailable(self._unavailable(str(exc))) from None
        try:
            text = self.stac_io.request(href, method=method, parameters=body)
        except APIError as exc:
            status = getattr(exc, "status_code", None)
            if status == 404:
                raise NotFound(f"{href} was not found in catalog '{self.id}' (HTTP 404)") from None
            if status in (400, 422):
                raise StacGdalMcpError(
                    f"catalog '{self.id}' rejected the request (HTTP {status}): {_short(str(exc))}"
                ) from None
            raise CatalogUnavailable(self._unavailable(f"HTTP {status}: {_short(str(exc))}")) from None
        except Exception as exc:  # requests' ConnectionError, Timeout, ...
            raise CatalogUnavailable(self._unavailable(f"{type(exc).__name__}: {_short(str(exc))}")) from None
        try:
            return json.loads(text)
        except ValueError:
            raise CatalogUnavailable(self._unavailable("the answer was not JSON")) from None

    def _unavailable(self, why: str) -> str:
        return (
            f"catalog '{self.id}' ({self.url}) is unavailable: {why}. "
            "Try again later, or use another catalog (list_catalogs)."
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
        for link in self.root.get("links", []):
            if link.get("rel") == rel and link.get("href"):
                return link["href"]
        return f"{self.url}/{default}"

    def collection(self, collection_id: str) -> dict:
        try:
            return self.request(f"{self.url}/collections/{collection_id}")
        except NotFound:
            raise CollectionNotFound(
                f"collection '{collection_id}' not found in catalog '{self.id}'; "
                "use list_collections to see what it has"
            ) from None

    def item(self, collection_id: str, item_id: str) -> dict:
        self.collection(collection_id)
        try:
            item = self.request(f"{self.url}/collections/{collection_id}/items/{item_id}")
        except NotFound:
            raise ItemNotFound(
                f"item '{item_id}' not found in collection '{collection_id}' of catalog '{self.id}'"
            ) from None
        return self.sign(item)

    def sign(self, item: dict) -> dict:
        """Sign asset hrefs where the catalog needs it (Planetary Computer SAS tokens)."""
        if self.config.signing == "planetary-computer":
            import planetary_computer

            try:
                return planetary_computer.sign(item)
            except Exception as exc:
                raise CatalogUnavailable(
                    f"could not sign asset hrefs with Planetary Computer SAS tokens: {_short(str(exc))}"
                ) from None
        return item


class LocalCatalog:
    """A static STAC catalog, an ItemCollection (.json) or newline-delimited items (.ndjson), in memory."""

    kind = "local"

    def __init__(self, config: CatalogConfig):
        self.config = config
        self._lock = threading.Lock()
        self._data: tuple[dict[str, dict], list[dict]] | None = None

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def path(self) -> Path:
        return Path(self.config.path).expanduser().resolve()

    @property
    def root_dir(self) -> Path:
        return self.path.parent

    @property
    def features(self) -> SearchFeatures:
        return SearchFeatures(
            item_search=True,
            filter_cql2_text=True,
            filter_cql2_json=True,
            query=True,
            sort=True,
            collection_search=True,
            free_text=True,
        )

    @property
    def data(self) -> tuple[dict[str, dict], list[dict]]:
        """(collections by id, items), loaded once."""
        with self._lock:  # tool calls run in threads: read the files once
            if self._data is None:
                self._data = _load_local(self.path, self.id)
            return self._data

    @property
    def collections(self) -> dict[str, dict]:
        return self.data[0]

    @property
    def items(self) -> list[dict]:
        return self.data[1]

    def collection(self, collection_id: str) -> dict:
        try:
            return self.collections[collection_id]
        except KeyError:
            raise CollectionNotFound(
                f"collection '{collection_id}' not found in catalog '{self.id}'; "
                f"it has: {', '.join(self.collections) or '(none)'}"
            ) from None

    def item(self, collection_id: str, item_id: str) -> dict:
        self.collection(collection_id)
        for item in self.items:
            if item.get("collection") == collection_id and item["id"] == item_id:
                return item
        raise ItemNotFound(
            f"item '{item_id}' not found in collection '{collection_id}' of catalog '{self.id}'"
        )

    def sign(self, item: dict) -> dict:
        return item


def _load_local(path: Path, catalog_id: str) -> tuple[dict[str, dict], list[dict]]:
    if not path.is_file():
        raise ConfigError(f"local catalog '{catalog_id}': {path} does not exist")
    if path.suffix == ".ndjson":
        with path.open() as f:
            items = [json.loads(line) for line in f if line.strip()]
        items = [_absolute_hrefs(i, path.parent) for i in items]
        return _implied_collections(items), items
    doc = json.loads(path.read_text())
    if doc.get("type") == "FeatureCollection":
        items = [_absolute_hrefs(i, path.parent) for i in doc.get("features", [])]
        return _implied_collections(items), items
    import pystac

    root = pystac.read_file(str(path))
    if not isinstance(root, pystac.Catalog):
        raise ConfigError(
            f"local catalog '{catalog_id}': {path} is not a catalog, collection or ItemCollection"
        )
    collections: dict[str, dict] = {}
    items: list[dict] = []
    for child in [root, *root.get_all_collections()]:
        if isinstance(child, pystac.Collection):
            collections[child.id] = child.to_dict(include_self_link=False, transform_hrefs=False)
    for item in root.get_items(recursive=True):
        item.make_asset_hrefs_absolute()
        d = item.to_dict(include_self_link=False, transform_hrefs=False)
        d["links"] = [l for l in d.get("links", []) if l.get("rel") not in ("root", "parent")]
        items.append(d)
    return collections, items


def _absolute_hrefs(item: dict, base: Path) -> dict:
    for asset in item.get("assets", {}).values():
        href = asset.get("href", "")
        if href and "://" not in href and not href.startswith("/"):
            asset["href"] = str((base / href).resolve())
    return item


def _implied_collections(items: list[dict]) -> dict[str, dict]:
    ids = sorted({i.get("collection") for i in items if i.get("collection")})
    return {cid: {"type": "Collection", "id": cid, "description": "", "links": []} for cid in ids}


def _short(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


class Catalogs:
    """The configured catalogs, opened on first use and kept for the server's lifetime."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._open: dict[str, RemoteCatalog | LocalCatalog] = {}
        self._lock = threading.Lock()

    def get(self, catalog_id: str | None = None) -> RemoteCatalog | LocalCatalog:
        config = self.settings.catalog(catalog_id)
        with self._lock:
            if config.id not in self._open:
                self._open[config.id] = (
                    RemoteCatalog(config, self.settings) if config.url else LocalCatalog(config)
                )
            return self._open[config.id]

    def local_roots(self) -> list[Path]:
        """Folders of local catalogs: their files may be read as inputs."""
        return [
            Path(c.path).expanduser().resolve().parent for c in self.settings.catalogs if c.path is not None
        ]

    def info(self, check_reachable: bool = False) -> list[CatalogInfo]:
        out = []
        for config in self.settings.catalogs:
            info = CatalogInfo(
                id=config.id,
                title=config.title,
                url=config.url,
                path=str(config.path) if config.path else None,
                kind="api" if config.url else "local",
                signing=config.signing,
            )
            if check_reachable:
                try:
                    catalog = self.get(config.id)
                    if isinstance(catalog, LocalCatalog):
                        _ = catalog.data  # loads the files
                    info.features = catalog.features
                    info.reachable = True
                except StacGdalMcpError as exc:
                    info.reachable, info.error = False, str(exc)
            elif config.path:
                info.features = self.get(config.id).features
            out.append(info)
        return out
