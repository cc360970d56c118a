"""Writing stac-geoparquet snapshots: hive folders partitioned by collection, year and
month that DuckDB opens with `hive_partitioning=true`, rows sorted by datetime so row-group
statistics prune, the real Planetary Computer items of 13 collections written without loss (3-D
bboxes beside 2-D ones, SAR items without eo:cloud_cover, assets that differ per item), a column
whose types cannot be unified refused in one line, and a byte cap that holds while writing.
Everything written is read back by DuckDB, pyarrow and stac-geoparquet, not by us."""

from __future__ import annotations

import copy
import itertools
import random
import re
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import real_snapshots as rs
from stac_geoparquet.arrow import stac_table_to_items

from stac_gdal_mcp.catalogs.geoparquet import without_nulls
from stac_gdal_mcp.catalogs.snapshot_write import write_snapshot
from stac_gdal_mcp.errors import AccessDenied, InvalidArgument, LimitExceeded

ALL = ["collection", "year", "month"]


@pytest.fixture(scope="module")
def real():
    """Every real item (2-D and 3-D bboxes), 13 collections."""
    items = rs.real_items(None)
    assert {len(i["bbox"]) for i in items} == {4, 6}
    assert len({i["collection"] for i in items}) == 13
    return items


def when(item: dict) -> datetime:
    props = item["properties"]
    value = props.get("datetime") or props["start_datetime"]
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def parquet_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.parquet"))


def hive(root: Path) -> str:
    return f"read_parquet('{root}/**/*.parquet', hive_partitioning = true, union_by_name = true)"


def normal(value):
    """JSON values as compared: nulls left out (Parquet gives absent fields null), timestamps as
    instants (stac-geoparquet writes them in its own ISO form)."""
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, str) and re.fullmatch(
        r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value
    ):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def test_partitioned_real_items_open_in_duckdb_with_hive_partitioning(real, tmp_path):
    """All 13 collections, 8 copies each (shuffled), in collection/year/month folders: DuckDB's
    hive_partitioning reads every item once, and the folder values are the items' own."""
    items = rs.copies(real, 8)
    random.Random(27).shuffle(items)
    out = tmp_path / "snap"
    assert write_snapshot(iter(copy.deepcopy(items)), out, partition_by=ALL, chunk_size=150) == len(items)
    rows = duckdb.sql(f"SELECT id, collection, year, month FROM {hive(out)}").fetchall()
    assert sorted(r[0] for r in rows) == sorted(i["id"] for i in items)
    want = {i["id"]: (i["collection"], when(i).year, when(i).month) for i in items}
    assert {r[0]: tuple(r[1:]) for r in rows} == want
    for path in parquet_files(out):
        parts = path.relative_to(out).parts
        assert [p.split("=")[0] for p in parts[:-1]] == ALL and re.fullmatch(r"part-\d+\.parquet", parts[-1])
    # one month of one collection: DuckDB opens that folder only and finds exactly its items
    cid, year, month = want[items[0]["id"]]
    found = duckdb.sql(
        f"SELECT id FROM {hive(out)} WHERE collection = ? AND year = ? AND month = ?",
        params=[cid, year, month],
    ).fetchall()
    assert sorted(r[0] for r in found) == sorted(k for k, v in want.items() if v == (cid, year, month))


def test_real_items_round_trip_without_loss(real, tmp_path):
    """Read back with pyarrow + stac-geoparquet, every item equals what was written: 3-D bboxes
    (3DEP, a part of their own), SAR items without eo:cloud_cover, assets that differ per item;
    rustac reads every part as well."""
    from shapely.geometry import shape

    out = tmp_path / "snap"
    write_snapshot(iter(copy.deepcopy(real)), out, partition_by=ALL)
    got = {}
    for path in parquet_files(out):
        for item in stac_table_to_items(pq.ParquetFile(path).read()):
            got[item["id"]] = item
    assert sorted(got) == sorted(i["id"] for i in real)
    for item in real:
        back = got[item["id"]]
        assert shape(back["geometry"]).equals(shape(item["geometry"]))
        rest = {k: v for k, v in item.items() if k != "geometry"}
        assert normal(without_nulls({k: v for k, v in back.items() if k != "geometry"})) == normal(rest), (
            item["id"]
        )
    import rustac  # rustac reads every part too, 3-D ones included

    by_rustac = [i["id"] for path in parquet_files(out) for i in rustac.read_sync(str(path))["features"]]
    assert sorted(by_rustac) == sorted(got)
    sar = [i for i in real if i["collection"] == "sentinel-1-rtc"]
    assert sar and all("eo:cloud_cover" not in got[i["id"]]["properties"] for i in sar)
    assert {len(got[i["id"]]["bbox"]) for i in real} == {4, 6}


