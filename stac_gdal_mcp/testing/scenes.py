"""write_scene: one synthetic scene's COGs, thumbnail and item JSON, with the truth counted from
its mask, and the pixel values drawn for its classes."""

from __future__ import annotations

from pathlib import Path

from .files import _write_cog, _write_json, _write_png
from .items import _geojson, item
from .kinds import _kind_info
from .masks import (
    _QA_FOR_SCL,
    SCL_CIRRUS,
    SCL_CLOUD_HIGH,
    SCL_CLOUD_MEDIUM,
    SCL_DARK,
    SCL_NODATA,
    SCL_NOT_VEGETATED,
    SCL_SATURATED,
    SCL_SHADOW,
    SCL_SNOW,
    SCL_UNCLASSIFIED,
    SCL_VEGETATION,
    SCL_WATER,
    _smooth_field,
    mask_truth,
    scene_classes,
)

# ---------------------------------------------------------------- write_scene


def write_scene(
    kind: str,
    out_dir,
    item_id: str,
    datetime: str,
    *,
    seed: int = 0,
    collection_id: str | None = None,
    epsg: int = 32633,
    origin=(500000.0, 5000000.0),
    size_px: int = 512,
    cloud_fraction: float = 0.3,
    shadow_fraction: float = 0.05,
    snow_fraction: float = 0.0,
    water_fraction: float = 0.0,
    nodata_fraction: float = 0.0,
    href_base: str | None = None,
    blocksize: int = 256,
    with_visual: bool = True,
    cirrus_fraction: float = 0.0,
    platform: str | None = None,
    tile: str | None = None,
) -> tuple[dict, dict]:
    """Write one synthetic scene as COGs and return ``(item_dict, truth)``.

    The scene is ``size_px`` x ``size_px`` pixels at the kind's band resolution (10 m for
    Sentinel-2, 30 m for Landsat) with upper-left corner ``origin`` in ``epsg``.  Files go to
    ``out_dir/<item_id>/<key>.tif`` (thumbnail ``.png``) and the item JSON to
    ``out_dir/<item_id>/<item_id>.json``.  Asset hrefs are ``f"{href_base}/{item_id}/{key}.tif"``
    when ``href_base`` is given, else relative (``./<key>.tif``).  The cloud, shadow, cirrus,
    snow and water fractions are of the valid pixels, ``nodata_fraction`` of the whole mask
    grid (a diagonal band along one corner, 0 in every band).  ``truth`` is counted from the
    mask that was written (definitions: the docstring of :mod:`stac_gdal_mcp.testing.synthetic`).
    """
    import numpy as np

    info = _kind_info(kind)
    collection_id = collection_id or kind
    resolution = info["gsd"]
    transform = (resolution, 0.0, float(origin[0]), 0.0, -resolution, float(origin[1]))
    scene = item(
        kind,
        item_id,
        datetime,
        collection_id=collection_id,
        epsg=epsg,
        transform=transform,
        shape=(size_px, size_px),
        platform=platform,
        tile=tile,
    )
    if not with_visual:
        scene["assets"].pop("visual", None)
    mask_key = info["mask"]
    mask_asset = scene["assets"][mask_key]
    mask_shape = tuple(mask_asset.get("proj:shape", scene["properties"]["proj:shape"]))

    rng = np.random.default_rng(seed)
    classes = scene_classes(
        rng,
        mask_shape,
        cloud=cloud_fraction,
        shadow=shadow_fraction,
        cirrus=cirrus_fraction,
        snow=snow_fraction,
        water=water_fraction,
        nodata=nodata_fraction,
    )
    factor = info["mask_factor"]
    band_classes = np.repeat(np.repeat(classes, factor, 0), factor, 1)[:size_px, :size_px]
    reflectance = _reflectance(rng, band_classes, [b[2] for b in info["bands"]])

    if kind == "sentinel-2-l2a":
        mask = classes.astype("uint8")
    else:
        lookup = np.zeros(max(_QA_FOR_SCL) + 1, dtype="uint16")
        for scl_value, qa_value in _QA_FOR_SCL.items():
            lookup[scl_value] = qa_value
        mask = lookup[classes]
    truth = mask_truth(kind, mask)

    item_dir = Path(out_dir) / item_id
    item_dir.mkdir(parents=True, exist_ok=True)
    grid = {"epsg": epsg, "transform": transform, "blocksize": blocksize}
    valid = band_classes != SCL_NODATA
    for index, band in enumerate(info["bands"]):
        key = band[0]
        dn = np.rint((reflectance[index] - info["offset"]) / info["scale"])
        dn = np.where(valid, np.clip(dn, 1, 65535), 0).astype("uint16")
        _write_cog(item_dir / f"{key}.tif", dn[None], nodata=0, resampling="average", description=key, **grid)
    mask_transform = tuple(mask_asset.get("proj:transform", transform))
    _write_cog(
        item_dir / f"{mask_key}.tif",
        mask[None],
        epsg=epsg,
        transform=mask_transform,
        blocksize=blocksize,
        nodata=int(mask_asset["raster:bands"][0]["nodata"]),
        resampling="nearest",
        description=mask_key,
    )
    rgb = _true_color(reflectance, [b[2] for b in info["bands"]], valid)
    if "visual" in scene["assets"]:
        _write_cog(item_dir / "visual.tif", rgb, nodata=0, resampling="average", description=None, **grid)
    _write_png(item_dir / "thumbnail.png", rgb, max_size=128)

    _finish_item(scene, kind, truth, classes, mask_transform, epsg)
    base = f"{href_base.rstrip('/')}/{item_id}" if href_base else "."
    for key, asset in scene["assets"].items():
        asset["href"] = f"{base}/{key}.{'png' if key == 'thumbnail' else 'tif'}"
    scene["links"][0]["href"] = (
        f"{href_base.rstrip('/')}/collection.json" if href_base else "../collection.json"
    )
    _write_json(item_dir / f"{item_id}.json", scene)
    return scene, truth


