"""threshold_area against numpy + exactextract on local copies of the same COGs.

Items live in the real pgstac test bed, their COGs on the Range server. Expected values: NDVI of
the local files with numpy (reflectance from the generator's scale/offset, the 20 m SCL repeated
onto the 10 m grid, not-clear classes masked), 1 where the condition holds and 0 where it does
not, and `exact_extract`'s sum and count of that on the zones projected with pyproj: the passing
area (x 100 m2 a pixel) and its share of the valid area - never through the code under test.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import rasterio
from exactextract import exact_extract
from exactextract.raster import NumPyRasterSource
from helpers import OFFSET, SCALE
from shapely.geometry import box, mapping

# a dask LocalCluster of 2 worker processes (pytest takes the fixture from this import)
from test_distributed import cluster  # noqa: F401
from test_zonal import ORIGIN, SCENE, local_features, ndvi_array, to_wgs84

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import InvalidArgument, OperationCancelled
from stac_gdal_mcp.models import MAP_LAYER_META
from stac_gdal_mcp.operations import registry
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.testing import synthetic

UID = uuid.uuid4().hex[:8]
S2, BROKEN = f"ta-s2-{UID}", f"ta-broken-{UID}"
DATES = {"S2A_TA1": "2024-06-01T10:00:00Z", "S2A_TA2": "2024-06-11T10:00:00Z"}
PIXEL_HA = 100 / 10_000  # a 10 m pixel


def fields():
    """Field clusters over the scene, and one half outside it."""
    return with_half_outside(synthetic.field_polygons(32633, SCENE, 24, seed=5, clusters=3))


def with_half_outside(features: list[dict]) -> dict:
    """`features` and one more zone half outside the scene, as a FeatureCollection."""
    half = to_wgs84(box(ORIGIN[0] - 150, ORIGIN[1] - 2000, ORIGIN[0] + 170, ORIGIN[1] - 1800), 32633)
    features.append({"type": "Feature", "id": "half-outside", "properties": {}, "geometry": mapping(half)})
    return {"type": "FeatureCollection", "features": features}


def cloudy_scenes(out_dir, href_base, dates: dict, collection: str, seed: int) -> tuple[dict, list]:
    """Sentinel-2 scenes on the test grid, 30 % cloud, one a date: (folder per id, items)."""
    made, items = {}, []
    for number, (item_id, when) in enumerate(dates.items()):
        item, _ = synthetic.write_scene(
            "sentinel-2-l2a", out_dir, item_id, when, collection_id=collection, seed=seed + number,
            size_px=512, blocksize=128, with_visual=False, href_base=href_base, cloud_fraction=0.3,
        )  # fmt: skip
        made[item_id], _ = out_dir / item_id, items.append(item)
    return made, items


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    folder = f"ta-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    made, items = cloudy_scenes(out_dir, href_base, DATES, S2, seed=80)
    broken, _ = synthetic.write_scene(
        "sentinel-2-l2a", out_dir, "S2A_TA_BROKEN", "2024-06-05T10:00:00Z", collection_id=BROKEN, seed=90,
        size_px=512, blocksize=128, with_visual=False, href_base=href_base,
    )  # fmt: skip
    (out_dir / "S2A_TA_BROKEN" / "nir.tif").unlink()  # its reads fail: 404
    pgstac_api.load(
        [synthetic.collection("sentinel-2-l2a", S2), synthetic.collection("sentinel-2-l2a", BROKEN)],
        [*items, broken],
    )
    return made


@pytest.fixture
def session(scenes, testbed_session):
    return testbed_session


def run(session, geometries, **arguments):
    arguments.setdefault("catalog", "testbed")
    return session.threshold_area(geometries, **arguments)


# --- the independent computation -------------------------------------------------------------------


def passing_area(values, extent, zones, test, pixel_ha=PIXEL_HA):
    """(area_ha, fraction) per zone: exactextract's sum and count of 1/0 (masked where not valid)."""
    passes = np.where(np.ma.getmaskarray(values), np.nan, test(values.data))  # NaN: not valid
    source = NumPyRasterSource(passes, extent.left, extent.bottom, extent.right, extent.top)
    found = exact_extract(source, local_features(zones, 32633), ["sum", "count"], output="pandas")
    found.index = [f["id"] for f in zones["features"]]
    return found["sum"] * pixel_ha, found["sum"] / found["count"].where(found["count"] > 0)


