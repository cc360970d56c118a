"""The count of a search takes the parts whose every row matches from their footers' row counts
(discovery/part_counts.py): on the real Planetary Computer items (tests/real_items) in
Planetary Computer parts and in hive folders, the counts stay those of DuckDB's own SQL by hand
(shapely testing the footprints of a bbox's candidates), every part counted whole truly holds
only matches (DuckDB's count over that part alone equals its rows), and over HTTP a part counted
whole is never read (the Range server's log of the bytes asked).
"""

from __future__ import annotations

from datetime import timedelta

import duckdb
import pyarrow.compute as pc
import pytest
import real_snapshots as rs
import shapely
from shapely.geometry import box

from stac_gdal_mcp import Session
from stac_gdal_mcp.discovery.parquet_search import make_plan
from stac_gdal_mcp.discovery.part_counts import whole
from stac_gdal_mcp.discovery.query import check_search
from testbed import serve_directory

WHEN = "(CASE WHEN start_datetime IS NOT NULL AND end_datetime IS NOT NULL THEN {} ELSE datetime END)"
US = [-125.0, 24.0, -66.0, 50.0]
SPAN = ("2024-04-17T00:00:00Z/2024-04-21T12:00:00Z", "2024-04-17 00:00:00+00", "2024-04-21 12:00:00+00")
DATED = (
    f"{WHEN.format('start_datetime')} <= TIMESTAMPTZ '{SPAN[2]}' "
    f"AND {WHEN.format('end_datetime')} >= TIMESTAMPTZ '{SPAN[1]}'"
)
TWO = "collection IN ('sentinel-2-l2a', 'landsat-c2-l2')"
SHAPES = {  # name -> (search arguments, DuckDB's WHERE, the bbox its footprints must meet)
    "cloud < 50": ({"filter": '"eo:cloud_cover" < 50'}, '"eo:cloud_cover" < 50', None),
    "cloud between": (
        {"filter": '"eo:cloud_cover" BETWEEN 0 AND 30 AND "eo:cloud_cover" > 0.1'},
        '"eo:cloud_cover" BETWEEN 0 AND 30 AND "eo:cloud_cover" > 0.1',
        None,
    ),
    "bbox": ({"bbox": US}, None, US),
    "collections and time": (
        {"collections": ["sentinel-2-l2a", "landsat-c2-l2"], "datetime": SPAN[0]},
        f"{TWO} AND {DATED}",
        None,
    ),
    "all together": (
        {
            "bbox": [-180.0, -90.0, 180.0, 90.0],
            "filter": '"eo:cloud_cover" <= 2',
            "datetime": "2013-01-01T00:00:00Z/2024-12-31T23:59:59Z",
        },
        f"\"eo:cloud_cover\" <= 2 AND {WHEN.format('start_datetime')} <= TIMESTAMPTZ '2024-12-31 23:59:59+00' "
        f"AND {WHEN.format('end_datetime')} >= TIMESTAMPTZ '2013-01-01 00:00:00+00'",
        [-180.0, -90.0, 180.0, 90.0],
    ),
}


