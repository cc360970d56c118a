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


#: How long list_catalogs(check_reachable=true) waits for a catalog (at most network.timeout_s).
REACH_TIMEOUT_S = 3.0


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
        """What list_catalogs shows of each catalog; `check_reachable`: each contacted (or its
        files read), all side by side, each within REACH_TIMEOUT_S (`_reach`)."""
        out = [
            CatalogInfo(
                id=config.id,
                title=config.title,
                url=masked_url(config.url or (config.urls or [""])[0]) or None,
                path=config.location if config.path or config.paths else None,
                kind=config.kind,
                signing=config.signing,
            )
            for config in self.settings.catalogs
        ]
        if check_reachable:
            self._reach(out)
        else:
            for info, config in zip(out, self.settings.catalogs):
                if config.path or config.paths:
                    info.features = self.get(config.id).features
        if all(c.id != "workspace" for c in self.settings.catalogs):
            from .workspace import workspace_info

            workspace = workspace_info(self.settings, self.get("workspace").features)
            workspace.reachable = True if check_reachable else None  # a folder of this server's
            out.append(workspace)
        return out

    def _reach(self, infos: list[CatalogInfo]) -> None:
        """Each catalog of `infos` contacted on its own thread, all at once: a remote one through
        a catalog of its own whose requests end at REACH_TIMEOUT_S with no retry (an unreachable
        host must not hold the answer for network.timeout_s x retries), a local one opened. What
        has not answered by then is unreachable, its thread left to finish on its own."""
        from concurrent.futures import ThreadPoolExecutor, wait

        timeout = min(self.settings.network.timeout_s, REACH_TIMEOUT_S)
        quick = self.settings.model_copy(
            update={
                "network": self.settings.network.model_copy(update={"timeout_s": timeout, "max_retries": 0})
            }
        )

        def reach(config):
            catalog = RemoteCatalog(config, quick) if config.kind == "api" else self.get(config.id)
            if isinstance(catalog, LocalCatalog):
                _ = catalog.data  # loads the files
            elif config.kind == "geoparquet":
                _ = catalog.files  # checks the files
            return catalog.features

        pool = ThreadPoolExecutor(max_workers=max(1, len(infos)), thread_name_prefix="reach")
        try:
            futures = [pool.submit(reach, config) for config in self.settings.catalogs]
            wait(futures, timeout=timeout + 0.5)
            for info, future in zip(infos, futures):
                if not future.done():
                    info.reachable, info.error = False, f"no answer within {timeout:g} s"
                    continue
                try:
                    info.features, info.reachable = future.result(), True
                except StacGdalMcpError as exc:
                    info.reachable, info.error = False, masked(exc)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