def ndvi_unmasked(folder):
    """NDVI of the local files, masked only where a band is nodata."""
    with rasterio.open(folder / "red.tif") as src:
        red, extent = src.read(1), src.bounds
    with rasterio.open(folder / "nir.tif") as src:
        nir = src.read(1)
    r, n = red * SCALE + OFFSET, nir * SCALE + OFFSET
    with np.errstate(all="ignore"):
        ndvi = (n - r) / (n + r)
    return np.ma.masked_array(ndvi, ~((red != 0) & (nir != 0) & np.isfinite(ndvi))), extent


def assert_close(got, want):
    """Within 1 % of the truth (the issue's bound); in fact equal to float rounding."""
    assert np.allclose(got.to_numpy(float), want.to_numpy(float), rtol=0.01, atol=1e-9, equal_nan=True)
    assert np.allclose(got.to_numpy(float), want.to_numpy(float), rtol=1e-6, atol=1e-9, equal_nan=True)


# --- areas equal exactextract on numpy -------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "test"),
    [
        ("> 0.3", lambda v: v > 0.3),
        ("<= 0.45", lambda v: v <= 0.45),
        ("between 0.2 0.5", lambda v: (v >= 0.2) & (v <= 0.5)),
    ],
)
def test_area_and_fraction_equal_the_coverage_weighted_truth_with_clouds_masked(
    session, scenes, condition, test
):
    zones = fields()
    frame = run(
        session, zones, condition=condition, collections=[S2], datetime="2024-06", min_valid_fraction=0
    )
    checked = 0
    for item_id in DATES:
        got = frame[frame["item_ids"] == item_id].set_index("zone_id")
        area, fraction = passing_area(*ndvi_array(scenes[item_id]), zones, test)
        assert_close(got["area_ha"], area.loc[got.index])
        assert_close(got["fraction"], fraction.loc[got.index])
        checked += int((got["area_ha"] > 0).sum())
        assert got.loc["half-outside", "valid_fraction"] < 0.6  # half of it is off the raster
    assert checked > 10 and frame["cloud_fraction"].gt(0).any()  # zones under clouds were compared
    assert list(frame.columns[:7]) == [
        "zone_id",
        "datetime",
        "collection_id",
        "item_ids",
        "area_ha",
        "fraction",
        "valid_fraction",
    ]
    provenance = frame.provenance
    assert provenance.kind == "threshold_area" and frame.request["condition"] == condition
    assert {s.item_id for s in provenance.sources} == set(DATES)


def test_without_the_cloud_mask_the_area_is_numpys_on_every_pixel(session, scenes):
    zones = fields()
    frame = run(session, zones, condition="> 0.3", mask_clouds=False, collections=[S2], datetime="2024-06",
                min_valid_fraction=0)  # fmt: skip
    for item_id in DATES:
        got = frame[frame["item_ids"] == item_id].set_index("zone_id")
        area, fraction = passing_area(*ndvi_unmasked(scenes[item_id]), zones, lambda v: v > 0.3)
        assert_close(got["area_ha"], area.loc[got.index])
        assert_close(got["fraction"], fraction.loc[got.index])


