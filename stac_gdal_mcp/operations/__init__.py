"""The operations: what a user asks the library to do with assets and stacks of items.

One module per operation - `warp` (reproject_asset), `convert` (convert and subset), `preview`,
`cloud` (cloud cover inside an area, per item), `series` (time series), `composite` and the
`zonal` folder (exact zonal statistics, up to a region's zones file) - each with `check`,
`estimate` and `run`; `tables` writes the time series and cloud cover tables.

What they stand on (raster I/O, item selection, masks, expressions, estimates, jobs) is in
`processing/`, one layer below: nothing there imports an operation.
"""
