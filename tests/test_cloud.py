"""cloud_cover_stats against generated scenes served over HTTP and indexed in pgstac.

Expected values: the mask file is read locally with rasterio, the AOI is projected with
pyproj and rasterized with rasterio.features on a grid padded with no data around the mask,
and the classes are counted with `synthetic.mask_truth` (the generator's own definitions).
"""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from helpers import fractions, mask_only_scene, utm_aoi
from pyproj import Transformer
from rasterio.features import geometry_mask
from shapely import transform as shapely_transform
from shapely.geometry import Polygon, box, mapping

# a dask LocalCluster of 2 worker processes (pytest takes the fixture from this import)
from test_distributed import cluster  # noqa: F401

from stac_gdal_mcp import Session
from stac_gdal_mcp.core import Core
from stac_gdal_mcp.errors import InvalidArgument, OperationCancelled
from stac_gdal_mcp.operations.cloud import cloud_cover_stats
from stac_gdal_mcp.processing.dask_runtime import dask_client
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.server import build_server
from stac_gdal_mcp.testing import synthetic

UID = uuid.uuid4().hex[:8]
S2, LS = f"cloud-s2-{UID}", f"cloud-ls-{UID}"
TOLERANCE = 0.005  # 0.5 percentage points
FRACTIONS = ("cloud", "shadow", "cirrus", "snow", "water", "clear", "nodata")
NODATA_VALUE = {"sentinel-2-l2a": 0, "landsat-c2-l2": 1}
ORIGIN = (500000.0, 5000000.0)  # EPSG:32633, near 15 E 45.1 N


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    folder = f"cloud-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    common = dict(out_dir=out_dir, href_base=href_base, blocksize=128, with_visual=False)
    made = {}

    def scene(kind, item_id, when, **kw):
        item, truth = synthetic.write_scene(kind, item_id=item_id, datetime=when, **common, **kw)
        key = "scl" if kind.startswith("sentinel") else "qa_pixel"
        made[item_id] = {"item": item, "truth": truth, "kind": kind, "path": out_dir / item_id / f"{key}.tif"}
        return item

    s2 = [
        scene(
            "sentinel-2-l2a",
            "S2A_A",
            "2024-06-01T10:00:00Z",
            seed=1,
            collection_id=S2,
            size_px=1024,
            **fractions(cloud=0.3, shadow=0.05, cirrus=0.03, snow=0.04, water=0.05, nodata=0.1),
        ),
        # east neighbour: its west edge is the other's east edge (x = 510240)
        scene(
            "sentinel-2-l2a",
            "S2A_B",
            "2024-06-01T10:00:01Z",
            seed=2,
            collection_id=S2,
            size_px=1024,
            origin=(ORIGIN[0] + 10240, ORIGIN[1]),
            cloud_fraction=0.1,
            shadow_fraction=0.02,
        ),
        scene(
            "sentinel-2-l2a",
            "S2A_C",
            "2024-06-06T10:00:00Z",
            seed=3,
            collection_id=S2,
            size_px=1024,
            **fractions(cloud=0.6, shadow=0.1, water=0.05),
        ),
    ]
    # Landsat over the same place, in the neighbouring UTM zone 32
    x, y = Transformer.from_crs(32633, 32632, always_xy=True).transform(ORIGIN[0] - 1000, ORIGIN[1] + 1000)
    ls = [
        scene(
            "landsat-c2-l2",
            "LC09_L2SP_190028_20240603_02_T1",
            "2024-06-03T10:00:00Z",
            seed=4,
            collection_id=LS,
            epsg=32632,
            origin=(round(x, -1), round(y, -1)),
            size_px=400,
            **fractions(cloud=0.25, shadow=0.05, cirrus=0.05, snow=0.05, water=0.1, nodata=0.05),
        )
    ]
    broken = synthetic.item(
        "sentinel-2-l2a",
        "S2A_BROKEN",
        "2024-06-11T10:00:00Z",
        collection_id=S2,
        href_base=f"{cog_server.url}/missing-{UID}",
    )
    broken["geometry"], broken["bbox"] = s2[0]["geometry"], s2[0]["bbox"]
    no_mask = dict(
        broken, id="S2A_NOMASK", properties=dict(broken["properties"], datetime="2024-06-12T10:00:00Z")
    )
    no_mask["assets"] = {k: v for k, v in broken["assets"].items() if k != "scl"}
    collections = [synthetic.collection("sentinel-2-l2a", S2), synthetic.collection("landsat-c2-l2", LS)]
    # the mask metadata lives on the items; the collection's item_assets would restore `scl`
    collections[0]["item_assets"].pop("scl")
    pgstac_api.load(collections, s2 + ls + [broken, no_mask])
    return made


