"""Cloud-mask schemes: which asset of an item is its cloud mask, and what its values mean.

A scheme names, for each class this package reports (nodata, cloud, shadow, cirrus, snow,
water), the mask values (a classification like Sentinel-2 SCL) or the bits (a bit field like
Landsat QA_PIXEL or HLS Fmask) that mean it. Where bits overlap, cloud wins: a pixel with
both the cloud and the shadow (or cirrus) bit counts as cloud only. `clear` is derived: a
valid pixel that is not cloud, shadow, cirrus or one of the scheme's `unusable` values/bits
(SCL 1 "saturated or defective", Fmask bit 2 "adjacent to cloud/shadow"). Snow and water are
clear-sky surfaces, so they count as clear.

Detection (`find_mask`), in order:
1. the STAC classification extension on an asset (`classification:classes` or
   `classification:bitfields`, on the asset or its bands), mapped by class names;
2. the known mask assets: Earth Search `scl` / Planetary Computer `SCL` (Sentinel-2 L2A),
   `qa_pixel` (Landsat Collection 2), `Fmask` (HLS).

Decoding (`MaskScheme.decode`) uses only `==`, `&` and `|`, so it works on numpy arrays,
dask arrays and xarray DataArrays alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import AssetUnreadable, MaskNotFound
from ..stac import band_entries

CLASSES = ("nodata", "cloud", "shadow", "cirrus", "snow", "water")
REPORTED = ("cloud", "shadow", "cirrus", "snow", "water", "clear")


@dataclass(frozen=True)
class MaskScheme:
    """What the values of a mask asset mean.

    encoding="values": `classes` maps a class to the pixel values that mean it.
    encoding="bits": `classes` maps a class to the bit positions that mean it (any set bit).
    `fill` is a whole pixel value meaning no data in either encoding (Fmask 255).
    """

    name: str
    title: str
    encoding: Literal["values", "bits"]
    classes: dict[str, tuple[int, ...]]
    unusable: tuple[int, ...] = ()
    fill: int | None = None

    def _any(self, mask, codes: tuple[int, ...]):
        hit = None
        for code in codes:
            test = (mask == code) if self.encoding == "values" else ((mask & (1 << code)) != 0)
            hit = test if hit is None else (hit | test)
        return hit

    def decode(self, mask, nodata: float | int | None = None) -> MaskClasses:
        """Boolean class arrays for an integer mask array (numpy, dask or xarray).

        `nodata` is the asset's own nodata value (from `raster:bands` or the file), if any.
        Every class except `nodata` is False where the pixel is nodata.
        """
        invalid = mask != mask  # NaN where a float load marked nodata; all False for integers
        if mask.dtype.kind == "f":
            mask = (mask.fillna(0) if hasattr(mask, "fillna") else _nan_to_zero(mask)).astype("int64")
        for code in [c for c in (self.fill, nodata) if c is not None]:
            invalid = invalid | (mask == int(code))
        found = self._any(mask, self.classes.get("nodata", ()))
        if found is not None:
            invalid = invalid | found
        valid = ~invalid
        out = {"nodata": invalid}
        for name in CLASSES[1:]:
            found = self._any(mask, self.classes.get(name, ()))
            out[name] = (found & valid) if found is not None else (valid & False)
        # a pixel flagged both cloud and shadow/cirrus (possible in bit fields) counts as cloud
        out["shadow"] = out["shadow"] & ~out["cloud"]
        out["cirrus"] = out["cirrus"] & ~out["cloud"]
        not_clear = out["cloud"] | out["shadow"] | out["cirrus"]
        found = self._any(mask, self.unusable)
        if found is not None:
            not_clear = not_clear | found
        out["clear"] = valid & ~not_clear
        return MaskClasses(**out)

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly account of the scheme (for results and records)."""
        key = "values" if self.encoding == "values" else "bits"
        return {
            "scheme": self.name,
            "title": self.title,
            "encoding": self.encoding,
            **{f"{name}_{key}": list(codes) for name, codes in self.classes.items() if codes},
            **({f"unusable_{key}": list(self.unusable)} if self.unusable else {}),
            **({"fill": self.fill} if self.fill is not None else {}),
        }


def _nan_to_zero(mask):
    import numpy as np

    return np.where(mask != mask, 0, mask)


