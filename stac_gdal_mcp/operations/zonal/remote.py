"""Zonal statistics on the dask.distributed cluster at `settings.dask_scheduler`: each item's
pixel work on a worker (`on_cluster`, `measure_on_worker`), and the zones' coverage on each grid
built once for the whole cluster rather than once per worker.

Every item of one grid (a season of Sentinel-2 over one MGRS tile) covers the same windows of
the same zones, so their coverage matrices are the same. The first item of a grid (told from its
STAC metadata: the CRS, transform and shape of the assets it reads, `grid_signature`) starts one
task per worker (`coverage_on_worker`), each building its share of the windows (the windows split
by their zone counts); every item task of that grid is given all the shares (dask moves a share
to the worker that lacks it) and keeps them in its call's `Coverages`. A window no share holds
(an item whose metadata misled) is built by the item's worker as before: the shares are an
optimisation, never a different answer.
"""

from __future__ import annotations

import logging
import threading

from ...processing.jobs import Job
from . import coverage
from .pixels import WINDOW_PIXELS, Call, ItemInputs, layout, measure_assets

log = logging.getLogger(__name__)


def on_cluster(cluster, worker=None):
    """`measure_assets` (or `worker`, of the same arguments) on a worker of `cluster`
    (`processing.items.Cluster`, sharing the call's request): the client resolves the item, a
    worker reads and measures it; with the statistics' own worker, each grid's coverage built
    once over the workers (the module docstring)."""
    own = worker is None
    worker = worker or measure_on_worker
    shares: dict = {}
    placed: dict = {}
    lock = threading.Lock()

    def measure(settings, call: Call, inputs: list[ItemInputs], indexes: list[int], job: Job):
        with lock:
            if not placed:
                placed.update(placement(call.items, len(cluster.names)) or {None: None})
        first = inputs[0].sources[0].item_id
        place = placed.get(first, first)
        if not own:
            return cluster.run(job, worker, settings, inputs, indexes, place=place)
        import numpy as np

        indexes = np.asarray(indexes, dtype="int64")  # (one argument for dask, not one per zone)
        found = _shares(cluster, shares, lock, call, settings, inputs, indexes)
        return cluster.run(job, worker, settings, inputs, indexes, found, place=place)

    return measure


def _shares(cluster, shares: dict, lock, call: Call, settings, inputs, indexes) -> list | None:
    """The futures of the coverage shares of this item's grid and zones (started by its grid's
    first item); None when the grid is not told by the metadata, there is one worker, or the
    statistics are not computed from coverage."""
    if len(cluster.names) < 2 or not coverage.cacheable(call.request):
        return None
    key = grid_signature(call.request, inputs, indexes)
    if key is None:
        return None
    with lock:
        found = shares.get(key)
        if found is None:
            n = len(cluster.names)
            found = shares[key] = [
                cluster.submit(coverage_on_worker, settings, inputs, indexes, (k, n), worker=k)
                for k in range(n)
            ]
    return found


def placement(items: list, workers: int) -> dict:
    """{item id: worker index}: the items of each grid (told by `item_grid`) dealt to the workers
    in turn, in the call's order, the count carried from one grid to the next, so every worker
    measures as many items of each grid as the others (the same for every group of zones of a
    region: the same items). Placed by a hash of their ids, two workers measured 14 and 22 of
    36 items (CPU 146.5 / 220.6 s at a million fields)."""
    grids: dict = {}
    for item in items:
        if isinstance(item, dict) and item.get("id") is not None:
            grids.setdefault(item_grid(item), []).append(item["id"])
    ids = [i for same in grids.values() for i in same]
    return {i: k % max(1, workers) for k, i in enumerate(ids)}


def item_grid(item: dict) -> tuple:
    """What tells an item's grids from its STAC metadata: the CRS, transform and shape of each
    asset (the asset's, else the item's); items of one MGRS tile or path/row share it."""
    shared = item.get("properties") or {}
    return tuple((key, *_proj(asset, shared)) for key, asset in sorted((item.get("assets") or {}).items()))


def _proj(asset: dict, shared: dict) -> tuple:
    """(CRS, transform, shape) of an asset from its projection metadata (the asset's, else its
    item's properties); None for each one missing."""
    found = []
    for names in (("proj:code", "proj:epsg"), ("proj:transform",), ("proj:shape",)):
        value = next((m[n] for m in (asset, shared) for n in names if m.get(n) is not None), None)
        found.append(tuple(value) if isinstance(value, list) else value)
    return tuple(found)


def grid_signature(request, inputs: list[ItemInputs], indexes) -> tuple | None:
    """What fixes an item's (or day's) grid windows, from the STAC metadata of the assets it
    reads (proj:code or proj:epsg, proj:transform, proj:shape: the asset's, else the item's), the
    resolution asked and the zones it covers; None when any is missing."""
    parts = []
    for one in inputs:
        bands = [*one.bands.values(), *([one.mask_band] if one.mask_band is not None else [])]
        for band in bands:
            item = band.source.item or {}
            asset = (item.get("assets") or {}).get(band.source.asset_key) or {}
            found = _proj(asset, item.get("properties") or {})
            if None in found:
                return None
            parts.append(found)
    return (request.call.resolution, tuple(parts), len(indexes), hash(indexes.tobytes()))


def coverage_on_worker(request, key: str, settings, inputs: list[ItemInputs], indexes, part: tuple[int, int]):
    """Share `part` = (k, of n) of the coverage matrices of one item's grid windows: {window
    key: matrix}, kept by this worker's call too; {} when the item cannot be opened (its own task
    then reads it and says why)."""
    from ...processing.items import kept

    call = kept(key, lambda: Call(request, None, [], [], None, settings.limits))

    def build(call, inputs, readers, zones, job):
        grid, projected, found, _ = layout(call, inputs, readers, zones)
        out = {}
        for window in _share([w for w in found if w.pixels <= WINDOW_PIXELS], *part):
            window_key = coverage.window_key(grid, window)
            out[window_key] = call.coverages.get(
                window_key, lambda w=window: coverage.cells(grid, w, [projected[i] for i in w.zones])
            )
        return out

    try:
        return measure_assets(settings, call, inputs, [int(i) for i in indexes], Job(), then=build)
    except Exception as exc:
        log.debug("coverage of an item's grid not built on this worker: %s", exc)
        return {}


def _share(windows: list, k: int, n: int) -> list:
    """The windows of share k of n: the largest first, each to the share of the fewest zones."""
    loads, mine = [0] * n, []
    for window in sorted(windows, key=lambda w: -len(w.zones)):
        least = loads.index(min(loads))
        loads[least] += len(window.zones)
        if least == k:
            mine.append(window)
    return mine


def measure_on_worker(request, key: str, settings, inputs: list[ItemInputs], indexes, shares=None):
    """The rows of one item on a dask worker; a worker keeps one call's zone projections and
    coverage (`shares`: the coverage of the item's grid built over the workers)."""
    from ...processing.items import kept

    call = kept(key, lambda: Call(request, None, [], [], None, settings.limits))
    for share in shares or ():
        call.coverages.seed(share)
    return measure_assets(settings, call, inputs, [int(i) for i in indexes], Job())
