"""The configured catalogs by name (`Catalogs`): each opened on first use as a `RemoteCatalog`
(remote.py) or a `LocalCatalog` (local.py) and kept for the server's lifetime; `info` is what
list_catalogs shows of them."""

from __future__ import annotations

import threading
from pathlib import Path

from ..errors import StacGdalMcpError
from ..models import CatalogInfo
from ..settings import Settings
from .local import LocalCatalog
from .redact import masked, masked_url
from .remote import RemoteCatalog


def catalog_root(path) -> Path:
    """The folder a local catalog's files are in: a file's folder, a folder itself (a
    stac-geoparquet snapshot; not the folder above it), a glob's folder before its first wildcard."""
    path = Path(path).expanduser()
    parts = path.parts
    for index, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return (Path(*parts[:index]) if index else Path(".")).resolve()
    resolved = path.resolve()
    return resolved if resolved.is_dir() else resolved.parent


class Catalogs:
    """The configured catalogs, opened on first use and kept for the server's lifetime."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._open: dict[str, RemoteCatalog | LocalCatalog] = {}
        self._lock = threading.Lock()

    def get(self, catalog_id: str | None = None) -> RemoteCatalog | LocalCatalog:
        if catalog_id == "workspace" and all(c.id != "workspace" for c in self.settings.catalogs):
            from .workspace import open_workspace_catalog  # the outputs, as a catalog

            return open_workspace_catalog(self, LocalCatalog)
        config = self.settings.catalog(catalog_id)
        with self._lock:
            if config.id not in self._open and config.kind == "geoparquet":
                from .geoparquet import GeoparquetCatalog  # stac-geoparquet files, searched in DuckDB

                self._open[config.id] = GeoparquetCatalog(config, self.settings)
            if config.id not in self._open:
                self._open[config.id] = (
                    RemoteCatalog(config, self.settings) if config.url else LocalCatalog(config)
                )
            return self._open[config.id]

    def local_roots(self) -> list[Path]:
        """Folders of local catalogs: their files may be read as inputs."""
        return [
            catalog_root(p)
            for c in self.settings.catalogs
            for p in ([c.path] if c.path is not None else c.paths or [])
        ]

    def info(self, check_reachable: bool = False) -> list[CatalogInfo]:
        out = []
        for config in self.settings.catalogs:
            info = CatalogInfo(
                id=config.id,
                title=config.title,
                url=masked_url(config.url or (config.urls or [""])[0]) or None,
                path=config.location if config.path or config.paths else None,
                kind=config.kind,
                signing=config.signing,
            )
            if check_reachable:
                try:
                    catalog = self.get(config.id)
                    if isinstance(catalog, LocalCatalog):
                        _ = catalog.data  # loads the files
                    elif config.kind == "geoparquet":
                        _ = catalog.files  # checks the files
                    info.features = catalog.features
                    info.reachable = True
                except StacGdalMcpError as exc:
                    info.reachable, info.error = False, masked(exc)
            elif config.path or config.paths:
                info.features = self.get(config.id).features
            out.append(info)
        if all(c.id != "workspace" for c in self.settings.catalogs):
            from .workspace import workspace_info

            out.append(workspace_info(self.settings, self.get("workspace").features))
        return out
