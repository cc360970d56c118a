"""The bands of the items a search finds over an area as one lazy xarray Dataset (`Session.load`):
an operation of the library that no tool offers. Its fields are the load group's
(`processing.requests.Load`, through `OverArea`) and composite's `bands`, declared there."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from .composite import Composite, band_names
from .params import OverArea

if TYPE_CHECKING:
    import xarray as xr

    from ..processing.jobs import Job

BandsArg = Composite.parameters()["bands"]  # the same parameter as composite's


class LoadDataset(OverArea):
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

    name: ClassVar[str] = "load"
    library_name: ClassVar[str] = "load"
    positional: ClassVar[tuple[str, ...]] = ("aoi", "bands")

    bands: BandsArg

    def estimate(self, core):
        """What loading and computing the Dataset would read (headers only)."""
        from ..processing.estimate.loads import estimate_load

        return estimate_load(core, self, band_names(self.bands), operation="load")

    def run(self, core, job: Job | None = None) -> xr.Dataset:
        """The lazy Dataset (`processing.load.prepare`, then one variable per band)."""
        from ..processing.load import as_dataset, prepare

        return as_dataset(prepare(core, self, band_names(self.bands)))