@pytest.fixture
def core(make_settings, pgstac_api, scenes):
    return Core(make_settings(catalogs=[{"id": "testbed", "url": pgstac_api.url}], default_catalog="testbed"))


def expected(scene: dict, aoi_bbox_or_geom) -> dict:
    """Independent count: local read, pyproj + rasterio.features, synthetic.mask_truth."""
    geom = box(*aoi_bbox_or_geom) if isinstance(aoi_bbox_or_geom, list) else aoi_bbox_or_geom
    with rasterio.open(scene["path"]) as src:
        mask, transform, crs = src.read(1), src.transform, src.crs
    project = Transformer.from_crs(4326, crs, always_xy=True).transform
    local = shapely_transform(geom.segmentize(0.0005), project, interleaved=False)
    inverse = ~transform
    cols, rows = zip(*(inverse @ xy for xy in local.exterior.coords))
    pad = (
        max(
            0,
            -math.floor(min(cols)),
            -math.floor(min(rows)),
            math.ceil(max(cols)) - mask.shape[1],
            math.ceil(max(rows)) - mask.shape[0],
        )
        + 1
    )
    padded = np.pad(mask, pad, constant_values=NODATA_VALUE[scene["kind"]])
    padded_transform = transform @ transform.translation(-pad, -pad)
    inside = geometry_mask([mapping(local)], out_shape=padded.shape, transform=padded_transform, invert=True)
    truth = synthetic.mask_truth(scene["kind"], padded[inside])
    truth["aoi_pixels"] = int(inside.sum())
    return truth


def check_row(row, truth):
    assert row.error is None, row.error
    assert row.aoi_pixels == pytest.approx(truth["aoi_pixels"], rel=0.01)
    assert row.valid_pixels == pytest.approx(truth["valid_pixels"], rel=0.01, abs=2)
    for name in FRACTIONS:
        got = getattr(row, f"{name}_fraction")
        if truth["valid_pixels"] == 0 and name != "nodata":
            assert got is None
        else:
            assert got == pytest.approx(truth[f"{name}_fraction"], abs=TOLERANCE), name


def by_id(result):
    return {row.item_id: row for row in result.items}


# --- AOIs against the independent count --------------------------------------------------------

AOIS = {
    # crosses internal COG tile edges (SCL tiles are 128 px = 2560 m)
    "crossing-tiles": utm_aoi(ORIGIN[0] + 1100, ORIGIN[1] - 4000, ORIGIN[0] + 3900, ORIGIN[1] - 1100),
    # half outside the item's west edge
    "straddling-edge": utm_aoi(ORIGIN[0] - 1500, ORIGIN[1] - 6000, ORIGIN[0] + 1500, ORIGIN[1] - 3000),
    # the lower-right corner: the no-data band of S2A_A
    "nodata-corner": utm_aoi(ORIGIN[0] + 7500, ORIGIN[1] - 10000, ORIGIN[0] + 10000, ORIGIN[1] - 7500),
    # across the boundary between S2A_A and S2A_B
    "across-items": utm_aoi(ORIGIN[0] + 8500, ORIGIN[1] - 5000, ORIGIN[0] + 12000, ORIGIN[1] - 2000),
}


