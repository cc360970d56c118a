"""compare_periods against numpy + exactextract on local copies of the same COGs.

Items live in the real pgstac test bed, their COGs on the Range server: two June scenes, one in
July (between the periods: never read) and two in August, on one UTM grid. Expected values: NDVI
of each local file with numpy (masked where a band is nodata and, with clouds masked, where the
20 m SCL repeated onto the 10 m grid is not clear), numpy's nanmedian over each period's scenes,
after - before where both have a value, and `exact_extract` on those arrays with the zones
projected by pyproj - never through the code under test.
"""

from __future__ import annotations

import base64
import uuid
import warnings

import numpy as np
import pytest
import rasterio
from exactextract import exact_extract
from exactextract.raster import NumPyRasterSource
from shapely import make_valid
from shapely.geometry import box, mapping, shape

# a dask LocalCluster of 2 worker processes (pytest takes the fixture from this import)
from test_distributed import cluster  # noqa: F401
from test_threshold_area import cloudy_scenes, ndvi_unmasked, with_half_outside
from test_zonal import ORIGIN, SCENE, local_features, ndvi_array

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import InvalidArgument, NotFound, OperationCancelled
from stac_gdal_mcp.models import MAP_LAYER_META
from stac_gdal_mcp.operations import registry
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.testing import synthetic

UID = uuid.uuid4().hex[:8]
S2 = f"cp-s2-{UID}"
JUNE = {"S2A_CP_J1": "2024-06-03T10:00:00Z", "S2A_CP_J2": "2024-06-13T10:00:00Z"}
JULY = {"S2A_CP_JUL": "2024-07-10T10:00:00Z"}
AUGUST = {"S2A_CP_A1": "2024-08-02T10:00:00Z", "S2A_CP_A2": "2024-08-12T10:00:00Z"}
BROKEN = {"S2A_CP_BROKEN": "2024-09-05T10:00:00Z"}
PERIODS = {"before": "2024-06", "after": "2024-08"}
# a June scene in UTM zone 33 up to 18 degrees E, an August one in zone 34 from 2 km west of it
# (no clouds: the field is clear in both)
S2X = f"cp-utm-{UID}"
TWO_CRS = {
    "S2A_CP_E": ("2024-06-05T10:00:00Z", 32633, (736477.0 - 5120, 4990000.0)),
    "S2A_CP_W": ("2024-08-05T10:00:00Z", 32634, (263523.0 - 2000, 4990000.0)),
}
EDGE = box(17.996, 44.99, 17.999, 44.995)  # west of 18 degrees E: in both scenes
PIXEL_HA = 100 / 10_000


def fields():
    """Field clusters over the scene (a self-crossing one repaired, as the operation repairs it),
    and one half outside it."""
    features = synthetic.field_polygons(32633, SCENE, 24, seed=7, clusters=3)
    for feature in features:
        feature["geometry"] = mapping(make_valid(shape(feature["geometry"])))
    return with_half_outside(features)


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    folder = f"cp-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    made, items = cloudy_scenes(out_dir, href_base, {**JUNE, **JULY, **AUGUST, **BROKEN}, S2, seed=100)
    (out_dir / "S2A_CP_BROKEN" / "red.tif").unlink()  # its reads fail: 404
    across = [
        synthetic.write_scene(
            "sentinel-2-l2a", out_dir, item_id, when, collection_id=S2X, seed=120, epsg=epsg, origin=origin,
            size_px=512, blocksize=128, with_visual=False, href_base=href_base, cloud_fraction=0.0,
            shadow_fraction=0.0,
        )[0]
        for item_id, (when, epsg, origin) in TWO_CRS.items()
    ]  # fmt: skip
    pgstac_api.load(
        [synthetic.collection("sentinel-2-l2a", S2), synthetic.collection("sentinel-2-l2a", S2X)],
        [*items, *across],
    )
    return made


@pytest.fixture
def session(scenes, testbed_session):
    return testbed_session


def run(session, geometries, **arguments):
    arguments = {"catalog": "testbed", "collections": [S2], **PERIODS, **arguments}
    return session.compare_periods(geometries, **arguments)


