"""Tests of stac_gdal_mcp.testing.synthetic and of the bundled sample catalog.

Truth is recomputed here from the written rasters with rasterio/numpy, following the mask
definitions of the synthetic module's docstring (SCL classes, Landsat QA_PIXEL bits).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from helpers import fractions
from pyproj import Transformer
from rio_cogeo.cogeo import cog_validate

from stac_gdal_mcp.testing import synthetic

SAMPLE = Path(synthetic.__file__).parents[1] / "data" / "sample"
S2, LANDSAT = "sentinel-2-l2a", "landsat-c2-l2"
TRUTH_KEYS = {
    "cloud_fraction",
    "shadow_fraction",
    "cirrus_fraction",
    "snow_fraction",
    "water_fraction",
    "clear_fraction",
    "nodata_fraction",
    "valid_pixels",
}


# ------------------------------------------------------------ independent truth


def truth_from_scl(scl: np.ndarray) -> dict:
    valid = scl != 0
    n = valid.sum()
    return {
        "cloud_fraction": ((scl == 8) | (scl == 9)).sum() / n,
        "shadow_fraction": (scl == 3).sum() / n,
        "cirrus_fraction": (scl == 10).sum() / n,
        "snow_fraction": (scl == 11).sum() / n,
        "water_fraction": (scl == 6).sum() / n,
        "clear_fraction": (valid & ~np.isin(scl, [1, 3, 8, 9, 10])).sum() / n,
        "nodata_fraction": (~valid).sum() / scl.size,
        "valid_pixels": int(n),
    }


def truth_from_qa_pixel(qa: np.ndarray) -> dict:
    bits = {
        name: (qa >> offset) & 1 == 1
        for name, offset in [
            ("fill", 0),
            ("dilated", 1),
            ("cirrus", 2),
            ("cloud", 3),
            ("shadow", 4),
            ("snow", 5),
            ("clear", 6),
            ("water", 7),
        ]
    }
    valid = ~bits["fill"]
    n = valid.sum()
    cloud = (bits["cloud"] | bits["dilated"]) & valid
    shadow = bits["shadow"] & ~cloud & valid
    cirrus = bits["cirrus"] & ~cloud & valid
    return {
        "cloud_fraction": cloud.sum() / n,
        "shadow_fraction": shadow.sum() / n,
        "cirrus_fraction": cirrus.sum() / n,
        "snow_fraction": (bits["snow"] & valid).sum() / n,
        "water_fraction": (bits["water"] & valid).sum() / n,
        "clear_fraction": (valid & ~cloud & ~shadow & ~cirrus).sum() / n,
        "nodata_fraction": (~valid).sum() / qa.size,
        "valid_pixels": int(n),
    }


def truth_from_mask_file(kind: str, path) -> dict:
    with rasterio.open(path) as src:
        mask = src.read(1)
    return truth_from_scl(mask) if kind == S2 else truth_from_qa_pixel(mask)


def assert_truth_equal(actual: dict, expected: dict) -> None:
    assert set(actual) == TRUTH_KEYS
    assert actual["valid_pixels"] == expected["valid_pixels"]
    for key in TRUTH_KEYS - {"valid_pixels"}:
        assert actual[key] == pytest.approx(expected[key], abs=1e-12), key


# ------------------------------------------------------------------ item()


@pytest.mark.parametrize("kind", synthetic.KINDS)
@pytest.mark.parametrize(
    "epsg, transform",
    [
        (32633, (10.0, 0.0, 390000.0, 0.0, -10.0, 5090000.0)),
        (32719, (20.0, 0.0, 600000.0, 0.0, -20.0, 6300000.0)),  # southern hemisphere
    ],
)
def test_item_parses_and_bbox_matches_corners(kind, epsg, transform):
    d = synthetic.item(
        kind,
        "scene-1",
        "2024-06-15T10:05:00Z",
        epsg=epsg,
        transform=transform,
        shape=(600, 800),
        cloud_cover=12.5,
    )
    item = pystac.Item.from_dict(copy.deepcopy(d), migrate=False)
    assert item.collection_id == kind
    assert item.properties["eo:cloud_cover"] == 12.5
    assert item.properties["proj:epsg"] == epsg
    assert item.properties["proj:code"] == f"EPSG:{epsg}"
    assert item.properties["proj:shape"] == [600, 800]
    assert item.properties["proj:transform"] == list(transform)

    a, _, c, _, e, f = transform
    xs = [c, c + 800 * a]
    ys = [f, f + 600 * e]
    to_wgs84 = Transformer.from_crs(f"EPSG:{epsg}", "EPSG:4326", always_xy=True)
    lons, lats = to_wgs84.transform([xs[0], xs[1], xs[1], xs[0]], [ys[0], ys[0], ys[1], ys[1]])
    expected = [min(lons), min(lats), max(lons), max(lats)]
    assert d["bbox"] == pytest.approx(expected, abs=1e-5)  # < ~1 m

    from shapely.geometry import shape

    footprint = shape(d["geometry"])
    assert footprint.is_valid
    assert list(footprint.bounds) == pytest.approx(d["bbox"], abs=1e-9)


def square_item(kind: str, item_id: str, when: str, gsd: float, corner, size: int, **fields) -> dict:
    """synthetic.item on a `size` x `size` grid of `gsd` m pixels from the upper-left `corner`."""
    transform = (gsd, 0.0, corner[0], 0.0, -gsd, corner[1])
    return synthetic.item(kind, item_id, when, transform=transform, shape=(size, size), **fields)


def classification(d: dict, asset: str):
    """pystac's classification extension of the item dict `d`'s `asset`."""
    from pystac.extensions.classification import ClassificationExtension

    return ClassificationExtension.ext(pystac.Item.from_dict(d, migrate=False).assets[asset])


def test_item_core_schema_and_assets():
    d = square_item(
        S2,
        "S2B_33TUL_20240714_0_L2A",
        "2024-07-14T10:06:22Z",
        10.0,
        (390000.0, 5090000.0),
        512,
        href_base="https://example.test/data",
    )
    assert d["properties"]["platform"] == "sentinel-2b"
    assert d["properties"]["s2:mgrs_tile"] == "33TUL"  # Gorizia
    assert d["properties"]["grid:code"] == "MGRS-33TUL"
    assert list(d["assets"]) == ["red", "green", "blue", "nir", "scl", "visual", "thumbnail"]
    assert d["assets"]["red"]["href"] == (
        "https://example.test/data/sentinel-2-l2a/S2B_33TUL_20240714_0_L2A/red.tif"
    )
    red = d["assets"]["red"]
    assert red["type"] == "image/tiff; application=geotiff; profile=cloud-optimized"
    assert red["roles"] == ["data"]
    assert red["raster:bands"][0] == pytest.approx(
        {
            "nodata": 0,
            "data_type": "uint16",
            "bits_per_sample": 15,
            "spatial_resolution": 10.0,
            "scale": 0.0001,
            "offset": -0.1,
        }
    )
    assert red["eo:bands"][0]["common_name"] == "red"
    scl = d["assets"]["scl"]
    assert scl["proj:shape"] == [256, 256]
    assert scl["proj:transform"] == [20.0, 0.0, 390000.0, 0.0, -20.0, 5090000.0]
    assert d["assets"]["visual"]["roles"] == ["visual"]
    assert d["assets"]["thumbnail"]["type"] == "image/png"
    for url in (
        synthetic.EO_SCHEMA,
        synthetic.PROJECTION_SCHEMA,
        synthetic.RASTER_SCHEMA,
        synthetic.CLASSIFICATION_SCHEMA,
    ):
        assert url in d["stac_extensions"]

    # Core STAC schema (bundled with pystac for 1.1.0 only; the 1.0 fields used are valid 1.1).
    as_1_1 = dict(copy.deepcopy(d), stac_version="1.1.0")
    pystac.validation.validate_dict(as_1_1, stac_version="1.1.0", extensions=[])

    classes = {c.value: c.name for c in classification(d, "scl").classes}
    assert classes[9] == "cloud_high_probability" and classes[3] == "cloud_shadows"


def test_landsat_item_fields():
    d = square_item(
        LANDSAT, "LC08_L2SP_191028_20240806_02_T1", "2024-08-06T09:52:55Z", 30.0, (387615.0, 5092215.0), 256
    )
    props = d["properties"]
    assert props["platform"] == "landsat-8"
    assert (props["landsat:wrs_path"], props["landsat:wrs_row"]) == ("191", "028")
    assert props["landsat:scene_id"] == "LC81910282024219LGN00"
    assert list(d["assets"]) == ["red", "green", "blue", "nir08", "qa_pixel", "thumbnail"]
    qa = d["assets"]["qa_pixel"]
    assert qa["roles"] == ["cloud"]
    assert "proj:shape" not in qa  # same grid as the item
    assert d["assets"]["nir08"]["raster:bands"][0]["scale"] == 0.0000275

    fields = {b.name: (b.offset, b.length) for b in classification(d, "qa_pixel").bitfields}
    assert fields["cloud"] == (3, 1) and fields["cloud_confidence"] == (8, 2)


@pytest.mark.parametrize("kind", synthetic.KINDS)
def test_collection_matches_items(kind):
    d = synthetic.collection(kind, bbox=(13.5, 45.8, 13.7, 46.0), interval=("2024-06-01T00:00:00Z", None))
    collection = pystac.Collection.from_dict(copy.deepcopy(d), migrate=False)
    assert collection.id == kind
    assert d["extent"]["temporal"]["interval"] == [["2024-06-01T00:00:00Z", None]]
    item = synthetic.item(kind, "x", "2024-06-15T10:00:00Z")
    assert set(d["item_assets"]) == set(item["assets"])
    assert d["summaries"]["eo:cloud_cover"] == {"minimum": 0, "maximum": 100}
    assert all(b["common_name"] for b in d["summaries"]["eo:bands"])
    as_1_1 = dict(copy.deepcopy(d), stac_version="1.1.0")
    pystac.validation.validate_dict(as_1_1, stac_version="1.1.0", extensions=[])
    assert synthetic.collection(kind, "other")["id"] == "other"


def test_mgrs_tile_of_known_places():
    assert synthetic.mgrs_tile(13.61, 45.93) == "33TUL"  # Gorizia (Sentinel-2 tile 33TUL)
    assert synthetic.mgrs_tile(12.49, 41.89) == "33TTG"  # Rome (Sentinel-2 tile 33TTG)
    assert synthetic.mgrs_tile(-122.42, 37.77) == "10SEG"  # San Francisco


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown kind"):
        synthetic.item("modis", "x", "2024-01-01T00:00:00Z")


# ------------------------------------------------------------- write_scene()

FRACTIONS = fractions(cloud=0.25, shadow=0.06, cirrus=0.03, snow=0.02, water=0.04, nodata=0.1)


@pytest.fixture(scope="module", params=synthetic.KINDS)
def scene(request, tmp_path_factory):
    kind = request.param
    out = tmp_path_factory.mktemp(kind)
    item_id = "scene-a"
    d, truth = synthetic.write_scene(
        kind,
        out,
        item_id,
        "2024-07-01T10:00:00Z",
        seed=7,
        origin=(390000.0, 5090000.0),
        size_px=300,
        blocksize=128,
        **FRACTIONS,
    )
    return kind, out / item_id, d, truth


def test_write_scene_truth_equals_written_mask(scene):
    kind, folder, d, truth = scene
    mask_key = "scl" if kind == S2 else "qa_pixel"
    assert_truth_equal(truth, truth_from_mask_file(kind, folder / f"{mask_key}.tif"))
    n = truth["valid_pixels"]
    for name in ("cloud", "shadow", "cirrus", "snow", "water"):  # requested fractions reached
        assert truth[f"{name}_fraction"] == pytest.approx(FRACTIONS[f"{name}_fraction"], abs=1 / n)
    assert truth["nodata_fraction"] == pytest.approx(0.1, abs=1e-3)
    assert d["properties"]["eo:cloud_cover"] == round(truth["cloud_fraction"] * 100, 2)


def test_write_scene_files_and_item_json(scene):
    kind, folder, d, truth = scene
    on_disk = json.loads((folder / "scene-a.json").read_text())
    assert on_disk == d
    item = pystac.Item.from_file(str(folder / "scene-a.json"))
    for key, asset in item.assets.items():
        assert d["assets"][key]["href"].startswith("./")
        assert Path(asset.get_absolute_href()).is_file(), key
    with rasterio.open(folder / "red.tif") as src:
        assert src.crs.to_epsg() == 32633
        assert tuple(src.transform)[:6] == tuple(d["properties"]["proj:transform"])
        assert [src.height, src.width] == d["properties"]["proj:shape"]
        red = src.read(1)
    # Nodata edge: 0 in the bands exactly where the mask says nodata.
    mask_key = "scl" if kind == S2 else "qa_pixel"
    with rasterio.open(folder / f"{mask_key}.tif") as src:
        mask = src.read(1)
        assert [src.height, src.width] == d["assets"][mask_key].get(
            "proj:shape", d["properties"]["proj:shape"]
        )
    nodata = mask == (0 if kind == S2 else 1)
    if kind == S2:
        nodata = np.repeat(np.repeat(nodata, 2, 0), 2, 1)[: red.shape[0], : red.shape[1]]
    assert np.array_equal(red == 0, nodata)
    assert nodata[-1, -1] and not nodata[0, 0]  # the edge band is in the lower-right corner
    # The item geometry is the valid-data footprint: the nodata corner is cut off.
    from shapely.geometry import Point, shape

    a, _, c, _, e, f = d["properties"]["proj:transform"]
    rows, cols = d["properties"]["proj:shape"]
    to_wgs84 = Transformer.from_crs(32633, 4326, always_xy=True)
    upper_left = Point(to_wgs84.transform(c + 2 * a, f + 2 * e))
    lower_right = Point(to_wgs84.transform(c + (cols - 2) * a, f + (rows - 2) * e))
    footprint = shape(d["geometry"])
    assert footprint.contains(upper_left) and not footprint.contains(lower_right)


def test_write_scene_reflectance_follows_classes(scene):
    kind, folder, d, truth = scene
    scale = d["assets"]["red"]["raster:bands"][0]["scale"]
    offset = d["assets"]["red"]["raster:bands"][0]["offset"]
    nir_key = "nir" if kind == S2 else "nir08"
    with rasterio.open(folder / "red.tif") as src:
        red = src.read(1) * scale + offset
    with rasterio.open(folder / f"{nir_key}.tif") as src:
        nir = src.read(1) * scale + offset
    mask_key = "scl" if kind == S2 else "qa_pixel"
    with rasterio.open(folder / f"{mask_key}.tif") as src:
        mask = src.read(1)
    if kind == S2:
        mask = np.repeat(np.repeat(mask, 2, 0), 2, 1)[: red.shape[0], : red.shape[1]]
        cloud, water, veg = np.isin(mask, [8, 9]), mask == 6, mask == 4
    else:
        cloud = ((mask >> 3) & 1 == 1) | ((mask >> 1) & 1 == 1)
        water = (mask >> 7) & 1 == 1
        veg = np.zeros_like(cloud)
    assert red[cloud].mean() > 0.3  # bright clouds
    assert nir[water].mean() < 0.05  # dark water in the near infrared
    if veg.any():
        ndvi = (nir[veg] - red[veg]) / (nir[veg] + red[veg])
        assert ndvi.mean() > 0.6


def test_write_scene_cogs_validate(scene):
    kind, folder, d, truth = scene
    tifs = sorted(folder.glob("*.tif"))
    expected = {k for k, a in d["assets"].items() if a["href"].endswith(".tif")}
    assert {p.stem for p in tifs} == expected
    for path in tifs:
        is_valid, errors, warnings = cog_validate(str(path))
        assert is_valid, (path.name, errors)
        with rasterio.open(path) as src:
            assert src.profile["tiled"] and src.profile["blockxsize"] == 128
            assert src.compression.name.lower() == "deflate"
            assert src.overviews(1), path.name  # every raster here is larger than a block


def test_mask_overviews_keep_exact_classes(scene):
    kind, folder, d, truth = scene
    mask_key = "scl" if kind == S2 else "qa_pixel"
    with rasterio.open(folder / f"{mask_key}.tif") as src:
        full = set(np.unique(src.read(1)).tolist())
        factor = src.overviews(1)[0]
        overview = src.read(1, out_shape=(src.height // factor, src.width // factor))
    assert set(np.unique(overview).tolist()) <= full


def test_qa_pixel_values_are_the_usgs_ones():
    # Values as documented for Landsat Collection 2 QA_PIXEL (USGS).
    assert synthetic.qa_pixel_value(fill=True) == 1
    assert synthetic.qa_pixel_value() == 21824  # clear, low confidences
    assert synthetic.qa_pixel_value(water=True) == 21952
    assert synthetic.qa_pixel_value(cloud=True, cloud_confidence=3) == 22280
    assert synthetic.qa_pixel_value(dilated_cloud=True) == 21762
    assert synthetic.qa_pixel_value(cloud_shadow=True, shadow_confidence=3) == 23888
    assert synthetic.qa_pixel_value(snow=True, snow_confidence=3) == 30048
    assert synthetic.qa_pixel_value(cirrus=True, cirrus_confidence=3) == 54596


def test_qa_pixel_known_pixels_decode(tmp_path):
    d, truth = synthetic.write_scene(
        LANDSAT,
        tmp_path,
        "LC09_L2SP_190028_20240701_02_T1",
        "2024-07-01T09:52:00Z",
        seed=3,
        size_px=200,
        **fractions(cloud=0.3, shadow=0.05, water=0.05, nodata=0.1),
    )
    folder = tmp_path / d["id"]
    with rasterio.open(folder / "qa_pixel.tif") as src:
        qa = src.read(1).astype(int)
    with rasterio.open(folder / "red.tif") as src:
        red = src.read(1) * 0.0000275 - 0.2
    with rasterio.open(folder / "nir08.tif") as src:
        nir = src.read(1) * 0.0000275 - 0.2

    def bit(value, n, length=1):
        return (value >> n) & ((1 << length) - 1)

    assert qa[-1, -1] == 1 and red[-1, -1] == -0.2  # corner of the nodata edge: fill, DN 0
    bright = np.argwhere(red > 0.6)  # thick cloud cores
    assert len(bright)
    for r, c in bright[:: max(1, len(bright) // 20)]:
        v = qa[r, c]
        assert bit(v, 3) == 1 and bit(v, 8, 2) == 3 and bit(v, 6) == 0 and bit(v, 0) == 0
    wet = np.argwhere((nir < 0.02) & (red > 0.0) & (red < 0.05))  # open water
    assert len(wet)
    for r, c in wet[:: max(1, len(wet) // 20)]:
        v = qa[r, c]
        assert bit(v, 7) == 1 and bit(v, 6) == 1 and bit(v, 3) == 0
    vegetation = np.argwhere((nir > 0.25) & (red < 0.06) & (red > 0.0))
    assert len(vegetation)
    assert {qa[r, c] for r, c in vegetation} == {21824}


def test_write_scene_with_href_base(tmp_path):
    d, _ = synthetic.write_scene(
        S2,
        tmp_path,
        "s",
        "2024-07-01",
        size_px=64,
        blocksize=64,
        cloud_fraction=0.0,
        shadow_fraction=0.0,
        href_base="http://127.0.0.1:8000/c",
        with_visual=False,
    )
    assert d["assets"]["red"]["href"] == "http://127.0.0.1:8000/c/s/red.tif"
    assert "visual" not in d["assets"] and not (tmp_path / "s" / "visual.tif").exists()
    assert d["properties"]["datetime"] == "2024-07-01T00:00:00Z"


def test_write_scene_is_deterministic(tmp_path):
    args = (S2, "s", "2024-07-01T10:00:00Z")
    kwargs = dict(size_px=64, blocksize=64, seed=5, nodata_fraction=0.2)
    d1, t1 = synthetic.write_scene(args[0], tmp_path / "a", *args[1:], **kwargs)
    d2, t2 = synthetic.write_scene(args[0], tmp_path / "b", *args[1:], **kwargs)
    assert d1 == d2 and t1 == t2
    for name in ("red.tif", "scl.tif", "thumbnail.png"):
        assert (tmp_path / "a/s" / name).read_bytes() == (tmp_path / "b/s" / name).read_bytes()


def test_impossible_fractions_are_rejected(tmp_path):
    with pytest.raises(ValueError):
        synthetic.write_scene(
            S2, tmp_path, "s", "2024-07-01", size_px=32, cloud_fraction=0.8, shadow_fraction=0.3
        )


def test_odc_stac_loads_written_scene(scene):
    odc_stac = pytest.importorskip("odc.stac")
    kind, folder, d, truth = scene
    item = pystac.Item.from_file(str(folder / "scene-a.json"))
    mask_key = "scl" if kind == S2 else "qa_pixel"
    data = odc_stac.load([item], bands=["red", mask_key], chunks={}).compute()
    with rasterio.open(folder / "red.tif") as src:
        assert np.array_equal(data["red"].values[0], src.read(1))
    assert data["red"].shape[1:] == tuple(d["properties"]["proj:shape"])


# ------------------------------------------------------------ sample catalog


def sample_items():
    catalog = pystac.Catalog.from_file(str(SAMPLE / "catalog.json"))
    return catalog, list(catalog.get_items(recursive=True))


def test_sample_catalog_is_complete_and_small():
    catalog, items = sample_items()
    assert {c.id for c in catalog.get_children()} == {S2, LANDSAT}
    assert sorted(i.collection_id for i in items).count(S2) >= 4
    assert sorted(i.collection_id for i in items).count(LANDSAT) >= 3
    for item in items:
        assert item.get_self_href().startswith(str(SAMPLE.resolve()))
        for key, asset in item.assets.items():
            assert not Path(asset.href).is_absolute(), (item.id, key)
            assert Path(asset.get_absolute_href()).is_file(), (item.id, key)
    total = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    assert total < 8_000_000
    for path in SAMPLE.rglob("*.json"):  # self-contained: no absolute paths or URLs to files
        text = path.read_text()
        assert str(SAMPLE.resolve()) not in text and "file://" not in text


def test_sample_truth_agrees_with_masks_and_metadata():
    truth = json.loads((SAMPLE / "truth.json").read_text())
    _, items = sample_items()
    assert set(truth) == {i.id for i in items}
    cloud_covers = []
    for item in items:
        kind = item.collection_id
        mask_key = "scl" if kind == S2 else "qa_pixel"
        counted = truth_from_mask_file(kind, item.assets[mask_key].get_absolute_href())
        assert_truth_equal(truth[item.id], counted)
        assert item.properties["eo:cloud_cover"] == pytest.approx(counted["cloud_fraction"] * 100, abs=0.005)
        cloud_covers.append(item.properties["eo:cloud_cover"])
    assert min(cloud_covers) < 1 and max(cloud_covers) > 80  # a clear and an overcast scene


def test_sample_cogs_validate():
    tifs = sorted(SAMPLE.rglob("*.tif"))
    assert len(tifs) >= 8 * 5
    for path in tifs:
        is_valid, errors, _ = cog_validate(str(path))
        assert is_valid, (path, errors)


def test_sample_catalog_opens_with_pystac_client():
    pystac_client = pytest.importorskip("pystac_client")
    client = pystac_client.Client.open(str(SAMPLE / "catalog.json"))
    collection = client.get_collection(S2)
    items = list(collection.get_items())
    assert items and all(i.properties["proj:code"] == "EPSG:32633" for i in items)