@pytest.mark.parametrize("name", AOIS)
def test_fractions_match_independent_count(core, scenes, name):
    aoi = AOIS[name]
    refs = [{"collection_id": S2, "item_id": i} for i in ("S2A_A", "S2A_B", "S2A_C")]
    refs.append({"collection_id": LS, "item_id": "LC09_L2SP_190028_20240603_02_T1"})
    result = cloud_cover_stats(core, aoi, items=refs, catalog="testbed")
    rows = by_id(result)
    assert result.returned == 4 and result.failed == 0
    for item_id, row in rows.items():
        scene = scenes[item_id]
        check_row(row, expected(scene, aoi))
        assert row.scene_cloud_cover == scene["item"]["properties"]["eo:cloud_cover"]
        assert row.crs == ("EPSG:32633" if item_id.startswith("S2") else "EPSG:32632")
        assert row.resolution == (20.0 if item_id.startswith("S2") else 30.0)
    if name == "straddling-edge":
        assert 0.4 < rows["S2A_A"].nodata_fraction < 0.6  # half the AOI is outside the item
    if name == "across-items":
        assert 0 < rows["S2A_B"].valid_pixels < rows["S2A_B"].aoi_pixels


def test_polygon_aoi(core, scenes):
    west, south, east, north = AOIS["crossing-tiles"]
    triangle = Polygon([(west, south), (east, south), ((west + east) / 2, north)])
    result = cloud_cover_stats(
        core, mapping(triangle), items=[{"collection_id": S2, "item_id": "S2A_A"}], catalog="testbed"
    )
    check_row(result.items[0], expected(scenes["S2A_A"], triangle))
    # a triangle has about half the pixels of its bbox
    square = cloud_cover_stats(
        core, AOIS["crossing-tiles"], items=[{"collection_id": S2, "item_id": "S2A_A"}], catalog="testbed"
    )
    assert result.items[0].aoi_pixels == pytest.approx(square.items[0].aoi_pixels / 2, rel=0.05)


def test_whole_item_matches_generated_truth(core, scenes):
    for item_id in ("S2A_A", "S2A_C", "LC09_L2SP_190028_20240603_02_T1"):
        scene = scenes[item_id]
        w, s, e, n = scene["item"]["bbox"]
        aoi = [w - 0.01, s - 0.01, e + 0.01, n + 0.01]
        ref = {"collection_id": scene["item"]["collection"], "item_id": item_id}
        row = cloud_cover_stats(core, aoi, items=[ref], catalog="testbed").items[0]
        assert row.valid_pixels == scene["truth"]["valid_pixels"]
        for name in FRACTIONS[:-1]:
            assert getattr(row, f"{name}_fraction") == pytest.approx(
                scene["truth"][f"{name}_fraction"], abs=TOLERANCE
            )


def test_aoi_outside_the_item(core):
    aoi = utm_aoi(ORIGIN[0] + 30000, ORIGIN[1] - 3000, ORIGIN[0] + 33000, ORIGIN[1])
    result = cloud_cover_stats(
        core, aoi, items=[{"collection_id": S2, "item_id": "S2A_A"}], catalog="testbed"
    )
    row = result.items[0]
    assert row.error is None
    assert row.valid_pixels == 0 and row.aoi_pixels > 0
    assert row.nodata_fraction == 1.0 and row.cloud_fraction is None and row.clear_fraction is None
    assert any("no valid pixels" in n for n in result.notes)


def test_reads_only_the_aoi_window(core, cog_server, pgstac_api):
    """Fresh files (GDAL caches what it read per process): the AOI window, then an overview."""
    folder = f"cloud-bytes-{UID}"
    made = [
        mask_only_scene(
            cog_server.root / folder,
            f"{cog_server.url}/{folder}",
            f"S2A_BYTES{i}",
            size_px=4096,
            blocksize=256,
            seed=i,
            collection_id=S2,
        )
        for i in range(2)
    ]
    pgstac_api.load([], [item for item, _ in made])
    # 3 km x 3 km across a tile corner (tiles are 256 px = 5120 m)
    aoi = utm_aoi(ORIGIN[0] + 3620, ORIGIN[1] - 6620, ORIGIN[0] + 6620, ORIGIN[1] - 3620)
    reads = []
    for (item, path), resolution in zip(made, (None, 80)):
        cog_server.reset_stats()
        row = cloud_cover_stats(
            core,
            aoi,
            items=[{"collection_id": S2, "item_id": item["id"]}],
            catalog="testbed",
            resolution=resolution,
        ).items[0]
        assert row.error is None and row.valid_pixels > 0
        reads.append(cog_server.stats()["paths"][f"/{folder}/{path.name}"]["bytes"])
        size = path.stat().st_size
        assert reads[-1] < size / 5, (reads[-1], size)  # 4 of 64 tiles, plus the header
        if resolution:
            assert row.resolution == 80.0
            assert row.aoi_pixels == pytest.approx(150 * 150 / 16, rel=0.1)
    assert reads[1] <= reads[0]  # the overview read costs no more than the full-resolution window


