"""Your outputs as a catalog: the workspace as a static STAC catalog, searchable as "workspace".

    <workspace>/catalog.json                              Catalog "workspace"
    <workspace>/stac/<operation>/collection.json          one Collection per operation
    <workspace>/stac/<operation>/items/<output_id>.json   one Item per output record

Items are the output records (`records/<output_id>.json`, written by the output store) with
what a static catalog needs added: `collection`, `root`/`parent`/`collection` links (relative:
the catalog is self-contained and can be copied or opened by any STAC tool), asset hrefs
relative to the item (`../../../outputs/<file>`), and the record's self link (the server's
resource URI for it) kept as an `alternate` link. An output whose sources had no time at all
gets its record's `created` time as `datetime` (STAC needs one); one without a raster footprint
(a time-series table or chart) gets its area of interest as geometry, so that a search by place
finds it. Collections carry the spatial and temporal extent of their items.

The records stay the truth; this catalog is derived from them. `refresh(settings)` rewrites it
(files whose content did not change are not touched; those of deleted outputs are removed);
the catalog `Catalogs.get("workspace")` returns (`open_workspace_catalog`: a local catalog with
`Refreshing` mixed in) refreshes it whenever the records folder changed since it last looked, so
a search always sees every output. (The local catalog class is handed in by `catalogs.py`, so
that this module does not import it back.) Nothing is read or written through a symbolic link.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import AccessDenied
from ..files import read_plain, slug, write_atomic
from ..models import CatalogInfo
from ..settings import CatalogConfig, Settings
from ..stac import collection_extent

WORKSPACE = "workspace"
STAC_VERSION = "1.1.0"
STAC_DIR = "stac"
TITLE = "Outputs of this server (the workspace)"


def _plain_dir(path: Path, workspace: Path, *, create: bool) -> Path:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise AccessDenied(f"the workspace entry '{path.name}' is a link or not a folder; refused")
    if create:
        path.mkdir(parents=True, exist_ok=True)
    if path.exists() and workspace not in path.resolve().parents:
        raise AccessDenied(f"the workspace entry '{path.name}' leads outside the workspace; refused")
    return path


def _write(path: Path, doc: dict) -> bool:
    """Write `doc` as JSON atomically unless the file already holds it; True when written."""
    text = json.dumps(doc, indent=1)
    if path.is_symlink():
        raise AccessDenied(f"'{path.name}' in the workspace is a symbolic link; refused")
    try:
        if read_plain(path) == text:
            return False
    except (OSError, ValueError, AccessDenied):
        pass
    write_atomic(path, text)
    return True


def _records(workspace: Path) -> list[dict]:
    """The output records whose file exists (plain files only, unreadable ones skipped)."""
    records_dir, outputs = workspace / "records", workspace / "outputs"
    if not records_dir.is_dir() or records_dir.is_symlink() or outputs.is_symlink():
        return []
    found = []
    for path in sorted(records_dir.glob("*.json")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            record = json.loads(read_plain(path))
            name = Path(record["assets"]["data"]["href"]).name
        except (OSError, ValueError, KeyError, TypeError, AccessDenied):
            continue
        file = outputs / name
        if file.is_file() and not file.is_symlink():
            found.append(record)
    return found


def fingerprint(workspace: Path) -> tuple:
    """What changes when an output is written or deleted: the records' names, sizes and times."""
    records_dir = workspace / "records"
    if not records_dir.is_dir() or records_dir.is_symlink():
        return ()
    out = []
    for entry in os.scandir(records_dir):
        if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
            stat = entry.stat(follow_symlinks=False)
            out.append((entry.name, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(out))


def _operation(record: dict) -> str:
    expression = (record.get("properties") or {}).get("processing:expression") or {}
    return slug(str((expression.get("expression") or {}).get("operation") or "output"))


def _area_of_interest(props: dict) -> list[float] | None:
    """The WGS84 bbox of the area an output without a raster footprint (a table, a chart) was
    made for: its `aoi_bbox`, or the bounds of its `aoi` parameter."""
    area = props.get("aoi_bbox")
    if area is None:
        expression = (props.get("processing:expression") or {}).get("expression") or {}
        area = (expression.get("parameters") or {}).get("aoi")
    if isinstance(area, str):
        try:
            area = json.loads(area)
        except ValueError:
            return None
    if isinstance(area, dict):
        from shapely.geometry import shape

        try:
            area = list(shape(area.get("geometry", area)).bounds)
        except Exception:  # not a GeoJSON geometry: no footprint
            return None
    if isinstance(area, list) and len(area) == 4 and all(isinstance(v, (int, float)) for v in area):
        w, s, e, n = (float(v) for v in area)
        if -180 <= w <= e <= 180 and -90 <= s <= n <= 90:
            return [w, s, e, n]
    return None


def _item(record: dict, operation: str, workspace: Path, item_dir: Path) -> dict:
    item = copy.deepcopy(record)
    item["stac_version"] = item.get("stac_version") or STAC_VERSION
    item["collection"] = operation
    props = item.setdefault("properties", {})
    if not props.get("datetime") and not (props.get("start_datetime") and props.get("end_datetime")):
        props["datetime"] = props.get("created")
    if not item.get("geometry"):
        area = _area_of_interest(props)
        if area is not None:
            w, s_, e, n = area
            item["geometry"] = {
                "type": "Polygon",
                "coordinates": [[[w, s_], [e, s_], [e, n], [w, n], [w, s_]]],
            }
            item["bbox"] = area
    for asset in (item.get("assets") or {}).values():
        href = asset.get("href")
        if isinstance(href, str) and Path(href).is_absolute():
            asset["href"] = os.path.relpath(href, item_dir)
    links = []
    for link in item.get("links") or []:
        if link.get("rel") == "self":
            links.append({**link, "rel": "alternate", "title": "the output record (the server's resource)"})
        elif link.get("rel") not in ("root", "parent", "collection"):
            links.append(link)
    to_root = os.path.relpath(workspace / "catalog.json", item_dir)
    item["links"] = [
        {"rel": "root", "href": to_root, "type": "application/json"},
        {"rel": "parent", "href": "../collection.json", "type": "application/json"},
        {"rel": "collection", "href": "../collection.json", "type": "application/json"},
        *links,
    ]
    return item


def refresh(settings: Settings) -> Path:
    """Write (or bring up to date) the workspace's static catalog; return its catalog.json."""
    workspace = Path(settings.workspace).expanduser().resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    stac_dir = _plain_dir(workspace / STAC_DIR, workspace, create=True)
    by_operation: dict[str, list[dict]] = {}
    for record in _records(workspace):
        operation = _operation(record)
        item_dir = stac_dir / operation / "items"
        by_operation.setdefault(operation, []).append(_item(record, operation, workspace, item_dir))

    for operation, items in sorted(by_operation.items()):
        folder = _plain_dir(stac_dir / operation, workspace, create=True)
        item_dir = _plain_dir(folder / "items", workspace, create=True)
        keep = set()
        for item in items:
            name = f"{slug(item['id'])}.json"
            keep.add(name)
            _write(item_dir / name, item)
        for stale in item_dir.glob("*.json"):
            if stale.name not in keep and not stale.is_symlink():
                stale.unlink()
        _write(
            folder / "collection.json",
            {
                "type": "Collection",
                "stac_version": STAC_VERSION,
                "stac_extensions": [],
                "id": operation,
                "title": f"{operation} outputs",
                "description": f"Outputs of {operation} written by stac-gdal-mcp into its workspace.",
                "license": "other",
                "extent": collection_extent(items),
                "links": [
                    {"rel": "root", "href": "../../catalog.json", "type": "application/json"},
                    {"rel": "parent", "href": "../../catalog.json", "type": "application/json"},
                    *(
                        {
                            "rel": "item",
                            "href": f"./items/{slug(i['id'])}.json",
                            "type": "application/geo+json",
                        }
                        for i in sorted(items, key=lambda i: i["id"])
                    ),
                ],
            },
        )
    for folder in stac_dir.iterdir():  # operations with no output left
        if folder.name not in by_operation and folder.is_dir() and not folder.is_symlink():
            for stale in (folder / "items").glob("*.json"):
                stale.unlink()
            for leftover in ((folder / "items"), (folder / "collection.json")):
                if leftover.is_dir():
                    leftover.rmdir()
                elif leftover.exists():
                    leftover.unlink()
            if not any(folder.iterdir()):
                folder.rmdir()

    catalog = workspace / "catalog.json"
    _write(
        catalog,
        {
            "type": "Catalog",
            "stac_version": STAC_VERSION,
            "id": WORKSPACE,
            "title": TITLE,
            "description": "Every output of stac-gdal-mcp in this workspace: one collection per operation, "
            "one item per output (its record: projection, raster, file and processing facts, "
            "derived_from links).",
            "links": [
                {"rel": "root", "href": "./catalog.json", "type": "application/json"},
                *(
                    {"rel": "child", "href": f"./{STAC_DIR}/{op}/collection.json", "type": "application/json"}
                    for op in sorted(by_operation)
                ),
            ],
        },
    )
    return catalog


class Refreshing:
    """Mixed into the local catalog class: `data` refreshes the files first when the records
    changed, then reloads them."""

    settings: Settings

    def _start_refreshing(self, settings: Settings) -> None:
        self.settings = settings
        self._seen: tuple | None = None
        self._refresh_lock = threading.Lock()

    @property
    def data(self) -> tuple[dict[str, dict], list[dict]]:
        with self._refresh_lock:
            now = fingerprint(self.path.parent)
            if now != self._seen:
                refresh(self.settings)
                with self._lock:
                    self._data = None
                self._seen = now
        return super().data


_CLASSES: dict[type, type] = {}


def workspace_config(settings: Settings) -> CatalogConfig:
    workspace = Path(settings.workspace).expanduser().resolve()
    return CatalogConfig(id=WORKSPACE, title=TITLE, path=workspace / "catalog.json")


def open_workspace_catalog(catalogs: Any, local_catalog_class: type) -> Any:
    """The one workspace catalog of a `Catalogs` (kept with its other open catalogs): an instance
    of `local_catalog_class` (catalogs.LocalCatalog) with `Refreshing` mixed in."""
    with catalogs._lock:
        cls = _CLASSES.get(local_catalog_class)
        if cls is None:
            cls = _CLASSES[local_catalog_class] = type(
                "WorkspaceCatalog", (Refreshing, local_catalog_class), {}
            )
        found = catalogs._open.get(WORKSPACE)
        if not isinstance(found, cls):
            found = cls(workspace_config(catalogs.settings))
            found._start_refreshing(catalogs.settings)
            catalogs._open[WORKSPACE] = found
        return found


def workspace_info(settings: Settings, features: Any = None) -> CatalogInfo:
    """The workspace catalog's line in list_catalogs (`features`: a local catalog's)."""
    return CatalogInfo(
        id=WORKSPACE, title=TITLE, path=str(workspace_config(settings).path), kind="local", features=features
    )
