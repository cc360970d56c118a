"""inspect_asset: what a raster asset is, from its header only (no pixel is read)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from ..models import Model
from .access import (
    AssetSource,
    capture_gdal_messages,
    diagnose,
    gdal_errors,
    is_transfer_failure,
    open_raster,
    read_failed,
)

if TYPE_CHECKING:
    from ..core import Core


class AssetInfo(Model):
    result_kind: ClassVar[str] = "inspect_asset"  # the operation that answers it

    href: str = Field(description="the asset href, without any signature")
    asset: str | None = None
    item_id: str | None = None
    driver: str
    width: int
    height: int
    count: int = Field(description="number of bands")
    dtypes: list[str]
    nodata: float | None = None
    scales: list[float]
    offsets: list[float]
    band_descriptions: list[str | None]
    crs: str | None = Field(description="EPSG code like 'EPSG:32633', or null")
    crs_name: str | None = Field(description="the CRS name from its WKT")
    transform: list[float] = Field(description="affine [a, b, c, d, e, f]")
    resolution: list[float]
    bounds: list[float] = Field(description="[left, bottom, right, top] in the asset's CRS")
    bounds_wgs84: list[float] | None = Field(description="[west, south, east, north]")
    block_size: list[list[int]] = Field(description="[rows, cols] of the internal blocks, per band")
    overviews: list[int] = Field(description="decimation factors of the internal overviews (band 1)")
    compression: str | None = None
    interleave: str | None = None
    is_cog: bool | None = Field(description="rio-cogeo's cog_validate verdict (null for non-TIFF)")
    cog_errors: list[str] = []
    cog_warnings: list[str] = []


def _crs_name(crs) -> str | None:
    if crs is None:
        return None
    try:
        from pyproj import CRS

        return CRS.from_wkt(crs.to_wkt()).name
    except Exception:  # pyproj may not parse every WKT GDAL writes
        return None


def inspect_asset(core: Core, source: AssetSource) -> AssetInfo:
    """Driver, size, bands, nodata, scale/offset, CRS, transform, bounds (native and WGS84),
    blocks, overviews, compression and COG validity of one asset."""
    from rasterio.warp import transform_bounds
    from rio_cogeo.cogeo import cog_validate

    with open_raster(source, core.settings) as src, gdal_errors(source, "reading the header of"):
        bounds_wgs84 = None
        if src.crs is not None:
            bounds_wgs84 = [
                round(v, 7) for v in transform_bounds(src.crs, "EPSG:4326", *src.bounds, densify_pts=21)
            ]
        is_cog, errors, warnings = None, [], []
        if src.driver == "GTiff":
            with capture_gdal_messages() as messages:
                is_cog, errors, warnings = cog_validate(source.gdal_path, quiet=True)
            failure = diagnose(messages, None, core.settings)
            if not is_cog and is_transfer_failure(failure):  # a failed read is not "not a COG"
                raise read_failed(source, failure, "checking the COG layout of")
        epsg = src.crs.to_epsg() if src.crs else None
        return AssetInfo(
            href=source.href_unsigned,
            asset=source.asset_key,
            item_id=source.item_id,
            driver=src.driver,
            width=src.width,
            height=src.height,
            count=src.count,
            dtypes=list(src.dtypes),
            nodata=src.nodata,
            scales=list(src.scales),
            offsets=list(src.offsets),
            band_descriptions=list(src.descriptions),
            crs=f"EPSG:{epsg}" if epsg else (src.crs.to_string() if src.crs else None),
            crs_name=_crs_name(src.crs),
            transform=[float(v) for v in list(src.transform)[:6]],
            resolution=[float(v) for v in src.res],
            bounds=[float(v) for v in src.bounds],
            bounds_wgs84=bounds_wgs84,
            block_size=[list(shape) for shape in src.block_shapes],
            overviews=list(src.overviews(1)) if src.count else [],
            compression=src.compression.value if src.compression else None,
            interleave=src.interleaving.value if src.interleaving else None,
            is_cog=is_cog,
            cog_errors=[source.scrub(e) for e in errors],
            cog_warnings=[source.scrub(w) for w in warnings],
        )
