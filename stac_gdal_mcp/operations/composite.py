"""A cloud-free picture of an AOI: per pixel, the median (mean, min, max) over time of each band.

`composite` returns it as a `Raster`: a lazy, georeferenced xarray DataArray on dask (band, y, x;
NaN where no usable value was seen; its provenance in `attrs`, its blocks output tiles of TILE
px) with the plan that made it;
`save_array` computes a DataArray a few tiles at a time and writes it as a float COG with a
record naming every item it came from (a composite's failed days left out of every tile).
`result` is the shape the server's tool returns.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field

from ..errors import InvalidArgument
from ..models import MapLayer, Model
from ..processing.dask_runtime import scheduler_name
from ..processing.jobs import Job, timed
from ..processing.load import (
    SOFTWARE,
    FailedItem,
    GridInfo,
    OutputRef,
    failed_error,
    failed_note,
    prepare,
    sources_read,
)
from ..processing.records import Provenance
from ..words import counted
from .base import Tool
from .params import OverArea, json_text
from .result import Answer, Wrapping

if TYPE_CHECKING:
    import xarray as xr

    from ..outputs import OutputRecord

TILE = 1024  # px a side of the output tiles a composite is computed and written by (its dask chunks)


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


def composite(core, aoi, *, job: Job | None = None, **arguments) -> Raster:
    """The composite of `aoi` over the load, search and composite `arguments` name."""
    return Composite.of(aoi, **arguments).run(core, job)


def reduce_over_time(core, request: Composite, job: Job | None = None) -> Raster:
    """Per pixel, `method` over time of each band's usable values: a lazy float32 DataArray
    (band, y, x) on dask, NaN outside the AOI and where no usable value was seen; its blocks are
    output tiles of at most TILE px a side, each the reduction of that tile's days. Nothing is
    read until it is computed or saved (`save_array` streams it tile by tile; the facts that
    need the pixels - valid_fraction, failed items - are filled in then)."""
    import dask.array as da
    import numpy as np
    import xarray as xr

    timed(job, core)
    load, names, method = request.load, list(request.names), request.method
    # the AOI is applied to each reduced tile (a cluster is not sent the whole AOI mask)
    prep = prepare(core, load, names, chunk=TILE, mask_aoi=False)
    plan = _Plan(
        prep=prep,
        call=request,
        parameters=load.record_parameters(bands=names, method=method),
        scheduler=scheduler_name(core),
    )
    raw = plan.reduced(plan.days)
    inside = da.from_array(prep.inside, chunks=raw.chunks[1:])
    data = da.where(inside[None], raw, np.float32(np.nan))
    first = prep.loaded[0].bands[names[0]]
    coords = {"band": names, "y": first.y.values, "x": first.x.values}
    if "spatial_ref" in first.coords:
        coords["spatial_ref"] = first.coords["spatial_ref"]
    provenance = plan.provenance([], None)
    array = xr.DataArray(
        data,
        dims=("band", "y", "x"),
        coords=coords,
        name=f"{method}_composite",
        attrs={"method": method, "items": prep.item_count, **provenance.to_attrs(as_text=True)},
    )
    return Raster(array, plan, core)


class Raster(Wrapping):
    """A composite: the lazy DataArray (band, y, x) with the plan that made it, so that saving it
    streams it tile by tile and leaves out the days whose reads fail. It reads as the array -
    `rgb.dims`, `rgb.sel(band="red")`, `rgb.attrs`, `rgb.values` and every other attribute go
    to `array` - and shows as it in Jupyter; `array` is the DataArray itself. `save()` writes it
    as a COG (`save_array`); the composite tool keeps that COG and answers its facts."""

    result_kind = "composite"
    _own = ("array", "plan")

    def __init__(self, array: xr.DataArray, plan: _Plan | None = None, core=None):
        self.array, self.plan, self._core = array, plan, core

    def replaced(self, array: xr.DataArray) -> Raster:
        """The raster holding `array` (what its `sel`, `isel`, `[...]` give), saved as a COG as a
        composite is, block by block (the plan streams the whole composite only); its provenance
        is the composite's (xarray keeps `attrs` through a selection; restored where dropped)."""
        if Provenance.of(array) is None and Provenance.of(self.array) is not None:
            array = array.assign_attrs(self.array.attrs)
        return Raster(array, None, self._core)

    def _held(self) -> xr.DataArray:
        return self.array

    @property
    def provenance(self) -> Provenance | None:
        return Provenance.of(self.array)

    def _save(self, core, format, output_name, job) -> OutputRecord:
        if format not in (None, "COG"):
            raise InvalidArgument("arrays are saved as COG")
        return save_array(core, self, output_name=output_name, job=job)

    def _outputs(self, core, job) -> tuple[OutputRecord]:
        """What the composite tool keeps of it: its COG."""
        return (save_array(core, self, job=job),)

    def _answer(self, core, records, limits, quicklook: bool) -> Answer:
        """The tool's answer: the output and the load's facts (with `quicklook`, a PNG of the COG),
        drawn at its call's AOI."""
        from .saved import quicklook_png

        (record,) = records
        images = (quicklook_png(core.outputs.path(record.id)),) if quicklook else ()
        value = result(self.array, record)
        title = f"composite ({', '.join(str(b) for b in value.bands)})"
        raster = {"id": record.id, "title": title, "image": 0 if images else None}
        return Answer(value, records, images, layer=MapLayer(rasters=[raster], notes=value.notes))


