"""`Session`: the library's entry point, and the object the server's tools call.

A session holds the settings, the configured catalogs, the output store (files in the workspace
with STAC-like records) and the key that signs paging cursors. Every capability is a method:
discovery returns typed results, analysis returns pandas / xarray objects, and writing a file
is always an explicit step (`save`, or the processing methods whose result is a file).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .core import Core
from .errors import InvalidArgument
from .operations import OPERATIONS
from .operations.base import library_method, takes_fields
from .operations.dataset import LoadDataset
from .processing.requests import AssetRef
from .session_discovery import Discovery
from .settings import Settings, load_settings

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    from .maps import MapView
    from .outputs import OutputRecord, OutputStore
    from .processing.access import AssetSource
    from .processing.jobs import Job

#: What names an input of the processing methods: an href, an item (a STAC item dict, a
#: pystac.Item, an ItemSummary from a search), an item reference (collection_id, item_id), an
#: `AssetRef` (as the MCP tools name it) or an already resolved `AssetSource`.
Source = Any


class Session(Discovery):
    """Find imagery in STAC catalogs and process its COG assets: one object, one method per task.

    `Session(config=None, *, workspace=None, **settings)`: `config` is a TOML settings file (or a
    `Settings` object); `workspace` the folder for outputs; other keywords override settings,
    e.g. `default_catalog="sample"` (the bundled offline catalog) or `limits={"max_items": 50}`.
    Environment variables `STAC_GDAL_MCP_*` apply too (see docs/configuration.md).

    The examples use the sample catalog and a few fields west of Nova Gorica:

    >>> from stac_gdal_mcp import Session
    >>> session = Session(default_catalog="sample")
    >>> aoi = [13.60, 45.92, 13.62, 45.935]

    Methods: discovery - `catalogs`, `collections`, `collection`, `queryables`, `search`,
    `get_item`; pixels without files - `cloud_cover`, `load`, `time_series`, `composite`,
    `zonal_stats`;
    files - `save`, `reproject`, `convert`, `preview` (and `inspect`, `asset` to look at an
    input); `outputs` is the output store (list, get, path, delete).

    A session is closed with `close()` (or by using it in a `with` block).
    """

    def __init__(
        self,
        config: str | os.PathLike | Settings | None = None,
        *,
        workspace: str | os.PathLike | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(config, Settings):
            if workspace is not None or settings:
                raise InvalidArgument("give either a Settings object or settings to load, not both")
            self.settings: Settings = config
        else:
            self.settings = load_settings(config, workspace=workspace, **settings)
        #: the services core functions take (settings, catalogs, output store, cursor codec)
        self.core = Core(self.settings)
        self._on_close: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"<Session default_catalog={self.settings.default_catalog!r} workspace='{self.workspace}'>"

    @property
    def workspace(self) -> Path:
        """The folder where outputs (files and their records) are written."""
        return Path(self.settings.workspace)

    @property
    def outputs(self) -> OutputStore:
        """The output store: `list()`, `get(output_id)` (the record), `path(output_id)`, `delete(output_id)`."""
        return self.core.outputs

    # --- lifetime ----------------------------------------------------------------------------

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the session closes (e.g. to stop what was started for it)."""
        self._on_close.append(callback)

    def close(self) -> None:
        """Release what the session holds (callbacks registered with `on_close`, the store)."""
        callbacks, self._on_close = self._on_close, []
        for callback in reversed(callbacks):
            callback()
        self.core.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- inputs --------------------------------------------------------------------------------

    @takes_fields(AssetRef, ("source", "asset"), shown={"source": "Source"})
    def asset(self, **names: Any) -> AssetSource:
        """Resolve an input the way every processing method does: `source` (an href, a STAC
        item dict or pystac.Item, an ItemSummary, or `(collection_id, item_id)`) and `asset` (a
        key or a band common name such as "red", "nir", "scl"); or, as the server's tools name it,
        `href=` or `collection_id=` + `item_id=` + `asset=`. The href policy applies and hrefs
        are signed where the catalog needs it.

        >>> session.asset(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "nir").label
        'S2A_33TUL_20240808_0_L2A/nir'
        """
        from .operations.inputs import resolve

        named = AssetRef.model_construct(**names)
        return resolve(self.core, named.source, named.asset, named)

    # --- processing into files ---------------------------------------------------------------

    def map(self, *results: Any, basemap: str | None = None, attribution: str | None = None) -> MapView:
        """The map the MCP App draws for the same tool answers, shown inline in Jupyter (offline:
        the coastline is bundled, local thumbnails inlined): `results` are any of search results
        (footprints), a `cloud_cover` ranking (its AOI and ranking), a `zonal_stats` table (the
        zones, coloured by the first statistic), a `time_series` table (its AOI and chart), an
        output record or a preview (at its bbox). `.view` is the view data, `.save(path)` writes
        the page. `basemap`: a `{z}/{x}/{y}` tile URL, drawn where the network allows.

        >>> ranking = session.cloud_cover(aoi, collections=["sentinel-2-l2a"], datetime="2024-06")
        >>> session.map(ranking, session.search(ids=list(ranking["item_id"])))
        <MapView aois=1 footprints=2 ranking=2>
        """
        from .maps import MapView

        return MapView.of(results, self.core, basemap=basemap, attribution=attribution)

    # --- outputs -------------------------------------------------------------------------------

    def save(
        self,
        result: pd.DataFrame | xr.DataArray,
        *,
        format: Literal["COG", "csv", "png", "parquet"] | None = None,
        output_name: str | None = None,
        job: Job | None = None,
    ) -> OutputRecord:
        """Write a result into the workspace, atomically, with a STAC-like record (proj, raster,
        file and processing extensions; `derived_from` links to every source): a `composite`
        (or any georeferenced DataArray on (band,) y, x) as a COG; a `time_series` table as CSV
        (default) or as a PNG chart (format="png"); a `zonal_stats` table as GeoParquet (default) or
        CSV (format="csv"). Returns the record (`session.outputs.path(record.id)` is the file).

        >>> record = session.save(session.composite(aoi, ["red", "nir"], collections=["sentinel-2-l2a"]))
        >>> record.properties.proj_code, len([l for l in record.links if l.rel == "derived_from"]) > 6
        ('EPSG:32633', True)
        """
        from .operations import registry

        return registry.save(self.core, result, format=format, output_name=output_name, job=job)


# The operations' methods, made from their classes (operations/base.py: `library_method`); their
# docstrings' examples run as this module's (doctest's `__test__`).
_METHODS = [*OPERATIONS.values(), LoadDataset]  # and `load`, an operation no tool offers
for _operation in _METHODS:
    setattr(Session, _operation.library_name, library_method(_operation))
__test__ = {_operation.library_name: _operation.__doc__ for _operation in _METHODS}
