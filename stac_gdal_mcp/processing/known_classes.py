"""Class rasters the server knows by name when their items do not say (no classification
extension): Sentinel-2 L2A's scene classification (SCL, by its asset key) and ESA WorldCover
(its `map` asset), and Landsat Collection 2's QA_PIXEL bit field (its `qa_pixel` asset in a
Landsat collection). Each class as the classification extension writes it - `value`, `name`,
`description`, `color_hint` - and QA_PIXEL as its `classification:bitfields`, so the code that
reads the extension reads these the same way.

Names and colours are the publishers' own: ESA's Sentinel-2 L2A product specification (SCL
values 0-11 and the colours of ESA's SCL legend), the ESA WorldCover product user manual
(values 10-100 and their map colours) and USGS's Landsat Collection 2 Level-2 science product
guides (QA_PIXEL: bit 0 fill, 1 dilated cloud, 2 cirrus, 3 cloud, 4 cloud shadow, 5 snow, 6
clear, 7 water; bits 8-9, 10-11, 12-13 and 14-15 the confidence of cloud, cloud shadow,
snow/ice and cirrus: 0 not set, 1 low, 2 medium (cloud only; reserved for the others), 3 high).

A bit field is not a list of classes: each pixel value is a set of flags. Where a class raster's
values are counted (zonal `frac`, `unique`, `majority`; a preview's legend) a bit-field value is
named by what it says (`bit_value_name`): its set one-bit flags, then the confidences that are
medium or high ("cloud, dilated cloud; cloud confidence high"; 21824, the common clear land
pixel, is "clear": low confidence is the usual state and is not named). The share of a flag in
a zone is the sum of the `frac_<value>` columns whose name holds it. USGS gives QA_PIXEL no
colours: a value takes the SCL colour of its most telling flag (`bit_value_color`).
"""

from __future__ import annotations

SCL = (
    (0, "No data", "000000"),
    (1, "Saturated or defective", "ff0000"),
    (2, "Dark area pixels", "2f2f2f"),
    (3, "Cloud shadows", "643200"),
    (4, "Vegetation", "00a000"),
    (5, "Not vegetated", "ffe65a"),
    (6, "Water", "0000ff"),
    (7, "Unclassified", "808080"),
    (8, "Cloud medium probability", "c0c0c0"),
    (9, "Cloud high probability", "ffffff"),
    (10, "Thin cirrus", "64c8ff"),
    (11, "Snow or ice", "ff96ff"),
)
WORLDCOVER = (
    (10, "Tree cover", "006400"),
    (20, "Shrubland", "ffbb22"),
    (30, "Grassland", "ffff4c"),
    (40, "Cropland", "f096ff"),
    (50, "Built-up", "fa0000"),
    (60, "Bare / sparse vegetation", "b4b4b4"),
    (70, "Snow and ice", "f0f0f0"),
    (80, "Permanent water bodies", "0064c8"),
    (90, "Herbaceous wetland", "0096a0"),
    (95, "Mangroves", "00cf75"),
    (100, "Moss and lichen", "fae6a0"),
)


# Landsat Collection 2 QA_PIXEL as `classification:bitfields` (name, offset, length, classes)
QA_PIXEL_FLAGS = ("fill", "dilated_cloud", "cirrus", "cloud", "cloud_shadow", "snow", "clear", "water")
QA_PIXEL_CONFIDENCES = ("cloud", "cloud_shadow", "snow", "cirrus")
QA_PIXEL = tuple(
    {"name": name, "offset": bit, "length": 1, "classes": [{"value": 1, "name": name}]}
    for bit, name in enumerate(QA_PIXEL_FLAGS)
) + tuple(
    {
        "name": f"{name}_confidence",
        "offset": 8 + 2 * i,
        "length": 2,
        "classes": [
            {"value": v, "name": level}
            for v, level in enumerate(("not_set", "low", "medium" if name == "cloud" else "reserved", "high"))
        ],
    }
    for i, name in enumerate(QA_PIXEL_CONFIDENCES)
)
# the colour of a bit-field value: its first flag in this order, in the SCL legend's colour
FLAG_COLORS = (
    ("fill", "000000"),
    ("cloud", "ffffff"),
    ("dilated cloud", "c0c0c0"),
    ("cloud shadow", "643200"),
    ("cirrus", "64c8ff"),
    ("snow", "ff96ff"),
    ("water", "0000ff"),
    ("clear", "00a000"),
)
UNNAMED_COLOR = "808080"


def known_bitfields(collection: str | None, asset_key: str) -> list[dict]:
    """The bit fields of asset `asset_key` of an item of `collection` when the server knows them
    (Landsat Collection 2 QA_PIXEL: key `qa_pixel` in a Landsat collection); [] otherwise."""
    if asset_key.lower() == "qa_pixel" and "landsat" in str(collection or "").lower():
        return [dict(f) for f in QA_PIXEL]
    return []


