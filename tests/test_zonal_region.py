"""zonal_stats at region scale: a zones file of more features than limits.zonal_region_zones, read in
groups of neighbours and written as it goes to a partitioned GeoParquet output.

Items in the real pgstac test bed, their COGs on the Range server: two items of one scene, and two
of one day on either side of the UTM zone 33/34 boundary (18 degrees E). The expected table is the
ordinary call's (`zonal.run` over every zone at once, itself checked against exactextract in
test_zonal.py); the region output is read back with pyarrow, partition by partition.
"""

from __future__ import annotations

import uuid

import geopandas
import pandas as pd
import pyarrow.dataset as ds
import pytest

# a dask LocalCluster of 2 worker processes (pytest takes the fixture from this import)
from test_distributed import cluster  # noqa: F401

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import InvalidArgument, LimitExceeded, OperationCancelled
from stac_gdal_mcp.operations import zonal
from stac_gdal_mcp.operations.zonal import region as zonal_region
from stac_gdal_mcp.operations.zonal import stats as zonal_stats
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.testing import synthetic

pytestmark = pytest.mark.testbed

UID = uuid.uuid4().hex[:8]
S2 = f"zr-s2-{UID}"
ORIGIN = (500000.0, 5000000.0)
SCENE = (ORIGIN[0], ORIGIN[1] - 5120, ORIGIN[0] + 5120, ORIGIN[1])
EAST, WEST = (32633, (736477.0 - 5120, 4990000.0)), (32634, (263523.0, 4990000.0))
GROUP = 64  # zones per group here (several groups from a few hundred zones)


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    folder = f"zr-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    plan = {
        "S2A_R1": ("2024-06-01T10:00:00Z", 32633, ORIGIN),
        "S2A_R2": ("2024-06-11T10:00:00Z", 32633, ORIGIN),
        "S2A_RE": ("2024-06-21T10:00:00Z", *EAST),
        "S2A_RW": ("2024-06-21T10:00:00Z", *WEST),
    }
    items = []
    for seed, (item_id, (when, epsg, origin)) in enumerate(plan.items()):
        item, _ = synthetic.write_scene(
            "sentinel-2-l2a", out_dir, item_id, when, collection_id=S2, seed=70 + seed, epsg=epsg,
            origin=origin, size_px=512, blocksize=128, with_visual=False, href_base=href_base,
            cloud_fraction=0.3,
        )  # fmt: skip
        items.append(item)
    pgstac_api.load([synthetic.collection("sentinel-2-l2a", S2)], items)
    return items


def zones_frame(count: int, seed: int = 1) -> geopandas.GeoDataFrame:
    """`count` fields: most in clusters over the first scene, some across the UTM boundary."""
    features = synthetic.field_polygons(32633, SCENE, count - 20, seed=seed, clusters=5)
    across = (736477.0 - 2000, 4990000.0 - 4000, 736477.0 + 400, 4990000.0 - 1000)
    features += synthetic.field_polygons(32633, across, 20, seed=seed + 1, clusters=2)
    frame = geopandas.GeoDataFrame.from_features(features, crs="EPSG:4326")
    frame["field_id"] = [f"f{i:05d}" for i in range(len(frame))]
    return frame


@pytest.fixture
def region(make_settings, pgstac_api, scenes, monkeypatch):
    monkeypatch.setattr(zonal_region, "GROUP_ZONES", GROUP)

    def make(**settings):
        limits = {"zonal_region_zones": 100, **settings.pop("limits", {})}
        session = Session(
            make_settings(
                catalogs=[{"id": "testbed", "url": pgstac_api.url}], default_catalog="testbed",
                limits=limits, **settings,
            )
        )  # fmt: skip
        path = session.settings.workspace / "fields.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        zones_frame(300).to_parquet(path)
        return session, path

    return make


def read_output(session, record) -> pd.DataFrame:
    """Every partition of a region output (pyarrow, hive partitioning), as one table."""
    folder = session.outputs.path(record.id)
    dataset = ds.dataset(folder, format="parquet", partitioning="hive")
    parts = [fragment.to_table().to_pandas() for fragment in dataset.get_fragments()]
    return pd.concat(parts, ignore_index=True)


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    frame = pd.DataFrame(frame).drop(columns=["zone_group"], errors="ignore")
    for column in ("date", "collection_id", "item_ids", "note", "error"):
        if column in frame:
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame.sort_values(["zone_id", "datetime"], kind="stable").reset_index(drop=True)


