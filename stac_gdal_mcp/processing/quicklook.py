"""A small PNG of a raster file: what a tool shows beside its result (image content).

`quicklook_png(path)` reads the file decimated (its overviews when it has them) to at most
`max_size` px on the long side and renders it as the previews are rendered: 3+ bands as RGB with
one 2-98 % stretch, one band through viridis; nodata (and NaN) pixels are transparent. If the
PNG is larger than `max_bytes`, it is rendered again at half the size until it fits.
"""

from __future__ import annotations

from os import PathLike

QUICKLOOK_SIZE = 512
QUICKLOOK_BYTES = 400_000


def quicklook_png(
    path: str | PathLike, *, max_size: int = QUICKLOOK_SIZE, max_bytes: int = QUICKLOOK_BYTES
) -> bytes:
    """The PNG bytes of a quicklook of the raster at `path` (at most `max_size` px on the long
    side and `max_bytes` bytes)."""
    import numpy as np
    import rasterio
    from rasterio.enums import Resampling

    from .formats import colorize, stretch_to_8bit

    with rasterio.Env(GDAL_PAM_ENABLED="NO"), rasterio.open(path) as src:
        indexes = [1, 2, 3] if src.count >= 3 else [1]
        size = max_size
        while True:
            scale = max(src.width, src.height) / size
            scale = max(scale, 1.0)  # never enlarge
            out_w, out_h = max(1, round(src.width / scale)), max(1, round(src.height / scale))
            data = src.read(
                indexes, out_shape=(len(indexes), out_h, out_w), resampling=Resampling.nearest, masked=True
            )
            values = np.ma.masked_invalid(data.astype("float32"))
            valid = ~np.ma.getmaskarray(values).any(axis=0)
            filled = values.filled(0)
            if len(indexes) == 3:
                image = stretch_to_8bit(filled, valid, (2, 98), joint=True)
            else:
                gray = stretch_to_8bit(filled, valid, (2, 98))[0]
                image = colorize(gray, valid, "viridis")
            png = encode_png(image, valid)
            if len(png) <= max_bytes or size <= 16:
                return png
            size //= 2


def encode_png(rgb, valid) -> bytes:
    """RGB uint8 (3, rows, cols) and a validity mask as an RGBA PNG (invalid: transparent)."""
    import io

    import numpy as np
    from PIL import Image

    rgba = np.concatenate([rgb.astype("uint8"), np.where(valid, 255, 0).astype("uint8")[None]])
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(np.moveaxis(rgba, 0, -1)), "RGBA").save(buffer, "PNG", optimize=True)
    return buffer.getvalue()
