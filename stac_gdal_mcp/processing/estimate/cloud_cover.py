"""The estimate of cloud_cover_stats: per item, the AOI's window of its cloud mask."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .reads import Planner, decimated_read
from .result import Estimate, LimitCheck, OutputSize

if TYPE_CHECKING:
    from ...core import Core


# --- cloud_cover_stats -----------------------------------------------------------------------------


def estimate_cloud_cover(core: Core, request) -> Estimate:
    """What `cloud.run` of `request` (a `cloud.CloudCoverStats`) would read: per item, the AOI's
    window of its mask (at the overview GDAL picks for `resolution`). Items whose mask cannot be
    found are noted."""
    from ..access import asset_source
    from ..items import fetch, plan_each
    from ..jobs import timed
    from ..masks import check_mask_format
    from ..selection import item_mask

    cat, selected, notes, collections = request.select(core)
    aoi_geom, resolution, asset, resampling = (
        request.geometry,
        request.resolution,
        request.asset,
        request.resampling,
    )
    planner = Planner(core)
    estimate = Estimate(operation="cloud_cover_stats", notes=list(notes))

    def one(ref_or_item) -> tuple[str, int]:
        item = fetch(cat, ref_or_item)
        mask = item_mask(item, collections, asset)
        source = asset_source(core, item, mask.asset, catalog=cat.id)
        check_mask_format(source)
        with planner.open(source) as (plan, src, open_level):
            spec, out_shape = cloud_window(src, aoi_geom, resolution)
            if spec is None:
                return item["id"], 0
            decimated_read(
                plan, src, open_level, spec, out_shape[1], out_shape[0], [1], nearest=resampling != "mode"
            )
            return item["id"], out_shape[0] * out_shape[1]

    workers = min(core.settings.limits.max_concurrency, len(selected) or 1)
    planned = plan_each(timed(None, core), selected, one, estimate.notes, workers)
    ids = [item_id for item_id, _ in planned]
    largest = max((pixels for _, pixels in planned), default=0)
    estimate.item_ids = ids
    limit = core.settings.limits.max_output_pixels
    estimate.limits = [
        LimitCheck(
            limit="limits.max_output_pixels (AOI pixels per mask)",
            needed=largest,
            allowed=limit,
            ok=largest <= limit,
        )
    ]
    if largest > limit:
        estimate.notes.append(
            "the AOI covers more mask pixels than limits.max_output_pixels: those items would get an "
            "error in their row; pass a coarser resolution"
        )
    estimate.output = OutputSize(rows=len(ids))
    return planner.fill(estimate)


def cloud_window(src, aoi_geom, resolution):
    """The native window `aoi_window_counts` reads and its decimated shape (rows, cols);
    (None, ...) when the AOI misses the mask."""
    from ..aoi import coordinates, decimation, project_aoi
    from ..bands import window_of

    k = decimation(abs(src.transform.a), resolution)
    xs, ys = coordinates(project_aoi(aoi_geom, src.crs))
    window = window_of(xs, ys, src.transform, src.width, src.height, k)
    return window.native, window.inside_shape
