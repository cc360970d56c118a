"""Files written whole or not at all (a temporary name, then os.replace): DEFLATE COGs with
overviews, PNG quicklooks, JSON documents."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

# ----------------------------------------------------------------------- files


def _write_cog(
    path: Path,
    array,
    *,
    epsg: int,
    transform,
    blocksize: int,
    nodata,
    resampling: str,
    description: str | None,
) -> None:
    """Write a (bands, rows, cols) array as a DEFLATE COG with internal overviews."""
    import rasterio
    import rasterio.shutil
    from affine import Affine
    from rasterio.io import MemoryFile

    count, rows, cols = array.shape
    profile = {
        "driver": "GTiff",
        "width": cols,
        "height": rows,
        "count": count,
        "dtype": array.dtype.name,
        "crs": f"EPSG:{epsg}",
        "transform": Affine(*transform),
        "nodata": nodata,
    }
    tmp = _temp_name(path)
    try:
        with rasterio.Env(GDAL_PAM_ENABLED="NO"), MemoryFile() as memory:
            with memory.open(**profile) as dataset:
                dataset.write(array)
                if description:
                    dataset.set_band_description(1, description)
            with memory.open() as source:
                rasterio.shutil.copy(
                    source,
                    tmp,
                    driver="COG",
                    BLOCKSIZE=blocksize,
                    COMPRESS="DEFLATE",
                    LEVEL=9,
                    PREDICTOR="YES" if resampling != "nearest" else "NO",
                    OVERVIEW_RESAMPLING=resampling.upper(),
                    BIGTIFF="NO",
                )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _write_png(path: Path, rgb, max_size: int) -> None:
    """Write a small RGB PNG quicklook (no georeferencing)."""
    import warnings

    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    step = max(1, math.ceil(max(rgb.shape[1:]) / max_size))
    small = rgb[:, ::step, ::step]
    tmp = _temp_name(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with (
                rasterio.Env(GDAL_PAM_ENABLED="NO"),
                rasterio.open(
                    tmp,
                    "w",
                    driver="PNG",
                    width=small.shape[2],
                    height=small.shape[1],
                    count=3,
                    dtype="uint8",
                ) as dataset,
            ):
                dataset.write(small)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _write_json(path: Path, document: dict) -> None:
    tmp = _temp_name(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _temp_name(path: Path) -> str:
    """A fresh file name next to ``path`` (same directory, so os.replace is atomic)."""
    fd, name = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp", dir=Path(path).parent)
    os.close(fd)
    os.remove(name)
    return name
