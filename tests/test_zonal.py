"""zonal_stats against exactextract run on local copies of the same COGs, and numpy.

Items live in the real pgstac test bed, their COGs on the Range server. Expected values: the
zones projected into each item's CRS with pyproj, and `exact_extract` run on the local file
(rasterio), or on numpy arrays made from the local files (reflectance from the generator's
scale/offset, the 20 m SCL repeated onto the 10 m grid, not-clear classes masked) - never
through the code under test.
"""

from __future__ import annotations

import math
import re
import uuid

import numpy as np
import pytest
import rasterio
from exactextract import exact_extract
from exactextract.raster import NumPyRasterSource
from helpers import NOT_CLEAR_SCL, OFFSET, SCALE
from pyproj import Transformer
from shapely import transform as shapely_transform
from shapely.geometry import box, mapping, shape

# a dask LocalCluster of 2 worker processes (pytest takes the fixture from this import)
from test_distributed import cluster  # noqa: F401

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import AssetUnreadable, InvalidArgument, OperationCancelled
from stac_gdal_mcp.operations import registry, zonal
from stac_gdal_mcp.operations.zonal import stats as zonal_stats
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.testing import synthetic

UID = uuid.uuid4().hex[:8]
S2, LS, BROKEN = f"zs-s2-{UID}", f"zs-ls-{UID}", f"zs-broken-{UID}"
ORIGIN = (500000.0, 5000000.0)  # EPSG:32633, 512 px of 10 m
SCENE = (ORIGIN[0], ORIGIN[1] - 5120, ORIGIN[0] + 5120, ORIGIN[1])
DATES = {"S2A_Z1": "2024-06-01T10:00:00Z", "S2A_Z2": "2024-06-11T10:00:00Z"}
# two items of one day on either side of the 18 degree E boundary between UTM zones 33 and 34
# (E ends and W starts at 18 degrees E, near the zone; pixel edges at whole metres)
ACROSS = {"S2A_E": (32633, (736477.0 - 5120, 4990000.0)), "S2A_W": (32634, (263523.0, 4990000.0))}
ACROSS_DAY = "2024-06-21T10:00:00Z"
ACROSS_ZONE = box(17.996, 44.99, 18.004, 44.995)
# two items of one day in one UTM zone, side by side with 1,120 m of overlap (tiles of one orbit)
TILES = {
    "S2A_T1": ("2024-06-25T10:00:00Z", ORIGIN),
    "S2A_T2": ("2024-06-25T10:00:05Z", (ORIGIN[0] + 4000, ORIGIN[1])),
}


def to_wgs84(geom, epsg):
    return shapely_transform(
        geom, Transformer.from_crs(epsg, 4326, always_xy=True).transform, interleaved=False
    )


def fields():
    """Field clusters over the scene, plus one half outside it and one far away."""
    features = synthetic.field_polygons(32633, SCENE, 24, seed=3, clusters=3)
    half = to_wgs84(box(ORIGIN[0] - 150, ORIGIN[1] - 2000, ORIGIN[0] + 170, ORIGIN[1] - 1800), 32633)
    far = to_wgs84(box(ORIGIN[0] + 90000, ORIGIN[1] - 2000, ORIGIN[0] + 90300, ORIGIN[1] - 1800), 32633)
    features.append({"type": "Feature", "id": "half-outside", "properties": {}, "geometry": mapping(half)})
    features.append({"type": "Feature", "id": "far-away", "properties": {}, "geometry": mapping(far)})
    return {"type": "FeatureCollection", "features": features}


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    folder = f"zs-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    made, s2_items = {}, []
    # (item id: datetime, EPSG, origin, seed, cloud fraction of its valid pixels)
    s2 = {i: (when, 32633, ORIGIN, 40 + k, 0.3) for k, (i, when) in enumerate(DATES.items())}
    s2 |= {i: (ACROSS_DAY, epsg, origin, 50, 0.3) for i, (epsg, origin) in ACROSS.items()}
    s2 |= {i: (when, 32633, origin, 70 + k, 0.3) for k, (i, (when, origin)) in enumerate(TILES.items())}
    for item_id, (when, epsg, origin, seed, clouds) in s2.items():
        item, _ = synthetic.write_scene(
            "sentinel-2-l2a", out_dir, item_id, when, collection_id=S2, seed=seed, epsg=epsg, origin=origin,
            size_px=512, blocksize=128, with_visual=False, href_base=href_base, cloud_fraction=clouds,
        )  # fmt: skip
        made[item_id] = out_dir / item_id
        s2_items.append(item)
    ls_id = "LC09_L2SP_190028_20240603_02_T1"
    ls_item, _ = synthetic.write_scene(
        "landsat-c2-l2", out_dir, ls_id, "2024-06-03T10:00:00Z", collection_id=LS, seed=21,
        origin=ORIGIN, size_px=171, blocksize=128, href_base=href_base, cloud_fraction=0.3,
    )  # fmt: skip
    made["LS"] = out_dir / ls_id
    broken, _ = synthetic.write_scene(
        "sentinel-2-l2a", out_dir, "S2A_BROKEN", "2024-06-05T10:00:00Z", collection_id=BROKEN, seed=60,
        origin=ORIGIN, size_px=512, blocksize=128, with_visual=False, href_base=href_base,
    )  # fmt: skip
    (out_dir / "S2A_BROKEN" / "red.tif").unlink()  # its reads fail: 404
    pgstac_api.load(
        [synthetic.collection(kind, cid) for kind, cid in
         (("sentinel-2-l2a", S2), ("landsat-c2-l2", LS), ("sentinel-2-l2a", BROKEN))],
        [*s2_items, ls_item, broken],
    )  # fmt: skip
    return made