# --- the independent computation -------------------------------------------------------------------


def period(scenes, ids, masked=True):
    """numpy's nanmedian over the scenes' NDVI (NaN where none has a value), and the extent."""
    arrays = [(ndvi_array if masked else ndvi_unmasked)(scenes[i]) for i in ids]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pixels: NaN
        return np.nanmedian(np.stack([a.filled(np.nan) for a, _ in arrays]), axis=0), arrays[0][1]


def truth(scenes, zones, masked=True, threshold=0.1):
    """Per zone: before_mean, delta_mean, decrease_ha, valid count; and the change array."""
    (before, extent), (after, _) = period(scenes, JUNE, masked), period(scenes, AUGUST, masked)
    both = np.isfinite(before) & np.isfinite(after)
    delta = np.where(both, after - before, np.nan)
    with np.errstate(invalid="ignore"):
        decrease = (delta < -threshold).astype("float64")
    found = {}
    for name, values, ops in (
        ("before", before, ["mean"]),
        ("delta", delta, ["mean", "count"]),
        ("decrease", decrease, ["sum"]),
    ):
        source = NumPyRasterSource(
            np.where(both, values, np.nan), extent.left, extent.bottom, extent.right, extent.top
        )
        frame = exact_extract(source, local_features(zones, 32633), ops, output="pandas")
        found |= {f"{name}_{op}": frame[op].to_numpy() for op in ops}
    return found, delta


def by_zone(table, zones):
    return table.set_index("zone_id").loc[[f["id"] for f in zones["features"]]]


# --- the values ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("masked", [True, False], ids=["clouds masked", "no cloud mask"])
def test_means_change_and_decrease_equal_numpy_and_exactextract(session, scenes, masked):
    zones = fields()
    result = run(session, zones, mask_clouds=masked, min_valid_fraction=0)
    got = by_zone(result.table, zones)
    want, _ = truth(scenes, zones, masked)
    known = want["delta_count"] > 0
    assert known.sum() > 20 and np.array_equal(got["delta_mean"].notna(), known)  # none: no mean
    for column in ("before_mean", "delta_mean"):
        assert np.abs(got[column].to_numpy(float)[known] - want[column][known]).max() < 0.002
    assert np.allclose(got["decrease_ha"], want["decrease_sum"] * PIXEL_HA, rtol=0.01, atol=1e-6)
    assert (got["decrease_ha"] > 1).sum() > 5 and (got["increase_ha"] > 1).sum() > 5  # both kinds compared
    assert np.allclose(got["after_mean"] - got["before_mean"], got["delta_mean"], atol=1e-5, equal_nan=True)
    assert got.loc["half-outside", "valid_fraction"] < 0.6
    if masked:  # clouds do take pixels away
        assert got["valid_fraction"].drop("half-outside").lt(0.95).any()


def test_each_periods_items_are_named_and_nothing_between_them_is_read(session, scenes):
    result = run(session, fields())
    for column, ids in (("before_items", JUNE), ("after_items", AUGUST)):
        assert {frozenset(v.split()) for v in result.table[column]} == {frozenset(ids)}
    sources = {s["item_id"] for s in result.table.attrs["stac_gdal_mcp"]["sources"]}
    assert sources == set(JUNE) | set(AUGUST)
    assert result.provenance.facts["items"] == {"before": 2, "after": 2}


def test_the_change_geotiff_is_after_minus_before_on_the_items_grid(session, scenes):
    zones = fields()
    result = run(session, zones)
    record = registry.save(session.core, result, format="COG")
    _, delta = truth(scenes, zones)
    with rasterio.open(session.outputs.path(record.id)) as src:
        t, values = src.transform, src.read(1)
        assert src.crs.to_epsg() == 32633 and (t.a, t.e) == (10, -10)
    col, row = (t.c - ORIGIN[0]) / 10, (ORIGIN[1] - t.f) / 10
    assert col == int(col) and row == int(row)  # the scenes' own pixel edges
    col, row = int(col), int(row)
    inside = values[max(0, -row) : 512 - row, max(0, -col) : 512 - col]
    want = delta[max(0, row) : max(0, row) + inside.shape[0], max(0, col) : max(0, col) + inside.shape[1]]
    same = np.isclose(inside, want, atol=1e-4) | (np.isnan(inside) & np.isnan(want))
    assert inside.size > 100_000 and same.mean() >= 0.99
    assert np.isfinite(want).mean() > 0.3
    derived = {link.href.rsplit("/", 2)[-2] for link in record.links if link.rel == "derived_from"}
    assert set(JUNE) | set(AUGUST) <= derived


