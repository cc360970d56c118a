"""The area of interest of an analysis: parsed (a WGS84 bbox or GeoJSON geometry, as shapely),
projected into a raster's CRS (edges densified, so they stay close to the true outline), and
rasterized onto a grid (pixel centres inside the AOI)."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import InvalidArgument


def aoi_geometry(aoi: Any):
    """A bbox [west, south, east, north] or a GeoJSON geometry/Feature (EPSG:4326) as shapely."""
    from shapely.geometry import box, shape

    from ..discovery import params

    if aoi is None:
        raise InvalidArgument(
            "aoi is required: a bbox [west, south, east, north] or a GeoJSON geometry (WGS84)"
        )
    if isinstance(aoi, str) and aoi.strip().startswith("{"):
        aoi = params.intersects(aoi)
    if isinstance(aoi, (list, tuple, str)):
        b = params.bbox(aoi)
        w, s, e, n = (b[0], b[1], b[3], b[4]) if len(b) == 6 else b
        if w == e or s == n:
            raise InvalidArgument(f"aoi bbox {b} has no area")
        return box(w, s, e, n)
    return shape(params.intersects(aoi))


def project_aoi(aoi_4326, crs) -> dict:
    """The AOI (shapely, EPSG:4326) as a GeoJSON geometry in `crs`, each edge cut into pieces of
    at most 1/64 of the AOI's extent first."""
    from rasterio.warp import transform_geom
    from shapely.geometry import mapping

    w, s, e, n = aoi_4326.bounds
    dense = aoi_4326.segmentize(max(e - w, n - s) / 64)
    return transform_geom("EPSG:4326", crs, mapping(dense))


def check_aoi_fits(aoi_4326, crs, what: str = "crs") -> None:
    """Refuse an AOI that a projected `crs` cannot draw: a point it cannot project, or an outline
    that folds over (the world in UTM collapses to a line): its projected area under half its
    area on the ellipsoid (conformal and equal-area projections keep it, or enlarge it)."""
    import math

    from pyproj import CRS
    from shapely.geometry import shape

    projected_crs = CRS.from_user_input(crs)
    if not projected_crs.is_projected:
        return
    # on the ellipsoid: in an equal-area cylindrical projection (EASE-Grid 2.0), where even the
    # whole world is a plain rectangle (a geodesic ring around it would have no area)
    on_earth = shape(project_aoi(aoi_4326, "EPSG:6933")).area
    try:
        projected = shape(project_aoi(aoi_4326, projected_crs.to_wkt()))
        unit = projected_crs.axis_info[0].unit_conversion_factor or 1.0
        drawn = projected.area * unit**2
    except Exception:  # a point PROJ cannot project
        drawn = float("nan")
    if not math.isfinite(drawn) or drawn < 0.5 * on_earth:
        use = projected_crs.area_of_use
        where = f" (made for {use.west:g}..{use.east:g} E, {use.south:g}..{use.north:g} N)" if use else ""
        raise InvalidArgument(
            f"aoi {[round(v, 6) for v in aoi_4326.bounds]} is too large for {what} {projected_crs.to_string()}"
            f"{where}: it cannot be drawn in that CRS; pass a smaller aoi, or {what}='EPSG:4326'"
        )


_RASTERIZE = threading.Lock()


def rasterize_aoi(geom: dict, shape: tuple[int, int], transform):
    """True for the pixels whose centre is inside `geom` (all pixels it touches when it is
    smaller than a pixel). Serialized: rasterio's rasterize is not safe across threads (it
    warns, spuriously, that its in-memory dataset has no geotransform)."""
    from rasterio.features import geometry_mask

    with _RASTERIZE:
        inside = geometry_mask([geom], out_shape=shape, transform=transform, invert=True)
        if not inside.any():
            inside = geometry_mask(
                [geom], out_shape=shape, transform=transform, invert=True, all_touched=True
            )
    return inside


def decimation(native: float, resolution: float | None) -> int:
    """The whole factor by which the native grid is coarsened to reach `resolution`."""
    if resolution is None:
        return 1
    if resolution <= 0:
        raise InvalidArgument(f"resolution must be positive (got {resolution})")
    return max(1, round(resolution / native))


def coordinates(geom: dict) -> tuple[list[float], list[float]]:
    """The x and y of every vertex of a GeoJSON geometry."""
    xs, ys = [], []

    def walk(c):
        if isinstance(c[0], (int, float)):
            xs.append(c[0])
            ys.append(c[1])
        else:
            for part in c:
                walk(part)

    if geom["type"] == "GeometryCollection":
        for g in geom["geometries"]:
            gx, gy = coordinates(g)
            xs += gx
            ys += gy
    else:
        walk(geom["coordinates"])
    return xs, ys
