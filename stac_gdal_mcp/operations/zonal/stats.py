"""zonal_stats as an operation: `ZonalStats`, its parameters declared once; its plan is the
`ZonalRequest` the zonal package measures (`request`: zones read, expression parsed, statistics
named), or at region scale (a zones file of more than limits.zonal_region_zones features) the
`region.RegionRequest` that measures it group by group.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr
from pydantic.json_schema import SkipJsonSchema

from ..base import LIBRARY_ONLY, Operation
from ..params import MaskCloudsArg, MinValidArg, ResolutionArg, SearchOrItemsArg, json_text
from . import DEFAULT_MIN_VALID_FRACTION, ZonalRequest, Zones, estimate, parse_stats, region, run
from .result import ZonalResult

if TYPE_CHECKING:
    from ...processing.jobs import Job
    from .result import ZonalTable


class ZonalStats(Operation):
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
    statistic but count, and a note. A `ZonalTable`: it reads as its GeoDataFrame in long form
    (zone_id, datetime, collection_id, item_ids, a column per statistic, valid_fraction,
    cloud_fraction, note, error, the zone's geometry; `frame`), with its `request` and
    `provenance`; `save` writes it (GeoParquet, or format="csv").
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

    name: ClassVar[str] = "zonal_stats"
    library_name: ClassVar[str] = "zonal_stats"
    positional: ClassVar[tuple[str, ...]] = ("geometries",)
    description: ClassVar[str] = """Exact statistics per zone (coverage-weighted, native grid) per
    scene or day; saves a GeoParquet. Class fractions: stats=["frac"], mask_clouds=false."""
    answer_model: ClassVar[type] = ZonalResult

    geometries: json_text(
        dict[str, Any] | list[dict[str, Any]] | str | SkipJsonSchema[Path],
        "GeoJSON (any type), workspace file or output URI",
    )
    search: SearchOrItemsArg = None
    id_property: Annotated[str | None, Field(description="property naming each zone")] = None
    expression: Annotated[str, Field(description="ndvi, ndwi, a band, an asset (scl) or a formula")] = "ndvi"
    stats: json_text(list[str], "mean, median, min, max, count, majority, frac, quantile(q=0.9)...") = (
        "mean",
        "count",
    )
    per: Annotated[Literal["item", "day"], Field(description="a row per zone and item, or solar day")] = (
        "item"
    )
    mask_clouds: MaskCloudsArg = True
    resolution: ResolutionArg = None
    min_valid_fraction: MinValidArg = DEFAULT_MIN_VALID_FRACTION
    max_items: Annotated[int | None, LIBRARY_ONLY, Field(ge=1, description="items at most")] = None
    _plan: Any = PrivateAttr(None)

    def request(self, core, zones: Zones | None = None) -> ZonalRequest:
        """The call checked into the request the zonal package measures: statistics named,
        expression parsed, then the zones read (`zones`: given, e.g. a region's group)."""
        from ...processing.access import local_roots
        from ...processing.expressions import parse_expression
        from .zones import read_zones

        stats = parse_stats(self.stats)
        text, tree, names = parse_expression(self.expression)
        if zones is None:
            roots, limits = local_roots(core), core.settings.limits
            zones = read_zones(self.geometries, id_property=self.id_property, roots=roots, limits=limits)
        # (the zones are the geometries read: a cluster is sent them once, as `zones`)
        call = self.model_copy(update={"geometries": None})
        return ZonalRequest(call, zones, text, tree, tuple(names), stats)

    def plan(self, core) -> ZonalRequest | region.RegionRequest:
        """The request, or at region scale the file's (only its metadata read here)."""
        if self._plan is None:
            if region.applies(core, self.geometries):
                template = self.request(core, Zones((), ()))
                self._plan = region.check(core, self, template)
            else:
                self._plan = self.request(core)
        return self._plan

    def estimate(self, core):
        """What `run` would read (headers only)."""
        plan = self.plan(core)
        return (region.estimate if isinstance(plan, region.RegionRequest) else estimate)(core, plan)

    def run(self, core, job: Job | None = None) -> ZonalTable:
        """The table, long form (a region's: its first rows, the rest saved)."""
        plan = self.plan(core)
        return (region.run if isinstance(plan, region.RegionRequest) else run)(core, plan, job)


def check(core, *args, **arguments) -> ZonalRequest:
    """The ordinary request of a call (all zones at once, whatever their number): `args` and
    `arguments` as `session.zonal_stats` takes them."""
    return ZonalStats.of(*args, **arguments).request(core)
