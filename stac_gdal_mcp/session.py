"""`Session`: the library's entry point, and the object the server's tools call.

A session holds the settings, the configured catalogs, the output store (files in the workspace
with STAC-like records) and the key that signs paging cursors. Every capability is a method:
discovery returns typed results, analysis returns pandas / xarray objects, and writing a file
is always an explicit step (`save`, or the processing methods whose result is a file).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack

from .core import Core
from .discovery.query import SearchArgs, search_args
from .errors import InvalidArgument
from .session_discovery import Discovery
from .settings import Settings, load_settings

if TYPE_CHECKING:
    import geopandas as gpd
    import pandas as pd
    import xarray as xr

    from .maps import MapView
    from .outputs import OutputRecord, OutputStore
    from .processing.access import AssetSource
    from .processing.estimate import Estimate
    from .processing.inspect import AssetInfo
    from .processing.jobs import Job
    from .processing.requests import Load
    from .results import CloudCover, Preview, SearchResults

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

    def asset(
        self,
        source: Source = None,
        asset: str | None = None,
        *,
        href: str | None = None,
        collection_id: str | None = None,
        item_id: str | None = None,
        catalog: str | None = None,
    ) -> AssetSource:
        """Resolve an input the way every processing method does: `source` (an href, a STAC
        item dict or pystac.Item, an ItemSummary, or `(collection_id, item_id)`) and `asset` (a
        key or a band common name such as "red", "nir", "scl"); or, as the server's tools name it,
        `href=` or `collection_id=` + `item_id=` + `asset=`. The href policy applies and hrefs
        are signed where the catalog needs it.

        >>> session.asset(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "nir").label
        'S2A_33TUL_20240808_0_L2A/nir'
        """
        from .operations.inputs import resolve
        from .processing.requests import AssetRef

        return resolve(self.core, source, asset, AssetRef(href, collection_id, item_id, asset, catalog))

    def inspect(
        self,
        source: Source = None,
        asset: str | None = None,
        *,
        href: str | None = None,
        collection_id: str | None = None,
        item_id: str | None = None,
        catalog: str | None = None,
        job: Job | None = None,
        dry_run: bool = False,
    ) -> AssetInfo | Estimate:
        """A raster asset's header (no pixel is read): driver, size, bands, dtypes, nodata,
        scale/offset, CRS, transform, bounds, blocks, overviews, compression, COG validity.
        Inputs as for `asset`; `dry_run=True`: an `Estimate` of the header's bytes and requests.

        >>> info = session.inspect(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "red")
        >>> info.crs, info.dtypes, info.is_cog
        ('EPSG:32633', ['uint16'], True)
        """
        from .operations import inspect

        source = self.asset(
            source, asset, href=href, collection_id=collection_id, item_id=item_id, catalog=catalog
        )
        return self._operate(inspect, inspect.check(source), dry_run=dry_run, job=job)

    # --- processing into files ---------------------------------------------------------------

    def reproject(
        self,
        source: Source = None,
        asset: str | None = None,
        *,
        dst_crs: str | int,
        resolution: float | Sequence[float] | None = None,
        bbox: Sequence[float] | None = None,
        bbox_crs: str = "EPSG:4326",
        resampling: str = "nearest",
        output_format: Literal["COG", "GTiff", "netCDF"] = "COG",
        output_name: str | None = None,
        job: Job | None = None,
        href: str | None = None,
        collection_id: str | None = None,
        item_id: str | None = None,
        catalog: str | None = None,
        dry_run: bool = False,
    ) -> OutputRecord | Estimate:
        """Warp an asset (or its part inside `bbox`) to `dst_crs` and write it into the workspace
        (a valid COG by default); only the source tiles needed are read. Returns the output's
        STAC-like record. Inputs as for `asset`; `job` reports progress and can cancel;
        `dry_run=True` returns what it would read and write instead (an `Estimate`).

        >>> record = session.reproject(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "red",
        ...                            dst_crs="EPSG:4326", bbox=aoi)
        >>> record.properties.proj_code, record.file.type.split(";")[0]
        ('EPSG:4326', 'image/tiff')
        """
        from .operations import warp

        source = self.asset(
            source, asset, href=href, collection_id=collection_id, item_id=item_id, catalog=catalog
        )
        request = warp.check(
            source,
            dst_crs=dst_crs,
            resolution=resolution,
            bbox=bbox,
            bbox_crs=bbox_crs,
            resampling=resampling,
            output_format=output_format,
            output_name=output_name,
        )
        return self._operate(warp, request, dry_run=dry_run, job=job)

    def convert(
        self,
        source: Source = None,
        asset: str | None = None,
        *,
        output_format: Literal["COG", "GTiff", "PNG", "JPEG", "netCDF"],
        bbox: Sequence[float] | None = None,
        bbox_crs: str = "EPSG:4326",
        bands: Sequence[int] | None = None,
        creation_options: dict[str, str | int] | None = None,
        output_name: str | None = None,
        job: Job | None = None,
        href: str | None = None,
        collection_id: str | None = None,
        item_id: str | None = None,
        catalog: str | None = None,
        dry_run: bool = False,
    ) -> OutputRecord | Estimate:
        """Write an asset (its window inside `bbox`, its `bands`) in another format, in its own
        CRS and resolution; PNG/JPEG are 8-bit renderings. Returns the output's record
        (`dry_run=True`: an `Estimate` of what it would read and write).

        >>> record = session.convert(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "red",
        ...                          output_format="PNG", bbox=aoi)
        >>> record.file.type
        'image/png'
        """
        from .operations import convert

        source = self.asset(
            source, asset, href=href, collection_id=collection_id, item_id=item_id, catalog=catalog
        )
        request = convert.check(
            source,
            output_format=output_format,
            bbox=bbox,
            bbox_crs=bbox_crs,
            bands=bands,
            creation_options=creation_options,
            output_name=output_name,
        )
        return self._operate(convert, request, dry_run=dry_run, job=job)

    def preview(
        self,
        source: Source = None,
        asset: str | None = None,
        *,
        assets: Sequence[str] | None = None,
        bbox: Sequence[float] | None = None,
        max_size: int = 512,
        job: Job | None = None,
        href: str | None = None,
        collection_id: str | None = None,
        item_id: str | None = None,
        catalog: str | None = None,
        dry_run: bool = False,
    ) -> Preview | Estimate:
        """A quicklook PNG of an item (true colour from its visual asset or red/green/blue) or of
        one asset (single band, colormap), at most `max_size` px; it shows inline in Jupyter and
        is saved as an output (`.record`). `assets`: 1 or 3 asset names to show. `dry_run=True`:
        an `Estimate` of what it would read and write.

        >>> image = session.preview(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), bbox=aoi, max_size=64)
        >>> image.png[:4], image.width <= 64
        (b'\\x89PNG', True)
        """
        from .operations import preview as previews
        from .operations.inputs import preview_sources
        from .processing.requests import AssetRef
        from .results import Preview

        ref = AssetRef(href, collection_id, item_id, asset, catalog)
        sources = preview_sources(self.core, source, asset, assets, ref)
        request = previews.check(sources, bbox=bbox, max_size=max_size)
        answer = self._operate(previews, request, dry_run=dry_run, job=job)
        return answer if dry_run else Preview(png=answer[1], record=answer[0])

    # --- analysis: pixels without files ------------------------------------------------------

    def cloud_cover(
        self,
        aoi: Sequence[float] | dict,
        *,
        items: Sequence[Any] | SearchResults | None = None,
        catalog: str | None = None,
        resolution: float | None = None,
        max_items: int | None = None,
        sort: Literal["clear", "cloud", "datetime", "-datetime", "search"] = "clear",
        job: Job | None = None,
        dry_run: bool = False,
        **search: Unpack[SearchArgs],
    ) -> CloudCover | Estimate:
        """How cloudy was *this area* in each scene: per item, the cloud, shadow, cirrus, snow,
        water and clear fractions of the valid pixels inside `aoi` (a WGS84 bbox or GeoJSON
        geometry), its no-data fraction, and the scene-wide eo:cloud_cover for comparison, from
        each item's own mask read only in the AOI's window. Items: `items` (search results or
        [{"collection_id": ..., "item_id": ...}]) or the search arguments (collections,
        datetime, ids, query, filter, filter_lang, sortby, max_cloud_cover). Clearest first by
        default. A `CloudCover`: `to_dataframe()` is the table, one row per item (`attrs` hold
        aoi_bbox, sort, failed and notes), and it reads as that table too; `.result` is the model.
        `dry_run=True`: an `Estimate` of what it would read (only headers are read).

        >>> ranking = session.cloud_cover(aoi, collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-07-31")
        >>> ranking[["item_id", "cloud_fraction", "scene_cloud_cover"]].tail(1).to_dict("records")
        [{'item_id': 'S2B_33TUL_20240604_0_L2A', 'cloud_fraction': ..., 'scene_cloud_cover': 62.0}]
        """
        from .operations import cloud
        from .operations.inputs import item_refs
        from .results import CloudCover

        request = cloud.check(
            aoi,
            items=item_refs(items),
            catalog=catalog,
            resolution=resolution,
            max_items=max_items,
            sort=sort,
            **search_args(search),
        )
        answer = self._operate(cloud, request, dry_run=dry_run, job=job)
        return answer if dry_run else CloudCover(answer)

    def load(
        self,
        aoi: Sequence[float] | dict,
        bands: Sequence[str] | str,
        *,
        mask_clouds: bool = True,
        resolution: float | None = None,
        crs: str | None = None,
        catalog: str | None = None,
        max_items: int | None = None,
        gdal_options: dict[str, str] | None = None,
        **search: Unpack[SearchArgs],
    ) -> xr.Dataset:
        """The items a search finds over `aoi`, loaded lazily with odc-stac on dask: one float32
        variable per band (common names such as "red", "nir", or asset keys) on (time, y, x),
        one time step per solar day, raster:bands scale/offset applied (reflectances), NaN where
        a pixel is nodata, cloud/shadow/cirrus (with `mask_clouds`) or outside the AOI. The grid
        is the items' CRS at the first band's native resolution unless `crs` / `resolution` say
        otherwise. Nothing is read until you compute.

        >>> ds = session.load(aoi, ["red", "nir"], collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-07-31")
        >>> sorted(ds.data_vars), ds.red.dims, ds.red.shape
        (['nir', 'red'], ('time', 'y', 'x'), (3, 170, 159))
        >>> ndvi = (ds.nir - ds.red) / (ds.nir + ds.red)
        >>> float(ndvi.isel(time=1).mean()) > 0.3
        True
        """
        from .operations.composite import band_names
        from .processing.load import as_dataset, prepare

        names = band_names(bands)
        load = self._load(aoi, search, catalog, mask_clouds, resolution, crs, max_items, gdal_options)
        return as_dataset(prepare(self.core, load, names))

    def time_series(
        self,
        aoi: Sequence[float] | dict,
        expression: str = "ndvi",
        *,
        reducer: Literal["mean", "median", "min", "max", "count"] = "mean",
        mask_clouds: bool = True,
        resolution: float | None = None,
        crs: str | None = None,
        catalog: str | None = None,
        max_items: int | None = None,
        gdal_options: dict[str, str] | None = None,
        job: Job | None = None,
        dry_run: bool = False,
        **search: Unpack[SearchArgs],
    ) -> pd.DataFrame | Estimate:
        """One value per solar day over `aoi`: `reducer` of `expression` (an index - ndvi, ndwi,
        nbr, ndbi -, a band, or a formula of band names such as "(nir-red)/(nir+red)") over the
        pixels left after cloud masking. A DataFrame indexed by acquisition time (UTC) with
        columns date, datetime, value, valid_fraction, valid_pixels, collection_id, item_ids;
        nothing is written until you `save` it (CSV, or format="png" for a chart). `dry_run=True`:
        an `Estimate` of what it would read (only headers are read).

        >>> table = session.time_series(aoi, "ndvi", collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-07-31")
        >>> list(table["date"]), [round(v, 3) for v in table["value"]]
        (['2024-06-04', '2024-06-19', '2024-07-14'], [0.517, 0.648, 0.52])
        """
        from .operations import series

        load = self._load(aoi, search, catalog, mask_clouds, resolution, crs, max_items, gdal_options)
        request = series.check(load, expression, reducer)
        return self._operate(series, request, dry_run=dry_run, job=job)

    def composite(
        self,
        aoi: Sequence[float] | dict,
        bands: Sequence[str] | str,
        *,
        method: Literal["median", "mean", "min", "max"] = "median",
        mask_clouds: bool = True,
        resolution: float | None = None,
        crs: str | None = None,
        catalog: str | None = None,
        max_items: int | None = None,
        gdal_options: dict[str, str] | None = None,
        job: Job | None = None,
        dry_run: bool = False,
        **search: Unpack[SearchArgs],
    ) -> xr.DataArray | Estimate:
        """A cloud-free picture of `aoi`: per pixel, the median (mean, min, max) over time of each
        band's cloud-masked values; a float32 DataArray (band, y, x) of reflectances, NaN where no
        clear value was seen, georeferenced (its `spatial_ref`). `save` writes it as a COG whose
        record lists every item it came from. `dry_run=True`: an `Estimate` of what computing and
        saving it would read and write (only headers are read).

        >>> rgb = session.composite(aoi, ["red", "green", "blue"], collections=["sentinel-2-l2a"])
        >>> rgb.dims, rgb.band.values.tolist(), rgb.attrs["items"]
        (('band', 'y', 'x'), ['red', 'green', 'blue'], 5)
        """
        from .operations import composite

        load = self._load(aoi, search, catalog, mask_clouds, resolution, crs, max_items, gdal_options)
        request = composite.check(load, bands, method)
        return self._operate(composite, request, dry_run=dry_run, job=job)

    def zonal_stats(
        self,
        geometries: Any,
        *,
        expression: str = "ndvi",
        stats: Sequence[str] | str = ("mean", "count"),
        mask_clouds: bool = True,
        per: Literal["item", "day"] = "item",
        id_property: str | None = None,
        items: Sequence[Any] | SearchResults | None = None,
        catalog: str | None = None,
        resolution: float | None = None,
        min_valid_fraction: float = 0.5,
        max_items: int | None = None,
        job: Job | None = None,
        dry_run: bool = False,
        **search: Unpack[SearchArgs],
    ) -> gpd.GeoDataFrame | Estimate:
        """Exact statistics of `expression` (an index - ndvi, ndwi, nbr, ndbi -, a band, an asset
        key such as "scl" or a formula of bands) per zone and per item (`per="day"`: per solar
        day), with exactextract on each item's native grid: partial pixels count by the share of
        their area inside the zone. `geometries`: GeoJSON (FeatureCollection, Feature, list of
        Features, geometry; or JSON text) or a GeoJSON/GeoPackage/GeoParquet file in the workspace;
        zone ids from `id_property`, else the feature id, else the position. `stats`: exactextract's
        (mean, median, min, max, sum, count, stdev, majority, frac, quantile(q=0.9), ...). Items as
        for `cloud_cover`. `per="day"` mosaics the items of one solar day (a pixel from the first
        item, in acquisition order, where it is usable). A zone-observation whose valid (clear,
        with data) share of the zone is under `min_valid_fraction` (0 keeps all) gets no
        statistic but count, and a note. A GeoDataFrame in long form (zone_id, datetime, collection_id, item_ids,
        a column per statistic, valid_fraction, cloud_fraction, note, error, the zone's geometry),
        its provenance in `attrs`; `save` writes it (GeoParquet, or format="csv").
        `dry_run=True`: an `Estimate` of what it would read (only headers are read).

        >>> fields = {"type": "FeatureCollection", "features": [
        ...     {"type": "Feature", "id": "vineyard", "properties": {},
        ...      "geometry": {"type": "Polygon", "coordinates": [[[13.600, 45.927], [13.610, 45.927],
        ...                   [13.610, 45.935], [13.600, 45.935], [13.600, 45.927]]]}},
        ...     {"type": "Feature", "id": "meadow", "properties": {},
        ...      "geometry": {"type": "Polygon", "coordinates": [[[13.610, 45.920], [13.620, 45.920],
        ...                   [13.620, 45.927], [13.610, 45.927], [13.610, 45.920]]]}}]}
        >>> table = session.zonal_stats(fields, collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-07-31")
        >>> table[["zone_id", "item_ids", "mean", "valid_fraction"]].round(3).iloc[[0, 1]].to_dict("records")
        [{'zone_id': 'vineyard', 'item_ids': 'S2B_33TUL_20240604_0_L2A', 'mean': nan, 'valid_fraction': 0.138},
         {'zone_id': 'vineyard', 'item_ids': 'S2A_33TUL_20240619_0_L2A', 'mean': 0.393, 'valid_fraction': 1.0}]
        >>> session.save(table).file.type
        'application/vnd.apache.parquet'
        """
        from .operations import zonal
        from .operations.inputs import item_refs
        from .operations.zonal import region as zonal_region

        # a zones file of more than limits.zonal_region_zones features: read and written in groups
        operation = zonal_region if zonal_region.applies(self.core, geometries) else zonal
        request = operation.check(
            self.core,
            geometries,
            expression=expression,
            stats=stats,
            mask_clouds=mask_clouds,
            per=per,
            id_property=id_property,
            resolution=resolution,
            min_valid_fraction=min_valid_fraction,
            catalog=catalog,
            items=item_refs(items),
            max_items=max_items,
            **search_args(search),
        )
        return self._operate(operation, request, dry_run=dry_run, job=job)

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

    # --- the one path of every operation ---------------------------------------------------------

    def _operate(self, operation, request, *, dry_run: bool, job: Job | None):
        """`operation` (a module of operations/: check, estimate, run) on its checked `request`:
        on a dry run its estimate (headers only, nothing written), else its run with `job`
        (progress, cancellation, the time limit; the run writes its outputs, if any)."""
        if dry_run:
            return operation.estimate(self.core, request)
        return operation.run(self.core, request, job)

    @staticmethod
    def _load(aoi, search: dict, *fields) -> Load:
        """The load of the analysis methods: `aoi`, the search arguments among `search` (any
        other name refused), then catalog, mask_clouds, resolution, crs, max_items, gdal_options."""
        from .processing.requests import Load

        return Load(aoi, search_args(search), *fields)

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
