"""Writing outputs: the formats, their creation options, chunked writing of a working GeoTIFF,
the final copy into the chosen format, and the 8-bit rendering for PNG/JPEG.

Georeferenced formats (COG, GTiff, netCDF) are written in two steps: pixels go chunk by chunk
into a local working GeoTIFF (progress and cancellation between chunks), then GDAL copies it
into the final format (the COG driver computes the internal overviews there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidArgument, ProcessingFailed
from .jobs import Job

COG_TYPE = "image/tiff; application=geotiff; profile=cloud-optimized"


@dataclass(frozen=True)
class OutputFormat:
    name: str
    driver: str
    suffix: str
    media_type: str
    defaults: dict[str, str] = field(default_factory=dict)
    allowed_options: tuple[str, ...] = ()
    eight_bit: bool = False  # PNG/JPEG: rendered to 8 bits for people, no georeferencing kept


_TIFF_OPTIONS = (
    "COMPRESS",
    "LEVEL",
    "PREDICTOR",
    "ZLEVEL",
    "ZSTD_LEVEL",
    "JPEG_QUALITY",
    "QUALITY",
    "BIGTIFF",
    "NUM_THREADS",
)
FORMATS = {
    "COG": OutputFormat(
        "COG",
        "COG",
        ".tif",
        COG_TYPE,
        defaults={
            "COMPRESS": "DEFLATE",
            "BLOCKSIZE": "512",
            "BIGTIFF": "IF_SAFER",
            "NUM_THREADS": "ALL_CPUS",
        },
        allowed_options=_TIFF_OPTIONS
        + (
            "BLOCKSIZE",
            "OVERVIEWS",
            "OVERVIEW_COUNT",
            "OVERVIEW_RESAMPLING",
            "OVERVIEW_COMPRESS",
            "STATISTICS",
        ),
    ),
    "GTiff": OutputFormat(
        "GTiff",
        "GTiff",
        ".tif",
        "image/tiff; application=geotiff",
        defaults={
            "COMPRESS": "DEFLATE",
            "TILED": "YES",
            "BLOCKXSIZE": "512",
            "BLOCKYSIZE": "512",
            "BIGTIFF": "IF_SAFER",
            "NUM_THREADS": "ALL_CPUS",
        },
        allowed_options=_TIFF_OPTIONS + ("TILED", "BLOCKXSIZE", "BLOCKYSIZE", "INTERLEAVE", "PHOTOMETRIC"),
    ),
    "netCDF": OutputFormat(
        "netCDF",
        "netCDF",
        ".nc",
        "application/netcdf",
        defaults={"FORMAT": "NC4", "COMPRESS": "DEFLATE", "ZLEVEL": "4"},
        allowed_options=("FORMAT", "COMPRESS", "ZLEVEL", "CHUNKING", "WRITE_BOTTOMUP"),
    ),
    "PNG": OutputFormat("PNG", "PNG", ".png", "image/png", allowed_options=("ZLEVEL",), eight_bit=True),
    "JPEG": OutputFormat(
        "JPEG",
        "JPEG",
        ".jpg",
        "image/jpeg",
        defaults={"QUALITY": "90"},
        allowed_options=("QUALITY",),
        eight_bit=True,
    ),
}
_VALUE = re.compile(r"^[A-Za-z0-9_.\-]{1,32}$")


def output_format(name: str, allowed: Iterable[str] | None = None) -> OutputFormat:
    """The format called `name` (any case; 'tif'/'geotiff' mean GTiff, 'jpg' JPEG, 'nc' netCDF)."""
    aliases = {
        "tif": "GTiff",
        "tiff": "GTiff",
        "geotiff": "GTiff",
        "jpg": "JPEG",
        "nc": "netCDF",
        "netcdf4": "netCDF",
    }
    key = aliases.get((name or "").lower(), name)
    found = next((f for n, f in FORMATS.items() if n.lower() == (key or "").lower()), None)
    allowed = list(allowed or FORMATS)
    if found is None or found.name not in allowed:
        raise InvalidArgument(f"output_format '{name}' is not one of: {', '.join(allowed)}")
    return found


def creation_options(
    fmt: OutputFormat, user: dict[str, str | int] | None = None, **overrides: str
) -> dict[str, str]:
    """The format's defaults, then `overrides`, then the caller's options (only the allowed keys)."""
    options = {**fmt.defaults, **overrides}
    for key, value in (user or {}).items():
        name = str(key).upper()
        if name not in fmt.allowed_options:
            raise InvalidArgument(
                f"creation option '{key}' is not allowed for {fmt.name}; allowed: {', '.join(fmt.allowed_options)}"
            )
        text = str(value)
        if not _VALUE.match(text):
            raise InvalidArgument(f"creation option {name}={value!r}: use a plain word or number")
        options[name] = text
    return options


def with_predictor(fmt: OutputFormat, options: dict[str, str], dtype: str) -> dict[str, str]:
    """Add a DEFLATE/ZSTD/LZW predictor (horizontal differencing; floating point for floats) unless
    the caller chose one: smaller files, and usually faster to compress."""
    compress = options.get("COMPRESS", "").upper()
    if (
        fmt.name not in ("COG", "GTiff")
        or "PREDICTOR" in options
        or compress not in ("DEFLATE", "ZSTD", "LZW")
    ):
        return options
    floating = dtype.startswith("float")
    return {**options, "PREDICTOR": "YES" if fmt.name == "COG" else ("3" if floating else "2")}


def overview_resampling(resampling: str) -> str:
    """Overview resampling matching a warp resampling (min/max/med/q1/q3/sum: average)."""
    known = ("nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average", "mode", "rms")
    return resampling if resampling in known else "average"


def write_chunks(
    path: Path,
    *,
    crs,
    transform,
    width: int,
    height: int,
    count: int,
    dtype: str,
    nodata,
    chunks: Iterable,
    on_chunk: Callable[[int], None],
    descriptions=None,
    scales=None,
    offsets=None,
) -> None:
    """Write `(window, array)` chunks into a tiled, uncompressed working GeoTIFF at `path`
    (band descriptions, scales and offsets are carried over to the final format by GDAL)."""
    import rasterio

    profile = dict(
        driver="GTiff",
        width=width,
        height=height,
        count=count,
        dtype=dtype,
        crs=crs,
        transform=transform,
        nodata=nodata,
        tiled=True,
        blockxsize=512,
        blockysize=512,
        BIGTIFF="IF_SAFER",
        SPARSE_OK="TRUE",
    )
    if width < 512 or height < 512:
        profile.update(tiled=False)
        profile.pop("blockxsize"), profile.pop("blockysize")
    with rasterio.open(path, "w", **profile) as dst:
        for index, text in enumerate(descriptions or [], start=1):
            if text:
                dst.set_band_description(index, text)
        if scales is not None and offsets is not None:
            dst.scales, dst.offsets = scales, offsets
        for number, (window, array) in enumerate(chunks, start=1):
            dst.write(array, window=window)
            on_chunk(number)


def finish(
    fmt: OutputFormat,
    working: Path,
    out: Path,
    options: dict[str, str],
    *,
    overview_resampling: str = "nearest",
    job: Job | None = None,
    step: float = 0,
    total: float = 1,
) -> None:
    """Copy the working GeoTIFF into `out` in format `fmt`.

    COG: the overviews are built first inside the (uncompressed) working file, and the COG
    driver then compresses each level once (OVERVIEWS=FORCE_USE_EXISTING), instead of building
    them into a compressed temporary file and compressing them again.

    Both GDAL calls report progress to `job` as the part `step`..`step + 1` of `total`, and stop
    mid-way when the job is cancelled or out of time (`gdal_calls`).
    """
    import rasterio

    from . import gdal_calls

    job = job or Job()
    options = dict(options)

    def callback(start: float, end: float, message: str):
        return job.gdal_callback(step + start, step + end, total, message)

    def stopped(exc: ProcessingFailed) -> None:
        job.check()  # cancelled or out of time: say so, not GDAL's "User terminated"
        raise exc

    with rasterio.Env(GDAL_PAM_ENABLED="NO"):
        copy_from = 0.0
        if fmt.driver == "COG" and "OVERVIEWS" not in options:
            method = (
                options.pop("OVERVIEW_RESAMPLING", overview_resampling)
                .lower()
                .replace("cubicspline", "cubic_spline")
            )
            try:
                build_overviews(
                    working,
                    int(options.get("BLOCKSIZE", 512)),
                    method,
                    progress=callback(0.0, 0.3, "building overviews"),
                )
            except ProcessingFailed as exc:
                stopped(exc)
            options["OVERVIEWS"] = "FORCE_USE_EXISTING"
            copy_from = 0.3
        job.check()
        try:
            gdal_calls.create_copy(
                fmt.driver, working, out, options, callback(copy_from, 1.0, f"writing {fmt.name}")
            )
        except ProcessingFailed as exc:
            stopped(exc)
        if fmt.driver not in ("COG", "GTiff"):
            return
        try:
            check_tiles(out)
        except ProcessingFailed:
            # Once more in one thread, where GDAL raises the error it hit (and says what it was).
            single = {k: v for k, v in options.items() if k != "NUM_THREADS"}
            with rasterio.Env(GDAL_NUM_THREADS="1"):
                try:
                    gdal_calls.create_copy(
                        fmt.driver, working, out, single, callback(copy_from, 1.0, "writing")
                    )
                except ProcessingFailed as exc:
                    stopped(exc)
            check_tiles(out)


def overview_factors(width: int, height: int, blocksize: int) -> list[int]:
    """2, 4, 8, ... until the overview fits in one block (as GDAL's COG driver does)."""
    factors, factor = [], 2
    while max(width, height) / (factor // 2) > blocksize:
        factors.append(factor)
        factor *= 2
    return factors


_GDAL_RESAMPLING = {"cubic_spline": "CUBICSPLINE"}


def build_overviews(path: Path, blocksize: int, resampling: str, progress=None) -> None:
    import rasterio
    from rasterio.enums import Resampling

    from . import gdal_calls

    try:
        Resampling[resampling]
    except KeyError:
        raise InvalidArgument(f"overview resampling '{resampling}' is not known to GDAL") from None
    with rasterio.open(path) as dst:
        factors = overview_factors(dst.width, dst.height, blocksize)
    if factors:
        name = _GDAL_RESAMPLING.get(resampling, resampling.upper())
        gdal_calls.build_overviews(path, factors, name, progress)


def check_tiles(path: Path) -> None:
    """Every block of every band and overview was written. (GDAL compresses in worker threads
    with NUM_THREADS, and an error there is only logged, not raised: this catches it.)"""
    import rasterio
    from rasterio.errors import RasterBlockError

    with rasterio.open(path) as src:
        levels = [None, *range(len(src.overviews(1)))]
    for level in levels:
        extra = {} if level is None else {"overview_level": level}
        with rasterio.open(path, **extra) as src:
            rows = -(-src.height // src.block_shapes[0][0])
            cols = -(-src.width // src.block_shapes[0][1])
            try:
                for band in range(1, src.count + 1):
                    for i in range(rows):
                        for j in range(cols):
                            src.block_size(band, i, j)
            except RasterBlockError:
                raise ProcessingFailed(
                    f"GDAL did not write block ({i}, {j}) of band {band}"
                    f"{'' if level is None else f' of overview level {level}'}; see the server log for GDAL's error"
                ) from None


CHUNK_BYTES = 32 * 1024**2  # pixels per chunk (memory held at once); progress/cancel between chunks


def chunk_rows(width: int, count: int, itemsize: int, *, block: int = 512) -> int:
    """Rows per chunk: whole 512-row strips, about CHUNK_BYTES of pixels each."""
    per_row = max(1, width * count * itemsize)
    strips = max(1, CHUNK_BYTES // (per_row * block))
    return int(strips * block)


def row_strips(width: int, height: int, count: int, dtype: str) -> list[tuple[int, int]]:
    """(first row, number of rows) of each chunk of a `width` x `height` output of `count`
    bands of `dtype`, top to bottom (`chunk_rows` rows each, the last one shorter)."""
    import numpy as np

    rows = chunk_rows(width, count, np.dtype(dtype).itemsize)
    return [(row0, min(rows, height - row0)) for row0 in range(0, height, rows)]


# --- 8-bit rendering for PNG / JPEG ----------------------------------------------------------------


def stretch_to_8bit(array, valid, percentiles: tuple[float, float] = (2, 98), *, joint: bool = False):
    """Scale `array` (bands, rows, cols) to 1..255 between percentiles of its `valid` pixels
    (rows, cols): per band, or one range for all bands (`joint`, keeps RGB colours balanced).
    uint8 data is kept as it is. Invalid pixels become 0."""
    import numpy as np

    out = np.zeros(array.shape, dtype="uint8")
    if not valid.any():
        return out
    if array.dtype == np.uint8:
        return np.where(valid[None], array, 0).astype("uint8")

    def limits(values):
        values = values[np.isfinite(values)]
        return np.percentile(values, percentiles) if values.size else (0.0, 0.0)

    shared = limits(array[:, valid].astype("float64").ravel()) if joint else None
    for i, band in enumerate(array):
        low, high = shared if joint else limits(band[valid].astype("float64"))
        if high <= low:
            scaled = np.full(band.shape, 128.0)
        else:
            scaled = 1 + (band.astype("float64") - low) * (254.0 / (high - low))
        out[i] = np.where(valid, np.clip(np.nan_to_num(scaled, nan=0), 1, 255), 0).astype("uint8")
    return out


def colorize(gray, valid, colormap: str = "viridis"):
    """A single 8-bit band as RGB through a matplotlib colormap."""
    import numpy as np
    from matplotlib import colormaps

    lut = (colormaps[colormap](np.linspace(0, 1, 256))[:, :3] * 255).round().astype("uint8")
    rgb = np.moveaxis(lut[gray], -1, 0)
    return np.where(valid[None], rgb, 0).astype("uint8")


def write_8bit(
    fmt: OutputFormat, path: Path, bands, valid, options: dict[str, str], *, crs, transform
) -> None:
    """Write 1 or 3 uint8 bands as PNG (with an alpha band: nodata transparent) or JPEG.

    `crs` and `transform` are the image's georeferencing. The file does not keep it (no
    .aux.xml or world file: PAM is off; the output's record carries it), but rasterio is given
    it: a dataset opened without one warns NotGeoreferencedWarning, and hiding that with
    `warnings.catch_warnings()` is not thread-safe (another thread's catch_warnings can undo
    the filter mid-write, so the warning reached stderr in some runs).
    """
    import numpy as np
    import rasterio

    if fmt.driver == "PNG":
        alpha = np.where(valid, 255, 0).astype("uint8")[None]
        bands = np.concatenate([bands, alpha])
    count, height, width = bands.shape
    with (
        rasterio.Env(GDAL_PAM_ENABLED="NO"),
        rasterio.open(
            path,
            "w",
            driver=fmt.driver,
            width=width,
            height=height,
            count=count,
            dtype="uint8",
            crs=crs,
            transform=transform,
            **options,
        ) as dst,
    ):
        dst.write(bands)
        if fmt.driver == "PNG":
            from rasterio.enums import ColorInterp

            gray = (
                [ColorInterp.gray] if count == 2 else [ColorInterp.red, ColorInterp.green, ColorInterp.blue]
            )
            dst.colorinterp = [*gray, ColorInterp.alpha]