def test_items_in_two_crss_go_on_the_first_items_grid_or_the_one_named(session, scenes):
    zone = {"type": "Feature", "id": "edge", "properties": {}, "geometry": mapping(EDGE)}
    first = run(session, zone, collections=[S2X], min_valid_fraction=0)
    named = run(session, zone, collections=[S2X], crs="EPSG:32634", resolution=10, min_valid_fraction=0)
    for result, crs, whose in ((first, "EPSG:32633", "the first item's"), (named, "EPSG:32634", "crs's")):
        facts = result.provenance.facts
        assert facts["crs"] == crs and result.change.attrs  # the change on that grid
        assert f"the items are in 2 CRSs; the change is on {crs} ({whose})" in facts["notes"]
        row = result.table.iloc[0]
        assert row["valid_fraction"] > 0.5 and np.isfinite(row["delta_mean"])
        assert (row["before_items"], row["after_items"]) == ("S2A_CP_E", "S2A_CP_W")


def test_bins_split_the_valid_area_into_named_classes(session, scenes):
    zones = fields()
    bins = {"loss": [None, -0.1], "stable": [-0.1, 0.1], "gain": [0.1, None]}
    got = by_zone(run(session, zones, bins=bins, min_valid_fraction=0).table, zones)
    want, _ = truth(scenes, zones)
    classes = got[["area_ha_loss", "area_ha_stable", "area_ha_gain"]].sum(axis=1)
    assert np.allclose(classes, want["delta_count"] * PIXEL_HA, rtol=1e-6)
    assert np.allclose(got["area_ha_loss"], got["decrease_ha"], rtol=1e-6, atol=1e-6)


def test_a_failed_item_is_left_out_and_named(session, scenes):
    result = run(session, fields(), after="2024-08-01/2024-09-30")
    facts = result.provenance.facts
    assert [f["item_id"] for f in facts["failed_items"]] == ["S2A_CP_BROKEN"]
    assert "404" in facts["failed_items"][0]["error"] and any(
        "could not be read" in n for n in facts["notes"]
    )
    assert "S2A_CP_BROKEN" not in " ".join(result.table["after_items"])
    with pytest.raises(NotFound, match="no item of the after period could be read"):
        run(session, fields(), after="2024-09")


