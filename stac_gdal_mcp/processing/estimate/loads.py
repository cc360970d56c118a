"""The estimate of odc-stac loads, for time_series and composite (`estimate_load`, `load_reads`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ...errors import LimitExceeded
from ...words import counted
from .reads import FilePlan, Planner
from .result import MAX_FILES_LISTED, Estimate, OutputSize, _output, output_checks

if TYPE_CHECKING:
    from ...core import Core
    from ..requests import Load


# --- time_series and composite (odc-stac loads) ----------------------------------------------------


def estimate_load(
    core: Core, load: Load, names: list[str], *, operation: str, chunk: int | None = None
) -> Estimate:
    """What an odc-stac load of `names` (time_series, composite) would read: for every item and
    asset, the source window of each dask chunk of the output grid (odc-stac reads a pasted
    window when the grids line up, else the chunk's footprint through GDAL's warper), at the
    overview odc-stac picks for a coarser grid. The output grid and its limits are the load's
    own (`load.prepare`, which reads no pixel)."""
    from .. import load as loads

    estimate = Estimate(operation=operation)
    try:
        prep = loads.prepare(core, load, names)
    except LimitExceeded as exc:
        estimate.would_refuse, estimate.refusal = True, str(exc)
        return estimate
    gbox = prep.gbox
    height, width = gbox.shape
    estimate.notes = list(prep.notes)
    estimate.item_ids = [i["id"] for stack in prep.stacks for i in stack.items]
    days = sum(len(loaded.days) for loaded in prep.loaded)
    grid_crs, grid_res = str(gbox.crs), [abs(gbox.resolution.x), abs(gbox.resolution.y)]
    if operation == "composite":
        estimate.output = _output(
            width, height, len(names), "float32", format="COG", crs=grid_crs, resolution=grid_res
        )
    else:
        estimate.output = OutputSize(
            width=width, height=height, crs=grid_crs, resolution=grid_res, rows=days, format="CSV + PNG chart"
        )
    estimate.limits = output_checks(width, height, len(names), "float32", core.settings.limits)
    chunk = chunk or loads.CHUNK  # the load's dask chunks (a composite's: its output tiles)
    estimate.notes.append(
        f"{counted(days, 'solar day')} from {counted(len(estimate.item_ids), 'item')}; the load holds "
        f"{width} x {height} px x {len(names)} band(s) x {counted(days, 'day')} of float32 "
        f"({width * height * len(names) * days * 4:,} bytes) in dask chunks of at most {chunk} px"
    )
    chunks = _chunks(height, width, chunk)
    planner = Planner(core)
    jobs = []
    for stack in prep.stacks:
        keys = list(dict.fromkeys([*stack.assets.values(), *([stack.mask.asset] if stack.mask else [])]))
        for item in stack.items:
            for key in keys:
                jobs.append((item, key))
    from ..access import asset_source

    def one(item, key) -> int:
        source = asset_source(core, item, key, catalog=load.catalog)
        with planner.open(source) as (plan, src, open_level):
            return load_reads(plan, src, open_level, gbox, chunks)

    workers = max(1, min(core.settings.limits.max_concurrency, len(jobs) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="estimate") as pool:
        pixels = sum(pool.map(lambda job: one(*job), jobs))
    estimate.read_pixels = int(pixels)
    estimate.inputs = list(dict.fromkeys(f"{item['id']}/{key}" for item, key in jobs))[:MAX_FILES_LISTED]
    return planner.fill(estimate)


def _chunks(height: int, width: int, size: int) -> list[tuple[int, int, int, int]]:
    """(row0, row1, col0, col1) of each dask chunk of the output grid."""
    return [
        (r, min(r + size, height), c, min(c + size, width))
        for r in range(0, height, size)
        for c in range(0, width, size)
    ]


def load_reads(plan: FilePlan, src, open_level, gbox, chunks) -> int:
    """Count what odc-stac reads of one asset for every chunk; return the source pixels read."""
    from odc.geo.geobox import GeoBox
    from odc.geo.overlap import compute_reproject_roi
    from odc.loader._reader import pick_overview

    src_box = GeoBox((src.height, src.width), src.transform, src.crs.to_wkt())
    pixels = 0
    for r0, r1, c0, c1 in chunks:
        part = gbox[r0:r1, c0:c1]
        rr = compute_reproject_roi(src_box, part, ttol=0.9)
        ys, xs = rr.roi_src
        if ys.stop <= ys.start or xs.stop <= xs.start:
            continue
        index = pick_overview(rr.read_shrink, src.overviews(1)) if rr.read_shrink > 1 else None
        if index is not None:  # odc-stac recomputes the window on the overview's own grid
            with open_level(index) as ovr:
                ovr_box = GeoBox((ovr.height, ovr.width), ovr.transform, src.crs.to_wkt())
            rr = compute_reproject_roi(ovr_box, part, ttol=0.9)
            ys, xs = rr.roi_src
            if ys.stop <= ys.start or xs.stop <= xs.start:
                continue
        pixels += (ys.stop - ys.start) * (xs.stop - xs.start)
        if plan.indexed:
            level = plan.level(index, open_level)
            tiles = level.tiles(xs.start, ys.start, xs.stop - xs.start, ys.stop - ys.start)
            plan.read(level, tiles, [1], fresh=True)  # odc-stac opens the file for each chunk
    return pixels
