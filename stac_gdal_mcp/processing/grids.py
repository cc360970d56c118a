"""Pure geometry for processing: bbox -> source window, output grids for warping, overview choice,
and the size limits, all decided from a dataset's header before any pixel is read."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, InvalidBBox, LimitExceeded

if TYPE_CHECKING:
    from .records import Provenance

RESAMPLING = (
    "nearest",
    "bilinear",
    "cubic",
    "cubic_spline",
    "lanczos",
    "average",
    "mode",
    "min",
    "max",
    "med",
    "q1",
    "q3",
    "sum",
    "rms",
)


@dataclass(frozen=True)
class Grid:
    """An output grid: CRS, affine transform, width and height in pixels."""

    crs: Any
    transform: Any
    width: int
    height: int

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        t = self.transform
        return (t.c, t.f + t.e * self.height, t.c + t.a * self.width, t.f)

    @property
    def resolution(self) -> tuple[float, float]:
        return (abs(self.transform.a), abs(self.transform.e))


# Words that make PROJ read a file or fetch a URL when the CRS is used (grids, init files).
_CRS_REFERENCES = re.compile(
    r"nadgrids|geoidgrids|[+]init\b|init\s*=|hgridshift|vgridshift|xyzgridshift|tinshift|deformation|"
    r"[+]grids\b|PARAMETERFILE|@|file:|(?<![a-z])(?:https?|ftp)://(?!www\.opengis\.net/def/crs/)",
    re.IGNORECASE,
)
_AUTHORITY_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*:{1,2}[A-Za-z0-9._-]+(\+[A-Za-z0-9._-]+)?$")
_OGC_URN = re.compile(r"^urn:ogc:def:crs:[A-Za-z0-9_]+:[0-9.]*:[A-Za-z0-9._-]+$", re.IGNORECASE)
_OGC_URL = re.compile(r"^https?://www\.opengis\.net/def/crs/[A-Za-z0-9_]+/[0-9.]+/[A-Za-z0-9._-]+$")
MAX_CRS_TEXT = 50_000
_RASTER_CRS_TYPES = ("Projected CRS", "Geographic 2D CRS", "Derived Projected CRS")
CRS_HINT = "use an authority code such as 'EPSG:4326', 'EPSG:32633' or 'OGC:CRS84', or its WKT/PROJJSON"


def parse_crs(value: str | int, what: str = "dst_crs"):
    """A rasterio CRS from an authority code ('EPSG:32633', 32633, 'OGC:CRS84', an OGC URN or
    opengis.net URL), WKT, PROJJSON or a PROJ string, that can be the CRS of a raster grid:
    projected or geographic 2D. Refused, each with one line saying what to give instead:
    anything that names a file or a URL (grid shifts `+nadgrids=`, `+geoidgrids=`, `@...`,
    `+init=`, WKT PARAMETERFILE), and geocentric, vertical, 3D, compound and engineering CRSs."""
    from rasterio.crs import CRS
    from rasterio.errors import CRSError

    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidArgument(f"{what} must be a string such as 'EPSG:4326' (got {type(value).__name__})")
    text = f"EPSG:{value}" if isinstance(value, int) else value.strip()
    shown = _shown(text)
    if not text or len(text) > MAX_CRS_TEXT:
        raise InvalidArgument(f"{what} must be 1 to {MAX_CRS_TEXT:,} characters; {CRS_HINT}")
    if text.startswith("{"):  # PROJJSON: its $schema URL is a name, never fetched
        text = _projjson_text(text, what, shown)
    if _CRS_REFERENCES.search(text):
        raise InvalidArgument(
            f"{what} {shown} refers to a grid, file or URL, which is not allowed; {CRS_HINT} without grids"
        )
    if text.lower().startswith(("http://", "https://")) and not _OGC_URL.match(text):
        raise InvalidArgument(f"{what} {shown} is a URL, which is not allowed; {CRS_HINT}")
    pj = _pyproj_crs(text, what, shown)
    kind = pj.type_name
    base = pj.source_crs if pj.is_bound and pj.source_crs is not None else pj
    if pj.is_bound:
        _check_bound(pj, what, shown)
        kind = base.type_name
    if kind not in _RASTER_CRS_TYPES:
        raise InvalidArgument(
            f"{what} {shown} is not a projected or 2D geographic CRS ({kind}), so it cannot be the CRS "
            f"of a raster grid; {_instead(base)}"
        )
    _check_earth(base, what, shown)
    try:
        return CRS.from_user_input(text)
    except (CRSError, ValueError, TypeError):
        raise InvalidArgument(f"{what} {shown} is not a CRS GDAL knows; {CRS_HINT}") from None


def _check_earth(crs, what: str, shown: str) -> None:
    """Refuse a CRS no coordinate operation reaches from WGS 84 (another celestial body's, such
    as IAU_2015:30100 on the Moon): the AOI and the items' footprints are on Earth."""
    from pyproj import Transformer
    from pyproj.exceptions import ProjError

    try:
        Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    except ProjError as exc:
        body = re.search(r"\(Earth vs ([^)]+)\)", str(exc))
        where = f"a CRS of {body.group(1)}" if body else "no coordinate operation reaches it from WGS 84"
        raise InvalidArgument(f"{what} {shown} is not a CRS on Earth ({where}); {CRS_HINT}") from None


