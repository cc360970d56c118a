"""inspect: a raster asset's header - driver, size, bands, nodata, CRS, blocks, overviews, COG
validity - with no pixel read (`processing.inspect.inspect_asset`), as an operation: `check`,
`estimate` (the header's bytes and requests), `run` (bounded in time, cancellable between its
reads), and its `AssetInfo` answered as itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..processing.access import AssetSource
from ..processing.jobs import Job, timed
from .registry import Answer

if TYPE_CHECKING:
    from ..core import Core
    from ..processing.estimate import Estimate
    from ..processing.inspect import AssetInfo

RESULT_KINDS = ("AssetInfo",)  # the class of its result (registry.kind_of)


@dataclass(frozen=True)
class InspectRequest:
    source: AssetSource


def check(source: AssetSource) -> InspectRequest:
    return InspectRequest(source)


def estimate(core: Core, request: InspectRequest) -> Estimate:
    """What inspecting would read: the header (opened once, as `run` opens it)."""
    from ..processing.estimate import Estimate
    from ..processing.estimate.reads import Planner

    source = request.source
    planner = Planner(core)
    with planner.open(source):
        pass
    found = Estimate(operation="inspect_asset", item_ids=[source.item_id] if source.item_id else [])
    return planner.fill(found)


def run(core: Core, request: InspectRequest, job: Job | None = None) -> AssetInfo:
    from ..processing.inspect import inspect_asset

    job = timed(job, core)
    job.check()
    info = inspect_asset(core, request.source)
    job.check()
    return info


def answer(core: Core, info: AssetInfo, records, limits, **options) -> Answer:
    """The inspect_asset tool's answer: the header facts."""
    return Answer(info)