def test_search_arguments_sort_and_failing_items(core, scenes):
    aoi = AOIS["crossing-tiles"]
    result = cloud_cover_stats(
        core, aoi, catalog="testbed", collections=[S2], datetime="2024-06-01/2024-06-30"
    )
    rows = by_id(result)
    assert set(rows) == {"S2A_A", "S2A_C", "S2A_BROKEN", "S2A_NOMASK"}  # S2A_B does not touch the AOI
    assert result.failed == 2
    assert "not found" in rows["S2A_BROKEN"].error or "404" in rows["S2A_BROKEN"].error
    assert "no cloud mask" in rows["S2A_NOMASK"].error and "qa_pixel" in rows["S2A_NOMASK"].error
    measured = [r for r in result.items if r.error is None]
    assert [r.clear_fraction for r in measured] == sorted((r.clear_fraction for r in measured), reverse=True)
    assert {r.item_id for r in result.items[-2:]} == {"S2A_BROKEN", "S2A_NOMASK"}
    for row in measured:
        check_row(row, expected(scenes[row.item_id], aoi))
    cloudiest = cloud_cover_stats(
        core, aoi, catalog="testbed", collections=[S2], sort="cloud", datetime="2024-06-01/2024-06-10"
    )
    assert [r.item_id for r in cloudiest.items] == sorted(
        ["S2A_A", "S2A_C"], key=lambda i: rows[i].cloud_fraction
    )
    latest = cloud_cover_stats(core, aoi, catalog="testbed", collections=[S2], sort="-datetime", max_items=2)
    assert len(latest.items) == 2 and any("max_items" in n for n in latest.notes)


def test_a_local_cluster_gives_the_threads_rows(make_settings, pgstac_api, scenes, cluster):  # noqa: F811
    """Masks counted in the worker processes of a LocalCluster (settings.dask_scheduler): the
    rows of the threaded call, exactly, the failed items' errors in the same words."""
    aoi = AOIS["crossing-tiles"]
    arguments = dict(catalog="testbed", collections=[S2], datetime="2024-06-01/2024-06-30")
    catalogs = [{"id": "testbed", "url": pgstac_api.url}]
    threads = cloud_cover_stats(Core(make_settings(catalogs=catalogs)), aoi, **arguments)
    address = cluster.scheduler_address
    on_cluster = cloud_cover_stats(
        Core(make_settings(catalogs=catalogs, dask_scheduler=address)), aoi, **arguments
    )
    assert on_cluster.model_dump() == threads.model_dump()
    assert on_cluster.failed == 2 and len(on_cluster.items) == 4
    # the masks were counted on the workers: a worker keeps the call's AOI grids
    assert any(dask_client(address).run(_worker_grids).values())
    for row in on_cluster.items[:2]:
        check_row(row, expected(scenes[row.item_id], aoi))


def _worker_grids() -> int:
    from stac_gdal_mcp.operations.cloud import AoiGrids
    from stac_gdal_mcp.processing import items

    return sum(isinstance(kept, AoiGrids) for kept in items._KEPT.values())


def test_progress_per_item(core):
    seen = []
    refs = [{"collection_id": S2, "item_id": i} for i in ("S2A_A", "S2A_B", "S2A_C", "S2A_BROKEN")]
    job = Job(lambda done, total, message: seen.append((done, total, message)), min_interval_s=0)
    cloud_cover_stats(core, AOIS["across-items"], items=refs, catalog="testbed", job=job)
    assert [d for d, _, _ in seen] == [0, 1, 2, 3, 4] and {t for _, t, _ in seen} == {4}
    assert any("S2A_BROKEN: error" in m for _, _, m in seen)
    assert any("clear" in m for _, _, m in seen)


def test_cancelled_between_items(core):
    job = Job()
    job.cancel()
    with pytest.raises(OperationCancelled):
        cloud_cover_stats(
            core,
            AOIS["across-items"],
            items=[{"collection_id": S2, "item_id": "S2A_A"}],
            catalog="testbed",
            job=job,
        )