def test_row_groups_are_sorted_by_datetime_so_statistics_prune(real, tmp_path):
    """400 Sentinel-2 rows over 100 days, shuffled, in row groups of 50: each file's row groups
    hold consecutive datetime ranges (their min/max statistics, read with pyarrow, do not
    overlap), so a date filter skips all but the groups that can hold it."""
    s2 = [i for i in real if i["collection"] == "sentinel-2-l2a"]
    items = rs.copies(s2, 100)
    random.Random(1).shuffle(items)
    out = tmp_path / "snap"
    write_snapshot(iter(items), out, partition_by=["collection", "year"], row_group_size=50)
    files = parquet_files(out)
    total = 0
    for path in files:
        meta = pq.ParquetFile(path).metadata
        column = meta.schema.names.index("datetime")
        ranges = [
            (meta.row_group(g).column(column).statistics.min, meta.row_group(g).column(column).statistics.max)
            for g in range(meta.num_row_groups)
        ]
        assert all(lo <= hi for lo, hi in ranges)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges)), ranges
        total += meta.num_rows
        if meta.num_rows > 50:
            assert meta.num_row_groups == -(-meta.num_rows // 50)
    assert total == len(items) and max(pq.ParquetFile(p).metadata.num_row_groups for p in files) >= 4


def test_one_file_keeps_the_items_order_and_refuses_mixed_bbox_shapes_in_one_line(real, tmp_path):
    flat = [i for i in real if len(i["bbox"]) == 4]
    out = tmp_path / "one.parquet"
    assert write_snapshot(iter(copy.deepcopy(flat)), out, chunk_size=7) == len(flat)  # 7 parts unified
    assert [r[0] for r in duckdb.sql(f"SELECT id FROM read_parquet('{out}')").fetchall()] == [
        i["id"] for i in flat
    ]
    with pytest.raises(InvalidArgument) as caught:
        write_snapshot(iter(copy.deepcopy(real)), tmp_path / "mixed.parquet")
    message = str(caught.value)
    assert "2-D and 3-D bboxes" in message and "partition_by" in message and "\n" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.parquet"]  # nothing half-written


@pytest.mark.parametrize("chunk_size", [1000, 40])  # the conflict inside one chunk, or between two
def test_a_column_whose_types_differ_is_refused_in_one_line_naming_it(real, tmp_path, chunk_size):
    s2 = [i for i in real if i["collection"] == "sentinel-2-l2a"]
    items = rs.copies(s2, 30)
    for item in items[60:]:
        item["properties"]["eo:cloud_cover"] = f"{item['properties']['eo:cloud_cover']}%"
    with pytest.raises(InvalidArgument) as caught:
        write_snapshot(iter(items), tmp_path / "snap", partition_by=["collection"], chunk_size=chunk_size)
    message = str(caught.value)
    assert "column 'eo:cloud_cover'" in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_a_nested_column_is_named_too(real, tmp_path):
    items = copy.deepcopy([i for i in real if i["collection"] == "io-lulc"])
    items[0]["assets"]["data"]["raster:bands"][0]["nodata"] = "nan"  # the others: 0
    with pytest.raises(InvalidArgument, match=r"column 'assets\.data\.raster:bands\[\]\.nodata'"):
        write_snapshot(iter(items), tmp_path / "x.parquet")
    assert list(tmp_path.iterdir()) == []


def test_the_byte_cap_holds_while_writing(real, tmp_path):
    """1,000 wide items, written 100 at a time, pass the cap early: the write stops at the chunk
    that passes it, having read a fraction of the items, and never held much more than the cap
    on disk; nothing is left. Uncapped, the same write holds several times the cap (the parts of
    a wide schema carry a footer each), so the bound is the cap's doing."""
    items = rs.copies([i for i in real if len(i["bbox"]) == 4], 22)[:1000]
    cap = 1_000_000
    seen = {"pulled": 0, "peak": 0}

    def watched():
        for item in items:
            seen["pulled"] += 1
            if seen["pulled"] % 10 == 1:  # the disk used, at every chunk's first item at least
                used = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
                seen["peak"] = max(seen["peak"], used)
            yield item

    for out, keys in ((tmp_path / "snap", ALL), (tmp_path / "one.parquet", None)):
        seen.update(pulled=0, peak=0)
        with pytest.raises(LimitExceeded) as caught:
            write_snapshot(watched(), out, partition_by=keys, max_bytes=cap, chunk_size=100)
        assert "1,000,000 bytes" in str(caught.value) and "\n" not in str(caught.value)
        assert seen["pulled"] < len(items) / 2, (keys, seen)
        assert seen["peak"] < 1.5 * cap, (keys, seen)
        assert list(tmp_path.iterdir()) == []
    seen.update(pulled=0, peak=0)
    write_snapshot(watched(), tmp_path / "all.parquet", chunk_size=100)
    assert seen["pulled"] == len(items) and seen["peak"] > 3 * cap, seen


def test_an_earlier_snapshot_is_replaced_and_other_folders_are_not(real, tmp_path):
    out = tmp_path / "snap"
    write_snapshot(iter(copy.deepcopy(real)), out, partition_by=ALL)
    write_snapshot(iter(copy.deepcopy(real[:5])), out, partition_by=["collection"])
    assert duckdb.sql(f"SELECT count(*) FROM {hive(out)}").fetchall() == [(5,)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    with pytest.raises(InvalidArgument, match="not a partitioned snapshot"):
        write_snapshot(iter(copy.deepcopy(real)), tmp_path / "home", partition_by=ALL)
    assert (tmp_path / "home" / "notes.txt").read_text() == "mine"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(AccessDenied):
        write_snapshot(iter(copy.deepcopy(real)), tmp_path / "link", partition_by=ALL)
    assert list((tmp_path / "elsewhere").iterdir()) == []


@pytest.mark.parametrize(
    ("partition_by", "words"),
    [(["day"], "partition_by takes collection, year, month"), (["month"], "month needs year")],
)
def test_bad_partition_keys_are_one_line(real, tmp_path, partition_by, words):
    with pytest.raises(InvalidArgument, match=words):
        write_snapshot(iter(real), tmp_path / "snap", partition_by=partition_by)
    assert list(tmp_path.iterdir()) == []


def test_a_partition_larger_than_the_sort_budget_is_sorted_a_time_slice_at_a_time(
    real, tmp_path, monkeypatch
):
    """A partition whose parts hold more than SLICE_BYTES is sorted in time slices (memory per
    slice, not per partition): the file still holds every item once, its row groups in time order
    (slices end in a short row group, so there are more of them than one sort would make)."""
    from stac_gdal_mcp.catalogs import snapshot_write

    s2 = [i for i in real if i["collection"] == "sentinel-2-l2a"]
    items = rs.copies(s2, 100)
    random.Random(2).shuffle(items)
    monkeypatch.setattr(snapshot_write, "STAGED_ROWS", 20)
    monkeypatch.setattr(snapshot_write, "SLICE_BYTES", 600_000)  # the parts hold about 2.2 MB: 4 slices
    out = tmp_path / "snap"
    write_snapshot(iter(items), out, partition_by=["collection"], row_group_size=30, chunk_size=100)
    (path,) = parquet_files(out)
    meta = pq.ParquetFile(path).metadata
    column = meta.schema.names.index("datetime")
    stats = [meta.row_group(g).column(column).statistics for g in range(meta.num_row_groups)]
    assert all(a.max <= b.min for a, b in itertools.pairwise(stats))
    assert meta.num_row_groups > -(-len(items) // 30)  # more than one slice
    ids = pq.read_table(path, columns=["id"])["id"].to_pylist()
    assert sorted(ids) == sorted(i["id"] for i in items)