@pytest.fixture
def session(scenes, testbed_session):
    return testbed_session


def run(session, geometries, **arguments):
    core = session.core
    arguments.setdefault("catalog", "testbed")
    return zonal.run(core, zonal_stats.check(core, geometries, **arguments))


# --- the independent computation -------------------------------------------------------------------


def local_features(collection, epsg):
    project = Transformer.from_crs(4326, epsg, always_xy=True).transform
    return [
        {"type": "Feature", "properties": {}, "geometry": mapping(shapely_transform(shape(f["geometry"]), project, interleaved=False))}
        for f in collection["features"]
    ]  # fmt: skip


def exactextract_local(path, collection, epsg, ops):
    """exactextract on the local file (rasterio opens it; its nodata is honoured)."""
    with rasterio.open(path) as src:
        return exact_extract(src, local_features(collection, epsg), ops, output="pandas")


def ndvi_local(folder, collection, epsg=32633):
    """numpy NDVI with the masks applied, then exactextract on the array (mean, count)."""
    ndvi, extent = ndvi_array(folder)
    source = NumPyRasterSource(ndvi, extent.left, extent.bottom, extent.right, extent.top)
    return exact_extract(source, local_features(collection, epsg), ["mean", "count"], output="pandas")


def ndvi_array(folder):
    """(NDVI of the local files, masked where a band is nodata or the SCL not clear; bounds)."""
    with rasterio.open(folder / "red.tif") as src:
        red, transform = src.read(1), src.transform
        extent = src.bounds
    with rasterio.open(folder / "nir.tif") as src:
        nir = src.read(1)
    with rasterio.open(folder / "scl.tif") as src:
        scl = np.repeat(np.repeat(src.read(1), 2, 0), 2, 1)[: red.shape[0], : red.shape[1]]
    r, n = red * SCALE + OFFSET, nir * SCALE + OFFSET
    with np.errstate(all="ignore"):
        ndvi = (n - r) / (n + r)
    keep = (red != 0) & (nir != 0) & ~np.isin(scl, NOT_CLEAR_SCL) & np.isfinite(ndvi)
    assert transform.a == 10
    return np.ma.masked_array(ndvi, ~keep), extent


def rows_of(frame, item_id):
    return frame[frame["item_ids"] == item_id].set_index("zone_id")


def assert_same(got, want, stat):
    if stat in ("mean", "count", "sum", "stdev"):
        assert np.allclose(got, want, rtol=1e-6, atol=1e-9, equal_nan=True), stat
    else:
        assert np.array_equal(np.asarray(got, "float64"), np.asarray(want, "float64"), equal_nan=True), stat


# --- statistics equal exactextract on the local files ----------------------------------------------