def _finish_item(scene: dict, kind: str, truth: dict, classes, mask_transform, epsg) -> None:
    """Put the counted truth into the item properties and use the valid-data footprint."""
    props = scene["properties"]
    props["eo:cloud_cover"] = round(truth["cloud_fraction"] * 100, 2)
    if kind == "sentinel-2-l2a":
        valid = max(truth["valid_pixels"], 1)
        props.update(
            {
                "s2:high_proba_clouds_percentage": round(
                    100 * int((classes == SCL_CLOUD_HIGH).sum()) / valid, 2
                ),
                "s2:medium_proba_clouds_percentage": round(
                    100 * int((classes == SCL_CLOUD_MEDIUM).sum()) / valid, 2
                ),
                "s2:thin_cirrus_percentage": round(truth["cirrus_fraction"] * 100, 2),
                "s2:cloud_shadow_percentage": round(truth["shadow_fraction"] * 100, 2),
                "s2:snow_ice_percentage": round(truth["snow_fraction"] * 100, 2),
                "s2:water_percentage": round(truth["water_fraction"] * 100, 2),
                "s2:nodata_pixel_percentage": round(truth["nodata_fraction"] * 100, 2),
            }
        )
    else:
        props["landsat:cloud_cover_land"] = props["eo:cloud_cover"]
    if truth["nodata_fraction"] > 0 and truth["valid_pixels"] > 0:
        scene["geometry"], scene["bbox"] = _valid_footprint(classes != SCL_NODATA, mask_transform, epsg)


def _valid_footprint(valid, transform, epsg) -> tuple[dict, list[float]]:
    """WGS84 polygon around the valid pixels (simplified to about one pixel)."""
    from affine import Affine
    from pyproj import Transformer
    from rasterio.features import shapes
    from shapely import set_precision
    from shapely import transform as apply
    from shapely.geometry import shape
    from shapely.geometry.polygon import orient
    from shapely.ops import unary_union

    parts = [
        shape(geom)
        for geom, value in shapes(valid.astype("uint8"), mask=valid, transform=Affine(*transform))
        if value
    ]
    outline = unary_union(parts).simplify(abs(transform[0]), preserve_topology=True)
    if outline.geom_type == "MultiPolygon":
        outline = max(outline.geoms, key=lambda g: g.area)
    to_wgs84 = Transformer.from_crs(epsg, 4326, always_xy=True)
    polygon = orient(apply(outline.segmentize(abs(transform[0]) * 64), to_wgs84.transform, interleaved=False))
    polygon = set_precision(polygon, 1e-8)
    return _geojson(polygon), [round(v, 8) for v in polygon.bounds]


# ---------------------------------------------------------------- pixel values

# Surface reflectance per SCL class for (red, green, blue, nir) -- nir08 uses the nir column.
_REFLECTANCE = {
    SCL_SATURATED: (1.0, 1.0, 1.0, 1.0),
    SCL_DARK: (0.02, 0.025, 0.02, 0.04),
    SCL_SHADOW: (0.02, 0.025, 0.015, 0.08),
    SCL_VEGETATION: (0.04, 0.07, 0.035, 0.32),
    SCL_NOT_VEGETATED: (0.15, 0.12, 0.09, 0.24),
    SCL_WATER: (0.025, 0.045, 0.055, 0.012),
    SCL_UNCLASSIFIED: (0.09, 0.08, 0.07, 0.15),
    SCL_CLOUD_MEDIUM: (0.42, 0.42, 0.43, 0.45),
    SCL_CLOUD_HIGH: (0.68, 0.68, 0.70, 0.72),
    SCL_CIRRUS: (0.16, 0.16, 0.15, 0.33),
    SCL_SNOW: (0.82, 0.84, 0.86, 0.70),
}
_COMMON_NAME_COLUMN = {"red": 0, "green": 1, "blue": 2, "nir": 3, "nir08": 3}


def _reflectance(rng, classes, common_names):
    """Float32 reflectance (bands, rows, cols) for a class map.

    The texture is a smooth random field cut into flat brightness steps ("parcels"): it
    looks like fields and compresses well, which keeps the bundled sample catalog small.
    """
    import numpy as np

    size = max(classes.shape)
    texture = 1.0 + 0.05 * np.round(2 * _smooth_field(rng, classes.shape, size / 30))
    table = np.zeros((max(_REFLECTANCE) + 1, 4), dtype="float32")
    for value, row in _REFLECTANCE.items():
        table[value] = row
    bands = [np.clip(table[classes, _COMMON_NAME_COLUMN[name]] * texture, 0.0, 1.0) for name in common_names]
    return np.stack(bands).astype("float32")


def _true_color(reflectance, common_names, valid):
    """uint8 RGB like the Sentinel-2 TCI: reflectance 0..0.2 -> 1..255, nodata 0."""
    import numpy as np

    rgb = reflectance[[common_names.index(n) for n in ("red", "green", "blue")]]
    scaled = np.clip(np.rint(rgb / 0.2 * 254 + 1), 1, 255)
    return np.where(valid, scaled, 0).astype("uint8")