def test_argument_errors(core):
    with pytest.raises(InvalidArgument, match="aoi"):
        cloud_cover_stats(core, None, collections=[S2], catalog="testbed")
    with pytest.raises(InvalidArgument, match="either"):
        cloud_cover_stats(
            core,
            AOIS["crossing-tiles"],
            items=[{"collection_id": S2, "item_id": "S2A_A"}],
            collections=[S2],
            catalog="testbed",
        )
    with pytest.raises(InvalidArgument, match="sort"):
        cloud_cover_stats(core, AOIS["crossing-tiles"], collections=[S2], catalog="testbed", sort="best")
    with pytest.raises(InvalidArgument, match="collections"):
        cloud_cover_stats(core, AOIS["crossing-tiles"], catalog="testbed")


# --- through the MCP server --------------------------------------------------------------------


async def test_tool_end_to_end(core, scenes):
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    aoi = AOIS["crossing-tiles"]
    session = Session(core.settings)  # the tools' session over the same settings
    async with Client(build_server(session=session), progress_handler=on_progress) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["cloud_cover_stats"].annotations.read_only_hint is True
        result = await client.call_tool(
            "cloud_cover_stats",
            {
                "aoi": aoi,
                "search": {"catalog": "testbed", "collections": [S2], "datetime": "2024-06-01/2024-06-10"},
            },
        )
        data = result.structured_content
        assert next(r["item_id"] for r in data["items"]) in ("S2A_A", "S2A_C")
        for row in data["items"]:
            truth = expected(scenes[row["item_id"]], aoi)
            assert row["cloud_fraction"] == pytest.approx(truth["cloud_fraction"], abs=TOLERANCE)
            assert "mask_source" not in row and "error" not in row  # given once, in `common`; no nulls
        assert data["common"]["mask_source"] == "asset 'scl', read through its classification:classes"
        assert progress and progress[-1][0] == progress[-1][1] == 2
        bad = await client.call_tool(
            "cloud_cover_stats", {"aoi": [1, 2, 3], "search": {"collections": [S2]}}, raise_on_error=False
        )
        assert bad.is_error and "bbox" in bad.content[0].text and "Traceback" not in bad.content[0].text


def test_items_on_one_grid_share_the_aoi_grid(tmp_path):
    """A time stack of one tile: the AOI is projected and rasterized once per grid, and the
    counts are those worked out for each item alone."""
    from rasterio.transform import from_origin

    from stac_gdal_mcp.operations.cloud import AoiGrids, aoi_window_counts
    from stac_gdal_mcp.processing.masks import KNOWN_ASSETS, MaskSource

    rng = np.random.default_rng(5)
    paths = {}
    for name, origin in (("a", ORIGIN), ("b", ORIGIN), ("c", (ORIGIN[0] + 200, ORIGIN[1]))):
        paths[name] = tmp_path / f"{name}.tif"
        with rasterio.open(
            paths[name], "w", driver="GTiff", width=256, height=256, count=1, dtype="uint8",
            crs="EPSG:32633", transform=from_origin(*origin, 20, 20), nodata=0,
        ) as dst:  # fmt: skip
            dst.write(rng.choice(np.array([0, 4, 8, 9, 3], dtype="uint8"), size=(256, 256)), 1)
    to_wgs84 = Transformer.from_crs(32633, 4326, always_xy=True)
    lons, lats = to_wgs84.transform(
        [ORIGIN[0] + 1000, ORIGIN[0] + 3000], [ORIGIN[1] - 3000, ORIGIN[1] - 1000]
    )
    aoi = box(min(lons), min(lats), max(lons), max(lats))
    source = MaskSource("scl", "x", KNOWN_ASSETS["scl"], "known asset")
    grids = AoiGrids(aoi, None, None)
    with rasterio.open(paths["a"]) as a, rasterio.open(paths["b"]) as b, rasterio.open(paths["c"]) as c:
        assert grids.for_dataset(a) is grids.for_dataset(b)
        assert grids.for_dataset(c) is not grids.for_dataset(a)
        for src in (a, b, c):
            shared = aoi_window_counts(src, aoi, source, grids=grids)
            alone = aoi_window_counts(src, aoi, source)
            assert shared == alone and shared["valid_pixels"] > 0