def test_scl_statistics_equal_exactextract_on_the_local_file(session, scenes):
    zones = fields()
    stats = ["mean", "count", "min", "max", "majority", "minority", "variety"]
    frame = run(session, zones, expression="scl", stats=stats, mask_clouds=False, collections=[S2],
                datetime="2024-06-01/2024-06-12")  # fmt: skip
    ids = [f["id"] for f in zones["features"]]
    for item_id in DATES:
        got = rows_of(frame, item_id)
        want = exactextract_local(scenes[item_id] / "scl.tif", zones, 32633, stats)
        want.index = ids
        inside = [i for i in ids if i != "far-away"]
        assert set(got.index) == set(inside)
        for stat in stats:
            assert_same(got.loc[inside, stat].to_numpy(), want.loc[inside, stat].to_numpy(), stat)
        assert got.loc["half-outside", "count"] > 0
        assert got.loc["half-outside", "valid_fraction"] == pytest.approx(170 / 320, abs=0.01)
    far = frame[frame["zone_id"] == "far-away"]
    assert len(far) == 1 and far["count"].iloc[0] == 0 and far["note"].iloc[0] == "no item covers this zone"
    multi = [f["id"] for f in zones["features"] if f["geometry"]["type"] == "MultiPolygon"]
    holes = [f["id"] for f in zones["features"] if len(f["geometry"]["coordinates"]) > 1 and f["geometry"]["type"] == "Polygon"]  # fmt: skip
    assert multi and holes  # the comparison above covered both kinds


def test_landsat_qa_pixel_statistics_equal_exactextract(session, scenes):
    zones = fields()
    stats = ["mean", "count", "min", "max", "majority", "quantile(q=0.75)", "median"]
    frame = run(session, zones, expression="qa_pixel", stats=stats, mask_clouds=False, collections=[LS])
    got = frame[frame["zone_id"] != "far-away"].set_index("zone_id")
    want = exactextract_local(scenes["LS"] / "qa_pixel.tif", zones, 32633, ["mean", "count", "min", "max", "majority", "quantile(q=0.75)", "median"])  # fmt: skip
    want.index = [f["id"] for f in zones["features"]]
    want = want.loc[got.index]
    for stat, column in [("mean", "mean"), ("count", "count"), ("min", "min"), ("max", "max"),
                         ("majority", "majority"), ("quantile", "quantile_75"), ("median", "median")]:  # fmt: skip
        assert_same(got[column].to_numpy(), want[column].to_numpy(), stat)


def test_ndvi_series_per_field_equals_numpy_and_exactextract(session, scenes):
    zones = fields()
    frame = run(session, zones, expression="ndvi", stats=["mean", "count"], collections=[S2],
                datetime="2024-06-01/2024-06-12", min_valid_fraction=0)  # fmt: skip
    ids = [f["id"] for f in zones["features"]]
    for item_id in DATES:
        got = rows_of(frame, item_id)
        want = ndvi_local(scenes[item_id], zones)
        want.index = ids
        inside = list(got.index)
        assert_same(got["count"].to_numpy(), want.loc[inside, "count"].to_numpy(), "count")
        assert_same(got["mean"].to_numpy(), want.loc[inside, "mean"].to_numpy(), "mean")
        assert got["cloud_fraction"].between(0, 1).all() and (got["cloud_fraction"] > 0).any()
    assert frame.provenance.kind == "zonal_stats" == registry.kind_of(frame)
    assert {s.item_id for s in frame.provenance.sources} == set(DATES)


def test_zone_across_two_utm_zones_is_measured_on_each_items_grid(session, scenes):
    zones = {"type": "Feature", "id": "across", "properties": {}, "geometry": mapping(ACROSS_ZONE)}
    frame = run(session, zones, expression="scl", stats=["count", "majority"], mask_clouds=False,
                collections=[S2], datetime="2024-06-21")  # fmt: skip
    assert sorted(frame["item_ids"]) == sorted(ACROSS)
    total = 0.0
    for item_id, (epsg, _) in ACROSS.items():
        want = exactextract_local(
            scenes[item_id] / "scl.tif", {"features": [zones]}, epsg, ["count", "majority"]
        )
        got = rows_of(frame, item_id).iloc[0]
        assert got["count"] == pytest.approx(want["count"][0], rel=1e-6)
        assert got["majority"] == want["majority"][0]
        total += got["valid_fraction"]
    assert total == pytest.approx(1.0, abs=0.02)  # each item sees its side of 18 degrees E
    day = run(session, zones, expression="scl", stats=["count"], mask_clouds=False, per="day",
              collections=[S2], datetime="2024-06-21")  # fmt: skip
    assert len(day) == 1 and day["date"].iloc[0] == "2024-06-21"
    assert day["count"].iloc[0] == frame["count"].max()
    assert sorted(day["item_ids"].iloc[0].split()) == sorted(ACROSS)


