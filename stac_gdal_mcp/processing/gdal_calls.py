"""GDAL C API calls rasterio does not offer. The two long calls rasterio gives no progress callback for, made through GDAL's C API
(ctypes, on the very libgdal rasterio has loaded) so that they can be stopped mid-way:

- `create_copy`: GDALCreateCopy (e.g. the COG driver writing and compressing every level);
- `build_overviews`: GDALBuildOverviews on a local working GeoTIFF.

Both take a GDAL progress function (`Job.gdal_callback`); when it returns 0, GDAL stops, the
call fails with "User terminated" and the caller (the output store) removes the partial file.
`forget_remote_file` empties GDAL's cache of one remote file before a read is retried.
Only local paths inside the workspace, or GDAL paths made by `access`, are passed here.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

from ..errors import ProcessingFailed

PROGRESS_FUNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p)

_OF_UPDATE, _OF_RASTER, _OF_VERBOSE_ERROR = 0x01, 0x02, 0x40


def _libgdal_path() -> str:
    import rasterio._base  # noqa: F401  (loads libgdal)

    with open("/proc/self/maps") as maps:
        for line in maps:
            name = line.rsplit(None, 1)[-1]
            if "libgdal" in Path(name).name:
                return name
    import ctypes.util

    found = ctypes.util.find_library("gdal")
    if not found:
        raise ProcessingFailed("cannot find the GDAL library rasterio uses")
    return found


@functools.cache
def _lib():
    lib = ctypes.CDLL(_libgdal_path())
    lib.GDALOpenEx.restype = ctypes.c_void_p
    lib.GDALOpenEx.argtypes = [
        ctypes.c_char_p,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    lib.GDALClose.argtypes = [ctypes.c_void_p]
    lib.GDALClose.restype = ctypes.c_int
    lib.GDALGetDriverByName.restype = ctypes.c_void_p
    lib.GDALGetDriverByName.argtypes = [ctypes.c_char_p]
    lib.GDALCreateCopy.restype = ctypes.c_void_p
    lib.GDALCreateCopy.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_char_p),
        PROGRESS_FUNC,
        ctypes.c_void_p,
    ]
    lib.GDALBuildOverviews.restype = ctypes.c_int
    lib.GDALBuildOverviews.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
        ctypes.c_void_p,
        PROGRESS_FUNC,
        ctypes.c_void_p,
    ]
    lib.VSICurlPartialClearCache.restype = None
    lib.VSICurlPartialClearCache.argtypes = [ctypes.c_char_p]
    lib.CPLGetLastErrorMsg.restype = ctypes.c_char_p
    lib.CPLErrorReset.restype = None
    return lib


def _always_continue():
    return PROGRESS_FUNC(lambda fraction, message, data: 1)


def _last_error(lib) -> str:
    raw = lib.CPLGetLastErrorMsg() or b""
    return " ".join(raw.decode("utf-8", "replace").split()) or "GDAL gave no reason"


def _open(lib, path: Path, *, update: bool):
    flags = _OF_RASTER | _OF_VERBOSE_ERROR | (_OF_UPDATE if update else 0)
    handle = lib.GDALOpenEx(os.fsencode(path), flags, None, None, None)
    if not handle:
        raise ProcessingFailed(f"GDAL cannot open the working file {path.name}: {_last_error(lib)}")
    return handle


def forget_remote_file(gdal_path: str) -> None:
    """Drop what GDAL's /vsicurl/ (/vsis3/...) cache holds of `gdal_path` (all opens in the
    process share it), so that a retry fetches the bytes again instead of reusing a short read."""
    if gdal_path.startswith("/vsi"):
        _lib().VSICurlPartialClearCache(gdal_path.encode())


def create_copy(driver: str, src: Path, dst: Path, options: dict[str, str], progress=None) -> None:
    """GDALCreateCopy of local `src` into `dst` with `driver` and creation `options`."""
    lib = _lib()
    progress = progress or _always_continue()
    handle = _open(lib, src, update=False)
    try:
        drv = lib.GDALGetDriverByName(driver.encode())
        if not drv:
            raise ProcessingFailed(f"GDAL has no {driver} driver")
        items = [f"{k}={v}".encode() for k, v in options.items()]
        array = (ctypes.c_char_p * (len(items) + 1))(*items, None)
        lib.CPLErrorReset()
        out = lib.GDALCreateCopy(drv, os.fsencode(dst), handle, 0, array, progress, None)
        if not out:
            raise ProcessingFailed(f"GDAL could not write {driver}: {_last_error(lib)}")
        if lib.GDALClose(out) != 0:
            raise ProcessingFailed(f"GDAL could not finish writing {driver}: {_last_error(lib)}")
    finally:
        lib.GDALClose(handle)


def build_overviews(path: Path, factors: list[int], resampling: str, progress=None) -> None:
    """GDALBuildOverviews on the local GeoTIFF `path` (all bands)."""
    lib = _lib()
    progress = progress or _always_continue()
    handle = _open(lib, path, update=True)
    try:
        levels = (ctypes.c_int * len(factors))(*factors)
        lib.CPLErrorReset()
        code = lib.GDALBuildOverviews(
            handle, resampling.upper().encode(), len(factors), levels, 0, None, progress, None
        )
        if code != 0:
            raise ProcessingFailed(f"GDAL could not build overviews: {_last_error(lib)}")
    finally:
        if lib.GDALClose(handle) != 0:
            raise ProcessingFailed(f"GDAL could not finish the overviews: {_last_error(lib)}")
