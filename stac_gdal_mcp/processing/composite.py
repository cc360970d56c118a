"""A cloud-free picture of an AOI: per pixel, the median (mean, min, max) over time of each band.

`composite` computes it as a georeferenced xarray DataArray (band, y, x; NaN where no usable
value was seen), its provenance in `attrs`; `save_array` writes a DataArray as a float COG with
a record naming every item it came from. `result` is the shape the server's tool returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ..errors import InvalidArgument
from ..models import Model
from .dask_runtime import compute_each, scheduler_name
from .jobs import Job
from .load import (
    SOFTWARE,
    FailedItem,
    GridInfo,
    OutputRef,
    failed_error,
    failed_note,
    parameters,
    prepare,
    sources_read,
)
from .records import Provenance

if TYPE_CHECKING:
    import xarray as xr

    from ..outputs import OutputRecord

Method = Literal["median", "mean", "min", "max"]
METHODS = ("median", "mean", "min", "max")


class CompositeResult(Model):
    output: OutputRef
    bands: list[str]
    method: str
    mask_clouds: bool
    items: int = Field(description="items that went into the composite (all in derived_from)")
    valid_fraction: float = Field(description="share of the AOI pixels with a value in the composite")
    grid: GridInfo
    scheduler: str
    notes: list[str] = []
    failed_items: list[FailedItem] = Field(
        default=[], description="items that could not be read: left out of the composite and of derived_from"
    )


def band_names(bands) -> list[str]:
    names = [b.strip() for b in bands.split(",")] if isinstance(bands, str) else list(bands or [])
    if not names or not all(isinstance(b, str) and b for b in names):
        raise InvalidArgument('bands must name at least one band, e.g. ["red", "green", "blue"]')
    return names


def composite(
    core,
    aoi,
    *,
    bands,
    method: Method = "median",
    mask_clouds: bool = True,
    resolution: float | None = None,
    crs: str | None = None,
    catalog: str | None = None,
    max_items: int | None = None,
    job: Job | None = None,
    gdal_options: dict | None = None,
    **search,
) -> xr.DataArray:
    """Per pixel, `method` over time of each band's usable values (computed on the session's
    dask scheduler): a float32 DataArray (band, y, x), NaN outside the AOI and where no usable
    value was seen. `search` takes the search arguments (`query.SearchArgs`). Its dry run
    (headers only: what it would read and write) is `estimate.estimate_composite`."""
    import numpy as np
    import xarray as xr

    from ..outputs import package_versions

    job = job or Job()
    job.limit_time(core.settings.limits.job_timeout_s)
    names = band_names(bands)
    if method not in METHODS:
        raise InvalidArgument(f"method must be one of {', '.join(METHODS)}")
    prep = prepare(
        core,
        aoi,
        names,
        mask_clouds=mask_clouds,
        resolution=resolution,
        crs=crs,
        catalog=catalog,
        max_items=max_items,
        search=search,
        gdal_options=gdal_options,
    )
    data, arrays, failed = _reduce_days(core, prep, names, method, job)
    data[:, ~prep.inside] = np.nan
    valid = np.isfinite(data[0])[prep.inside]
    item_count = prep.item_count - len(failed)
    notes = list(prep.notes)
    if failed:
        notes.append(failed_note(failed, "they are left out of the composite and of derived_from"))
    coords = {"band": names, "y": arrays[0].y.values, "x": arrays[0].x.values}
    if "spatial_ref" in arrays[0].coords:
        coords["spatial_ref"] = arrays[0].coords["spatial_ref"]
    valid_fraction = round(float(valid.mean()) if valid.size else 0.0, 6)
    provenance = Provenance(
        kind="composite",
        operation="composite",
        parameters=parameters(
            aoi=aoi,
            bands=names,
            method=method,
            mask_clouds=mask_clouds,
            resolution=resolution,
            crs=crs,
            catalog=catalog,
            max_items=max_items,
            **search,
        ),
        sources=sources_read(prep, failed),
        title=f"{method} composite of {', '.join(names)} from {item_count} items",
        lineage=(
            f"{method} over time of {', '.join(names)} "
            f"({'clouds masked with each item mask' if mask_clouds else 'no cloud mask'}), "
            f"{item_count} items loaded with odc-stac (groupby solar_day)"
        ),
        software=package_versions(*SOFTWARE),
        facts={
            "stem": f"composite-{method}",
            "bands": names,
            "method": method,
            "mask_clouds": mask_clouds,
            "items": item_count,
            "valid_fraction": valid_fraction,
            "grid": prep.grid.model_dump(),
            "crs": str(prep.gbox.crs),
            "transform": [float(v) for v in list(prep.gbox.affine)[:6]],
            "scheduler": scheduler_name(core),
            "notes": notes,
            "failed_items": [f.model_dump() for f in failed],
        },
    )
    attrs = {"method": method, "items": item_count, "valid_fraction": valid_fraction}
    return xr.DataArray(
        data,
        dims=("band", "y", "x"),
        coords=coords,
        name=f"{method}_composite",
        attrs={**attrs, **provenance.to_attrs(as_text=True)},
    )


def _reduce_days(core, prep, names: list[str], method: str, job: Job):
    """`method` over the solar days of each band, the days computed one by one (a day whose
    reads fail is left out and its items returned as failed, never read as no-data). Returns
    (float32 data (band, y, x), one computed day's arrays (for the coordinates), failed items)."""
    import warnings

    import numpy as np

    parts = {
        (index, t): tuple(loaded.bands[name].isel(time=t) for name in names)
        for index, loaded in enumerate(prep.loaded)
        for t in range(len(loaded.days))
    }
    computed, errors = compute_each(core, job, parts)
    failed = [
        FailedItem(item_id=m["id"], error=errors[(index, t)])
        for index, loaded in enumerate(prep.loaded)
        for t, (_, _, members) in enumerate(loaded.days)
        if (index, t) in errors
        for m in members
    ]
    if not computed:
        raise failed_error(failed)
    days = list(computed.values())
    reduce = {"median": np.nanmedian, "mean": np.nanmean, "min": np.nanmin, "max": np.nanmax}[method]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"All-NaN slice|Mean of empty slice", RuntimeWarning)
        data = np.stack(
            [
                reduce(np.stack([np.asarray(day[b].values, dtype="float32") for day in days]), axis=0)
                for b in range(len(names))
            ]
        ).astype("float32")
    return data, days[0], failed