def _projjson_text(text: str, what: str, shown: str) -> str:
    import json

    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidArgument(f"{what} {shown} is not valid PROJJSON; {CRS_HINT}") from None
    if not isinstance(doc, dict):
        raise InvalidArgument(f"{what} {shown} is not a PROJJSON object; {CRS_HINT}")
    doc.pop("$schema", None)
    return json.dumps(doc)


def _pyproj_crs(text: str, what: str, shown: str):
    from pyproj import CRS as ProjCRS
    from pyproj.exceptions import CRSError as ProjCRSError

    looks_like = (
        _AUTHORITY_CODE.match(text)
        or _OGC_URN.match(text)
        or _OGC_URL.match(text)
        or text.startswith(("{", "+"))
        or "+proj=" in text
        or re.match(r"^[A-Z][A-Z0-9_]*\[", text)  # WKT1/WKT2
    )
    if not looks_like:
        raise InvalidArgument(f"{what} {shown} is not a CRS; {CRS_HINT}")
    try:
        return ProjCRS.from_user_input(text)
    except (ProjCRSError, ValueError, TypeError, RecursionError):
        raise InvalidArgument(f"{what} {shown} is not a CRS GDAL knows; {CRS_HINT}") from None


def _check_bound(pj, what: str, shown: str) -> None:
    """A bound CRS (a CRS plus a transformation to WGS84) is fine with a Helmert transformation
    (`+towgs84=`), not with one that reads a grid file."""
    doc = pj.to_json_dict()

    def files(node) -> bool:
        if isinstance(node, dict):
            if "value" in node and isinstance(node["value"], str):
                return True
            return any(files(v) for v in node.values())
        if isinstance(node, list):
            return any(files(v) for v in node)
        return False

    if files(doc.get("transformation", {}).get("parameters", [])):
        raise InvalidArgument(
            f"{what} {shown} refers to a grid, file or URL, which is not allowed; {CRS_HINT} without grids"
        )


def _instead(pj) -> str:
    """What to give instead of a CRS that cannot describe a raster grid."""
    if pj.is_compound and pj.sub_crs_list:
        code = pj.sub_crs_list[0].to_authority()
        if code:
            return f"use its horizontal part, {':'.join(code)}"
    elif pj.type_name == "Geographic 3D CRS":
        try:
            code = pj.to_2d().to_authority(min_confidence=70)
        except Exception:  # pyproj raises several kinds here; the generic hint follows
            code = None
        if code:
            return f"use a 2D geographic or projected CRS such as {':'.join(code)}"
    return "use a projected or 2D geographic CRS such as EPSG:4326 or EPSG:32633"


def _shown(text: str) -> str:
    """`text` quoted on one short line, for messages."""
    from ..catalogs.security import shown

    return shown(" ".join(text.split()), 60)


def parse_resampling(name: str):
    from rasterio.enums import Resampling

    if name not in RESAMPLING:
        raise InvalidArgument(f"resampling '{name}' is not one of: {', '.join(RESAMPLING)}")
    return Resampling[name]


def check_bbox(bbox: Sequence[float]) -> tuple[float, float, float, float]:
    if (
        bbox is None
        or len(bbox) != 4
        or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in bbox)
    ):
        raise InvalidBBox(f"bbox must be 4 numbers [west, south, east, north], got {bbox!r}")
    west, south, east, north = (float(v) for v in bbox)
    if west >= east or south >= north:
        raise InvalidBBox(f"bbox {list(bbox)} must have west < east and south < north")
    return west, south, east, north


def bbox_in(bbox: Sequence[float], bbox_crs, crs) -> tuple[float, float, float, float]:
    """`bbox` (in `bbox_crs`) as bounds in `crs`, edges densified."""
    from rasterio.warp import transform_bounds

    box = check_bbox(bbox)
    src = parse_crs(bbox_crs, "bbox_crs")
    if src == crs:
        return box
    return transform_bounds(src, crs, *box, densify_pts=21)