def test_a_failed_read_is_never_data(session, scenes):
    items = [{"collection_id": BROKEN, "item_id": "S2A_BROKEN"}, {"collection_id": S2, "item_id": "S2A_Z1"}]
    frame = run(session, fields(), expression="ndvi", stats=["mean"], items=items)
    measured = frame[(frame["zone_id"] != "far-away") & (frame["item_ids"] == "S2A_BROKEN")]
    assert len(measured) and measured["mean"].isna().all() and measured["valid_fraction"].isna().all()
    assert measured["error"].str.contains("red.tif").all()
    assert "could not be read" in " ".join(frame.provenance.facts["notes"])
    assert [item_id for item_id, _ in frame.quality.failed] == ["S2A_BROKEN"]


def test_every_item_failing_fails_the_call_with_the_reason(session, scenes):
    with pytest.raises(AssetUnreadable, match="red.tif"):
        run(session, fields(), expression="ndvi", stats=["mean"], items=[{"collection_id": BROKEN, "item_id": "S2A_BROKEN"}])  # fmt: skip


def test_an_item_failing_before_its_zones_are_matched_gives_every_zone_an_error(session, scenes):
    """An item that cannot even be fetched may cover any zone: each zone gets its error row, and
    none is called 'not covered' because of it (that would be silence about a failed read)."""
    zones = fields()
    missing = "S2A_MISSING"
    frame = run(session, zones, expression="scl", stats=["mean", "count"], mask_clouds=False,
                items=[{"collection_id": S2, "item_id": "S2A_Z1"}, {"collection_id": S2, "item_id": missing}])  # fmt: skip
    failed = frame[frame["item_ids"] == missing].set_index("zone_id")
    ids = [f["id"] for f in zones["features"]]
    assert sorted(failed.index, key=str) == sorted(ids, key=str)
    assert failed["error"].str.contains(missing).all()
    assert failed["mean"].isna().all() and failed["count"].isna().all()
    assert not (frame["note"] == "no item covers this zone").any()
    measured = rows_of(frame, "S2A_Z1")
    assert measured["error"].isna().all() and (measured["count"] > 0).all()
    assert [f["item_id"] for f in frame.provenance.facts["failed_items"]] == [missing]


def test_estimate_counts_the_windows_reads(session, scenes):
    core = session.core
    request = zonal_stats.check(core, fields(), expression="ndvi", catalog="testbed", collections=[S2], datetime="2024-06-01/2024-06-12")  # fmt: skip
    estimate = zonal.estimate(core, request)
    assert sorted(estimate.item_ids) == sorted(DATES)
    assert estimate.output.rows == 2 * (len(fields()["features"]) - 1)
    assert estimate.read_bytes and estimate.read_requests
    assert all(f.tiles < 16 for f in estimate.files)  # not the 16 tiles of a whole 512 px band


def test_cancel_stops_the_call(session, scenes):
    job = Job()
    job.cancel()
    core = session.core
    with pytest.raises(OperationCancelled):
        zonal.run(core, zonal_stats.check(core, fields(), catalog="testbed", collections=[S2]), job=job)


def test_save_writes_geoparquet_and_csv_with_a_record(session, scenes):
    import geopandas

    frame = run(
        session, fields(), stats=["mean", "count"], collections=[S2], datetime="2024-06-01/2024-06-12"
    )
    record = zonal.save(session.core, frame)
    back = geopandas.read_parquet(session.core.outputs.root / record.file.href.rsplit("/", 1)[-1])
    assert len(back) == len(frame) and back.crs.to_epsg() == 4326
    assert np.allclose(back["mean"], frame["mean"], equal_nan=True)
    derived = [link for link in record.links if link.rel == "derived_from" and link.href.endswith(".tif")]
    assert len(derived) == len(frame.provenance.sources) > 0
    csv = zonal.save(session.core, frame, format="csv")
    assert csv.file.type == "text/csv"


