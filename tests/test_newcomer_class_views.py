"""Class rasters are drawn and counted as classes, not numbers:

- a preview of a Sentinel-2 SCL (the asset as the Planetary Computer publishes it: no
  classification extension) shows each class in ESA's SCL colour and answers with a legend
  naming the classes shown, their shares those of the served file read with rasterio;
- Landsat Collection 2 QA_PIXEL values are named by their flags, from the Planetary Computer's
  own `classification:bitfields` and, where an item carries none, by the asset key in a Landsat
  collection: zonal_stats' `frac` and `unique` columns and the preview's legend;
- ESA WorldCover's `map` (no extension) in ESA's colours, and an asset with the classification
  extension in its own color_hints (a class without one in a colour of its own, a white one's
  legend swatch framed dark);
- a white class in the class-fraction chart is outlined dark (visible on the white page).

On the pgstac test bed and the Range server; the assets' metadata are the real Planetary
Computer items' (tests/real_items/planetary-computer), their pixels synthetic scenes.
"""

from __future__ import annotations

import base64
import io
import json
import uuid
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from helpers import utm_aoi
from PIL import Image
from rasterio.enums import Resampling
from rasterio.features import geometry_mask
from rasterio.warp import transform_geom

UID = uuid.uuid4().hex[:8]
S2 = f"sentinel-2-l2a-views-{UID}"
LANDSAT = f"landsat-c2-l2-views-{UID}"
ORIGIN = (500000.0, 5000000.0)
REAL = Path(__file__).parent / "real_items" / "planetary-computer"
# ESA's SCL legend (Sentinel-2 L2A product specification), written out here as the expectation
SCL_COLOURS = {
    1: (255, 0, 0), 2: (47, 47, 47), 3: (100, 50, 0), 4: (0, 160, 0), 5: (255, 230, 90),
    6: (0, 0, 255), 7: (128, 128, 128), 8: (192, 192, 192), 9: (255, 255, 255),
    10: (100, 200, 255), 11: (255, 150, 255),
}  # fmt: skip
# USGS Landsat Collection 2 QA_PIXEL bits, written out here as the expectation
QA_FLAGS = {0: "fill", 1: "dilated cloud", 2: "cirrus", 3: "cloud", 4: "cloud shadow", 5: "snow", 6: "clear", 7: "water"}  # fmt: skip


def real_asset(name: str, key: str, href: str) -> dict:
    """Asset `key` of the first real Planetary Computer item of `name`, pointed at `href`."""
    item = json.loads((REAL / name).read_text())[0]
    return {**item["assets"][key], "href": href}


def expected_qa_name(value: int) -> str:
    flags = [QA_FLAGS[b] for b in range(8) if value >> b & 1]
    levels = [
        f"{what} confidence {'medium' if what == 'cloud' and level == 2 else 'high'}"
        for what, level in (
            (w, value >> offset & 3)
            for w, offset in (("cloud", 8), ("cloud shadow", 10), ("snow", 12), ("cirrus", 14))
        )
        if level > 1
    ]
    return ", ".join(flags) + ("; " if flags and levels else "") + ", ".join(levels) or "no flag set"


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    from stac_gdal_mcp.testing import synthetic

    folder = f"views-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    common = {"href_base": href_base, "size_px": 256, "water_fraction": 0.15, "snow_fraction": 0.05}
    s2, _ = synthetic.write_scene(
        "sentinel-2-l2a", out_dir, "VIEWS_S2", "2024-06-01T10:00:00Z", collection_id=S2,
        with_visual=False, seed=7, cloud_fraction=0.2, **common,
    )  # fmt: skip
    s2["assets"]["scl"] = real_asset("sentinel-2-l2a-pc.json", "SCL", s2["assets"]["scl"]["href"])
    landsat = []
    for n, keep_bitfields in enumerate((True, False)):
        item, _ = synthetic.write_scene(
            "landsat-c2-l2", out_dir, f"VIEWS_LS_{n}", f"2024-06-0{n + 2}T10:00:00Z",
            collection_id=LANDSAT, seed=11, cirrus_fraction=0.05, **common,
        )  # fmt: skip
        qa = real_asset("landsat-c2-l2-pc.json", "qa_pixel", item["assets"]["qa_pixel"]["href"])
        if not keep_bitfields:
            qa.pop("classification:bitfields")
        item["assets"]["qa_pixel"] = qa
        landsat.append(item)
    collections = [synthetic.collection("sentinel-2-l2a", S2), synthetic.collection("landsat-c2-l2", LANDSAT)]
    for c in collections:
        c.get("item_assets", {}).pop("scl", None)
        c.get("item_assets", {}).pop("qa_pixel", None)
    covers = [
        class_item(s2, out_dir, href_base, collection, key, values) for collection, key, values in COVERS
    ]
    collections += [
        {**synthetic.collection("sentinel-2-l2a", c["collection"]), "item_assets": {}} for c in covers
    ]
    pgstac_api.load(collections, [s2, *landsat, *covers])
    return {"dir": out_dir, "landsat": landsat}