def bbox_window(dataset, bbox: Sequence[float], bbox_crs="EPSG:4326"):
    """The pixel window of `dataset` covering `bbox`: rounded outwards, clipped to the dataset."""
    from rasterio.windows import Window, from_bounds

    left, bottom, right, top = bbox_in(bbox, bbox_crs, dataset.crs)
    w = from_bounds(left, bottom, right, top, transform=dataset.transform)
    eps = 1e-6
    col0, row0 = math.floor(w.col_off + eps), math.floor(w.row_off + eps)
    col1, row1 = math.ceil(w.col_off + w.width - eps), math.ceil(w.row_off + w.height - eps)
    col0, row0 = max(col0, 0), max(row0, 0)
    col1, row1 = min(col1, dataset.width), min(row1, dataset.height)
    if col1 <= col0 or row1 <= row0:
        raise InvalidBBox(
            f"bbox {list(bbox)} ({bbox_crs}) does not overlap the asset; its bounds are "
            f"{_round(dataset.bounds)} in {crs_label(dataset.crs)}"
        )
    return Window(col0, row0, col1 - col0, row1 - row0)


def crs_label(crs) -> str:
    epsg = crs.to_epsg() if crs else None
    return f"EPSG:{epsg}" if epsg else (crs.to_string() if crs else "(no CRS)")


def _round(values) -> list[float]:
    return [round(float(v), 6) for v in values]


def warp_grid(
    dataset,
    dst_crs,
    resolution: float | Sequence[float] | None = None,
    bbox: Sequence[float] | None = None,
    bbox_crs="EPSG:4326",
) -> Grid:
    """The output grid for warping `dataset` to `dst_crs`: its whole footprint, or the part
    inside `bbox`, at `resolution` (dst CRS units) or the resolution GDAL would pick."""
    from rasterio.transform import from_origin
    from rasterio.warp import calculate_default_transform, transform_bounds

    if dataset.crs is None:
        raise InvalidArgument("the asset has no CRS, so it cannot be reprojected")
    default, width, height = calculate_default_transform(
        dataset.crs, dst_crs, dataset.width, dataset.height, *dataset.bounds
    )
    if resolution is None:
        res_x, res_y = abs(default.a), abs(default.e)
        if bbox is None:
            return Grid(dst_crs, default, width, height)
    else:
        res_x, res_y = _resolution(resolution)
    full = transform_bounds(dataset.crs, dst_crs, *dataset.bounds, densify_pts=21)
    left, bottom, right, top = full
    if bbox is not None:
        b_left, b_bottom, b_right, b_top = bbox_in(bbox, bbox_crs, dst_crs)
        left, bottom = max(left, b_left), max(bottom, b_bottom)
        right, top = min(right, b_right), min(top, b_top)
        if left >= right or bottom >= top:
            raise InvalidBBox(
                f"bbox {list(bbox)} ({bbox_crs}) does not overlap the asset, whose bounds in "
                f"{crs_label(dst_crs)} are {_round(full)}"
            )
    cols, rows = cells(right - left, res_x), cells(top - bottom, res_y)
    return Grid(dst_crs, from_origin(left, top, res_x, res_y), cols, rows)


def cells(length: float, resolution: float) -> int:
    """A grid's side in pixels: `length` (CRS units) over `resolution`, rounded up; refused in
    one line when it cannot be counted (a subnormal resolution such as 5e-324 makes it inf)."""
    across = length / resolution
    if not math.isfinite(across):
        raise too_fine(resolution)
    return max(1, math.ceil(across - 1e-6))


def too_fine(resolution: float) -> LimitExceeded:
    return LimitExceeded(
        f"resolution {resolution:g} is too fine: the output would have more pixels across than "
        "can be counted; pass a coarser resolution"
    )


def _resolution(resolution) -> tuple[float, float]:
    values = [resolution, resolution] if isinstance(resolution, (int, float)) else list(resolution)
    if len(values) != 2 or not all(
        isinstance(v, (int, float)) and v > 0 and math.isfinite(v) for v in values
    ):
        raise InvalidArgument(
            f"resolution must be a positive number or [x, y] in dst_crs units, got {resolution!r}"
        )
    return float(values[0]), float(values[1])


def native_resolution_in(dataset, dst_crs) -> tuple[float, float]:
    """The resolution (dst_crs units) GDAL would give the whole dataset reprojected to dst_crs."""
    from rasterio.warp import calculate_default_transform

    default, _, _ = calculate_default_transform(
        dataset.crs, dst_crs, dataset.width, dataset.height, *dataset.bounds
    )
    return abs(default.a), abs(default.e)


