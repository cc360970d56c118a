"""Deterministic Sentinel-2-like and Landsat-like items for the discovery tests, and the
independent computations the tests compare against (shapely + plain Python, not our code)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from stac_gdal_mcp.testing import synthetic

S2 = "disc-s2"
LS = "disc-ls"


def build(seed: int = 7) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    items = []
    start = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    for tile in range(4):  # 4 tiles side by side, ~11 km wide each, 10 dates
        for day in range(10):
            when = start + timedelta(days=5 * day, minutes=tile)
            item_id, platform = f"S2{'AB'[day % 2]}_T33T{tile}_{when:%Y%m%d}", f"sentinel-2{'ab'[day % 2]}"
            grid = {
                "transform": (10.0, 0.0, 400000.0 + tile * 11000, 0.0, -10.0, 5100000.0),
                "shape": (1098, 1098),
            }
            items.append(
                _item("sentinel-2-l2a", item_id, when, rng, collection_id=S2, platform=platform, **grid)
            )
    for path in range(3):  # 3 Landsat frames, 8 dates
        for day in range(8):
            when = start + timedelta(days=8 * day, hours=path)
            items.append(landsat_item(path, day, when, rng, collection_id=LS, shape=(1000, 1000)))
    collections = [synthetic.collection("sentinel-2-l2a", S2), synthetic.collection("landsat-c2-l2", LS)]
    return collections, items


def landsat_item(path: int, number: int, when: datetime, rng, *, collection_id: str, shape) -> dict:
    """The Landsat-like item of WRS-2 frame 19`path`/028 (frames 20 km apart) at `when`: Landsat 9
    on odd visit `number`s, 8 on even ones; its cloud cover drawn from `rng`."""
    item_id, platform = f"LC09_L2SP_19{path}028_{when:%Y%m%d}", "landsat-9" if number % 2 else "landsat-8"
    transform = (30.0, 0.0, 380000.0 + path * 20000, 0.0, -30.0, 5120000.0)
    return _item(
        "landsat-c2-l2",
        item_id,
        when,
        rng,
        collection_id=collection_id,
        transform=transform,
        shape=shape,
        platform=platform,
    )


def _item(kind: str, item_id: str, when: datetime, rng, **fields) -> dict:
    """synthetic.item at `when` with a cloud cover drawn from `rng` (0-100, 2 decimals)."""
    cover = round(rng.uniform(0, 100), 2)
    return synthetic.item(kind, item_id, when.strftime("%Y-%m-%dT%H:%M:%SZ"), cloud_cover=cover, **fields)


def expected(items, *, collections=None, where=None, **search):
    """Ids matching, computed independently of the code under test."""
    return [
        item["id"]
        for item in items
        if (not collections or item["collection"] in collections)
        and matches(item, **search)
        and (not where or where(item))
    ]


def matches(item: dict, *, bbox=None, start=None, end=None, max_cloud=None) -> bool:
    """Whether `item` intersects `bbox`, has its datetime in [start, end] and at most `max_cloud`
    cloud cover (each when given), with shapely and plain comparisons."""
    from shapely.geometry import box, shape

    props = item["properties"]
    when = datetime.fromisoformat(props["datetime"].replace("Z", "+00:00"))
    if bbox and not shape(item["geometry"]).intersects(box(*bbox)):
        return False
    if (start and when < start) or (end and when > end):
        return False
    return max_cloud is None or props["eo:cloud_cover"] <= max_cloud
