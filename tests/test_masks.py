"""Mask schemes: detection from item metadata and value-by-value decoding.

Expected classes are written out by hand from the product specifications (USGS Landsat C2
QA_PIXEL, HLS v2 Fmask, ESA SCL), never derived from the code under test.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from stac_gdal_mcp.errors import AssetNotFound, MaskNotFound, NotFound
from stac_gdal_mcp.processing.masks import (
    HLS_FMASK,
    LANDSAT_QA_PIXEL,
    SENTINEL2_SCL,
    find_mask,
    qa_field,
    scheme_from_classification,
)
from stac_gdal_mcp.testing import synthetic

NAMES = ("nodata", "cloud", "shadow", "cirrus", "snow", "water", "clear")


def classes_of(scheme, values, dtype, nodata=None):
    decoded = scheme.decode(np.array(values, dtype=dtype), nodata=nodata)
    return [{name for name in NAMES if bool(getattr(decoded, name)[i])} for i in range(len(values))]


# --- Landsat Collection 2 QA_PIXEL ----------------------------------------------------------

# (value, classes) — the named values are those USGS documents for Landsat 8/9 C2 L2.
QA_PIXEL_CASES = [
    (1, {"nodata"}),  # fill
    (21824, {"clear"}),  # clear land, low confidences
    (21952, {"water", "clear"}),  # clear water
    (22280, {"cloud"}),  # high-confidence cloud
    (21762, {"cloud"}),  # dilated cloud
    (23888, {"shadow"}),  # cloud shadow (bit 4) with clear bit 6 set
    (30048, {"snow", "clear"}),  # snow/ice
    (54596, {"cirrus"}),  # high-confidence cirrus
    (0, {"clear"}),  # no bit set: valid, nothing flagged
    (1 << 1, {"cloud"}),  # bit 1 dilated cloud alone
    (1 << 2, {"cirrus"}),  # bit 2 cirrus alone
    (1 << 3, {"cloud"}),  # bit 3 cloud alone
    (1 << 4, {"shadow"}),  # bit 4 cloud shadow alone
    (1 << 5, {"snow", "clear"}),  # bit 5 snow alone
    (1 << 6, {"clear"}),  # bit 6 "clear" flag alone
    (1 << 7, {"water", "clear"}),  # bit 7 water alone
    ((1 << 3) | (1 << 4), {"cloud"}),  # cloud and shadow bits: cloud wins
    ((1 << 3) | (1 << 2), {"cloud"}),  # cloud and cirrus bits: cloud wins
    ((1 << 4) | (1 << 7), {"shadow", "water"}),  # shadow over water
    (1 | (1 << 3), {"nodata"}),  # fill wins over everything
    (3 << 8, {"clear"}),  # confidence bits alone flag nothing
    (3 << 10 | 3 << 12 | 3 << 14, {"clear"}),
    (65535 & ~1, {"cloud", "snow", "water"}),  # every bit but fill
]


@pytest.mark.parametrize("value, expected", QA_PIXEL_CASES)
def test_qa_pixel_value(value, expected):
    assert classes_of(LANDSAT_QA_PIXEL, [value], "uint16") == [expected]


def test_qa_pixel_confidence_fields():
    # 22280 = cloud, cloud confidence high (3), shadow/snow/cirrus confidence low (1)
    values = np.array([22280, 21824, 54596], dtype="uint16")
    assert qa_field(values, 8, 2).tolist() == [3, 1, 1]
    assert qa_field(values, 14, 2).tolist() == [1, 1, 3]
    assert qa_field(values, 6).tolist() == [0, 1, 1]  # the clear bit


# --- HLS v2 Fmask -----------------------------------------------------------------------------

FMASK_CASES = [
    (0, {"clear"}),
    (1 << 0, {"cirrus"}),
    (1 << 1, {"cloud"}),
    (1 << 2, set()),  # adjacent to cloud/shadow: valid, not clear
    (1 << 3, {"shadow"}),
    (1 << 4, {"snow", "clear"}),
    (1 << 5, {"water", "clear"}),
    (1 << 6, {"clear"}),  # aerosol level low
    (2 << 6, {"clear"}),  # aerosol moderate
    (3 << 6, {"clear"}),  # aerosol high
    (3 << 6 | 1 << 5, {"water", "clear"}),
    ((1 << 1) | (1 << 0), {"cloud"}),  # cloud + cirrus: cloud wins
    ((1 << 1) | (1 << 3), {"cloud"}),  # cloud + shadow: cloud wins
    ((1 << 3) | (1 << 5), {"shadow", "water"}),
    ((1 << 2) | (1 << 5), {"water"}),  # adjacent water
    (255, {"nodata"}),  # fill value
]


@pytest.mark.parametrize("value, expected", FMASK_CASES)
def test_fmask_value(value, expected):
    assert classes_of(HLS_FMASK, [value], "uint8") == [expected]


# --- Sentinel-2 SCL ---------------------------------------------------------------------------

SCL_CASES = {
    0: {"nodata"},
    1: set(),  # saturated or defective: valid, not clear
    2: {"clear"},  # dark area / topographic shadow is not cloud shadow
    3: {"shadow"},
    4: {"clear"},
    5: {"clear"},
    6: {"water", "clear"},
    7: {"clear"},
    8: {"cloud"},
    9: {"cloud"},
    10: {"cirrus"},
    11: {"snow", "clear"},
}


def test_scl_every_value():
    values = list(SCL_CASES)
    assert classes_of(SENTINEL2_SCL, values, "uint8") == [SCL_CASES[v] for v in values]


def test_asset_nodata_value_and_float_nan():
    # an asset nodata other than the scheme's own is honoured
    assert classes_of(SENTINEL2_SCL, [4, 200], "uint8", nodata=200) == [{"clear"}, {"nodata"}]
    # a float load (odc-stac with NaN for nodata) decodes the same, NaN as nodata
    decoded = SENTINEL2_SCL.decode(np.array([4.0, np.nan, 9.0]))
    assert decoded.nodata.tolist() == [False, True, False]
    assert decoded.cloud.tolist() == [False, False, True]


def test_decode_works_on_dask_and_xarray():
    import dask.array as da
    import xarray as xr

    rng = np.random.default_rng(1)
    values = rng.integers(0, 65536, size=(64, 64), dtype="uint16")
    expected = LANDSAT_QA_PIXEL.decode(values)
    lazy = LANDSAT_QA_PIXEL.decode(da.from_array(values, chunks=16))
    labelled = LANDSAT_QA_PIXEL.decode(xr.DataArray(values, dims=("y", "x")))
    for name in NAMES:
        want = getattr(expected, name)
        assert np.array_equal(getattr(lazy, name).compute(), want), name
        assert np.array_equal(getattr(labelled, name).values, want), name
    # and against a hand count over the same pixels
    fill = (values & 1) != 0
    cloud = ((values & 0b1010) != 0) & ~fill
    assert int(expected.cloud.sum()) == int(cloud.sum())


# --- detection --------------------------------------------------------------------------------


def s2_item():
    return synthetic.item("sentinel-2-l2a", "S2B_T1", "2024-06-01T10:00:00Z")


def landsat_item():
    return synthetic.item("landsat-c2-l2", "LC09_L2SP_190028_20240601_02_T1", "2024-06-01T10:00:00Z")


def test_detect_from_classification_classes():
    item = s2_item()
    source = find_mask(item)
    assert (source.asset, source.detected_by) == ("scl", "classification")
    assert source.nodata == 0
    s = source.scheme
    assert s.encoding == "values"
    assert set(s.classes["cloud"]) == {8, 9}
    assert s.classes["shadow"] == (3,) and s.classes["cirrus"] == (10,)
    assert s.classes["snow"] == (11,) and s.classes["water"] == (6,) and s.classes["nodata"] == (0,)
    assert s.unusable == (1,)
    # the classification-derived scheme decodes every value like the known one
    values = np.arange(12, dtype="uint8")
    for name in NAMES:
        assert np.array_equal(getattr(s.decode(values), name), getattr(SENTINEL2_SCL.decode(values), name))


def test_detect_from_classification_bitfields():
    source = find_mask(landsat_item())
    assert (source.asset, source.detected_by) == ("qa_pixel", "classification")
    s = source.scheme
    assert s.encoding == "bits"
    assert set(s.classes["cloud"]) == {1, 3} and s.classes["nodata"] == (0,)
    assert s.classes["shadow"] == (4,) and s.classes["cirrus"] == (2,)
    values = np.array([v for v, _ in QA_PIXEL_CASES], dtype="uint16")
    for name in NAMES:
        assert np.array_equal(getattr(s.decode(values), name), getattr(LANDSAT_QA_PIXEL.decode(values), name))


def test_detect_known_asset_keys_without_classification():
    # Earth Search v1 style: `scl` with no classification extension
    item = s2_item()
    del item["assets"]["scl"]["classification:classes"]
    source = find_mask(item)
    assert (source.asset, source.scheme, source.detected_by) == ("scl", SENTINEL2_SCL, "known asset")
    # Planetary Computer style key `SCL`
    item["assets"]["SCL"] = item["assets"].pop("scl")
    assert find_mask(item).scheme is SENTINEL2_SCL
    assert find_mask(item).asset == "SCL"
    # HLS: Fmask
    hls = copy.deepcopy(landsat_item())
    hls["assets"] = {"B04": {"href": "x/B04.tif"}, "Fmask": {"href": "x/Fmask.tif"}}
    source = find_mask(hls)
    assert (source.asset, source.scheme) == ("Fmask", HLS_FMASK)
    # Landsat without bitfields
    item = landsat_item()
    del item["assets"]["qa_pixel"]["classification:bitfields"]
    source = find_mask(item)
    assert (source.scheme, source.nodata) == (LANDSAT_QA_PIXEL, 1)


def test_classification_from_collection_item_assets():
    item = s2_item()
    classes = item["assets"]["scl"].pop("classification:classes")
    item["assets"]["cloudmask"] = item["assets"].pop("scl")
    with pytest.raises(MaskNotFound):
        find_mask(item)
    collection = {"item_assets": {"cloudmask": {"classification:classes": classes, "roles": ["data"]}}}
    source = find_mask(item, collection)
    assert (source.asset, source.detected_by) == ("cloudmask", "classification")


def test_land_cover_classification_is_not_a_cloud_mask():
    item = s2_item()
    item["assets"] = {
        "red": item["assets"]["red"],
        "landcover": {
            "href": "x/lc.tif",
            "classification:classes": [{"value": 1, "name": "forest"}, {"value": 2, "name": "water"}],
        },
    }
    assert scheme_from_classification("landcover", item["assets"]["landcover"]) is None
    with pytest.raises(MaskNotFound):
        find_mask(item)


def test_no_mask_error_names_what_was_looked_for():
    item = s2_item()
    del item["assets"]["scl"]
    with pytest.raises(MaskNotFound) as info:
        find_mask(item)
    message = str(info.value)
    assert isinstance(info.value, AssetNotFound) and isinstance(info.value, NotFound)
    for word in ("classification", "scl", "SCL", "qa_pixel", "Fmask", "S2B_T1", "red"):
        assert word in message, word


def test_forced_asset():
    item = s2_item()
    assert find_mask(item, asset="scl").asset == "scl"
    with pytest.raises(MaskNotFound, match="no asset 'SCL'"):
        find_mask(item, asset="SCL")