def choose_overview(
    factors: Sequence[int], native: tuple[float, float], target: tuple[float, float]
) -> int | None:
    """Index of the coarsest overview that is still at least as fine as `target`
    (None: read full resolution). `factors` are the dataset's decimation factors (2, 4, ...)."""
    ratio = min(target[0] / native[0], target[1] / native[1])
    best = None
    for index, factor in enumerate(factors):
        if factor <= ratio * (1 + 1e-6):
            best = index
    return best


def check_output_size(
    width: int, height: int, count: int, dtype: str, limits, *, resolution: float | None = None
) -> None:
    """Refuse an output larger than limits.max_output_pixels or max_output_bytes, saying how to shrink it."""
    import numpy as np

    pixels = int(width) * int(height)
    nbytes = pixels * count * np.dtype(dtype).itemsize
    over = []
    if pixels > limits.max_output_pixels:
        over.append(f"{_count(pixels)} pixels > limits.max_output_pixels={limits.max_output_pixels:,}")
    if nbytes > limits.max_output_bytes:
        over.append(f"{_count(nbytes)} bytes > limits.max_output_bytes={limits.max_output_bytes:,}")
    if not over:
        return
    # logarithms: a resolution of 1e-300 makes sizes of hundreds of digits, beyond any float
    factor = math.exp(
        max(
            math.log(pixels) - math.log(limits.max_output_pixels),
            math.log(nbytes) - math.log(limits.max_output_bytes),
        )
        / 2
    )
    hint = "pass a smaller bbox"
    if resolution:
        hint += (
            f", a coarser resolution (at least {resolution * factor:.4g}; coarse outputs read an overview)"
        )
    hint += " or fewer bands" if count > 1 else ""
    raise LimitExceeded(
        f"the output would be {_count(width)} x {_count(height)} pixels x {count} band(s) of {dtype}: "
        f"{'; '.join(over)}. To shrink it, {hint}."
    )


def _count(n: int) -> str:
    """1,234,567; or about 1.2e+300 for numbers too long to read."""
    return f"{n:,}" if n < 10**15 else f"about {float(n):.2g}" if n < 10**300 else "more than 1e+300"


def source_pixels_read(grid, native: tuple[float, float], factor: int, source_pixels: int) -> float:
    """About how many source pixels (of the overview with decimation `factor`) lie under the output
    grid: output pixels x (output pixel / source pixel) in each direction, at most the whole level."""
    ratio_x = grid.resolution[0] / (native[0] * factor)
    ratio_y = grid.resolution[1] / (native[1] * factor)
    return min(
        (grid.width * ratio_x) * (grid.height * ratio_y), source_pixels / factor**2
    )  # floats: may be inf


def array_grid(array, provenance: Provenance | None):
    """(CRS, affine transform) of a DataArray: from its provenance (moved to the first pixel of a
    slice of the grid, by its x/y coordinates: pixel centres), else from odc-geo."""
    from affine import Affine
    from rasterio.crs import CRS

    if provenance is not None and "crs" in provenance.facts:
        transform = Affine(*provenance.facts["transform"])
        if array.sizes.get("x") and array.sizes.get("y") and {"x", "y"} <= set(array.coords):
            _on_pixels(array, transform)
            col, row = ~transform @ (float(array.x[0]), float(array.y[0]))
            transform = transform @ Affine.translation(round(col - 0.5), round(row - 0.5))
        return CRS.from_user_input(provenance.facts["crs"]), transform
    import odc.geo.xr  # noqa: F401  (the .odc accessor)

    gbox = getattr(array.odc, "geobox", None)
    if gbox is None or gbox.crs is None:
        raise InvalidArgument(
            "the array has no georeferencing (no spatial_ref/crs coordinate); keep the coordinates of a load"
        )
    return CRS.from_user_input(gbox.crs.to_wkt()), gbox.affine


def _on_pixels(array, transform) -> None:
    """Refuse a cut off the grid's adjacent pixels (a step, picked columns): no transform fits it."""
    import numpy as np

    for dim, step in (("x", transform.a), ("y", transform.e)):
        gaps = np.diff(np.asarray(array[dim], dtype="float64"))
        if gaps.size and not np.allclose(gaps, step, rtol=0, atol=abs(step) * 1e-6):
            raise InvalidArgument(
                f"save takes a slice of the grid's own pixels; this array's {dim} steps by "
                f"{float(gaps[0]):g} where a pixel is {step:g} (use coarsen or reproject_asset)"
            )