def _pc_parts(tbl, root, slices: int = 3) -> list:
    """Each collection's rows (in time order) in `slices` parts of the Planetary Computer's
    layout, each named by the hours its rows span (parts of a week to a year there)."""
    meta = rs._metadata(tbl, None)
    written = []
    for cid in sorted(set(tbl["collection"].to_pylist())):
        rows = tbl.filter(pc.equal(tbl["collection"], cid))
        n = -(-rows.num_rows // slices)
        for k in range(slices):
            part = rows.slice(k * n, n)
            times = pc.coalesce(*[part[c] for c in ("datetime", "start_datetime")])
            low, high = pc.min(times).as_py(), pc.max(times).as_py() + timedelta(hours=1)
            name = f"part-{k:04d}_{low:%Y-%m-%dT%H}:00:00_{high:%Y-%m-%dT%H}:00:00.parquet"
            written.append(rs.write(part, root / f"{cid}.parquet" / name, meta=meta))
    return written


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The real items, 60 copies each (2,760 rows): Planetary Computer parts, hive folders."""
    items = rs.real_items()
    tbl = rs.by_time(rs.repeated(rs.table(rs.copies(items, 1)), 60), "collection")
    root = tmp_path_factory.mktemp("part-counts")
    pc_parts = _pc_parts(tbl, root / "pc")
    hive = rs.write_hive_layout(tbl, root / "hive", rs.collections(items))
    return {"pc parts": (root / "pc", pc_parts), "hive": (root / "hive", hive), "root": root}


def by_hand(files, where: str | None, area: list | None) -> int:
    """The count by DuckDB's own SQL over `files`, shapely testing the bbox candidates' footprints."""
    listed = ", ".join(f"'{f}'" for f in files)
    source = f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    conditions = [where] if where else []
    if area is not None:
        w, s, e, n = area
        conditions.append(f"bbox.xmin <= {e} AND bbox.xmax >= {w} AND bbox.ymin <= {n} AND bbox.ymax >= {s}")
    rows = con.sql(f"SELECT geometry FROM {source} WHERE {' AND '.join(conditions)}").fetchall()
    if area is None:
        return len(rows)
    return int(shapely.intersects(shapely.from_wkb([r[0] for r in rows]), box(*area)).sum())


def _whole(session, args: dict) -> list[str]:
    cat = session.core.catalogs.get("gp")
    with cat.pinned():
        plan = make_plan(cat, check_search(**args))
        return whole(cat, plan.files, plan.within)


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_counts_equal_duckdb_by_hand_with_parts_counted_whole(make_settings, sources, layout, name):
    path, files = sources[layout]
    args, where, area = SHAPES[name]
    expected = by_hand(files, where, area)
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        counted = session.search(catalog="gp", detail="count", **args).matched
        page = session.search(catalog="gp", limit=10, fields=["id"], **args)
        taken = _whole(session, args)
    assert counted == expected and page.matched == expected
    assert taken and len(taken) < len(files)  # some parts counted whole, others read
    for part in taken:  # each truly holds only matches: DuckDB's count over it alone is its rows
        assert by_hand([part], where, area) == duckdb.sql(f"SELECT count(*) FROM '{part}'").fetchall()[0][0]


def test_a_plain_condition_over_columns_with_nulls_or_an_or_reads_the_parts(make_settings, sources, tmp_path):
    """A part whose cloud cover has a null among values inside the bounds, and a CQL2 `or`, count
    no part whole; the counts stay DuckDB's."""
    import pyarrow as pa

    path, files = sources["pc parts"]
    either = '"eo:cloud_cover" < 50 OR "eo:cloud_cover" > 90'
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        assert _whole(session, {"filter": either}) == []
        assert session.search(catalog="gp", detail="count", filter=either).matched == by_hand(
            files, either, None
        )
    clear = [f for f in files if f.parent.name == "sentinel-2-l2a.parquet"]
    import pyarrow.parquet as pq

    holed = pq.read_table(clear[0])
    cloud = holed["eo:cloud_cover"].to_pylist()
    cloud[3] = None
    holed = holed.set_column(
        holed.schema.get_field_index("eo:cloud_cover"), "eo:cloud_cover", pa.array(cloud)
    )
    parts = [rs.write(pq.read_table(f), tmp_path / "sentinel-2-l2a.parquet" / f.name) for f in clear[1:]]
    parts.append(rs.write(holed, tmp_path / "sentinel-2-l2a.parquet" / clear[0].name))
    settings = make_settings(
        catalogs=[{"id": "gp", "path": str(tmp_path / "sentinel-2-l2a.parquet")}], default_catalog="gp"
    )
    below = '"eo:cloud_cover" < 1000'
    with Session(settings) as session:
        taken = {_named(f) for f in _whole(session, {"filter": below})}
        counted = session.search(catalog="gp", detail="count", filter=below).matched
    assert counted == by_hand(parts, below, None) == sum(pq.read_metadata(f).num_rows for f in parts) - 1
    assert taken == {_named(str(f)) for f in parts[:-1]}  # the part with a null is read


def test_a_part_counted_whole_is_not_read_over_http(make_settings, sources):
    """Over HTTP, once the footers are read, the count of a search its parts hold whole reads no
    byte of any part; with parts that straddle it, only theirs (version checks, bytes 0-0, aside)."""
    root = sources["root"]
    path, files = sources["pc parts"]
    with serve_directory(root) as server:
        urls = [f"{server.url}/{f.relative_to(root).as_posix()}" for f in files]
        settings = make_settings(catalogs=[{"id": "gp", "urls": urls}], default_catalog="gp")
        with Session(settings) as session:
            session.search(catalog="gp", collections=["naip"], limit=1, fields=["id"])  # the footers read
            read = {}
            for name in ("collections", "cloud < 50"):
                args = (
                    {"collections": ["sentinel-2-l2a", "naip"]} if name == "collections" else SHAPES[name][0]
                )
                server.reset_stats()
                counted = session.search(catalog="gp", detail="count", **args).matched
                read[name] = {p for p, asked, _ in server.request_log() if asked != "bytes=0-0"}
                assert counted == by_hand(
                    files,
                    TWO.replace("landsat-c2-l2", "naip") if name == "collections" else SHAPES[name][1],
                    None,
                )
            taken = {_named(u) for u in _whole(session, SHAPES["cloud < 50"][0])}
    assert read["collections"] == set()
    assert read["cloud < 50"] and taken
    assert not {_named(p) for p in read["cloud < 50"]} & taken


def _named(path: str) -> str:
    """A part's folder and name (a URL's, a path's)."""
    return "/".join(path.split("/")[-2:])


def test_over_http_a_first_page_past_the_rows_a_count_reads_leaves_matched_unknown(
    make_settings, sources, monkeypatch
):
    """Over HTTP a first page whose count would read more than HTTP_COUNT_ROWS rows leaves
    `matched` unknown and says so; detail='count' counts them; a page whose parts are counted
    whole, and one under the bound, carry their count."""
    from stac_gdal_mcp.discovery import parquet_source

    root = sources["root"]
    path, files = sources["pc parts"]
    cloudy = SHAPES["cloud < 50"]
    monkeypatch.setattr(parquet_source, "HTTP_COUNT_ROWS", 200)  # the straddling parts hold 240 rows
    with serve_directory(root) as server:
        urls = [f"{server.url}/{f.relative_to(root).as_posix()}" for f in files]
        settings = make_settings(catalogs=[{"id": "gp", "urls": urls}], default_catalog="gp")
        with Session(settings) as session:
            page = session.search(catalog="gp", limit=10, fields=["id"], **cloudy[0])
            counted = session.search(catalog="gp", detail="count", **cloudy[0]).matched
            named = session.search(catalog="gp", limit=10, fields=["id"], collections=["sentinel-2-l2a"])
            monkeypatch.setattr(parquet_source, "HTTP_COUNT_ROWS", 240)
            under = session.search(catalog="gp", limit=10, fields=["id"], **cloudy[0])
    expected = by_hand(files, cloudy[1], None)
    assert page.matched is None and parquet_source.UNCOUNTED in page.notes and len(page.items) == 10
    assert page.ids == under.ids and counted == expected == under.matched
    assert named.matched == 240 and parquet_source.UNCOUNTED not in named.notes + under.notes
