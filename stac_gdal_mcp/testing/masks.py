"""Sentinel-2 SCL and Landsat QA_PIXEL: the class values and bits, random class maps with exact
fractions, and the truth fractions counted from a mask (definitions: the docstring of
:mod:`stac_gdal_mcp.testing.synthetic`)."""

from __future__ import annotations

from .kinds import _kind_info

# --------------------------------------------------------------------------- masks

SCL_NODATA, SCL_SATURATED, SCL_DARK, SCL_SHADOW = 0, 1, 2, 3
SCL_VEGETATION, SCL_NOT_VEGETATED, SCL_WATER, SCL_UNCLASSIFIED = 4, 5, 6, 7
SCL_CLOUD_MEDIUM, SCL_CLOUD_HIGH, SCL_CIRRUS, SCL_SNOW = 8, 9, 10, 11

SCL_CLASSES = [  # (value, name, description, color hint)
    (0, "no_data", "No data", "000000"),
    (1, "saturated_or_defective", "Saturated or defective", "FF0000"),
    (2, "dark_area_pixels", "Dark area pixels", "2F2F2F"),
    (3, "cloud_shadows", "Cloud shadows", "643200"),
    (4, "vegetation", "Vegetation", "00A000"),
    (5, "not_vegetated", "Not vegetated", "FFE65A"),
    (6, "water", "Water", "0000FF"),
    (7, "unclassified", "Unclassified", "808080"),
    (8, "cloud_medium_probability", "Cloud medium probability", "C0C0C0"),
    (9, "cloud_high_probability", "Cloud high probability", "FFFFFF"),
    (10, "thin_cirrus", "Thin cirrus", "64C8FF"),
    (11, "snow", "Snow or ice", "FF96FF"),
]

QA_FILL, QA_DILATED_CLOUD, QA_CIRRUS, QA_CLOUD = 0, 1, 2, 3
QA_CLOUD_SHADOW, QA_SNOW, QA_CLEAR, QA_WATER = 4, 5, 6, 7
QA_CLOUD_CONFIDENCE, QA_SHADOW_CONFIDENCE = 8, 10
QA_SNOW_CONFIDENCE, QA_CIRRUS_CONFIDENCE = 12, 14

_FLAG_BITS = [  # (offset, name, description)
    (QA_FILL, "fill", "Image or fill data"),
    (QA_DILATED_CLOUD, "dilated_cloud", "Dilated cloud"),
    (QA_CIRRUS, "cirrus", "Cirrus (high confidence)"),
    (QA_CLOUD, "cloud", "Cloud (high confidence)"),
    (QA_CLOUD_SHADOW, "cloud_shadow", "Cloud shadow (high confidence)"),
    (QA_SNOW, "snow", "Snow or ice (high confidence)"),
    (QA_CLEAR, "clear", "Clear: cloud and dilated cloud bits not set"),
    (QA_WATER, "water", "Water"),
]
_CONFIDENCE_BITS = [
    (QA_CLOUD_CONFIDENCE, "cloud_confidence", "Cloud confidence"),
    (QA_SHADOW_CONFIDENCE, "cloud_shadow_confidence", "Cloud shadow confidence"),
    (QA_SNOW_CONFIDENCE, "snow_ice_confidence", "Snow/ice confidence"),
    (QA_CIRRUS_CONFIDENCE, "cirrus_confidence", "Cirrus confidence"),
]


def qa_pixel_value(
    *,
    fill: bool = False,
    dilated_cloud: bool = False,
    cirrus: bool = False,
    cloud: bool = False,
    cloud_shadow: bool = False,
    snow: bool = False,
    water: bool = False,
    cloud_confidence: int = 1,
    shadow_confidence: int = 1,
    snow_confidence: int = 1,
    cirrus_confidence: int = 1,
) -> int:
    """One Landsat C2 QA_PIXEL value; the clear bit is derived (set unless cloud/dilated)."""
    if fill:
        return 1
    clear = not (cloud or dilated_cloud)
    flags = {
        QA_DILATED_CLOUD: dilated_cloud,
        QA_CIRRUS: cirrus,
        QA_CLOUD: cloud,
        QA_CLOUD_SHADOW: cloud_shadow,
        QA_SNOW: snow,
        QA_CLEAR: clear,
        QA_WATER: water,
    }
    value = sum(1 << bit for bit, on in flags.items() if on)
    confidences = {
        QA_CLOUD_CONFIDENCE: cloud_confidence,
        QA_SHADOW_CONFIDENCE: shadow_confidence,
        QA_SNOW_CONFIDENCE: snow_confidence,
        QA_CIRRUS_CONFIDENCE: cirrus_confidence,
    }
    return value + sum(level << bit for bit, level in confidences.items())