@dataclass
class MaskClasses:
    """Boolean arrays, one per class, all the shape of the decoded mask."""

    nodata: Any
    cloud: Any
    shadow: Any
    cirrus: Any
    snow: Any
    water: Any
    clear: Any

    @property
    def valid(self):
        return ~self.nodata


SENTINEL2_SCL = MaskScheme(
    name="sentinel-2-scl",
    title="Sentinel-2 L2A scene classification (SCL)",
    encoding="values",
    classes={"nodata": (0,), "cloud": (8, 9), "shadow": (3,), "cirrus": (10,), "snow": (11,), "water": (6,)},
    unusable=(1,),
)

LANDSAT_QA_PIXEL = MaskScheme(
    name="landsat-c2-qa-pixel",
    title="Landsat Collection 2 QA_PIXEL bit field",
    encoding="bits",
    # bit 0 fill, 1 dilated cloud, 2 cirrus, 3 cloud, 4 cloud shadow, 5 snow, 6 clear, 7 water
    classes={"nodata": (0,), "cloud": (1, 3), "shadow": (4,), "cirrus": (2,), "snow": (5,), "water": (7,)},
)

HLS_FMASK = MaskScheme(
    name="hls-fmask",
    title="HLS Fmask bit field",
    encoding="bits",
    # bit 0 cirrus, 1 cloud, 2 adjacent to cloud/shadow, 3 cloud shadow, 4 snow/ice, 5 water
    classes={"cloud": (1,), "shadow": (3,), "cirrus": (0,), "snow": (4,), "water": (5,)},
    unusable=(2,),
    fill=255,
)

# Known mask asset keys, in the order they are tried.
KNOWN_ASSETS: dict[str, MaskScheme] = {
    "scl": SENTINEL2_SCL,
    "SCL": SENTINEL2_SCL,
    "qa_pixel": LANDSAT_QA_PIXEL,
    "QA_PIXEL": LANDSAT_QA_PIXEL,
    "Fmask": HLS_FMASK,
    "fmask": HLS_FMASK,
}


def qa_field(mask, offset: int, length: int = 1):
    """The unsigned integer stored in bits offset..offset+length-1 (e.g. QA_PIXEL cloud confidence: 8, 2)."""
    return (mask >> offset) & ((1 << length) - 1)


# --- the classification extension -------------------------------------------------------------


def _category(name: str) -> str | None:
    """Our class for a classification class or bit field name, by its words."""
    text = name.lower().replace("-", "_").replace(" ", "_")
    if text.startswith(("not_", "no_cloud", "non_")) and "no_data" not in text:
        return None
    if any(w in text for w in ("no_data", "nodata", "fill")):
        return "nodata"
    if "adjacent" in text or "saturat" in text or "defective" in text:
        return "unusable"
    if "shadow" in text:
        return None if ("dark" in text or "topographic" in text or "terrain" in text) else "shadow"
    if "cirrus" in text:
        return "cirrus"
    if "snow" in text or text == "ice" or "_ice" in text:
        return "snow"
    if "cloud" in text and "confidence" not in text and "probability_low" not in text:
        return "cloud" if "low_probability" not in text else None
    if "water" in text:
        return "water"
    return None


def classification(asset: dict, key: str) -> list:
    """The asset's `key` entries (classification:classes or :bitfields), its bands' included."""
    found = list(asset.get(key) or [])
    for band in band_entries(asset):
        found += band.get(key) or []
    return found


def scheme_from_classification(asset_key: str, asset: dict) -> MaskScheme | None:
    """A scheme from `classification:classes` / `classification:bitfields`, or None when they
    are absent or name no cloud class."""
    codes: dict[str, list[int]] = {}
    encoding: Literal["values", "bits"]
    classes = classification(asset, "classification:classes")
    bitfields = classification(asset, "classification:bitfields")
    if classes:
        encoding = "values"
        for c in classes:
            if "value" not in c:
                continue
            category = (
                "nodata" if c.get("nodata") else _category(str(c.get("name") or c.get("description") or ""))
            )
            if category:
                codes.setdefault(category, []).append(int(c["value"]))
    elif bitfields:
        encoding = "bits"
        for f in bitfields:
            if int(f.get("length", 1)) != 1 or "offset" not in f:
                continue  # confidence levels and other multi-bit fields
            set_class = next((c for c in f.get("classes") or [] if c.get("value") == 1), {})
            category = _category(str(f.get("name") or set_class.get("name") or ""))
            if category:
                codes.setdefault(category, []).append(int(f["offset"]))
    else:
        return None
    if not codes.get("cloud"):
        return None
    return MaskScheme(
        name=f"classification-{'classes' if encoding == 'values' else 'bitfields'}",
        title=f"classification:{'classes' if encoding == 'values' else 'bitfields'} of asset '{asset_key}'",
        encoding=encoding,
        classes={k: tuple(v) for k, v in codes.items() if k != "unusable"},
        unusable=tuple(codes.get("unusable", ())),
    )


