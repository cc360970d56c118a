"""time_series and composite (odc-stac on dask's threaded scheduler) against numpy.

Expected values: the generated COGs are read locally with rasterio, DN -> reflectance with the
scale/offset the generator wrote, the 20 m SCL repeated onto the 10 m grid, cloud/shadow/cirrus
dropped by the generator's own SCL definitions, AOI pixels chosen with rasterio.features on the
item grid (pixel centres), and reduced with numpy.
"""

from __future__ import annotations

import csv
import json
import math
import uuid

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from helpers import (
    aoi_on_grid,
    expected_ndvi,
    read,
    run_composite,
    run_time_series,
    usable_pixels,
    utm_aoi,
)
from pyproj import Transformer
from rasterio.features import geometry_mask
from shapely import transform as shapely_transform
from shapely.geometry import box, mapping

from stac_gdal_mcp.errors import InvalidArgument, MaskNotFound
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.testing import synthetic

UID = uuid.uuid4().hex[:8]
S2, LS = f"ts-s2-{UID}", f"ts-ls-{UID}"
ORIGIN = (500000.0, 5000000.0)  # EPSG:32633


# crosses the boundary between the west items (x < 505120) and the east one
AOI = utm_aoi(ORIGIN[0] + 3500, ORIGIN[1] - 4900, ORIGIN[0] + 6500, ORIGIN[1] - 2500)
DAYS = {  # item id -> (datetime, west or east, generator arguments)
    "S2A_D1": ("2024-06-01T10:00:00Z", "west", dict(seed=11, cloud_fraction=0.2, nodata_fraction=0.15)),
    "S2A_D2": ("2024-06-06T10:00:00Z", "west", dict(seed=12, cloud_fraction=0.5, cirrus_fraction=0.05)),
    "S2A_D3": ("2024-06-11T10:00:00Z", "west", dict(seed=13, cloud_fraction=0.05, water_fraction=0.1)),
    "S2A_D4": ("2024-06-16T10:00:00Z", "west", dict(seed=14, cloud_fraction=0.9, shadow_fraction=0.1)),
    "S2A_P1": ("2024-06-21T10:00:00Z", "west", dict(seed=15, cloud_fraction=0.3)),
    "S2A_P2": ("2024-06-21T10:00:05Z", "east", dict(seed=16, cloud_fraction=0.1, snow_fraction=0.05)),
}


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    folder = f"ts-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    made, items = {}, []
    for item_id, (when, side, kw) in DAYS.items():
        origin = ORIGIN if side == "west" else (ORIGIN[0] + 5120, ORIGIN[1])
        item, truth = synthetic.write_scene(
            "sentinel-2-l2a",
            out_dir,
            item_id,
            when,
            collection_id=S2,
            origin=origin,
            size_px=512,
            blocksize=128,
            with_visual=False,
            href_base=href_base,
            shadow_fraction=kw.pop("shadow_fraction", 0.05),
            **kw,
        )
        made[item_id] = {"item": item, "dir": out_dir / item_id}
        items.append(item)
    ls_item, _ = synthetic.write_scene(
        "landsat-c2-l2",
        out_dir,
        "LC09_L2SP_190028_20240603_02_T1",
        "2024-06-03T10:00:00Z",
        collection_id=LS,
        seed=21,
        origin=ORIGIN,
        size_px=240,
        blocksize=128,
        href_base=href_base,
        cloud_fraction=0.3,
    )
    made["LS"] = {"item": ls_item, "dir": out_dir / ls_item["id"]}
    pgstac_api.load(
        [synthetic.collection("sentinel-2-l2a", S2), synthetic.collection("landsat-c2-l2", LS)],
        items + [ls_item],
    )
    return made


@pytest.fixture
def session(scenes, testbed_session):
    return testbed_session


# --- the independent computation ---------------------------------------------------------------


def aoi_pixel_count(aoi, resolution=10.0, crs="EPSG:32633"):
    """AOI pixel centres on the 10 m grid anchored at 0 (as odc-geo snaps), padded around the AOI."""
    project = Transformer.from_crs(4326, crs, always_xy=True).transform
    local = shapely_transform(box(*aoi).segmentize(0.0005), project, interleaved=False)
    w, s, e, n = local.bounds
    x0, y1 = math.floor(w / resolution) * resolution, math.ceil(n / resolution) * resolution
    cols, rows = math.ceil((e - x0) / resolution), math.ceil((y1 - s) / resolution)
    transform = rasterio.transform.from_origin(x0, y1, resolution, resolution)
    return int(
        geometry_mask([mapping(local)], out_shape=(rows, cols), transform=transform, invert=True).sum()
    )


def same_value(got, want, rel) -> bool:
    """A day without a usable pixel has no value (None) on both sides; numbers agree within `rel`."""
    if got is None or want is None:
        return got is None and want is None
    return got == pytest.approx(want, rel=rel)


# --- time series -------------------------------------------------------------------------------