# SCL class of the generated scene -> QA_PIXEL value of the Landsat twin.
_QA_FOR_SCL = {
    SCL_NODATA: qa_pixel_value(fill=True),
    SCL_SATURATED: qa_pixel_value(),
    SCL_DARK: qa_pixel_value(),
    SCL_SHADOW: qa_pixel_value(cloud_shadow=True, shadow_confidence=3),
    SCL_VEGETATION: qa_pixel_value(),
    SCL_NOT_VEGETATED: qa_pixel_value(),
    SCL_WATER: qa_pixel_value(water=True),
    SCL_UNCLASSIFIED: qa_pixel_value(),
    SCL_CLOUD_MEDIUM: qa_pixel_value(dilated_cloud=True),  # the rim of a cloud blob
    SCL_CLOUD_HIGH: qa_pixel_value(cloud=True, cloud_confidence=3),
    SCL_CIRRUS: qa_pixel_value(cirrus=True, cirrus_confidence=3),
    SCL_SNOW: qa_pixel_value(snow=True, snow_confidence=3),
}


def _qa_pixel_bitfields() -> list[dict]:
    fields = [
        {
            "name": name,
            "description": description,
            "offset": offset,
            "length": 1,
            "classes": [
                {"value": 0, "name": f"not_{name}", "description": f"{name} bit not set"},
                {"value": 1, "name": name, "description": description},
            ],
        }
        for offset, name, description in _FLAG_BITS
    ]
    levels = [
        (0, "not_set", "No confidence level set"),
        (1, "low", "Low confidence"),
        (2, "medium", "Medium confidence (reserved for shadow, snow, cirrus)"),
        (3, "high", "High confidence"),
    ]
    fields += [
        {
            "name": name,
            "description": description,
            "offset": offset,
            "length": 2,
            "classes": [{"value": v, "name": n, "description": d} for v, n, d in levels],
        }
        for offset, name, description in _CONFIDENCE_BITS
    ]
    return fields