# --- the reduction over time, per output tile ------------------------------------------------------


@dataclass
class _Plan:
    """How a composite is made: the call (its bands, method, cloud mask: `Composite`), the
    prepared load, and what its record will say."""

    prep: Any
    call: Composite
    parameters: dict
    scheduler: str

    @property
    def names(self) -> list[str]:
        return list(self.call.names)

    @property
    def days(self) -> list[tuple[int, int]]:
        """(stack, time index) of every solar day of the load."""
        return [(i, t) for i, loaded in enumerate(self.prep.loaded) for t in range(len(loaded.days))]

    def members(self, day: tuple[int, int]) -> list[dict]:
        index, t = day
        return self.prep.loaded[index].days[t][2]

    def day_arrays(self, day: tuple[int, int], tile) -> tuple:
        """The day's band values (dask) in `tile` (row0, row1, col0, col1)."""
        (index, t), (r0, r1, c0, c1) = day, tile
        loaded = self.prep.loaded[index]
        return tuple(loaded.bands[name].data[t, r0:r1, c0:c1] for name in self.names)

    def reduced(self, days: list[tuple[int, int]]):
        """`method` over `days` of each band, lazily: (band, y, x), one block per band and tile,
        each computed from that tile's blocks of the days alone (AOI not applied)."""
        import dask.array as da

        cube = da.stack(
            [da.stack([self.prep.loaded[i].bands[name].data[t] for i, t in days]) for name in self.names]
        )  # (band, day, y, x)
        return reduce_days(cube.rechunk({1: -1}), self.call.method)

    def provenance(self, failed: list[FailedItem], valid_fraction: float | None) -> Provenance:
        from ..outputs import package_versions

        prep, names, method, mask_clouds = self.prep, self.names, self.call.method, self.call.mask_clouds
        item_count = prep.item_count - len(failed)
        notes = list(prep.notes)
        if failed:
            notes.append(failed_note(failed, "they are left out of the composite and of derived_from"))
        return Provenance(
            kind="composite",
            operation="composite",
            parameters=self.parameters,
            sources=sources_read(prep, failed),
            title=f"{method} composite of {', '.join(names)} from {counted(item_count, 'item')}",
            lineage=(
                f"{method} over time of {', '.join(names)} "
                f"({'clouds masked with each item mask' if mask_clouds else 'no cloud mask'}), "
                f"{counted(item_count, 'item')} loaded with odc-stac (groupby solar_day)"
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
                "scheduler": self.scheduler,
                "notes": notes,
                "failed_items": [f.model_dump() for f in failed],
            },
        )