def _grid(array, provenance: Provenance | None):
    """(CRS, affine transform) of a DataArray: from its provenance, else from odc-geo."""
    from affine import Affine
    from rasterio.crs import CRS

    if provenance is not None and "crs" in provenance.facts:
        return CRS.from_user_input(provenance.facts["crs"]), Affine(*provenance.facts["transform"])
    import odc.geo.xr  # noqa: F401  (the .odc accessor)

    gbox = getattr(array.odc, "geobox", None)
    if gbox is None or gbox.crs is None:
        raise InvalidArgument(
            "the array has no georeferencing (no spatial_ref/crs coordinate); keep the coordinates of a load"
        )
    return CRS.from_user_input(gbox.crs.to_wkt()), gbox.affine


def save_array(
    core, array: xr.DataArray, *, output_name: str | None = None, job: Job | None = None
) -> OutputRecord:
    """Write a georeferenced DataArray ((band,) y, x) as a COG output; its record comes from the
    array's provenance (a composite lists every item it came from in `derived_from`)."""
    import numpy as np
    from rasterio.windows import Window

    from .formats import COG_TYPE, FORMATS, creation_options, finish, write_chunks
    from .grids import check_output_size
    from .records import describe_raster

    provenance = Provenance.of(array)
    if array.ndim == 2:
        array = array.expand_dims(band=[array.name or "value"])
    if array.ndim != 3 or tuple(array.dims[1:]) != ("y", "x"):
        raise InvalidArgument(f"save takes an array on (band, y, x) or (y, x); this one is on {array.dims}")
    crs, transform = _grid(array, provenance)
    if provenance is None:
        provenance = Provenance(
            kind="array",
            operation="save",
            title=str(array.name or "array"),
            lineage=f"an array ({', '.join(map(str, array.dims))}) saved from Python",
        )
    count, height, width = array.shape
    data = np.asarray(array.values)
    if data.dtype.kind not in "fiu":
        raise InvalidArgument(f"save takes numeric arrays, not {data.dtype}")
    check_output_size(width, height, count, str(data.dtype), core.settings.limits)
    nodata = float("nan") if data.dtype.kind == "f" else None
    job = job or Job()
    job.progress(1, 1, f"writing {provenance.title}")
    store = core.outputs
    with store.writing(".tif", output_name, stem=provenance.facts.get("stem", "array")) as out:
        working = out.scratch(".tif")
        write_chunks(
            working,
            crs=crs,
            transform=transform,
            width=width,
            height=height,
            count=count,
            dtype=str(data.dtype),
            nodata=nodata,
            chunks=[(Window(0, 0, width, height), data)],
            on_chunk=lambda n: None,
            descriptions=[str(b) for b in array["band"].values] if "band" in array.coords else None,
        )
        fmt = FORMATS["COG"]
        finish(
            fmt,
            working,
            out.path,
            creation_options(fmt, OVERVIEW_RESAMPLING="AVERAGE", PREDICTOR="YES"),
            job=job,
        )
        return store.commit(
            out,
            operation=provenance.operation,
            parameters=provenance.parameters,
            sources=provenance.sources,
            media_type=COG_TYPE,
            raster=describe_raster(out.path),
            title=provenance.title,
            lineage=provenance.lineage,
            software=provenance.software,
        )


def result(array: xr.DataArray, record: OutputRecord) -> CompositeResult:
    """The composite tool's result: the output and the load's facts."""
    provenance = Provenance.of(array)
    if provenance is None or provenance.kind != "composite":
        raise InvalidArgument("not a composite (made by composite)")
    facts = provenance.facts
    return CompositeResult(
        output=OutputRef.of(record),
        bands=facts["bands"],
        method=facts["method"],
        mask_clouds=facts["mask_clouds"],
        items=facts["items"],
        valid_fraction=facts["valid_fraction"],
        grid=GridInfo.model_validate(facts["grid"]),
        scheduler=facts["scheduler"],
        notes=facts["notes"],
        failed_items=facts.get("failed_items", []),
    )