def every_day(session, datetime: str, **arguments):
    """The series of AOI over the test bed's Sentinel-2 scenes in `datetime`, every day kept
    however little of the AOI is valid."""
    arguments = {"collections": [S2], "catalog": "testbed", "min_valid_fraction": 0, **arguments}
    return run_time_series(session, AOI, datetime=datetime, **arguments)


def test_ndvi_series_matches_numpy(session, scenes):
    # every day's value, however little of the AOI is valid (the west items cover half of it)
    result = every_day(session, "2024-06-01/2024-06-30")
    assert [r.date for r in result.rows] == [
        "2024-06-01",
        "2024-06-06",
        "2024-06-11",
        "2024-06-16",
        "2024-06-21",
    ]
    assert result.rows[-1].item_ids == ["S2A_P1", "S2A_P2"]  # one solar day, two items
    assert result.grid.crs == "EPSG:32633" and result.grid.resolution == 10.0
    n_aoi = aoi_pixel_count(AOI)
    assert result.grid.aoi_pixels == pytest.approx(n_aoi, rel=0.005)
    for row in result.rows:
        want, count = expected_ndvi([scenes[i] for i in row.item_ids], AOI)
        assert row.valid_pixels == pytest.approx(count, rel=0.005, abs=3), row.date
        assert same_value(row.value, want, rel=1e-3), (row.date, row.value, want)
        assert row.valid_fraction == pytest.approx(count / n_aoi, abs=0.005)
    # the east half is outside the single-item days: at most about half the AOI is valid
    assert all(r.valid_fraction < 0.55 for r in result.rows[:-1]) and result.rows[-1].valid_fraction > 0.5


def test_outputs_csv_and_chart(session, scenes):
    result = every_day(
        session, "2024-06-01/2024-06-12", reducer="median", expression="(nir - red) / (nir + red)"
    )
    assert result.expression == "(nir - red) / (nir + red)" and len(result.rows) == 3
    store = session.outputs
    with open(store.path(result.csv.id), newline="") as f:
        table = list(csv.DictReader(f))
    assert [t["date"] for t in table] == [r.date for r in result.rows]
    for t, r in zip(table, result.rows):
        want, _ = expected_ndvi([scenes[i] for i in r.item_ids], AOI, reducer="median")
        assert float(t["value"]) == pytest.approx(want, rel=1e-3)
        assert t["item_ids"].split() == r.item_ids
    png = store.path(result.chart.id)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = store.get(result.csv.id)
    derived = {l.href for l in record.links if l.rel == "derived_from"}
    assert any("S2A_D1/red.tif" in h for h in derived) and any("S2A_D3/scl.tif" in h for h in derived)
    assert record.properties.processing_expression["expression"]["operation"] == "time_series"


def test_band_count_and_no_mask(session, scenes):
    day = dict(collections=[S2], datetime="2024-06-06/2024-06-06", catalog="testbed", expression="red")
    masked = run_time_series(session, AOI, reducer="count", **day)
    unmasked = run_time_series(session, AOI, reducer="count", mask_clouds=False, **day)
    _, keep_masked, _ = usable_pixels(scenes["S2A_D2"], ["red"], AOI, mask_clouds=True)
    _, keep_all, _ = usable_pixels(scenes["S2A_D2"], ["red"], AOI, mask_clouds=False)
    assert masked.rows[0].value == pytest.approx(keep_masked.sum(), rel=0.005, abs=3)
    assert unmasked.rows[0].value == pytest.approx(keep_all.sum(), rel=0.005, abs=3)
    assert unmasked.rows[0].value > 1.5 * masked.rows[0].value > 0  # 55 % cloud and cirrus that day
    empty = run_time_series(session, AOI, reducer="count", **dict(day, datetime="2024-06-16/2024-06-16"))
    assert empty.rows[0].value == 0 and any("no usable pixel" in n for n in empty.notes)  # 100 % cloud/shadow


def test_landsat_common_names_and_scale(session, scenes):
    """`nir` finds Landsat's nir08; scale 0.0000275 offset -0.2; QA_PIXEL masks clouds."""
    aoi = utm_aoi(ORIGIN[0] + 1000, ORIGIN[1] - 5000, ORIGIN[0] + 5000, ORIGIN[1] - 1000)
    result = run_time_series(session, aoi, collections=[LS], catalog="testbed", expression="nir")
    folder = scenes["LS"]["dir"]
    nir, transform, crs = read(folder / "nir08.tif")
    qa = read(folder / "qa_pixel.tif")[0]
    qa_cloudy = (qa & (1 | 2 | 4 | 8 | 16)) != 0  # fill, dilated cloud, cirrus, cloud, shadow
    keep = aoi_on_grid(aoi, transform, crs, nir.shape) & (nir != 0) & ~qa_cloudy
    want = float((nir[keep] * 0.0000275 - 0.2).mean())
    assert result.grid.resolution == 30.0
    assert result.rows[0].value == pytest.approx(want, rel=1e-4)
    assert result.rows[0].valid_pixels == pytest.approx(keep.sum(), rel=0.01)


