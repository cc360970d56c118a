"""Coverage stored once per grid window (operations/zonal/coverage.py) gives exactextract's numbers.

Expected values: exactextract's `exact_extract` called here on the same arrays (NaN where a pixel
is not usable: nodata by value), never through the code under test; zones with holes, several
parts (one off the raster), across the window's edge, outside it, and a sliver.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd
import pytest
import rasterio
import shapely
from exactextract import exact_extract
from exactextract.raster import NumPyRasterSource
from rasterio.transform import Affine
from shapely.geometry import box, mapping

# the pgstac test bed's scenes and a session over them (pytest takes the fixtures from this import)
from test_zonal import ACROSS, DATES, S2, exactextract_local, fields, rows_of, run, scenes, session  # noqa: F401

from stac_gdal_mcp.errors import LimitExceeded
from stac_gdal_mcp.operations import zonal
from stac_gdal_mcp.operations.zonal import coverage, pixels

HEIGHT, WIDTH = 300, 400
GRID = pixels.Grid(
    Affine(10, 0, 500000, 0, -10, 5000000), WIDTH, HEIGHT, rasterio.crs.CRS.from_epsg(32633), (256, 256)
)
WINDOW_BOX = (500000, 5000000 - HEIGHT * 10, 500000 + WIDTH * 10, 5000000)
STATS = ["count", "sum", "mean", "min", "max", "median", "quantile(q=0.9)", "quantile(q=0.05)",
         "majority", "minority", "mode", "variety", "unique"]  # fmt: skip


def zones(seed=5, count=150):
    rng = np.random.default_rng(seed)
    found = []
    for k in range(count):
        cx, cy = 500000 + rng.uniform(0, WIDTH * 10), 5000000 - rng.uniform(0, HEIGHT * 10)
        half = rng.uniform(15, 250, 2)
        field = shapely.affinity.rotate(
            box(cx - half[0], cy - half[1], cx + half[0], cy + half[1]), rng.uniform(0, 90)
        )
        if k % 5 == 0:  # a hole
            field = field.difference(shapely.Point(cx, cy).buffer(min(half) / 2))
        if k % 7 == 0:  # two parts, the second often off the raster's east edge
            field = shapely.MultiPolygon([field, box(cx + 300, cy, cx + 360, cy + 70)])
        found.append(field)
    found.append(box(400000, 400000, 400100, 400100))  # outside the window
    found.append(box(501000, 4998000, 501000.5, 4998600))  # a sliver: partial cells only
    return found


def arrays(kind, seed=9):
    rng = np.random.default_rng(seed)
    data = (
        rng.integers(0, 6, (HEIGHT, WIDTH)).astype("uint16")
        if kind == "classes"
        else rng.normal(0.4, 0.2, (HEIGHT, WIDTH))
    )
    mask = rng.random((HEIGHT, WIDTH)) < 0.2
    mask[:80, :80] = True  # a corner of nodata
    mask[:, -30:] |= rng.random((HEIGHT, 30)) < 0.7  # the east edge mostly masked
    cloud = np.ma.masked_array(
        (rng.random((HEIGHT, WIDTH)) < 0.3).astype("float64"), mask=rng.random((HEIGHT, WIDTH)) < 0.1
    )
    return np.ma.masked_array(data, mask=mask), cloud


def exactextract_of(masked, geometries, ops):
    """exactextract on the array with a nodata value where masked (its type's largest value for
    integers, NaN for floats), as a user would call it on a file."""
    if masked.dtype.kind in "iu":
        nodata = np.iinfo(masked.dtype).max
        array = masked.filled(nodata)
    else:
        nodata, array = None, np.ma.masked_array(masked, dtype="float64").filled(np.nan)
    features = [{"type": "Feature", "properties": {}, "geometry": mapping(g)} for g in geometries]
    source = NumPyRasterSource(array, *WINDOW_BOX, nodata=nodata)
    return exact_extract(source, features, ops, output="pandas")


def request_of(stats):
    class Request:
        pass

    request = Request()
    request.stats = zonal.parse_stats(stats)
    return request


@pytest.mark.parametrize("kind", ["classes", "reflectance"])
def test_every_zones_statistics_equal_exactextracts_to_the_bit(kind):
    geometries = zones()
    value, cloud = arrays(kind)
    stats = STATS + (["frac"] if kind == "classes" else [])
    window = pixels.Window(0, 0, WIDTH, HEIGHT, tuple(range(len(geometries))))
    got = coverage.reduce(
        request_of(stats), coverage.cells(GRID, window, geometries), window.zones, value, cloud, pixels._label
    )
    want = exactextract_of(
        value,
        geometries,
        [s for s in stats if s != "frac"] + (["frac", "unique"] if kind == "classes" else []),
    )
    clouds = exactextract_of(cloud, geometries, ["mean"])
    for stat in zonal.parse_stats(stats):
        if stat.name == "frac":
            continue
        if stat.name == "unique":
            assert [list(map(pixels._label, sorted(u))) for u in want["unique"]] == list(got["unique"])
            continue
        np.testing.assert_array_equal(
            got[stat.column].to_numpy(float), want[stat.column].to_numpy(float), err_msg=stat.column
        )
    np.testing.assert_array_equal(got["_count"].to_numpy(), want["count"].to_numpy())
    np.testing.assert_array_equal(got["cloud_fraction"].to_numpy(), clouds["mean"].to_numpy())
    if kind == "classes":
        for zone, (classes, fractions) in enumerate(zip(want["unique"], want["frac"])):
            for c, f in zip(classes, fractions):
                assert got.loc[zone, f"frac_{int(c)}"] == f
            others = [c for c in got if c.startswith("frac_") and int(c[5:]) not in set(map(int, classes))]
            assert got.loc[zone, others].isna().all()
    assert got.loc[len(geometries) - 2, "count"] == 0  # outside: count 0, no statistic
    assert np.isnan(got.loc[len(geometries) - 2, "mean"])
    assert 0 < got.loc[len(geometries) - 1, "count"] <= 3.0  # the sliver: 60 cells of 5 % each at most


def test_exactextract_path_counts_no_masked_pixel_of_a_multipolygon_part_off_the_raster():
    """The path without stored coverage (stdev) gives exactextract's numbers on NaN-filled arrays
    too: a masked array's mask was lost for such zones (0.3), counting every masked pixel."""
    geometries = zones()
    value, cloud = arrays("reflectance")
    window = pixels.Window(0, 0, WIDTH, HEIGHT, tuple(range(len(geometries))))
    got = pixels.extract(request_of(["count", "stdev"]), GRID, window, geometries, value, cloud)
    want = exactextract_of(value, geometries, ["count", "stdev"])
    np.testing.assert_array_equal(got["count"].to_numpy(), want["count"].to_numpy())
    off = [
        i for i, g in enumerate(geometries) if g.geom_type == "MultiPolygon" and g.bounds[2] > WINDOW_BOX[2]
    ]
    assert off, "the layout has a multipolygon with a part off the raster"
    whole = exactextract_of(np.ma.masked_array(value.data), [geometries[i] for i in off], ["count"])["count"]
    assert (got.loc[off, "count"].to_numpy() < whole.to_numpy()).all()  # its masked pixels left out