def test_classes_of_a_class_raster_are_counted_at_its_own_resolution(session, scenes):
    """ "in [4, 5]" on the 20 m SCL: vegetation and bare soil, 400 m2 a pixel."""
    zones = fields()
    frame = run(session, zones, expression="scl", condition="in [4, 5]", mask_clouds=False, collections=[S2],
                datetime="2024-06-01", min_valid_fraction=0)  # fmt: skip
    got = frame.set_index("zone_id")
    with rasterio.open(scenes["S2A_TA1"] / "scl.tif") as src:
        scl, extent = src.read(1), src.bounds
    values = np.ma.masked_array(scl.astype("float64"), scl == 0)
    area, fraction = passing_area(values, extent, zones, lambda v: np.isin(v, [4, 5]), pixel_ha=400 / 10_000)
    assert_close(got["area_ha"], area.loc[got.index])
    assert_close(got["fraction"], fraction.loc[got.index])
    assert got["fraction"].between(0.05, 0.95).any()


def test_a_zone_too_cloudy_gets_a_note_and_per_day_names_the_days_items(session, scenes):
    zones = fields()
    frame = run(session, zones, condition="> 0.3", per="day", collections=[S2], datetime="2024-06")
    thin = frame["valid_fraction"] < 0.5
    assert thin.any() and frame.loc[thin, "area_ha"].isna().all()
    assert frame.loc[thin, "note"].str.contains("min_valid_fraction=0.5").all()
    assert set(frame["date"]) == {"2024-06-01", "2024-06-11"} and set(frame["item_ids"]) == set(DATES)
    notes = frame.provenance.facts["notes"]
    assert f"{int(thin.sum())} of {len(frame)} rows had less valid area" in " ".join(notes)
    assert any("no area, a note" in n for n in notes) and not any("statistics" in n for n in notes)


def test_a_failed_read_is_an_error_in_its_rows_never_an_area(session, scenes):
    ids = ["S2A_TA1", "S2A_TA_BROKEN"]
    frame = run(session, fields(), condition="> 0.3", collections=[S2, BROKEN], ids=ids)
    failed = frame[frame["item_ids"] == "S2A_TA_BROKEN"]
    assert len(failed) and failed["error"].str.contains("nir.tif").all() and failed["area_ha"].isna().all()
    assert frame[frame["item_ids"] == "S2A_TA1"]["error"].isna().all()


# --- arguments, estimate, cancel, save, answer -------------------------------------------------------


@pytest.mark.parametrize("bad", ["> x", "=> 0.3", "between 0.5 0.2", "in []", "about 0.3", ""])
def test_a_bad_condition_is_refused_in_one_line_naming_it(make_settings, bad):
    session = Session(make_settings())
    with pytest.raises(InvalidArgument) as error:
        session.threshold_area(mapping(box(13, 45, 13.01, 45.01)), condition=bad, dry_run=True)
    message = str(error.value)
    assert "\n" not in message and "condition" in message and (bad.strip() in message)


def test_the_estimate_names_the_items_and_reads_only_tiles_under_the_zones(session, scenes):
    estimate = run(session, fields(), condition="> 0.3", collections=[S2], datetime="2024-06", dry_run=True)
    assert estimate.operation == "threshold_area" and sorted(estimate.item_ids) == sorted(DATES)
    assert estimate.read_bytes and all(f.tiles < 16 for f in estimate.files)


def test_cancel_stops_the_call(session, scenes):
    job = Job()
    job.cancel()
    with pytest.raises(OperationCancelled):
        run(session, fields(), condition="> 0.3", collections=[S2], job=job)


def test_the_answer_is_lean_and_the_table_is_saved_as_geoparquet(session, scenes):
    import geopandas

    frame = run(session, fields(), condition="> 0.3", collections=[S2], datetime="2024-06")
    limits = session.settings.limits.model_copy(update={"max_result_bytes": 4000})
    answer = registry.answer(session.core, frame, limits)
    value = answer.value
    assert value.rows_total == len(frame) > len(value.rows) > 0
    assert len(value.model_dump_json()) < 6000 and any("rows shown" in n for n in value.notes)
    assert answer.images[0][:4] == b"\x89PNG"
    (record,) = answer.records
    back = geopandas.read_parquet(session.outputs.path(record.id))
    assert np.allclose(back["area_ha"], frame["area_ha"], equal_nan=True)
    assert value.zone_layer.stat == "area_ha" and value.zone_layer.features
    call = registry.map_call(frame)
    assert call["tool"] == "threshold_area" and call["result"]["_meta"][MAP_LAYER_META]["zones"]["features"]
    assert "geometry" not in value.zone_layer.features[0] and answer.layer.zones["features"][0]["geometry"]