# --- finding the mask of an item ----------------------------------------------------------------


@dataclass(frozen=True)
class MaskSource:
    """The mask asset of one item and how to read it."""

    asset: str
    href: str
    scheme: MaskScheme
    detected_by: Literal["classification", "known asset"]
    nodata: float | None = None

    def describe(self) -> str:
        if self.detected_by == "classification":
            return f"asset '{self.asset}', read through its {self.scheme.title.split(' of ')[0]}"
        return f"asset '{self.asset}' as {self.scheme.title} (known asset key)"


def asset_nodata(asset: dict) -> float | None:
    """The nodata value declared in `raster:bands` (STAC 1.0) or `bands`/`nodata` (STAC 1.1)."""
    for band in band_entries(asset):
        if band.get("nodata") is not None:
            return band["nodata"]
    return asset.get("nodata")


def find_mask(item: dict, collection: dict | None = None, asset: str | None = None) -> MaskSource:
    """The cloud-mask asset of an item (see the module docstring for the order of detection).

    `collection` lends its `item_assets` metadata when the item's assets carry none.
    `asset` forces one asset key (its scheme is still detected).
    """
    assets = item.get("assets") or {}
    item_assets = (collection or {}).get("item_assets") or {}
    keys = [asset] if asset else list(assets)
    if asset and asset not in assets:
        raise MaskNotFound(
            f"item '{item.get('id')}' has no asset '{asset}'; its assets: {', '.join(assets) or '(none)'}"
        )

    def merged(key: str) -> dict:
        return {**item_assets.get(key, {}), **assets[key]}

    # 1. the classification extension (known keys first, so a mask is preferred to e.g. a land cover)
    ordered = [k for k in keys if k in KNOWN_ASSETS] + [k for k in keys if k not in KNOWN_ASSETS]
    for key in ordered:
        meta = merged(key)
        scheme = scheme_from_classification(key, meta)
        if scheme is not None and (
            key in KNOWN_ASSETS or "cloud" in " ".join(meta.get("roles") or []) or _maskish(key, meta)
        ):
            return MaskSource(key, meta["href"], scheme, "classification", asset_nodata(meta))
    # 2. known asset keys
    for key in ordered:
        if key in KNOWN_ASSETS:
            meta = merged(key)
            return MaskSource(key, meta["href"], KNOWN_ASSETS[key], "known asset", asset_nodata(meta))
    raise MaskNotFound(
        f"no cloud mask found in item '{item.get('id')}' of collection '{item.get('collection')}': "
        "looked for an asset with the classification extension (classification:classes or "
        "classification:bitfields naming a cloud class) and for the known mask assets "
        "'scl'/'SCL' (Sentinel-2 L2A SCL), 'qa_pixel' (Landsat Collection 2 QA_PIXEL) and "
        f"'Fmask' (HLS); the item's assets are: {', '.join(assets) or '(none)'}"
    )


def _maskish(key: str, meta: dict) -> bool:
    """A non-standard asset that still looks like a quality/cloud mask."""
    words = f"{key} {meta.get('title') or ''} {' '.join(meta.get('roles') or [])}".lower()
    return any(w in words for w in ("cloud", "mask", "qa", "quality", "classification", "scl"))


MASK_DRIVERS = ("GTiff", "JP2OpenJPEG")


def check_mask_format(source) -> None:
    """Masks are read as GeoTIFF or JPEG 2000 only (a file name that says nothing: GeoTIFF)."""
    from .access import suffix_driver

    if (suffix_driver(source.href_unsigned) or "GTiff") not in MASK_DRIVERS:
        raise AssetUnreadable(f"{source.href_unsigned} is not a GeoTIFF or JPEG 2000 mask")
