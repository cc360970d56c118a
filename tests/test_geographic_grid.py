"""Loads on a geographic grid (crs="EPSG:4326"): odc-stac names its dimensions latitude and
longitude there; time_series and composite work on it as on a projected grid."""

from __future__ import annotations

import math

import rasterio

import stac_gdal_mcp

AOI = [13.595, 45.915, 13.63, 45.94]


def test_time_series_and_composite_on_a_geographic_grid(tmp_path):
    with stac_gdal_mcp.Session(workspace=tmp_path, default_catalog="sample") as session:
        args = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-07-31"}
        utm = session.time_series(AOI, **args)
        geo = session.time_series(AOI, crs="EPSG:4326", resolution=0.0001, **args)
        assert list(utm["date"]) == list(geo["date"])
        for a, b in zip(utm["value"], geo["value"]):
            # the same scenes resampled to another grid: close, not equal
            assert (a is None or math.isnan(a)) == (b is None or math.isnan(b))
            if a is not None and not math.isnan(a):
                assert abs(a - b) < 0.05
        composite = session.composite(AOI, bands=["nir"], crs="EPSG:4326", resolution=0.0001, **args)
        assert composite.dims == ("band", "y", "x")
        record = session.save(composite)
        with rasterio.open(session.outputs.path(record.id)) as out:
            assert out.crs.to_epsg() == 4326
            west, south, east, north = out.bounds
            assert west <= AOI[0] + 0.0001 and east >= AOI[2] - 0.0001
            assert south <= AOI[1] + 0.0001 and north >= AOI[3] - 0.0001