def test_a_local_cluster_gives_the_threaded_table(make_testbed_session, scenes, session, cluster):  # noqa: F811
    import pandas as pd

    remote = make_testbed_session(dask_scheduler=cluster.scheduler_address)
    arguments = {"condition": "> 0.3", "collections": [S2], "datetime": "2024-06"}
    on_cluster, on_threads = run(remote, fields(), **arguments), run(session, fields(), **arguments)
    pd.testing.assert_frame_equal(pd.DataFrame(on_cluster.to_wkb()), pd.DataFrame(on_threads.to_wkb()))


# --- the tool, as a client calls it, on the bundled sample catalog -----------------------------------


async def test_the_tool_answers_the_librarys_table_with_a_chart(tmp_path):
    """threshold_area through an MCP client (fastmcp Client): its rows are the library's, the
    table linked as a resource, the chart of area over time first; a bad condition is one line."""
    from fastmcp import Client
    from test_zonal_mcp import FIELDS, SEARCH, dumped

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    arguments = {"geometries": FIELDS, "condition": "> 0.5", "per": "day"}
    with Session(load_settings(default_catalog="sample", workspace=tmp_path / "workspace")) as session:
        async with Client(build_server(session=session)) as client:
            answer = dumped(await client.call_tool_mcp("threshold_area", {**arguments, "search": SEARCH}))
            wrong = dumped(await client.call_tool_mcp("threshold_area", {**arguments, "condition": "> half", "search": SEARCH}))  # fmt: skip
        table = session.threshold_area(FIELDS, condition="> 0.5", per="day", **SEARCH)
    value = answer["structuredContent"]
    assert value["rows_total"] == len(table) == len(value["rows"]) == 15
    got = np.array([r["area_ha"] if r["area_ha"] is not None else np.nan for r in value["rows"]])
    assert np.allclose(got, table["area_ha"], rtol=1e-3, equal_nan=True)
    assert answer["content"][0]["type"] == "image"
    assert value["table"]["uri"] in {c["uri"] for c in answer["content"] if c["type"] == "resource_link"}
    assert wrong["isError"] and "condition '> half'" in wrong["content"][0]["text"]
    assert "\n" not in wrong["content"][0]["text"]


async def test_the_tool_takes_the_cloud_mask_resolution_and_least_valid_share(tmp_path):
    """mask_clouds, resolution and min_valid_fraction reach the operation from the tool: its rows
    are the library's with the same keywords, and not those of the defaults."""
    from fastmcp import Client
    from test_zonal_mcp import FIELDS, SEARCH, dumped

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    chosen = {"mask_clouds": False, "resolution": 20.0, "min_valid_fraction": 0.9}
    with Session(load_settings(default_catalog="sample", workspace=tmp_path / "workspace")) as session:
        async with Client(build_server(session=session)) as client:
            arguments = {"geometries": FIELDS, "condition": "> 0.5", "search": SEARCH, **chosen}
            answer = dumped(await client.call_tool_mcp("threshold_area", arguments))
        table = session.threshold_area(FIELDS, condition="> 0.5", **chosen, **SEARCH)
        default = session.threshold_area(FIELDS, condition="> 0.5", **SEARCH)
    value = answer["structuredContent"]
    assert value["mask_clouds"] is False and value["rows_total"] == len(table)
    got = np.array([r["area_ha"] if r["area_ha"] is not None else np.nan for r in value["rows"]])
    assert np.allclose(got, table["area_ha"], rtol=1e-3, equal_nan=True)
    assert not np.allclose(got, default["area_ha"], rtol=1e-3, equal_nan=True)
