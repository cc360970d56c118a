"""Local catalogs: a static STAC catalog, an ItemCollection (.json) or newline-delimited items
(.ndjson), read into memory and read again when the file changes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ..errors import CollectionNotFound, ConfigError, ItemNotFound, StacGdalMcpError
from ..models import SearchFeatures
from ..settings import CatalogConfig
from .item_shape import well_formed
from .security import shown as quoted


class LocalCatalog:
    """A static STAC catalog, an ItemCollection (.json) or newline-delimited items (.ndjson), in memory."""

    kind = "local"

    def __init__(self, config: CatalogConfig):
        self.config = config
        self._lock = threading.Lock()
        self._data: tuple[dict[str, dict], list[dict]] | None = None
        self._stamp: tuple[int, int] | None = None
        self.left_out: list[str] = []  # the items of the wrong shape its files hold (item_shape.py)
        self.refused: dict[str, str] = {}  # what is wrong with each of them, by id

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
        """(collections by id, items), read again when the file changed (size or modification
        time), so a re-run of `stac-gdal-mcp index` is seen without a restart. For a static
        catalog that is the root file only: its children are not watched."""
        with self._lock:  # tool calls run in threads: read the files once per version
            stamp = _stamp(self.path)
            if self._data is None or stamp != self._stamp:
                left_out, refused = [], {}
                self._data = _load_local(self.path, self.id, left_out, refused)
                self.left_out, self.refused = left_out, refused
                self._stamp = stamp
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
                f"collection {quoted(collection_id, 80)} not found in catalog '{self.id}'; "
                f"it has: {', '.join(self.collections) or '(none)'}"
            ) from None

    def item(self, collection_id: str, item_id: str) -> dict:
        self.collection(collection_id)
        for item in self.items:
            if item.get("collection") == collection_id and item["id"] == item_id:
                return item
        if item_id in self.refused:
            raise StacGdalMcpError(
                f"item {quoted(item_id, 80)} of catalog '{self.id}' cannot be read: {self.refused[item_id]}"
            )
        raise ItemNotFound(
            f"item {quoted(item_id, 80)} not found in collection {quoted(collection_id, 80)} "
            f"of catalog '{self.id}'"
        )

    def sign(self, item: dict) -> dict:
        return item


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _load_local(
    path: Path, catalog_id: str, left_out: list[str], refused: dict[str, str]
) -> tuple[dict[str, dict], list[dict]]:
    """(collections, items) of the file at `path`; an item of the wrong shape in an ItemCollection
    or a newline-delimited file is left out, named in `left_out` (and in `refused` by its id)."""
    if not path.is_file():
        raise ConfigError(f"local catalog '{catalog_id}': {path} does not exist")
    if path.suffix == ".ndjson":
        with path.open() as f:
            items = [json.loads(line) for line in f if line.strip()]
        items = [_absolute_hrefs(i, path.parent) for i in well_formed(items, left_out, refused)]
        return _implied_collections(items), items
    doc = json.loads(path.read_text())
    if doc.get("type") == "FeatureCollection":
        items = [
            _absolute_hrefs(i, path.parent) for i in well_formed(doc.get("features", []), left_out, refused)
        ]
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
