"""The operations: what a user asks the library to do with assets and stacks of items.

One module per operation - `inspect` (an asset's header), `warp` (reproject_asset), `convert`
(convert and subset), `preview`, `cloud` (cloud cover inside an area, per item), `series` (time
series), `composite` and the `zonal` folder (exact zonal statistics, up to a region's zones file)
- each an `Operation` (`registry.py`: `check`, `estimate`, `run`) whose results know what
happens to them (`save`, `outputs`, `answer`, `map_call`, found by their kind in `registry.py`;
output records and search pages in `saved.py`). `inputs` resolves an input as a notebook names
it; `tables` writes the time series and cloud cover tables.

What they stand on (raster I/O, item selection, masks, expressions, estimates, jobs) is in
`processing/`, one layer below: nothing there imports an operation.
"""
