"""Class rasters the server knows by name when their items do not say (no classification
extension): Sentinel-2 L2A's scene classification (SCL, by its asset key) and ESA WorldCover
(its `map` asset). Each class as the classification extension writes it - `value`, `name`,
`description`, `color_hint` - so the code that reads the extension reads these the same way.

Names and colours are the publishers' own: ESA's Sentinel-2 L2A product specification (SCL
values 0-11 and the colours of ESA's SCL legend) and the ESA WorldCover product user manual
(values 10-100 and their map colours).
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