def _words(name) -> str:
    return str(name).replace("_", " ").strip()


def bit_value_name(value: int, bitfields: list[dict]) -> str:
    """A bit-field value named by its set one-bit flags, then its multi-bit fields (confidences)
    that are above low ("cloud, dilated cloud; cloud confidence high"); "no flag set" else."""
    flags, levels = [], []
    for f in sorted(bitfields, key=lambda f: int(f.get("offset", 0))):
        length, offset = int(f.get("length", 1)), int(f.get("offset", 0))
        field = (int(value) >> offset) & ((1 << length) - 1)
        names = {c.get("value"): c.get("name") for c in f.get("classes") or []}
        if length == 1 and field:
            flags.append(_words(f.get("name") or names.get(1) or f"bit {offset}"))
        elif length > 1 and field > 1:
            levels.append(f"{_words(f.get('name') or f'bits {offset}')} {_words(names.get(field, field))}")
    text = ", ".join(flags) + ("; " if flags and levels else "") + ", ".join(levels)
    return text or "no flag set"


def bit_value_color(name: str) -> str:
    """The colour of a bit-field value by its name (`bit_value_name`): that of its first flag in
    FLAG_COLORS' order, e.g. a cloud's white, a clear pixel's green."""
    flags = name.split(";")[0].split(", ")
    exact = [color for word, color in FLAG_COLORS if word in flags]
    loose = [color for word, color in FLAG_COLORS if any(word in flag for flag in flags)]
    return (exact or loose or [UNNAMED_COLOR])[0]


def known_classes(collection: str | None, asset_key: str) -> list[dict]:
    """The classes of asset `asset_key` of an item of `collection` when the server knows them
    (SCL by its key in any collection; WorldCover's `map` in an `esa-worldcover` collection), as
    `classification:classes` entries (value 0 of SCL marked nodata); [] otherwise."""
    if asset_key.lower() == "scl":
        table = SCL
    elif asset_key == "map" and str(collection or "").startswith("esa-worldcover"):
        table = WORLDCOVER
    else:
        return []
    return [
        {
            "value": value,
            "name": name.lower().replace(" ", "_").replace("/", "").replace("__", "_"),
            "description": name,
            "color_hint": color.upper(),
            **({"nodata": True} if table is SCL and value == 0 else {}),
        }
        for value, name, color in table
    ]


def asset_classes(item: dict | None, asset_key: str | None) -> tuple[list[dict], list[dict]]:
    """(classes, bit fields) of an item's asset: its classification extension's
    (`classification:classes`, `classification:bitfields`, on the asset or its bands), else the
    ones the server knows (`known_classes`, `known_bitfields`); ([], []) for other rasters."""
    from .masks import classification

    item = item or {}
    asset = (item.get("assets") or {}).get(asset_key or "") or {}
    collection, key = item.get("collection"), asset_key or ""
    classes = classification(asset, "classification:classes")
    bitfields = [] if classes else classification(asset, "classification:bitfields")
    if classes or bitfields:
        return classes, bitfields
    return known_classes(collection, key), known_bitfields(collection, key)


def hex_color(hint) -> str | None:
    """A classification color_hint ("00A000", "#00a000") as "#00a000", None when it is not one."""
    text = str(hint or "").removeprefix("#").lower()
    return f"#{text}" if len(text) == 6 and all(c in "0123456789abcdef" for c in text) else None


def name_values(values, classes: list[dict], bitfields: list[dict]) -> dict[int, dict]:
    """Pixel value -> {"name", "color" ("#rrggbb"), "nodata"} for the `values` of a class raster:
    a class's description (else its name) and color_hint, a bit-field value's flags
    (`bit_value_name`) and colour; a class without a colour takes one of matplotlib's tab20,
    a value no class lists is "value N (unlisted)" in grey."""
    from matplotlib import colormaps

    spare = colormaps["tab20"]
    table = {}
    for i, c in enumerate(c for c in classes if "value" in c):
        color = hex_color(c.get("color_hint")) or "#{:02x}{:02x}{:02x}".format(
            *(round(255 * v) for v in spare(i % 20)[:3])
        )
        name = str(c.get("description") or c.get("name") or c["value"])
        table[int(c["value"])] = {"name": name, "color": color, "nodata": bool(c.get("nodata"))}
    named = {}
    for value in (int(v) for v in values):
        if value in table:
            named[value] = table[value]
        elif bitfields:
            name = bit_value_name(value, bitfields)
            named[value] = {"name": name, "color": f"#{bit_value_color(name)}", "nodata": name == "fill"}
        else:
            named[value] = {
                "name": f"value {value} (unlisted)",
                "color": f"#{UNNAMED_COLOR}",
                "nodata": False,
            }
    return named