ARGUMENTS = dict(
    collections=[S2], datetime="2024-06-01/2024-06-30", id_property="field_id", catalog="testbed"
)


def ordinary(session, path, **arguments):
    request = zonal_stats.check(session.core, str(path), **{**ARGUMENTS, **arguments})
    return zonal.run(session.core, request)


@pytest.mark.parametrize("per", ["item", "day"])
def test_region_equals_the_ordinary_call(region, per):
    session, path = region()
    head = session.zonal_stats(str(path), per=per, **ARGUMENTS)
    facts = head.provenance.facts
    record = session.outputs.get(facts["saved_as"])
    assert session.save(head).id == record.id  # saved once, while computed
    whole = ordinary(session, path, per=per)
    table = read_output(session, record)
    assert facts["zones"] == 300 and facts["rows"] == len(whole) == len(table)
    assert facts["groups"] == -(-300 // GROUP) == len(list(session.outputs.path(record.id).iterdir()))
    across = whole[whole["zone_id"] >= "f00280"]
    assert across["item_ids"].str.contains("S2A_RW").any() and across["item_ids"].str.contains("S2A_RE").any()
    pd.testing.assert_frame_equal(comparable(table), comparable(whole.to_wkb()), check_dtype=False)
    assert len(head) <= GROUP * 4 and set(head["zone_id"]) < set(whole["zone_id"])


def test_region_on_a_cluster_of_worker_processes(region, cluster):  # noqa: F811 (the fixture)
    session, path = region(dask_scheduler=cluster.scheduler_address)
    head = session.zonal_stats(str(path), **ARGUMENTS)
    record = session.outputs.get(head.provenance.facts["saved_as"])
    local, _ = region()
    whole = ordinary(local, path)
    pd.testing.assert_frame_equal(
        comparable(read_output(session, record)), comparable(whole.to_wkb()), check_dtype=False
    )


@pytest.mark.parametrize("per", ["item", "day"])
def test_a_group_is_made_into_tables_of_a_few_zones_at_a_time(region, monkeypatch, per):
    """Each group's rows are made into a table `TABLE_ZONES` zones at a time, a file each of its
    partition (never the whole group's table at once): the files hold the ordinary call's rows;
    the answer holds the first table's zones and tells the box of every zone."""
    monkeypatch.setattr(zonal_region, "TABLE_ZONES", 20)
    session, path = region()
    head = session.zonal_stats(str(path), per=per, **ARGUMENTS)
    record = session.outputs.get(head.provenance.facts["saved_as"])
    whole = ordinary(session, path, per=per)
    folder = session.outputs.path(record.id)
    files = {p.name: len(list(p.glob("*.parquet"))) for p in folder.iterdir()}
    assert files == {f"zone_group={k:05d}": 4 if k < 4 else 3 for k in range(5)}  # (64 zones, 44 last)
    pd.testing.assert_frame_equal(
        comparable(read_output(session, record)), comparable(whole.to_wkb()), check_dtype=False
    )
    assert head["zone_id"].nunique() == 20 and set(head["zone_id"]) < set(whole["zone_id"])
    first = comparable(whole.to_wkb())
    first = first[first["zone_id"].isin(set(head["zone_id"]))].reset_index(drop=True)
    pd.testing.assert_frame_equal(comparable(head.frame.to_wkb()), first, check_dtype=False)
    assert head.provenance.properties["zones_bbox"] == whole.provenance.properties["zones_bbox"]


def test_a_partition_is_made_and_written_a_slice_of_rows_at_a_time(region, monkeypatch):
    """Each group's rows become Arrow and are written `WRITE_ROWS` at a time, a row group each
    (never a whole group's Arrow copy at once): counted as made; the partitions hold the ordinary
    call's rows, and each is GeoParquet geopandas reads with its zones' shapes and CRS."""
    import pyarrow.parquet as pq

    monkeypatch.setattr(zonal_region, "WRITE_ROWS", 50)
    made, parts = [], zonal_region.geoparquet_parts

    def counted(frame, rows):
        schema, tables = parts(frame, rows)
        return schema, (made.append(table.num_rows) or table for table in tables)

    monkeypatch.setattr(zonal_region, "geoparquet_parts", counted)
    session, path = region()
    head = session.zonal_stats(str(path), **ARGUMENTS)
    record = session.outputs.get(head.provenance.facts["saved_as"])
    folder, whole = session.outputs.path(record.id), ordinary(session, path)
    assert max(made) == 50 and sum(made) == len(whole) == head.provenance.facts["rows"]
    for file in sorted(folder.glob("*/part-*.parquet")):
        meta = pq.ParquetFile(file).metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        assert sizes == [50] * (meta.num_rows // 50) + ([meta.num_rows % 50] if meta.num_rows % 50 else [])
        read = geopandas.read_parquet(file)
        assert read.crs == "EPSG:4326"
        shapes = whole.drop_duplicates("zone_id").set_index("zone_id").geometry
        assert read.geometry.geom_equals_exact(shapes.loc[read["zone_id"]].set_axis(read.index), 0).all()
    pd.testing.assert_frame_equal(
        comparable(read_output(session, record)), comparable(whole.to_wkb()), check_dtype=False
    )


def test_many_buckets_give_the_same_rows_and_refuse_ids_repeated_across_them(region, monkeypatch):
    """Buckets of 40 zones (8 of them): the groups cut from each along the curve give the rows of
    the ordinary call; an id repeated in two buckets is found (hashes compared, then the ids)."""
    from stac_gdal_mcp.operations.zonal import groups

    monkeypatch.setattr(groups, "BUCKET_ZONES", 40)
    session, path = region()
    head = session.zonal_stats(str(path), **ARGUMENTS)
    record = session.outputs.get(head.provenance.facts["saved_as"])
    pd.testing.assert_frame_equal(
        comparable(read_output(session, record)),
        comparable(ordinary(session, path).to_wkb()),
        check_dtype=False,
    )
    frame = zones_frame(300)
    frame.loc[[3, 297], "field_id"] = "f01000"  # the first cluster and the UTM boundary: two buckets
    frame.to_parquet(path)
    with pytest.raises(InvalidArgument, match="zone ids must be unique; repeated: 'f01000'"):
        session.zonal_stats(str(path), **ARGUMENTS)


def test_an_item_runs_on_one_worker_group_after_group(region, cluster):  # noqa: F811 (the fixture)
    """Each group of zones measures every item again: `Cluster.run(place=item id)` sends an item's
    work to the same worker process each time (its tiles then come from that worker's /vsicurl/
    cache, not the network), and the items spread over the workers."""
    from stac_gdal_mcp.processing.items import Cluster

    def worker_address(shared, key):
        from distributed import get_worker

        return get_worker().address

    session, _ = region(dask_scheduler=cluster.scheduler_address)
    places = [f"S2A_T33UXP_2024060{k}" for k in range(10)]
    seen: dict[str, set] = {}
    for _ in range(3):  # three groups: a Cluster each, as zonal_region's groups make
        runner = Cluster(session.core, "a group's request")
        try:
            for place in places:
                seen.setdefault(place, set()).add(runner.run(Job(), worker_address, place=place))
        finally:
            runner.close()
    assert all(len(workers) == 1 for workers in seen.values()), seen
    assert set().union(*seen.values()) == set(cluster.scheduler_info["workers"])


def leftovers(session) -> list:
    workspace = session.settings.workspace
    return sorted(
        p.name
        for folder in ("outputs", "records", ".tmp")
        for p in (workspace / folder).glob("*")
        if not p.name.endswith(".alive")
    )


def test_cancel_and_failure_leave_nothing(region):
    session, path = region()

    def progress(done, total, message):
        if done >= 2:  # two groups written: then the user cancels
            job.cancel()

    job = Job(progress, min_interval_s=0)
    with pytest.raises(OperationCancelled):
        session.zonal_stats(str(path), job=job, **ARGUMENTS)
    assert leftovers(session) == [] and session.outputs.list() == []
    small, path = region(limits={"max_output_bytes": 20_000})
    with pytest.raises(LimitExceeded, match="max_output_bytes"):
        small.zonal_stats(str(path), **ARGUMENTS)
    assert leftovers(small) == []


def test_limits_are_checked_from_the_metadata(region):
    session, path = region(limits={"max_region_zones": 299})
    with pytest.raises(LimitExceeded, match="300 features, more than limits.max_region_zones=299"):
        session.zonal_stats(str(path), **ARGUMENTS)


def test_the_tool_at_region_scale(region):
    """The zonal_stats tool, as a client calls it, over the same file: the same call runs at region
    scale, its answer counts every row of the ordinary call, and its table is the partitioned output."""
    import asyncio

    from fastmcp import Client

    from stac_gdal_mcp.server import build_server

    session, path = region()
    search = {"collections": [S2], "datetime": "2024-06-01/2024-06-30"}

    async def call():
        async with Client(build_server(session=session)) as client:
            found = await client.call_tool_mcp(
                "zonal_stats", {"geometries": "fields.parquet", "search": search, "id_property": "field_id"}
            )
            return found.model_dump(mode="json", by_alias=True, exclude_none=True)

    answer = asyncio.run(call())
    assert not answer.get("isError"), answer
    content = answer["structuredContent"]
    whole = ordinary(session, path)
    assert content["zones"] == 300 and content["rows_total"] == len(whole)
    assert any("region scale" in note for note in content["notes"])
    output_id = content["table"]["id"]
    pd.testing.assert_frame_equal(
        comparable(read_output(session, session.outputs.get(output_id))),
        comparable(whole.to_wkb()),
        check_dtype=False,
    )


def test_dry_run_counts_the_rows_of_the_ordinary_estimate(region):
    session, path = region()
    estimate = session.zonal_stats(str(path), dry_run=True, **ARGUMENTS)
    request = zonal_stats.check(session.core, str(path), **ARGUMENTS)
    whole = zonal.estimate(session.core, request)
    assert estimate.output.rows == whole.output.rows > 0
    assert sorted(estimate.item_ids) == sorted(whole.item_ids)
    assert estimate.read_bytes >= whole.read_bytes > 0
    assert session.outputs.list() == []


def test_the_dry_run_selects_the_items_once_as_the_run_does(region, monkeypatch):
    """Both select the items once over the zones' extent, not once per group (5 groups here): a
    capped search then gives the dry run the run's items."""
    session, path = region()
    selected, select = [], zonal.select
    monkeypatch.setattr(zonal, "select", lambda core, request: selected.append(1) or select(core, request))
    estimate = session.zonal_stats(str(path), dry_run=True, **ARGUMENTS)
    assert len(selected) == 1 and estimate.output.rows > 0
    session.zonal_stats(str(path), **ARGUMENTS)
    assert len(selected) == 2


def test_the_groups_notes_are_five_and_a_count_of_the_rest(region):
    """Twelve invalid zones over the groups: the answer and the dry run keep the first five notes
    and count the rest, as a small call does (not every note of each group while fewer than five)."""
    from shapely.geometry import Polygon

    session, path = region()
    frame = zones_frame(300)
    bad = list(range(0, 300, 25))
    bowties = []
    for geom in frame.geometry[bad]:
        x0, y0, x1, y1 = geom.bounds
        bowties.append(Polygon([(x0, y0), (x1, y1), (x1, y0), (x0, y1)]))
    frame.loc[bad, "geometry"] = bowties
    frame.to_parquet(path)
    head = session.zonal_stats(str(path), **ARGUMENTS)
    estimate = session.zonal_stats(str(path), dry_run=True, **ARGUMENTS)
    for notes in (head.provenance.facts["notes"], estimate.notes):
        repaired = [n for n in notes if n.startswith("zone ") and "repaired with make_valid" in n]
        counted = [n for n in notes if n.startswith("... and ") and n.endswith(" more such notes")]
        assert len(repaired) == 5 and len(counted) == 1, notes
        assert notes.index(counted[0]) == notes.index(repaired[-1]) + 1


def test_every_zone_is_checked_before_a_pixel_is_read(region, cog_server):
    """A zone of too many vertices at the end of the file is refused before the first group is
    measured: no tile is fetched."""
    session, path = region(limits={"zonal_region_zones": 100, "max_zone_vertices": 200})
    frame = zones_frame(300)
    frame.loc[299, "geometry"] = frame.loc[299, "geometry"].buffer(0.0001, quad_segs=64)
    frame.to_parquet(path)
    cog_server.reset_stats()
    with pytest.raises(
        LimitExceeded, match="'f00299' has .* vertices, more than limits.max_zone_vertices=200"
    ):
        session.zonal_stats(str(path), **ARGUMENTS)
    assert cog_server.stats()["bytes"] == 0


def test_a_broken_file_is_refused_in_one_line(region):
    session, path = region()
    path.write_bytes(b"PAR1" + b"\x00" * 64)
    with pytest.raises(InvalidArgument, match="geometries file 'fields.parquet' cannot be read"):
        session.zonal_stats(str(path), **ARGUMENTS)


def test_repeated_ids_are_refused_before_a_pixel_is_read(region, cog_server):
    session, path = region()
    frame = zones_frame(300)
    frame.loc[299, "field_id"] = "f00007"
    frame.to_parquet(path)
    cog_server.reset_stats()
    with pytest.raises(InvalidArgument, match="zone ids must be unique; repeated: 'f00007'"):
        session.zonal_stats(str(path), **ARGUMENTS)
    assert cog_server.stats()["bytes"] == 0 and session.outputs.list() == []


def test_a_window_over_a_tile_edge_is_read_again_from_the_cache(scenes, cog_server, make_settings):
    """A window over four tiles is read one tile at a time (`pixels.read_by_tile`): its pixels are
    the file's, and the next group's read of the same window, on a freshly opened dataset, fetches
    nothing (each tile came through GDAL's /vsicurl/ cache; one read over several tiles was a
    multi-range request past it, fetched again by every group over that edge)."""
    import numpy as np
    import rasterio

    from stac_gdal_mcp.core import Core
    from stac_gdal_mcp.operations.zonal.pixels import read_by_tile
    from stac_gdal_mcp.processing.access import open_raster, resolve_input

    href = scenes[0]["assets"]["red"]["href"]
    local = cog_server.root / href.removeprefix(cog_server.url + "/")
    name = f"edge-{uuid.uuid4().hex[:8]}.tif"  # (a URL no earlier read has cached)
    (cog_server.root / name).hardlink_to(local)
    core = Core(make_settings())
    source = resolve_input(core, href=f"{cog_server.url}/{name}")
    native = (100, 90, 170, 150)  # columns 100-169, rows 90-149: over the tile edges at 128
    with rasterio.open(local) as truth:
        assert truth.block_shapes[0] == (128, 128)
        expected = truth.read(1, window=((90, 150), (100, 170)))
    cog_server.reset_stats()
    with open_raster(source, core.settings) as src:
        first = read_by_tile(src, native)
    fetched = cog_server.stats()["bytes"]
    cog_server.reset_stats()
    with open_raster(source, core.settings) as src:
        again = read_by_tile(src, native)
    assert np.array_equal(first, expected) and np.array_equal(again, expected)
    assert fetched > 0 and cog_server.stats()["bytes"] == 0


def test_the_zones_file_is_read_a_batch_at_a_time(tmp_path, monkeypatch):
    """A GeoParquet of one row group (as geopandas writes up to ~1M rows) is read a batch at a
    time: Arrow's pool holds about one batch of geometries, not the row group's whole column
    (pre-buffering read the column chunk whole: +13 MB at 100,000 fields)."""
    import numpy as np
    import pyarrow as pa
    import shapely

    from stac_gdal_mcp.operations.zonal import files

    monkeypatch.setattr(files, "BATCH_ZONES", 500)
    peaks = {}
    for count in (2_000, 20_000):
        path = tmp_path / f"zones-{count}.parquet"
        xy = np.random.default_rng(count).uniform(10, 11, (count, 2))
        geopandas.GeoDataFrame(
            geometry=shapely.buffer(shapely.points(xy), 0.001), crs="EPSG:4326"
        ).to_parquet(path)
        base, peak, read = pa.total_allocated_bytes(), 0, 0
        for wkb, ids, start in files.batches(path, "'zones'", None):
            peak, read = max(peak, pa.total_allocated_bytes()), read + len(wkb)
            assert ids is None and start == read - len(wkb) and len(wkb) <= 500
        assert read == count
        peaks[count] = peak - base
    assert peaks[20_000] < 1.5 * peaks[2_000], peaks