def test_coverage_is_built_once_per_window_and_shared_by_items_asking_together():
    from concurrent.futures import ThreadPoolExecutor

    geometries = zones(count=40)
    window = pixels.Window(0, 0, WIDTH, HEIGHT, tuple(range(len(geometries))))
    store = coverage.Coverages()
    before = coverage.BUILT[0]
    with ThreadPoolExecutor(4) as pool:
        got = list(
            pool.map(
                lambda _: store.get(
                    coverage.window_key(GRID, window), lambda: coverage.cells(GRID, window, geometries)
                ),
                range(8),
            )
        )
    assert coverage.BUILT[0] - before == 1
    assert all(m is got[0] for m in got)
    other = pixels.Window(0, 0, WIDTH // 2, HEIGHT, window.zones)
    store.get(coverage.window_key(GRID, other), lambda: coverage.cells(GRID, other, geometries))
    assert coverage.BUILT[0] - before == 2  # another window: its own


def test_coverages_past_their_cell_budget_drop_the_least_recently_used():
    geometries = zones(count=40)
    windows = [pixels.Window(0, 0, WIDTH - k, HEIGHT, tuple(range(len(geometries)))) for k in range(3)]
    one = coverage.cells(GRID, windows[0], geometries).nnz
    store = coverage.Coverages(max_cells=int(one * 2.5))
    for w in windows:
        store.get(coverage.window_key(GRID, w), lambda w=w: coverage.cells(GRID, w, geometries))
    before = coverage.BUILT[0]
    store.get(coverage.window_key(GRID, windows[2]), lambda: coverage.cells(GRID, windows[2], geometries))
    assert coverage.BUILT[0] == before  # kept
    store.get(coverage.window_key(GRID, windows[0]), lambda: coverage.cells(GRID, windows[0], geometries))
    assert coverage.BUILT[0] == before + 1  # dropped, built again


def test_cached_and_exactextract_paths_give_one_table():
    """A statistic only exactextract computes (stdev) sends the call down its path: the shared
    statistics are the same numbers either way."""
    geometries = zones()
    value, cloud = arrays("reflectance")
    window = pixels.Window(0, 0, WIDTH, HEIGHT, tuple(range(len(geometries))))
    stats = ["mean", "count", "median", "max"]
    assert coverage.cacheable(request_of(stats)) and not coverage.cacheable(request_of([*stats, "stdev"]))
    cached = coverage.reduce(
        request_of(stats), coverage.cells(GRID, window, geometries), window.zones, value, cloud, pixels._label
    )
    plain = pixels.extract(request_of(stats), GRID, window, geometries, value, cloud)
    pd.testing.assert_frame_equal(cached[plain.columns], plain, check_exact=True, check_dtype=False)


# --- class statistics are bounded: limits.max_classes -----------------------------------------------


@pytest.mark.parametrize("stats", [["frac"], ["unique"], ["majority"], ["frac", "stdev"]])
def test_class_statistics_of_a_continuous_raster_are_refused_in_one_line(session, scenes, stats):  # noqa: F811
    """frac/unique/majority of reflectance (55 distinct values under the fields, 26 in the first
    window, over a limit of 20) are refused naming limits.max_classes, on the stored-coverage path and exactextract's
    alike."""
    session.core.settings.limits.max_classes = 20
    with pytest.raises(LimitExceeded) as refused:
        run(session, fields(), expression="red", stats=stats, mask_clouds=False, collections=[S2],
            datetime="2024-06-01/2024-06-12")  # fmt: skip
    message = str(refused.value)
    assert re.search(
        r"red has \d\d+ distinct values under the zones, more than limits.max_classes=20", message
    )
    assert "\n" not in message
    assert "median" in message and "red > 0.5" in message


def test_classes_within_max_classes_are_measured_and_a_lower_limit_refuses_them(session, scenes):  # noqa: F811
    frame = run(session, fields(), expression="scl", stats=["count", "frac", "majority", "unique"], mask_clouds=False,
                collections=[S2], datetime="2024-06-01/2024-06-12")  # fmt: skip
    measured = frame[frame["count"] > 0]
    assert len(measured) and measured["error"].isna().all()
    classes = {v for u in measured["unique"] for v in u}
    assert 3 <= len(classes) <= 12
    session.core.settings.limits.max_classes = 2
    with pytest.raises(LimitExceeded, match="limits.max_classes=2"):
        run(session, fields(), expression="scl", stats=["frac"], mask_clouds=False, collections=[S2],
            datetime="2024-06-01/2024-06-12")  # fmt: skip


# --- through the pipeline: a season on one grid, items of several grids ------------------------------

SEASON = dict(collections=[S2], datetime="2024-06-01/2024-06-22", mask_clouds=False)


def season_zones() -> dict:
    """The test bed's fields (over the grid of S2A_Z1 and S2A_Z2), and fields either side of and
    across the UTM 33/34 boundary at 18 degrees E (S2A_E, S2A_W): one with a hole, one of two parts."""
    zones = fields()
    across = [
        box(17.996, 44.99, 18.004, 44.995),
        box(17.985, 44.975, 17.99, 44.978).difference(box(17.987, 44.976, 17.988, 44.977)),
        box(18.01, 44.975, 18.016, 44.979),
        box(17.97, 44.965, 17.975, 44.967).union(box(18.02, 44.965, 18.024, 44.968)),
    ]
    zones["features"] += [
        {"type": "Feature", "id": f"utm-{k}", "properties": {}, "geometry": mapping(g)}
        for k, g in enumerate(across)
    ]
    return zones


def test_a_second_item_on_a_grid_computes_no_coverage(session, scenes):  # noqa: F811
    """Two items of one grid (S2A_Z1, S2A_Z2) build the coverage of the first item's windows once;
    two items of two grids (either side of UTM 33/34) build one set each."""
    zones = fields()
    counted = functools.partial(
        run, session, expression="scl", stats=["count"], collections=[S2], mask_clouds=False
    )
    before = coverage.BUILT[0]
    one = counted(zones, datetime="2024-06-01")
    first = coverage.BUILT[0] - before
    assert first >= 2 and set(one["item_ids"].dropna()) == {"S2A_Z1"}  # (a window per group of tiles)
    before = coverage.BUILT[0]
    both = counted(zones, datetime="2024-06-01/2024-06-12")
    assert set(both["item_ids"].dropna()) == set(DATES)
    assert coverage.BUILT[0] - before == first  # the second item on the grid: none
    across = {
        "type": "Feature",
        "id": "across",
        "properties": {},
        "geometry": mapping(box(17.996, 44.99, 18.004, 44.995)),
    }
    before = coverage.BUILT[0]
    counted(across, datetime="2024-06-21")
    assert coverage.BUILT[0] - before == len(ACROSS)  # one window on each grid


@pytest.mark.parametrize("expression", ["scl", "ndvi"])
def test_the_cached_and_the_exactextract_paths_agree_in_every_zone_of_a_season(session, scenes, expression):  # noqa: F811
    """Every item of the test bed's season (one grid, and two grids across UTM 33/34), zones across
    tile edges, with holes, multipolygons, half outside the raster: the statistics from stored
    coverage equal exactextract's own (stdev sends the call down its path), to the bit."""
    zones = season_zones()
    stats = ["count", "mean", "min", "max", "median", "majority"]
    cached = run(session, zones, expression=expression, stats=stats, min_valid_fraction=0, **SEASON)
    plain = run(
        session, zones, expression=expression, stats=[*stats, "stdev"], min_valid_fraction=0, **SEASON
    )
    assert len(set(cached["item_ids"].dropna())) >= 4
    key = ["zone_id", "item_ids"]
    cached, plain = (f.sort_values(key).reset_index(drop=True) for f in (cached, plain))
    import pandas as pd

    pd.testing.assert_frame_equal(
        pd.DataFrame(cached.drop(columns="geometry")),
        pd.DataFrame(plain.drop(columns=["geometry", "stdev"])),
        check_exact=True,
    )


def test_season_statistics_equal_exactextract_on_each_local_file(session, scenes):  # noqa: F811
    zones = season_zones()
    stats = ["count", "mean", "min", "max", "median", "quantile(q=0.9)", "majority", "minority", "variety"]
    frame = run(session, zones, expression="scl", stats=stats, min_valid_fraction=0, **SEASON)
    ids = [f["id"] for f in zones["features"]]
    for item_id in [*DATES, *ACROSS]:
        epsg = ACROSS.get(item_id, (32633, None))[0]
        got = rows_of(frame, item_id)
        want = exactextract_local(scenes[item_id] / "scl.tif", zones, epsg, stats)
        want.index = ids
        inside = [i for i in got.index if got.loc[i, "count"] > 0]
        assert inside
        for stat in zonal.parse_stats(stats):
            np.testing.assert_array_equal(
                got.loc[inside, stat.column].to_numpy(float),
                want.loc[inside, stat.column].to_numpy(float),
                err_msg=f"{item_id} {stat.column}",
            )


# --- through the tool: one line, and an answer within its budget ------------------------------------


async def test_the_tool_refuses_classes_of_a_continuous_raster_and_answers_classes_within_its_budget(
    tmp_path,
):
    """Over an MCP client on the bundled sample catalog: `unique` of NDVI (9 distinct values in a
    window, over a limit of 5) is one line naming limits.max_classes; `unique` and `frac` of SCL
    (under the default 1,000) answer within limits.max_result_bytes (the rows that fit)."""
    import json

    from fastmcp import Client
    from test_zonal_mcp import FIELDS, SEARCH, dumped

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.server import build_server
    from stac_gdal_mcp.settings import load_settings

    budget = 4096

    async def call(arguments: dict, **limits) -> dict:
        settings = load_settings(
            default_catalog="sample", workspace=tmp_path / "ws", limits={"max_result_bytes": budget, **limits}
        )
        with Session(settings) as opened:
            async with Client(build_server(session=opened)) as client:
                return dumped(
                    await client.call_tool_mcp(
                        "zonal_stats", {"geometries": FIELDS, "search": SEARCH, **arguments}
                    )
                )

    refused = await call({"expression": "ndvi", "stats": ["unique"]}, max_classes=5)
    answered = await call({"expression": "scl", "stats": ["unique", "frac"], "mask_clouds": False})
    text = refused["content"][0]["text"]
    assert refused["isError"] and "limits.max_classes=5" in text and "\n" not in text.strip()
    assert not answered.get("isError")
    rows = answered["structuredContent"]["rows"]
    assert rows and all(isinstance(r["unique"], list) for r in rows)
    assert len(json.dumps(rows, separators=(",", ":"))) <= budget


def test_items_are_dealt_to_the_workers_grid_by_grid():
    """`remote.placement`: a season of two tiles, listed day by day (east, west), goes half of
    each tile to each worker (a hash of the ids sent 14 and 22 of 36 items to two workers), the
    same for every group of zones; an item without projection metadata is placed all the same."""
    from collections import Counter

    from stac_gdal_mcp.operations.zonal.remote import placement

    def item(name: str, day: int, epsg: int) -> dict:
        asset = {"proj:code": f"EPSG:{epsg}", "proj:transform": [10, 0, 0, 0, -10, 0], "proj:shape": [9, 9]}
        return {"id": f"{name}_{day:03d}", "assets": {"red": asset, "nir": dict(asset)}}

    items = [item(name, day, epsg) for day in range(18) for name, epsg in (("E", 32633), ("W", 32634))]
    items.append({"id": "bare", "assets": {"red": {}}})
    placed = placement(items, 2)
    assert placed == placement(items, 2)
    by_grid = Counter((name[0], worker) for name, worker in placed.items() if name != "bare")
    assert by_grid == {("E", 0): 9, ("E", 1): 9, ("W", 0): 9, ("W", 1): 9}
    assert placed["bare"] in (0, 1)
