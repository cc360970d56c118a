"""Estimates before work (dry runs): what an operation would read and write, from headers only.

Each `estimate_*` function plans its operation exactly as the operation does (the same output
grid, overview level, windows, strips and limits) and then, instead of reading pixels, looks up
the byte ranges of the tiles those reads touch in each GeoTIFF's own tile index. Nothing but
headers is read. How tile ranges become HTTP requests follows GDAL 3.10's `/vsicurl/` (see
`reads` and docs/processing.md, "Dry runs"). Limits are checked with the very functions the
operation calls, so a dry run refuses what the operation would refuse, with the same words (how
to shrink the request).

Modules:

- `result`: the answer (`Estimate`, `OutputSize`, `FileRead`, `LimitCheck`) and the limit
  checks (`output_checks`, `read_check`, `refusals`);
- `reads`: the read model of one file (its tile index, `FilePlan`, the requests of a read,
  `decimated_read` at the overview GDAL picks) and the `Planner` of an operation's files;
- `assets`: `estimate_convert`, `estimate_reproject` (with GDAL's warper's chunks and source
  windows) and `estimate_preview`;
- `cloud_cover`: `estimate_cloud_cover` (`cloud_window`);
- `loads`: the odc-stac loads of time_series and composite, `estimate_load` (`load_reads`).

Each operation module's `estimate(core, request)` calls its function here with its request.

Importing this package imports no numpy, rasterio or odc: they are imported where they are used.
"""

from .assets import estimate_convert, estimate_preview, estimate_reproject
from .cloud_cover import estimate_cloud_cover
from .loads import estimate_load
from .result import Estimate

__all__ = [
    "Estimate",
    "estimate_cloud_cover",
    "estimate_convert",
    "estimate_load",
    "estimate_preview",
    "estimate_reproject",
]