# --- arguments (no services) ------------------------------------------------------------------------


@pytest.fixture
def core(make_settings):
    return Session(make_settings()).core


def test_unknown_stat_is_refused_in_one_line_listing_the_valid_ones(core):
    with pytest.raises(InvalidArgument) as error:
        zonal_stats.check(core, mapping(box(13, 45, 13.01, 45.01)), stats=["mean", "avg"])
    message = str(error.value)
    assert "\n" not in message and "'avg'" in message and "majority" in message and "quantile" in message
    with pytest.raises(InvalidArgument, match="per-pixel"):
        zonal_stats.check(core, mapping(box(13, 45, 13.01, 45.01)), stats=["values"])


def test_invalid_rings_are_repaired_with_a_note_or_refused_naming_the_feature(core):
    bowtie = {
        "type": "Polygon",
        "coordinates": [[[13, 45], [13.01, 45.01], [13.01, 45], [13, 45.01], [13, 45]]],
    }
    line = {"type": "LineString", "coordinates": [[13, 45], [13.01, 45.01]]}
    request = zonal_stats.check(core, {"type": "Feature", "id": "bow", "properties": {}, "geometry": bowtie})
    assert request.zones.geometries[0].is_valid and request.zones.geometries[0].area > 0
    assert "'bow'" in request.zones.notes[0] and "repaired" in request.zones.notes[0]
    with pytest.raises(InvalidArgument, match="zone 'line' has no area"):
        zonal_stats.check(core, [{"type": "Feature", "id": "line", "properties": {}, "geometry": line}])


def test_zone_ids_from_a_property_and_from_a_workspace_file(core):
    import geopandas

    collection = {"type": "FeatureCollection", "features": synthetic.field_polygons(32633, SCENE, 12)}
    request = zonal_stats.check(core, collection, id_property="name")
    assert request.zones.ids[0] == "field 0"
    with pytest.raises(InvalidArgument, match="no property 'crop'"):
        zonal_stats.check(core, collection, id_property="crop")
    path = core.settings.workspace / "fields.gpkg"
    path.parent.mkdir(parents=True, exist_ok=True)
    geopandas.GeoDataFrame.from_features(collection["features"], crs="EPSG:4326").to_file(path)
    request = zonal_stats.check(core, "fields.gpkg", id_property="name")
    assert len(request.zones) == len(collection["features"])
    assert math.isclose(
        request.zones.geometries[3].area, shape(collection["features"][3]["geometry"]).area, rel_tol=1e-9
    )
    with pytest.raises(Exception, match="outside the allowed folders"):
        zonal_stats.check(core, "/etc/passwd.geojson")


def test_a_mostly_cloudy_zone_gets_no_value_and_a_note_unless_min_valid_fraction_is_0(session, scenes):
    """At the default (0.5) a zone-observation less than half valid (clear, with data) keeps its
    count and fractions but no mean, and says why; at 0 it has numpy's mean."""
    zones = fields()
    arguments = dict(
        expression="ndvi", stats=["mean", "count"], collections=[S2], datetime="2024-06-01/2024-06-12"
    )
    default = run(session, zones, **arguments)
    everything = run(session, zones, min_valid_fraction=0, **arguments)
    ids = [f["id"] for f in zones["features"]]
    cloudy = 0
    for item_id in DATES:
        got, kept = rows_of(default, item_id), rows_of(everything, item_id)
        want = ndvi_local(scenes[item_id], zones)
        want.index = ids
        low = (kept["valid_fraction"] < 0.5) & (kept["count"] > 0)
        cloudy += int((low & (kept["cloud_fraction"] > 0.5)).sum())
        assert got.loc[low, "mean"].isna().all()
        assert got.loc[low, "note"].str.contains("under min_valid_fraction=0.5: no statistics").all()
        assert np.allclose(got.loc[low, "count"], want.loc[low[low].index, "count"], rtol=1e-6)
        assert_same(kept.loc[low, "mean"].to_numpy(), want.loc[low[low].index, "mean"].to_numpy(), "mean")
        high = kept["valid_fraction"] >= 0.5
        assert_same(got.loc[high, "mean"].to_numpy(), want.loc[high[high].index, "mean"].to_numpy(), "mean")
        assert got.loc[high, "note"].isna().all()
    assert cloudy > 0  # the comparison above covered zones under mostly cloudy masks
    dropped = int(default["note"].fillna("").str.contains("min_valid_fraction").sum())
    assert f"{dropped} of {len(default)} rows had less valid area than min_valid_fraction=0.5" in " ".join(
        default.provenance.facts["notes"]
    )
    assert default.quality.too_little == dropped == int(default["too_little_valid"].sum())
    with pytest.raises(InvalidArgument, match="min_valid_fraction"):
        run(session, zones, min_valid_fraction=1.5, **arguments)