WORLDCOVER = f"esa-worldcover-views-{UID}"
LANDCOVER = f"landcover-views-{UID}"
# a land cover's own classification: its colours (one white, one without a colour_hint)
OWN_CLASSES = [
    {"value": 1, "name": "forest", "description": "Forest", "color_hint": "1B5E20"},
    {"value": 2, "name": "glacier", "description": "Glacier", "color_hint": "FFFFFF"},
    {"value": 3, "name": "lake", "description": "Lake", "color_hint": "4FC3F7"},
    {"value": 4, "name": "other", "description": "Other"},
]
# ESA WorldCover's legend (product user manual), written out here as the expectation
WORLDCOVER_COLOURS = {10: (0, 100, 0), 30: (255, 255, 76), 50: (250, 0, 0), 80: (0, 100, 200)}
COVERS = [(WORLDCOVER, "map", list(WORLDCOVER_COLOURS)), (LANDCOVER, "landcover", [1, 2, 3, 4])]


def class_item(
    base: dict, out_dir: Path, href_base: str, collection: str, key: str, values: list[int]
) -> dict:
    """An item of `collection` on `base`'s grid whose one asset `key` is a class raster: four
    bands of `values`, written as a COG (nodata 0)."""
    from helpers import write_cog

    with rasterio.open(out_dir / "VIEWS_S2" / "scl.tif") as src:
        transform, shape = src.transform, src.shape
    data = np.zeros(shape, dtype="uint8")
    for n, value in enumerate(values):
        data[n * shape[0] // len(values) : (n + 1) * shape[0] // len(values), 4:] = value
    write_cog(
        out_dir / f"{collection}.tif", data, transform=transform, nodata=0, OVERVIEW_RESAMPLING="NEAREST"
    )
    asset = {"href": f"{href_base}/{collection}.tif", "type": "image/tiff; application=geotiff; profile=cloud-optimized",
             "roles": ["data"], "raster:bands": [{"nodata": 0, "data_type": "uint8"}]}  # fmt: skip
    if collection == LANDCOVER:
        asset["classification:classes"] = OWN_CLASSES
    return {**base, "id": f"{collection}-item", "collection": collection, "assets": {key: asset}, "links": []}


@pytest.fixture
def settings(make_settings, pgstac_api):
    return make_settings(catalogs=[{"id": "bed", "url": pgstac_api.url}], default_catalog="bed")


def decode(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


async def preview(build, settings, collection: str, item_id: str, asset: str):
    """(answer, the image it sends, the saved PNG) of a 128-px preview of one asset."""
    async with Client(build(settings)) as client:
        result = await client.call_tool_mcp(
            "preview", {"collection_id": collection, "item_id": item_id, "asset": asset, "max_size": 128}
        )
        assert not result.is_error, result.content[0].text
        record = result.structured_content
        [saved] = await client.read_resource(f"stac-gdal://outputs/{record['id']}/file")
    (sent,) = [decode(base64.b64decode(b.data)) for b in result.content if b.type == "image"]
    return result, sent, decode(base64.b64decode(saved.blob))


def read_shown(path: Path, shape) -> np.ndarray:
    """The file read as the preview reads it: decimated to `shape`, nearest (a class stays a class)."""
    with rasterio.open(path) as src:
        return src.read(1, out_shape=shape, resampling=Resampling.nearest)


async def test_scl_preview_in_scl_colours_with_a_class_legend(scenes, settings, build):
    result, sent, saved = await preview(build, settings, S2, "VIEWS_S2", "scl")
    values = read_shown(scenes["dir"] / "VIEWS_S2" / "scl.tif", saved.shape[:2])
    for value, rgb in SCL_COLOURS.items():  # every pixel in its class's colour, nodata transparent
        where = values == value
        assert (saved[where][:, :3] == rgb).all() and (saved[where][:, 3] == 255).all(), value
    assert (saved[values == 0][:, 3] == 0).all()
    assert (values == 4).any() and (values == 6).any() and (values == 9).any()
    classes = {c["value"]: c for c in result.structured_content["properties"]["preview:classes"]}
    valid = values[values > 0]
    assert set(classes) == set(np.unique(valid).tolist())
    for value, c in classes.items():
        assert c["share"] == pytest.approx((valid == value).mean(), abs=1e-4)
        assert c["color"] == "#{:02x}{:02x}{:02x}".format(*SCL_COLOURS[value])
    assert classes[4]["name"] == "Vegetation" and classes[6]["name"] == "Water"
    text = " ".join(b.text for b in result.content if b.type == "text")
    assert "classes in their own colours: " in text and "Vegetation" in text and "viridis" not in text
    legend = sent[saved.shape[0] :, :, :3]  # the legend under the picture: its swatches' colours
    assert sent.shape[0] > saved.shape[0] + 60
    for value in classes:
        assert (legend == SCL_COLOURS[value]).all(axis=-1).sum() >= 20, value


@pytest.mark.parametrize("n", [0, 1], ids=["real-bitfields", "by-asset-key"])
async def test_qa_pixel_values_named_by_their_flags(scenes, settings, build, n):
    item_id = f"VIEWS_LS_{n}"
    path = scenes["dir"] / item_id / "qa_pixel.tif"
    result, sent, saved = await preview(build, settings, LANDSAT, item_id, "qa_pixel")
    values = read_shown(path, saved.shape[:2])
    classes = {c["value"]: c["name"] for c in result.structured_content["properties"]["preview:classes"]}
    assert set(classes) == set(np.unique(values[values != 1]).tolist())
    assert classes == {v: expected_qa_name(v) for v in classes}
    assert {
        21824: "clear",
        21952: "clear, water",
        22280: "cloud; cloud confidence high",
    }.items() <= classes.items()
    assert (saved[values == 1][:, 3] == 0).all()  # fill: transparent
    assert (saved[values == 21952][:, :3] == (0, 0, 255)).all()  # water in SCL's water colour

    west, south, east, north = utm_aoi(ORIGIN[0] + 300, ORIGIN[1] - 7200, ORIGIN[0] + 7200, ORIGIN[1] - 300)
    zone = {"type": "Polygon", "coordinates": [[[west, south], [east, south], [east, north], [west, north], [west, south]]]}  # fmt: skip
    arguments = {
        "geometries": zone, "expression": "qa_pixel", "stats": ["frac", "unique"], "mask_clouds": False,
        "search": {"collections": [LANDSAT], "ids": [item_id]},
    }  # fmt: skip
    async with Client(build(settings)) as client:
        answer = await client.call_tool_mcp("zonal_stats", arguments)
    assert not answer.is_error, answer.content[0].text
    table = answer.structured_content
    named = table["classes"]
    assert named and named == {v: expected_qa_name(int(v)) for v in named}
    text = "\n".join(b.text for b in answer.content if b.type == "text")
    assert "clear, water" in text
    with rasterio.open(path) as src:  # the zone's pixels (centres inside), numpy's count
        inside = ~geometry_mask([transform_geom("EPSG:4326", src.crs, zone)], src.shape, src.transform)
        counted = src.read(1)[inside]
    counted = counted[counted != 1]
    assert {c for c in table["stats"] if c.startswith("frac_")} == {f"frac_{v}" for v in np.unique(counted)}
    assert set(named) == {str(v) for v in np.unique(counted)}
    from stac_gdal_mcp import Session

    frame = Session(settings).zonal_stats(zone, **{k: v for k, v in arguments.items() if k != "geometries"})
    for value in named:  # the library's table: the same columns, numpy's shares (centres inside)
        assert frame[f"frac_{value}"].iloc[0] == pytest.approx((counted == int(value)).mean(), abs=0.01)
    assert sorted(frame["unique"].iloc[0]) == sorted(int(v) for v in named)
    assert frame.provenance.facts["classes"]["21824"] == "clear"


async def test_worldcover_and_a_classification_in_their_own_colours(scenes, settings, build):
    """ESA WorldCover's `map` (no classification extension) in ESA's colours; a land cover with
    the extension in its color_hints, a class without one in a colour of its own, the white
    glacier's legend swatch outlined."""
    _, _, worldcover = await preview(build, settings, WORLDCOVER, f"{WORLDCOVER}-item", "map")
    values = read_shown(scenes["dir"] / f"{WORLDCOVER}.tif", worldcover.shape[:2])
    for value, rgb in WORLDCOVER_COLOURS.items():
        assert (values == value).any() and (worldcover[values == value][:, :3] == rgb).all(), value
    result, sent, own = await preview(build, settings, LANDCOVER, f"{LANDCOVER}-item", "landcover")
    values = read_shown(scenes["dir"] / f"{LANDCOVER}.tif", own.shape[:2])
    for c in OWN_CLASSES[:3]:
        rgb = tuple(int(c["color_hint"][i : i + 2], 16) for i in (0, 2, 4))
        assert (own[values == c["value"]][:, :3] == rgb).all(), c
    other = own[values == 4][:, :3]
    assert (other == other[0]).all() and len(
        {tuple(other[0])} | {(27, 94, 32), (255, 255, 255), (79, 195, 247)}
    ) == 4
    shown = {c["value"]: c["name"] for c in result.structured_content["properties"]["preview:classes"]}
    assert shown == {1: "Forest", 2: "Glacier", 3: "Lake", 4: "Other"}
    legend = sent[own.shape[0] :, :, :3].astype(int)
    forest = np.argwhere((legend == (27, 94, 32)).all(axis=-1))  # the swatches' column: forest's
    column = legend[:, (forest[:, 1].min() + forest[:, 1].max()) // 2].min(axis=-1)
    drawn = np.flatnonzero(column < 250)  # from the first swatch's top to the last one's bottom
    white = np.flatnonzero(column[: drawn.max()] == 255)
    white = white[white > drawn.min()]
    runs = np.split(white, np.flatnonzero(np.diff(white) > 1) + 1)
    swatch = max(runs, key=len)  # the glacier's white swatch, framed dark above and below
    assert (
        len(swatch) >= 5
        and column[swatch[0] - 2 : swatch[0]].min() < 90
        and column[swatch[-1] + 1 : swatch[-1] + 3].min() < 90
    )


def test_a_white_class_is_outlined_in_the_fraction_chart():
    """Vegetation (green) and high-probability cloud (SCL white) share a zone's bar: the white
    part's top edge is drawn dark, not lost in the white page."""
    import pandas as pd

    from stac_gdal_mcp.operations.zonal.chart import fractions_png

    frame = pd.DataFrame(
        {
            "zone_id": ["field"],
            "datetime": pd.to_datetime(["2024-06-01T10:00:00Z"]),
            "frac_4": [0.5],
            "frac_9": [0.5],
        }
    )
    picture = decode(
        fractions_png(
            frame, "scl", {"4": "Vegetation", "9": "Cloud high probability"}, {"4": "#00a000", "9": "#ffffff"}
        )
    )
    rgb = picture[..., :3].astype(int)
    green = (rgb == (0, 160, 0)).all(axis=-1)
    rows, cols = np.nonzero(green[:, : green.shape[1] * 3 // 4])  # the bar, not the legend's swatch
    top, bottom, right = rows.min(), rows.max(), cols.max()
    column = right + (right - cols.min()) // 2  # the middle of the white part
    middle = (top + bottom) // 2
    assert (rgb[middle, column] > 245).all()  # white inside
    edge = rgb[top - 3 : top + 2, column].min(axis=-1)
    assert edge.min() < 110, edge  # a dark outline where the white bar meets the white page