def _tiles(chunks) -> list[tuple[int, int, int, int]]:
    """(row0, row1, col0, col1) of each block of a 2-D chunking ((rows, ...), (cols, ...))."""
    import itertools

    def edges(sizes):
        stops = list(itertools.accumulate(sizes))
        return list(zip([0, *stops[:-1]], stops))

    return [(r0, r1, c0, c1) for r0, r1 in edges(chunks[0]) for c0, c1 in edges(chunks[1])]


def reduce_days(cube, method: str):
    """`method` over axis 1 (the days, one chunk) of a float32 dask array (band, day, y, x),
    ignoring NaN (NaN where a pixel has no value). Equal to numpy's nanmedian / nanmean /
    nanmin / nanmax, built of numpy functions only (a cluster's workers need nothing else), and
    without their all-NaN warnings; the median sorts the days once per pixel, several times
    faster than np.nanmedian."""
    import dask.array as da
    import numpy as np

    nan = np.float32(np.nan)
    if method in ("min", "max"):
        ufunc = np.fmin if method == "min" else np.fmax  # fmin/fmax skip NaN
        return cube.map_blocks(ufunc.reduce, axis=1, drop_axis=1, dtype="float32")
    if method == "mean":
        count = (~da.isnan(cube)).sum(axis=1, dtype="int16")
        total = da.nansum(cube, axis=1) / da.maximum(count, 1)  # (no 0/0 where there is no value)
        return da.where(count > 0, total, nan).astype("float32")
    ordered = cube.map_blocks(np.sort, axis=1, dtype="float32")  # NaN last
    count = (~da.isnan(ordered)).sum(axis=1, dtype="int16")  # of the sorted days: `cube` goes at once

    def at(position):
        index = position[:, None]
        return da.map_blocks(
            np.take_along_axis, ordered, index, axis=1, dtype="float32", chunks=index.chunks
        )[:, 0]

    low, high = at(da.maximum((count - 1) // 2, 0)), at(count // 2)
    return da.where(count > 0, (low + high) / 2, nan)


def save_array(
    core, array: xr.DataArray, *, output_name: str | None = None, job: Job | None = None
) -> OutputRecord:
    """Write a georeferenced DataArray ((band,) y, x) as a COG output; its record comes from the
    array's provenance (a composite lists every item it came from in `derived_from`).

    The pixels are computed and written part by part - a composite tile by tile, any other
    dask-backed array block by block, a numpy array in row strips - into a working GeoTIFF,
    which becomes the COG: memory holds a few parts, never the whole output. A composite's
    day whose reads fail (on any tile) is left out of every tile, and its items named in
    `failed_items`; the facts known once its pixels are (valid_fraction, items, failed_items)
    are then also written into the array's `attrs`."""
    import rasterio

    from ..processing.formats import COG_TYPE, FORMATS, creation_options, finish, write_chunks
    from ..processing.records import describe_raster

    plan = _plan_of(array)
    array, crs, transform, provenance = _checked(core, getattr(array, "array", array))
    count, height, width = array.shape
    dtype = array.dtype
    nodata = float("nan") if dtype.kind == "f" else None
    job = timed(job, core)
    outcome = _Outcome()
    if plan is not None:
        parts = _composite_tiles(core, plan, job, outcome)
    else:
        parts = _parts(core, array, job)
    store = core.outputs
    with (
        rasterio.Env(GDAL_CACHEMAX=WRITE_CACHE_BYTES),  # GDAL's default, 5% of RAM, would hold that much
        store.writing(".tif", output_name, stem=provenance.facts.get("stem", "array")) as out,
    ):
        working = out.scratch(".tif")
        write_chunks(
            working,
            crs=crs,
            transform=transform,
            width=width,
            height=height,
            count=count,
            dtype=str(dtype),
            nodata=nodata,
            chunks=parts,
            on_chunk=lambda n: None,
            descriptions=[str(b) for b in array["band"].values] if "band" in array.coords else None,
        )
        if plan is not None:
            inside = int(plan.prep.inside.sum())
            provenance = plan.provenance(outcome.failed, round(outcome.valid / inside, 6) if inside else 0.0)
        fmt = FORMATS["COG"]
        finish(
            fmt,
            working,
            out.path,
            creation_options(fmt, OVERVIEW_RESAMPLING="AVERAGE", PREDICTOR="YES"),
            job=job,
            step=_WRITE_STEPS,
            total=_WRITE_STEPS + 1,
        )
        record = store.commit(
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
    if plan is not None:  # the composite now knows its facts
        array.attrs.update(
            items=provenance.facts["items"],
            valid_fraction=provenance.facts["valid_fraction"],
            **provenance.to_attrs(as_text=True),
        )
    return record


def _checked(core, array: xr.DataArray) -> tuple:
    """(the array on (band, y, x), its CRS, its transform, its provenance: the one the operation
    that made it keeps in its `attrs`), checked before anything is computed: numeric,
    georeferenced, within limits.max_output_pixels and max_output_bytes."""
    from ..processing.grids import array_grid, check_output_size

    provenance = Provenance.of(array)
    if provenance is None:
        raise InvalidArgument("save takes an array an operation made (a composite's, a change's)")
    if array.ndim == 2:
        array = array.expand_dims(band=[array.name or "value"])
    if array.ndim != 3 or tuple(array.dims[1:]) != ("y", "x"):
        raise InvalidArgument(f"save takes an array on (band, y, x) or (y, x); this one is on {array.dims}")
    crs, transform = array_grid(array, provenance)
    count, height, width = array.shape
    if array.dtype.kind not in "fiu":
        raise InvalidArgument(f"save takes numeric arrays, not {array.dtype}")
    check_output_size(width, height, count, str(array.dtype), core.settings.limits)
    return array, crs, transform, provenance


WRITE_CACHE_BYTES = 128 * 1024**2  # GDAL's block cache while a save reads and writes
_WRITE_STEPS = 4  # progress: computing and writing the pixels is 4/5 of a save, the COG 1/5


@dataclass
class _Outcome:
    """What streaming a composite found: the failed items, the valid AOI pixels written."""

    failed: list[FailedItem] = field(default_factory=list)
    valid: int = 0


def _plan_of(array) -> _Plan | None:
    """The plan of a composite (a `Raster`), else None (any other array)."""
    return array.plan if isinstance(array, Raster) else None


def _composite_tiles(core, plan: _Plan, job: Job, outcome: _Outcome):
    """(window, float32 pixels) of each output tile of the composite, computed a few at a
    time on the session's scheduler (only reduced tiles come back from a cluster).

    A tile that fails is computed again day by day: the days that fail are left out and every
    tile is made again without them (tiles already written held their pixels), so that no
    pixel of the output comes from a day reported failed; if no day fails alone (a transient
    failure), the tiles not yet written are computed again, at most twice."""
    import numpy as np
    from rasterio.windows import Window

    from ..processing.dask_runtime import PartFailed, compute_stream

    inside, errors = plan.prep.inside, {}
    retries = 0
    tiles = None
    done: set = set()
    while True:
        keep = [d for d in plan.days if d not in errors]
        if not keep:
            raise failed_error(outcome.failed)
        raw = plan.reduced(keep)
        tiles = tiles or _tiles(raw.chunks[1:])
        todo = [t for t in tiles if t not in done]
        parts = ((t, raw[:, t[0] : t[1], t[2] : t[3]]) for t in todo)
        try:
            with contextlib.closing(compute_stream(core, job, parts, ahead=_AHEAD)) as stream:
                for tile, data in stream:
                    r0, r1, c0, c1 = tile
                    mask = inside[r0:r1, c0:c1]
                    data = np.where(mask, data, np.float32(np.nan)).astype("float32", copy=False)
                    outcome.valid += int(np.count_nonzero(np.isfinite(data[0]) & mask))
                    yield Window(c0, r0, c1 - c0, r1 - r0), data
                    done.add(tile)
                    progress = (len(done) * _WRITE_STEPS, len(tiles) * (_WRITE_STEPS + 1))
                    job.progress(*progress, f"composite tile {len(done)}/{len(tiles)}")
            return
        except PartFailed as exc:
            bad = _failing_days(core, job, plan, keep, exc.key)
            if not bad:
                retries += 1
                if retries > 2:
                    raise
                continue
            errors.update(bad)
            outcome.failed = [
                FailedItem(item_id=m["id"], error=errors[d])
                for d in plan.days
                if d in errors
                for m in plan.members(d)
            ]
            done.clear()  # the tiles written so far hold pixels of the failed days: all again
            outcome.valid = 0


_AHEAD = 2  # output tiles computed at once


def _failing_days(core, job: Job, plan: _Plan, days, tile) -> dict:
    """{day: error} of the days whose reads fail in `tile`, each computed on its own."""
    from ..errors import AssetUnreadable
    from ..processing.dask_runtime import compute

    bad = {}
    for day in days:
        job.check()
        try:
            compute(core, job, *plan.day_arrays(day, tile))
        except AssetUnreadable as exc:
            bad[day] = str(exc).removeprefix("loading the items failed: ")
    return bad


def _parts(core, array, job: Job):
    """(window, pixels) of any (band, y, x) array: a dask array's blocks (computed a few at a
    time; a failed read is an error), a numpy array's row strips."""
    import numpy as np
    from rasterio.windows import Window

    from ..processing.dask_runtime import compute_stream
    from ..processing.formats import row_strips

    count, height, width = array.shape
    data = array.data
    if hasattr(data, "chunks") and hasattr(data, "dask"):
        rows, cols = data.chunks[1], data.chunks[2]
        tiles = _tiles((rows, cols))
        parts = ((t, data[:, t[0] : t[1], t[2] : t[3]]) for t in tiles)
        with contextlib.closing(compute_stream(core, job, parts, ahead=_AHEAD)) as stream:
            for (r0, r1, c0, c1), values in stream:
                yield Window(c0, r0, c1 - c0, r1 - r0), np.asarray(values)
        return
    for row0, rows in row_strips(width, height, count, str(array.dtype)):
        job.check()
        yield Window(0, row0, width, rows), np.asarray(data[:, row0 : row0 + rows])


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


class Composite(OverArea):
    """A cloud-free picture of `aoi`: per pixel, the median (mean, min, max) over time of each
    band's cloud-masked values; a `Raster`, which reads as its float32 DataArray (band, y, x) of
    reflectances (`.array`), NaN where no clear value was seen, georeferenced (its `spatial_ref`). `save` writes it as a COG whose
    record lists every item it came from. `dry_run=True`: an `Estimate` of what computing and
    saving it would read and write (only headers are read).

    >>> rgb = session.composite(aoi, ["red", "green", "blue"], collections=["sentinel-2-l2a"])
    >>> rgb.dims, rgb.band.values.tolist(), rgb.attrs["items"]
    (('band', 'y', 'x'), ['red', 'green', 'blue'], 5)
    """

    name: ClassVar[str] = "composite"
    library_name: ClassVar[str] = "composite"
    positional: ClassVar[tuple[str, ...]] = ("aoi", "bands")
    tool: ClassVar[Tool] = Tool(quicklook=True)
    description: ClassVar[str] = """A cloud-free picture of the AOI: per pixel, the `method` over
    time of each band's cloud-masked reflectances, as a float32 COG (NaN where never clear).

    Example: composite(aoi=[13.6, 45.92, 13.62, 45.935], bands=["red", "green", "blue"],
    search={"catalog": "sample", "collections": ["sentinel-2-l2a"], "datetime": "2024-06"})."""
    answer_model: ClassVar[type] = CompositeResult

    bands: json_text(list[str], 'band names or asset keys: ["red", "green", "blue"]')
    method: Annotated[
        Literal["median", "mean", "min", "max"], Field(description="per-pixel statistic over time")
    ] = "median"

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The band names (checked)."""
        return tuple(band_names(self.bands))

    def plan(self, core) -> Composite:
        """The band names checked before anything is read."""
        self.names  # noqa: B018
        return self

    def estimate(self, core):
        """What computing and saving the composite would read and write (headers only)."""
        from ..processing.estimate.loads import estimate_load

        names = list(self.plan(core).names)
        return estimate_load(core, self.load, names, operation="composite", chunk=TILE)

    def run(self, core, job: Job | None = None) -> Raster:
        """The lazy composite (`reduce_over_time`)."""
        return reduce_over_time(core, self.plan(core), job)