def test_per_day_mosaics_the_items_of_one_day_as_numpy_on_the_merged_array(session, scenes):
    """A field across two tiles of one day: one row, the pixels of both tiles each counted once
    (where they overlap, the earlier acquisition's usable pixel), as exactextract gives on the
    numpy mosaic of the two local tiles."""
    x0, y0 = ORIGIN
    across = box(x0 + 4700, y0 - 3000, x0 + 5700, y0 - 2500)  # over the overlap and past T1's edge
    inside = box(x0 + 6000, y0 - 1000, x0 + 6400, y0 - 700)  # in T2 only
    zones = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "id": name, "properties": {}, "geometry": mapping(to_wgs84(g, 32633))}
        for name, g in (("across", across), ("t2-only", inside))]}  # fmt: skip
    day = run(session, zones, expression="ndvi", stats=["mean", "count"], per="day", collections=[S2],
              datetime="2024-06-25", min_valid_fraction=0)  # fmt: skip
    assert len(day) == 2 and set(day["date"]) == {"2024-06-25"}
    assert set(day["item_ids"]) == {"S2A_T1 S2A_T2"}
    (t1, extent), (t2, _) = ndvi_array(scenes["S2A_T1"]), ndvi_array(scenes["S2A_T2"])
    merged = np.ma.masked_all((512, 912), dtype="float64")
    merged[:, 400:] = t2
    first = ~t1.mask
    merged[:, :512][first] = t1[first]  # the earlier item wins where it is usable
    source = NumPyRasterSource(merged, extent.left, extent.bottom, extent.left + 9120, extent.top)
    want = exact_extract(source, local_features(zones, 32633), ["mean", "count"], output="pandas")
    got = day.set_index("zone_id").loc[["across", "t2-only"]]
    assert_same(got["count"].to_numpy(), want["count"].to_numpy(), "count")
    assert_same(got["mean"].to_numpy(), want["mean"].to_numpy(), "mean")
    alone = exactextract_local(
        scenes["S2A_T1"] / "red.tif", {"features": zones["features"][:1]}, 32633, ["count"]
    )
    assert alone["count"][0] < 0.5 * 5000 < got.loc["across", "count"]  # T1 alone sees 42 % of the field


async def test_the_tool_without_cloud_mask_gives_exactextracts_class_fractions(session, scenes):
    """zonal_stats through an MCP client on the test bed, mask_clouds=false, stats=["frac"]: one
    frac_<class> column per class present, equal to exactextract's frac on the local SCL file."""
    from test_zonal_mcp import call

    zones = fields()
    items = [{"collection_id": S2, "item_id": "S2A_Z1"}]
    result = await call(session, {"geometries": zones, "search": {"catalog": "testbed", "items": items},
                                  "expression": "scl", "stats": ["frac"], "mask_clouds": False})  # fmt: skip
    assert "structuredContent" in result, result["content"]
    rows = {r["zone_id"]: r for r in result["structuredContent"]["rows"]}
    want = exactextract_local(scenes["S2A_Z1"] / "scl.tif", zones, 32633, ["unique", "frac"])
    checked = 0
    for feature, classes, fractions in zip(zones["features"], want["unique"], want["frac"]):
        if feature["id"] == "far-away":
            continue
        row = rows[feature["id"]]
        got = {k: v for k, v in row.items() if k.startswith("frac_") and v}
        assert got == pytest.approx(
            {f"frac_{int(c)}": round(f, 4) for c, f in zip(classes, fractions) if round(f, 4)}, abs=1e-12
        )
        checked += len(got) > 1
    assert checked > 10  # fields of several classes
    # a zone no item covers has no fraction of any class (not 0: nothing was measured)
    far = [v for k, v in rows["far-away"].items() if k.startswith("frac_")]
    assert far and all(v is None for v in far)


