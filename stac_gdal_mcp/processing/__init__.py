"""Processing of STAC assets with GDAL through rasterio (and odc-stac for stacks of items).

- `access`: naming an input (href or collection/item/asset), href policy, signing, GDAL
  environment for cloud reads, opening with errors translated.
- `jobs`: progress reporting and cancellation for long operations.
- `grids`: pure geometry: bbox -> window, output grids, overview choice, size limits.
- `inspect`: a COG's header; `formats`: writing each output format.
- `records`: the raster part of an output record, read back from the written file.
- `masks`: cloud-mask schemes.
- `items`: the item pipeline of the operations over many items (cloud cover, zonal statistics):
  references parsed once, a fan-out per item with progress, cancel and each item's failure in
  its row, on threads or a dask cluster; dry runs planned per item. `bands`: the band-window
  reader (scale/offset, nodata, which stored values are data, the window of an area on a grid).
- `load`: stacks of many items through odc-stac, with `aoi` (the area of interest), `selection`
  (which items, their masks), `expressions` (band math) and `dask_runtime` (where the dask
  graphs run).

This is what the operations (`stac_gdal_mcp.operations`, one layer up) stand on.

Heavy imports (rasterio, numpy) happen inside functions so that importing this package is cheap.
"""
