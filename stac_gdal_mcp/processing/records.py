"""The raster part of an output record (`RasterFacts`), read from the file that was written or
from the grid of an output whose format keeps no georeferencing (PNG, JPEG); and the
`Provenance` a computed result carries until it is saved as an output."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..models import Model
from ..outputs import RasterBand, RasterFacts, SourceRef
from ..stac import footprint


def _number(value: float | None) -> float | str | None:
    if value is None:
        return None
    if value != value:  # NaN: JSON has no NaN, the raster extension spells it "nan"
        return "nan"
    return int(value) if float(value).is_integer() else float(value)


def raster_bands(
    dtypes: Sequence[str], nodata: float | None, scales=None, offsets=None, units=None
) -> list[RasterBand]:
    """`raster:bands` entries; scale/offset only where they are not the identity."""
    count = len(dtypes)
    scales = scales or [1.0] * count
    offsets = offsets or [0.0] * count
    units = units or [None] * count
    return [
        RasterBand(
            data_type=dtypes[i],
            nodata=_number(nodata),
            scale=None if scales[i] in (None, 1.0) else float(scales[i]),
            offset=None if offsets[i] in (None, 0.0) else float(offsets[i]),
            unit=units[i] or None,
        )
        for i in range(count)
    ]


def _array_bounds(height: int, width: int, transform) -> tuple[float, float, float, float]:
    """(north, west, south, east) of a grid (north-up or not)."""
    xs = [
        transform.c,
        transform.c + transform.a * width + transform.b * height,
        transform.c + transform.a * width,
        transform.c + transform.b * height,
    ]
    ys = [
        transform.f,
        transform.f + transform.d * width + transform.e * height,
        transform.f + transform.d * width,
        transform.f + transform.e * height,
    ]
    return max(ys), min(xs), min(ys), max(xs)


def raster_facts(crs, transform, width: int, height: int, bands: list[RasterBand]) -> RasterFacts:
    """Facts for a grid: CRS (EPSG code, else WKT2), shape, transform, bounds, WGS84 footprint
    (no footprint when `crs` is None: a picture without georeferencing)."""
    north, west, south, east = _array_bounds(height, width, transform)
    epsg = crs.to_epsg() if crs else None
    geometry, bbox = footprint(crs, (west, south, east, north)) if crs else (None, None)
    return RasterFacts(
        proj_code=f"EPSG:{epsg}" if epsg else None,
        proj_wkt2=None if epsg or not crs else crs.to_wkt(),
        proj_shape=[height, width],
        proj_transform=[float(v) for v in list(transform)[:6]],
        proj_bbox=[float(west), float(south), float(east), float(north)],
        bbox=bbox,
        geometry=geometry,
        bands=bands,
    )


def describe_raster(path: str | Path) -> RasterFacts:
    """Facts read back from a written raster file (GeoTIFF/COG/netCDF)."""
    import rasterio

    with rasterio.Env(GDAL_PAM_ENABLED="NO"), rasterio.open(path) as src:
        bands = raster_bands(
            list(src.dtypes), src.nodata, list(src.scales), list(src.offsets), list(src.units)
        )
        return raster_facts(src.crs, src.transform, src.width, src.height, bands)


class Provenance(Model):
    """How a computed result (a table, a composite array) was made, carried with it until it is
    saved - a table's `provenance`; in `attrs` where pandas or xarray must keep it (a time series'
    DataFrame, a composite's DataArray) -: what its output record will say (operation,
    parameters, sources, title, lineage, software, extra properties) and the result's own facts
    (grid, item count, notes, ...)."""

    kind: str  # the result's kind: the name of the operation that made it ("time_series", ...)
    operation: str
    parameters: dict[str, Any] = {}
    sources: list[SourceRef] = []
    title: str
    lineage: str
    software: dict[str, str] = {}
    properties: dict[str, Any] = {}
    facts: dict[str, Any] = {}

    def to_attrs(self, *, as_text: bool = False) -> dict[str, Any]:
        """`{ATTR: ...}` for a pandas (a dict) or xarray (JSON text, netCDF-safe) `attrs`."""
        return {PROVENANCE_ATTR: self.model_dump_json() if as_text else self.model_dump(mode="json")}

    @classmethod
    def of(cls, obj) -> Provenance | None:
        """The provenance kept in `obj.attrs` (a DataFrame, Dataset or DataArray), if any."""
        value = (getattr(obj, "attrs", None) or {}).get(PROVENANCE_ATTR)
        if value is None:
            return None
        return cls.model_validate_json(value) if isinstance(value, str) else cls.model_validate(value)

    @classmethod
    def required(cls, obj, kind: str, what: str) -> Provenance:
        """The provenance of `obj`, which the operation `kind` must have made (a `what` table);
        else one line saying so."""
        from ..errors import InvalidArgument

        provenance = cls.of(obj)
        if provenance is None or provenance.kind != kind:
            raise InvalidArgument(f"not a {what} table (made by {kind}); nothing says where it came from")
        return provenance


PROVENANCE_ATTR = "stac_gdal_mcp"
