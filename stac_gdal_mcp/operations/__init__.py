"""The operations: what a user asks the library to do with assets and stacks of items.

One module per operation - `inspect` (an asset's header), `warp` (reproject_asset), `convert`
(convert and subset), `preview`, `cloud` (cloud cover inside an area, per item), `series` (time
series), `composite` and the `zonal` folder (exact zonal statistics, up to a region's zones file)
- each one class, an `Operation` (`base.py`: its fields are its parameters; `estimate`, `run`)
whose results know themselves (`result.Result`: `save`, `answer`, `map_layer`; an output
record's in `saved.py`). `OPERATIONS` (the tools and
the Session's methods are made from it) and `RESULTS` (each kind of result, its class) are the
registries, below. `params` holds the field types and the parameter groups; `inputs` resolves
an input as a notebook names it; `tables` writes the time series tables.

What they stand on (raster I/O, item selection, masks, expressions, estimates, jobs) is in
`processing/`, one layer below: nothing there imports an operation.
"""

from . import change, cloud, composite, convert, inspect, preview, saved, series, threshold, warp
from .base import Operation
from .result import Result
from .zonal import stats as zonal_stats
from .zonal.result import ZonalTable

#: Every operation, by its name (the tool's): what the server makes its tools of and the Session
#: its methods of.
OPERATIONS: dict[str, type[Operation]] = {
    "inspect_asset": inspect.InspectAsset,
    "reproject_asset": warp.ReprojectAsset,
    "convert_asset": convert.ConvertAsset,
    "preview": preview.PreviewImage,
    "cloud_cover_stats": cloud.CloudCoverStats,
    "time_series": series.TimeSeries,
    "composite": composite.Composite,
    "zonal_stats": zonal_stats.ZonalStats,
    "compare_periods": change.ComparePeriods,
    "threshold_area": threshold.ThresholdArea,
}

#: Every kind of result (`registry.kind_of`) -> its class: a typed result (`result.Result`) that
#: saves, answers and draws itself, and wraps a bare object of its kind (an output record, an
#: asset's header). A kind of a layer above (a search page) is a `Result` of its own.
RESULTS: dict[str, type[Result]] = {
    "inspect_asset": inspect.Asset,
    "preview": preview.Preview,
    "cloud_cover_stats": cloud.CloudCover,
    "composite": composite.Raster,
    "compare_periods": change.Change,
    "time_series": series.SeriesTable,
    "zonal_stats": ZonalTable,
    "threshold_area": threshold.ThresholdTable,
    "output": saved.Output,
}
