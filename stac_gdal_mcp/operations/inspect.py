"""inspect: a raster asset's header - driver, size, bands, nodata, CRS, blocks, overviews, COG
validity - with no pixel read (`processing.inspect.inspect_asset`), as an operation: its
`estimate` (the header's bytes and requests), `run` (bounded in time, cancellable between its
reads), and its `AssetInfo` a result (`Asset`) answered as itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..processing.inspect import AssetInfo
from ..processing.jobs import Job, timed
from .base import Tool
from .params import OnAsset
from .result import Answer, Result

if TYPE_CHECKING:
    from ..core import Core
    from ..processing.estimate import Estimate


class InspectAsset(OnAsset):
    """A raster asset's header (no pixel is read): driver, size, bands, dtypes, nodata,
    scale/offset, CRS, transform, bounds, blocks, overviews, compression, COG validity.
    Inputs as for `asset`; `dry_run=True`: an `Estimate` of the header's bytes and requests.

    >>> info = session.inspect(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "red")
    >>> info.crs, info.dtypes, info.is_cog
    ('EPSG:32633', ['uint16'], True)
    """

    name: ClassVar[str] = "inspect_asset"
    library_name: ClassVar[str] = "inspect"
    tool: ClassVar[Tool] = Tool(read_only=True, map=False, task=False, dry_run=False, confirm=False)
    description: ClassVar[str] = """A raster's header: size, bands, dtypes, nodata, scale/offset, CRS,
    transform, bounds, blocks, overviews, compression, COG validity.

    Example: inspect_asset(catalog="sample", collection_id="sentinel-2-l2a",
    item_id="S2A_33TUL_20240808_0_L2A", asset="red")."""
    answer_model: ClassVar[type] = AssetInfo

    def estimate(self, core: Core) -> Estimate:
        """What inspecting would read: the header (opened once, as `run` opens it)."""
        from ..processing.estimate import Estimate
        from ..processing.estimate.reads import Planner

        source = self.plan(core).input
        planner = Planner(core)
        with planner.open(source):
            pass
        found = Estimate(operation="inspect_asset", item_ids=[source.item_id] if source.item_id else [])
        return planner.fill(found)

    def run(self, core: Core, job: Job | None = None) -> AssetInfo:
        from ..processing.inspect import inspect_asset

        job = timed(job, core)
        job.check()
        info = inspect_asset(core, self.plan(core).input)
        job.check()
        return info


class Asset(Result):
    """An asset's header (`info`, the `AssetInfo` inspect_asset gives) as a result: answered as
    itself; it is neither saved nor drawn."""

    result_kind = "inspect_asset"

    def __init__(self, info: AssetInfo, core: Core | None = None):
        self.info, self._core = info, core

    @classmethod
    def of(cls, obj, core=None) -> Asset:
        return cls(obj, core)

    def _answer(self, core, records, limits, quicklook: bool) -> Answer:
        return Answer(self.info)