def scene_classes(
    rng,
    shape,
    *,
    cloud: float,
    shadow: float,
    cirrus: float = 0.0,
    snow: float = 0.0,
    water: float = 0.0,
    nodata: float = 0.0,
):
    """A random class map (SCL values) with exactly the requested pixel fractions.

    ``nodata`` is of all pixels; the others are of the valid pixels and are placed as blobs
    (thresholded smooth random fields; shadows are the cloud field shifted sideways).
    """
    import numpy as np

    fractions = {
        "cloud": cloud,
        "shadow": shadow,
        "cirrus": cirrus,
        "snow": snow,
        "water": water,
        "nodata": nodata,
    }
    for name, value in fractions.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} fraction must be within [0, 1], got {value}")
    if cloud + shadow + cirrus + snow + water > 1.0 + 1e-9:
        raise ValueError("cloud + shadow + cirrus + snow + water fractions exceed 1")

    rows, cols = shape
    size = max(rows, cols)
    classes = np.full(shape, SCL_VEGETATION, dtype="uint8")

    # Nodata: a band along the lower-right corner, as at the edge of a swath.
    yy, xx = np.mgrid[0:rows, 0:cols]
    edge = xx / cols * 0.8 + yy / rows
    free = np.ones(shape, dtype=bool)
    nodata_mask = _take_top(edge, free, round(nodata * rows * cols))
    classes[nodata_mask] = SCL_NODATA
    free &= ~nodata_mask
    n_valid = int(free.sum())

    cloud_field = _smooth_field(rng, shape, size / 14)
    clouds = _take_top(cloud_field, free, round(cloud * n_valid))
    cores = _take_top(cloud_field, clouds, round(0.65 * clouds.sum()))
    classes[clouds] = SCL_CLOUD_MEDIUM
    classes[cores] = SCL_CLOUD_HIGH
    free &= ~clouds

    # Late-morning sun from the south-east: shadows fall north-west of the clouds.
    shift = (-max(1, rows // 12), -max(1, cols // 10))
    shadows = _take_top(np.roll(cloud_field, shift, axis=(0, 1)), free, round(shadow * n_valid))
    classes[shadows] = SCL_SHADOW
    free &= ~shadows

    for value, fraction, scale in (
        (SCL_CIRRUS, cirrus, (size / 5, size / 5)),
        (SCL_SNOW, snow, (size / 10, size / 10)),
        (SCL_WATER, water, (size / 4, size / 40)),
    ):
        chosen = _take_top(_smooth_field(rng, shape, scale), free, round(fraction * n_valid))
        classes[chosen] = value
        free &= ~chosen

    # Clear land: vegetation with patches of bare soil, a little dark area and unclassified.
    land = _smooth_field(rng, shape, size / 20)
    n_free = int(free.sum())
    for value, share in ((SCL_NOT_VEGETATED, 0.3), (SCL_DARK, 0.01), (SCL_UNCLASSIFIED, 0.01)):
        chosen = _take_top(
            land if value == SCL_NOT_VEGETATED else rng.random(shape), free, round(share * n_free)
        )
        classes[chosen] = value
        free &= ~chosen
    return classes


def mask_truth(kind: str, mask) -> dict:
    """Truth fractions counted from an SCL or QA_PIXEL array (definitions: the docstring of
    :mod:`stac_gdal_mcp.testing.synthetic`)."""
    import numpy as np

    _kind_info(kind)  # rejects unknown kinds
    mask = np.asarray(mask)
    if kind == "sentinel-2-l2a":
        valid = mask != SCL_NODATA
        cloud = np.isin(mask, (SCL_CLOUD_MEDIUM, SCL_CLOUD_HIGH))
        shadow = mask == SCL_SHADOW
        cirrus = mask == SCL_CIRRUS
        snow = mask == SCL_SNOW
        water = mask == SCL_WATER
        not_clear = cloud | shadow | cirrus | (mask == SCL_SATURATED)
    else:

        def bit(n):
            return (mask >> n) & 1 == 1

        valid = ~bit(QA_FILL)
        cloud = bit(QA_CLOUD) | bit(QA_DILATED_CLOUD)
        shadow = bit(QA_CLOUD_SHADOW) & ~cloud
        cirrus = bit(QA_CIRRUS) & ~cloud
        snow = bit(QA_SNOW)
        water = bit(QA_WATER)
        not_clear = cloud | shadow | cirrus
    n_valid = int(valid.sum())

    def share(flags) -> float:
        return float((flags & valid).sum()) / n_valid if n_valid else 0.0

    return {
        "cloud_fraction": share(cloud),
        "shadow_fraction": share(shadow),
        "cirrus_fraction": share(cirrus),
        "snow_fraction": share(snow),
        "water_fraction": share(water),
        "clear_fraction": share(~not_clear),
        "nodata_fraction": float((~valid).sum()) / mask.size,
        "valid_pixels": n_valid,
    }


def _smooth_field(rng, shape, scale):
    """Zero-mean, unit-variance random field smoothed with a Gaussian of ``scale`` pixels."""
    import numpy as np

    sy, sx = scale if isinstance(scale, tuple) else (scale, scale)
    noise = rng.standard_normal(shape)
    fy = np.fft.fftfreq(shape[0])[:, None]
    fx = np.fft.rfftfreq(shape[1])[None, :]
    kernel = np.exp(-2 * np.pi**2 * ((sy * fy) ** 2 + (sx * fx) ** 2))
    field = np.fft.irfft2(np.fft.rfft2(noise) * kernel, s=shape)
    return (field - field.mean()) / (field.std() or 1.0)


def _take_top(score, candidates, k: int):
    """Boolean mask of the ``k`` candidate pixels with the highest score (exact count)."""
    import numpy as np

    chosen = np.zeros(score.shape, dtype=bool)
    index = np.flatnonzero(candidates)
    k = min(int(k), index.size)
    if k > 0:
        order = np.argsort(score.ravel()[index], kind="stable")
        chosen.flat[index[order[-k:]]] = True
    return chosen