def test_expression_errors(session):
    for bad in ("__import__('os').system('x')", "nir.real", "nir[0]", "f(nir)", "", "1 + 2", "nir +"):
        with pytest.raises(InvalidArgument):
            run_time_series(session, AOI, collections=[S2], catalog="testbed", expression=bad)
    with pytest.raises(InvalidArgument, match="reducer"):
        run_time_series(session, AOI, collections=[S2], catalog="testbed", reducer="sum")


# --- composite ---------------------------------------------------------------------------------


def test_median_composite_matches_numpy(session, scenes):
    result = run_composite(
        session,
        AOI,
        bands=["red", "nir"],
        collections=[S2],
        datetime="2024-06-01/2024-06-30",
        catalog="testbed",
    )
    assert result.items == 6 and result.method == "median"
    store = session.outputs
    path = store.path(result.output.id)
    with rasterio.open(path) as out:
        assert out.driver == "GTiff" and out.count == 2 and out.dtypes[0] == "float32"
        assert out.crs.to_epsg() == 32633 and out.res == (10.0, 10.0)
        assert out.overviews(1) or max(out.shape) < 512
        data, out_transform = out.read(), out.transform
    # every west-side pixel of the output against numpy's nanmedian over the five west days
    west = ["S2A_D1", "S2A_D2", "S2A_D3", "S2A_D4", "S2A_P1"]
    for index, band in enumerate(["red", "nir"]):
        stack = []
        for item_id in west:
            values, keep, item_transform = usable_pixels(scenes[item_id], [band], AOI)
            stack.append(np.where(keep, values[band], np.nan))
        want = np.nanmedian(np.stack(stack), axis=0)
        col = round((out_transform.c - item_transform.c) / 10)
        row = round((item_transform.f - out_transform.f) / 10)
        width = min(data.shape[2], want.shape[1] - col)
        got = data[index, :, :width]
        ref = want[row : row + data.shape[1], col : col + width]
        both = np.isfinite(got) & np.isfinite(ref)
        assert both.sum() > 1000
        np.testing.assert_allclose(got[both], ref[both], rtol=1e-5)
        # same coverage, up to a few AOI edge pixels
        assert abs(int(np.isfinite(got).sum()) - int(np.isfinite(ref).sum())) <= 0.01 * both.sum()
    record = store.get(result.output.id)
    derived = " ".join(l.href for l in record.links if l.rel == "derived_from")
    for item_id in DAYS:
        assert f"/{item_id}/red.tif" in derived and f"/{item_id}/scl.tif" in derived
    assert record.properties.proj_code == "EPSG:32633"
    assert record.assets["data"].raster_bands[0].data_type == "float32"
    assert 0.5 < result.valid_fraction <= 1.0


def test_composite_needs_a_mask_or_mask_clouds_false(session, scenes, pgstac_api):
    item = json.loads(json.dumps(scenes["S2A_D1"]["item"]))
    item["id"], item["collection"] = "NOMASK", f"ts-nomask-{UID}"
    del item["assets"]["scl"]
    collection = synthetic.collection("sentinel-2-l2a", item["collection"])
    del collection["item_assets"]["scl"]
    pgstac_api.load([collection], [item])
    with pytest.raises(MaskNotFound, match="mask_clouds=false"):
        run_composite(session, AOI, bands=["red"], collections=[item["collection"]], catalog="testbed")
    result = run_composite(
        session, AOI, bands=["red"], collections=[item["collection"]], catalog="testbed", mask_clouds=False
    )
    assert result.items == 1 and not result.mask_clouds


# --- through the MCP server --------------------------------------------------------------------


async def test_tools_end_to_end(session, scenes):
    async with Client(build_server(session=session)) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["time_series"].annotations.read_only_hint is False
        assert tools["composite"].annotations.destructive_hint is False
        ts = (
            await client.call_tool(
                "time_series",
                {
                    "aoi": AOI,
                    "min_valid_fraction": 0,
                    "search": {
                        "catalog": "testbed",
                        "collections": [S2],
                        "datetime": "2024-06-10/2024-06-12",
                    },
                },
            )
        ).structured_content
        assert [r["date"] for r in ts["rows"]] == ["2024-06-11"]
        want, _ = expected_ndvi([scenes["S2A_D3"]], AOI)
        assert ts["rows"][0]["value"] == pytest.approx(want, rel=1e-3)
        assert (
            ts["csv"]["uri"].startswith("stac-gdal://outputs/") and ts["chart"]["media_type"] == "image/png"
        )
        comp = (
            await client.call_tool(
                "composite",
                {
                    "aoi": AOI,
                    "bands": ["red"],
                    "search": {
                        "catalog": "testbed",
                        "collections": [S2],
                        "datetime": "2024-06-10/2024-06-22",
                    },
                    "method": "max",
                },
            )
        ).structured_content
        assert comp["items"] == 4 and comp["output"]["file"].endswith(".tif")
        bad = await client.call_tool(
            "time_series",
            {
                "aoi": AOI,
                "search": {"catalog": "testbed", "collections": [S2]},
                "expression": "os.system('x')",
            },
            raise_on_error=False,
        )
        assert bad.is_error and "Traceback" not in bad.content[0].text