def test_a_failing_item_with_count_asked_gives_rows_with_error(session, scenes):
    items = [{"collection_id": BROKEN, "item_id": "S2A_BROKEN"}, {"collection_id": S2, "item_id": "S2A_Z1"}]
    frame = run(session, fields(), expression="ndvi", stats=["count", "mean"], items=items)
    measured = frame[(frame["zone_id"] != "far-away") & (frame["item_ids"] == "S2A_BROKEN")]
    assert (
        len(measured) and measured["error"].str.contains("red.tif").all() and measured["count"].isna().all()
    )


def test_the_package_has_one_solar_day_definition():
    """The solar day is odc-stac's (`ParsedItem.solar_date_at`), asked in one place:
    load.solar_days; nothing else works out a local day from a longitude."""
    from pathlib import Path

    import stac_gdal_mcp

    root = Path(stac_gdal_mcp.__file__).parent
    # odc-stac's call, or a longitude turned into hours (degrees / 15, or * 240 into seconds)
    pattern = re.compile(r"solar_date_at\(|lon\w*[\"'\])]*(?:\.\w+\([^()]*\))*\s*(?:/\s*15\b|\*\s*240\b)")
    assert pattern.search('hours = pd.to_timedelta(rows["_lon"].fillna(0) / 15, unit="h")')  # (the old one)
    found = {
        str(path.relative_to(root)): [m.group(0) for m in pattern.finditer(path.read_text())]
        for path in root.rglob("*.py")
        if pattern.search(path.read_text())
    }
    assert found == {"processing/load.py": ["solar_date_at("]}


# --- on dask.distributed ----------------------------------------------------------------------------


def test_a_local_cluster_gives_the_threaded_table(make_settings, pgstac_api, scenes, session, cluster):  # noqa: F811
    """Items measured in the worker processes of a LocalCluster: the very table of the threaded
    run, failed item included (its error rows as the threads give them)."""
    import pandas as pd
    from distributed import Client

    remote = Session(
        make_settings(
            catalogs=[{"id": "testbed", "url": pgstac_api.url}],
            default_catalog="testbed",
            dask_scheduler=cluster.scheduler_address,
        )
    )
    items = [{"collection_id": S2, "item_id": i} for i in (*DATES, *ACROSS)]
    items.append({"collection_id": BROKEN, "item_id": "S2A_BROKEN"})
    arguments = {
        "expression": "ndvi",
        "stats": ["mean", "count", "majority", "quantile(q=0.5)"],
        "items": items,
    }
    with Client(cluster.scheduler_address, set_as_default=False) as client:
        before = sum(client.run(lambda dask_worker: dask_worker.state.executed_count).values())
        on_cluster = run(remote, fields(), **arguments)
        ran = sum(client.run(lambda dask_worker: dask_worker.state.executed_count).values()) - before
    on_threads = run(session, fields(), **arguments)
    assert ran >= len(DATES) + 1  # each item under the fields (and the broken one) ran in a worker
    assert on_threads["error"].notna().any() and on_threads["count"].gt(0).any()
    pd.testing.assert_frame_equal(
        pd.DataFrame(on_cluster.to_wkb()), pd.DataFrame(on_threads.to_wkb()), check_exact=True
    )
    assert on_cluster.provenance == on_threads.provenance and on_cluster.quality == on_threads.quality
    # one day's two tiles mosaicked in a worker: the threads' mosaic
    tiles = {"expression": "ndvi", "stats": ["mean", "count"], "per": "day", "min_valid_fraction": 0,
             "items": [{"collection_id": S2, "item_id": i} for i in TILES]}  # fmt: skip
    on_cluster, on_threads = run(remote, fields(), **tiles), run(session, fields(), **tiles)
    assert set(on_threads["item_ids"].dropna()) == {"S2A_T1 S2A_T2"} and on_threads["count"].gt(0).any()
    pd.testing.assert_frame_equal(
        pd.DataFrame(on_cluster.to_wkb()), pd.DataFrame(on_threads.to_wkb()), check_exact=True
    )