# --- arguments, estimate, cancel, answer ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"before": "2024-08", "after": "2024-06"}, "starts before before"),
        ({"before": "2024-06-01/2024-06-30", "after": "2024-06-15/2024-07-15"}, "starts before before"),
        ({"bins": {"loss": [0.2, -0.2]}}, "bin 'loss'"),
        ({"reducer": "mode"}, "reducer"),
        ({"threshold": -0.1}, "threshold"),
        ({"datetime": "2024-06"}, "before and after, not datetime"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(make_settings, arguments, words):
    session = Session(make_settings())
    with pytest.raises(InvalidArgument) as error:  # (dry_run: refused before any search)
        session.compare_periods(mapping(box(13, 45, 13.01, 45.01)), dry_run=True, **{**PERIODS, **arguments})
    assert "\n" not in str(error.value) and words in str(error.value)


def test_an_empty_period_is_refused_in_one_line_naming_it(session, scenes):
    with pytest.raises(NotFound) as error:
        run(session, fields(), before="2023-06")
    assert "\n" not in str(error.value) and "before period (2023-06)" in str(error.value)


def test_the_estimate_names_both_periods_items(session, scenes):
    estimate = run(session, fields(), dry_run=True)
    assert estimate.operation == "compare_periods"
    assert sorted(estimate.item_ids) == sorted({**JUNE, **AUGUST})
    assert estimate.read_bytes and estimate.output.rows == len(fields()["features"])


def test_cancel_stops_the_call(session, scenes):
    job = Job()
    job.cancel()
    with pytest.raises(OperationCancelled):
        run(session, fields(), job=job)


def test_the_answer_keeps_the_table_and_the_change_and_is_lean(session, scenes):
    result = run(session, fields())
    limits = session.settings.limits.model_copy(update={"max_result_bytes": 4000})
    answer = registry.answer(session.core, result, limits)
    value = answer.value
    assert len(value.rows) < len(result.table) and any("rows shown" in n for n in value.notes)
    assert value.change.media_type.startswith("image/tiff") and value.table.file.endswith(".parquet")
    assert [image[:4] for image in answer.images] == [b"\x89PNG", b"\x89PNG"]
    assert value.zone_layer.stat == "delta_mean" and len(value.model_dump_json()) < 6000
    assert "geometry" not in value.zone_layer.features[0]  # the client sent the zones
    drawn = answer.layer.zones["features"]  # the map gets them beside the answer
    assert [f["id"] for f in drawn] == [f["id"] for f in value.zone_layer.features] and drawn[0]["geometry"]
    assert registry.map_call(result)["result"]["_meta"][MAP_LAYER_META]["zones"]["features"]
    # the change raster goes on the map: at its record's bbox, drawn with the change picture
    from stac_gdal_mcp.maps import build_map_view
    from stac_gdal_mcp.server.links import answered
    from stac_gdal_mcp.server.map_app import result_json, view_as_sent

    sent = result_json(answered(answer, limits.max_resource_bytes))
    view = view_as_sent([{"tool": "compare_periods", "arguments": {}, "result": sent}])
    (raster,) = view["outputs"]
    record = session.outputs.get(value.change.id)
    assert raster["id"] == value.change.id and raster["bbox"] == record.bbox and len(view["zones"]) == 1
    index = raster["image"]["content"]  # the answer's second image: the change picture
    assert sent["content"][index]["data"] == base64.b64encode(answer.images[1]).decode()
    assert build_map_view([{"tool": "compare_periods", "result": sent}])["outputs"][0]["image"].endswith(
        sent["content"][index]["data"]
    )


def test_a_change_saves_answers_and_draws_itself(session, scenes):
    """The `Change` saves itself (the change raster, the table), its table filtered with pandas is
    a change's table still (saved, drawn; it has no change raster), and it draws its zones as the
    registry does; the table's GeoDataFrame alone is of no kind."""
    import pandas as pd

    result = run(session, fields())
    assert result.request["before"] == PERIODS["before"] and registry.kind_of(result) == "compare_periods"
    cog = result.save("COG")
    with rasterio.open(session.outputs.path(cog.id)) as src:
        assert np.array_equal(src.read(1), result.change.values, equal_nan=True)
    csv = pd.read_csv(session.outputs.path(result.save("csv").id))
    assert list(csv["zone_id"]) == list(result.table["zone_id"])

    kept = result.table[result.table["delta_mean"].notna()]  # a pandas filter: a change's table still
    assert 0 < len(kept) < len(result.table) and registry.kind_of(kept) == "compare_periods"
    assert type(kept) is type(result.table) and kept.provenance == result.provenance
    with pytest.raises(InvalidArgument, match="^save takes .*, not GeoDataFrame$"):
        session.save(result.table.frame)
    saved = pd.read_csv(session.outputs.path(session.save(kept, format="csv").id))
    assert list(saved["zone_id"]) == list(kept["zone_id"])
    with pytest.raises(InvalidArgument, match="^the change raster is saved from the Change"):
        session.save(kept, format="COG")
    ids = [f["id"] for f in result.map_layer().zones["features"]]
    assert ids == list(result.table["zone_id"]) and result.map_layer() == registry.map_layer(result)
    assert [f["id"] for f in registry.map_layer(kept).zones["features"]] == list(kept["zone_id"])


def test_a_local_cluster_gives_the_threaded_table(make_testbed_session, scenes, session, cluster):  # noqa: F811
    import pandas as pd

    remote = make_testbed_session(dask_scheduler=cluster.scheduler_address)
    on_cluster, on_threads = run(remote, fields()), run(session, fields())
    pd.testing.assert_frame_equal(
        pd.DataFrame(on_cluster.table.to_wkb()), pd.DataFrame(on_threads.table.to_wkb())
    )
    assert np.array_equal(on_cluster.change.values, on_threads.change.values, equal_nan=True)


# --- the tool, as a client calls it, on the bundled sample catalog -----------------------------------


async def test_the_tool_answers_the_librarys_table_with_both_files_and_two_pictures(tmp_path):
    """compare_periods through an MCP client (fastmcp Client): its rows are the library's, the
    table and the change are linked as resources, a chart and the change picture come first."""
    from fastmcp import Client
    from test_zonal_mcp import FIELDS, dumped

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    arguments = {"geometries": FIELDS, "before": "2024-06", "after": "2024-08"}
    search = {"collections": ["sentinel-2-l2a"]}
    with Session(load_settings(default_catalog="sample", workspace=tmp_path / "workspace")) as session:
        async with Client(build_server(session=session)) as client:
            answer = dumped(await client.call_tool_mcp("compare_periods", {**arguments, "search": search}))
            estimate = dumped(await client.call_tool_mcp("compare_periods", {**arguments, "search": search, "dry_run": True}))  # fmt: skip
            wrong = dumped(await client.call_tool_mcp("compare_periods", {**arguments, "after": "2024-05", "search": search}))  # fmt: skip
        table = session.compare_periods(FIELDS, **arguments, **search).table
    value = answer["structuredContent"]
    assert [r["zone_id"] for r in value["rows"]] == list(table["zone_id"])
    got = np.array([r["delta_mean"] for r in value["rows"]])
    assert np.allclose(got, table["delta_mean"], rtol=1e-3)  # (4 significant digits in the answer)
    assert value["items"] == {"before": 2, "after": 1} and value["zone_layer"]["stat"] == "delta_mean"
    assert [c["type"] for c in answer["content"][:2]] == ["image", "image"]
    links = {c["uri"] for c in answer["content"] if c["type"] == "resource_link"}
    assert {value["table"]["uri"], value["change"]["uri"]} <= links
    assert estimate["structuredContent"]["dry_run"] is True and estimate["structuredContent"]["item_ids"]
    assert wrong["isError"] and "starts before before" in wrong["content"][0]["text"]
    assert "\n" not in wrong["content"][0]["text"]


async def test_the_tool_takes_the_threshold_cloud_mask_resolution_and_least_valid_share(tmp_path):
    """threshold, mask_clouds, resolution and min_valid_fraction reach the operation from the
    tool: its rows are the library's with the same keywords, and not those of the defaults."""
    from fastmcp import Client
    from test_zonal_mcp import FIELDS, dumped

    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    arguments = {"geometries": FIELDS, "before": "2024-06", "after": "2024-08"}
    search = {"collections": ["sentinel-2-l2a"]}
    chosen = {"threshold": 0.05, "mask_clouds": False, "resolution": 20.0, "min_valid_fraction": 0.2}
    with Session(load_settings(default_catalog="sample", workspace=tmp_path / "workspace")) as session:
        async with Client(build_server(session=session)) as client:
            answer = dumped(
                await client.call_tool_mcp("compare_periods", {**arguments, **chosen, "search": search})
            )
        table = session.compare_periods(FIELDS, **arguments, **chosen, **search).table
        default = session.compare_periods(FIELDS, **arguments, **search).table
    value = answer["structuredContent"]
    assert value["threshold"] == 0.05 and value["mask_clouds"] is False
    for column in ("delta_mean", "decrease_ha"):
        got = np.array([r[column] for r in value["rows"]], dtype=float)
        assert np.allclose(got, table[column], rtol=1e-3, atol=1e-3, equal_nan=True)
        assert not np.allclose(got, default[column], rtol=1e-3, atol=1e-3, equal_nan=True)
