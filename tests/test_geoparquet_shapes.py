"""Every query shape's answer equals DuckDB's own SQL written by hand over the same files: the
wide file of real Planetary Computer items (tests/real_items, 13 collections), the same rows in
Planetary Computer parts and in hive folders. The hand-written SQL is pgstac's rules spelled out
(an item's time is start_datetime..end_datetime where it has both, else datetime; the order is
the sort key then collection and id, NULLS as PostgreSQL puts them), with shapely testing the
footprints of the bbox candidates for `intersects` (DuckDB's spatial extension is not here).

And a walk with a CQL2 condition over many parts, in a fresh process, stays under its memory
bound (512 MB, within limits.query_memory_mb + the process's own margin), DuckDB's memory
counted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import duckdb
import pytest
import real_snapshots as rs
import shapely
from shapely.geometry import shape

from stac_gdal_mcp import Session

START = "(CASE WHEN start_datetime IS NOT NULL AND end_datetime IS NOT NULL THEN start_datetime ELSE datetime END)"
END = (
    "(CASE WHEN start_datetime IS NOT NULL AND end_datetime IS NOT NULL THEN end_datetime ELSE datetime END)"
)
NEWEST = f"ORDER BY {START} DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST"
CLEAREST = 'ORDER BY "eo:cloud_cover" ASC NULLS LAST, collection ASC NULLS LAST, id ASC NULLS LAST'
CLOUDIEST = 'ORDER BY "eo:cloud_cover" DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST'
BOX = [-115.0, 30.0, -100.0, 45.0]
TRIANGLE = {
    "type": "Polygon",
    "coordinates": [[[-125.0, 25.0], [-70.0, 25.0], [-100.0, 50.0], [-125.0, 25.0]]],
}
SPAN = ("2021-06-01T00:00:00Z/2022-06-30T23:59:59Z", "2021-06-01 00:00:00+00", "2022-06-30 23:59:59+00")
CLEAR = '"eo:cloud_cover" < 20'
PAGE = 50
MARGIN_MB = 384  # the server process with its libraries and one page (docs/security.md)


def _overlap(box) -> str:
    w, s, e, n = box
    return f"bbox.xmin <= {e} AND bbox.xmax >= {w} AND bbox.ymin <= {n} AND bbox.ymax >= {s}"


WHEN = f"{START} <= TIMESTAMPTZ '{SPAN[2]}' AND {END} >= TIMESTAMPTZ '{SPAN[1]}'"
LATER = ("2013-01-01T00:00:00Z/2024-12-31T23:59:59Z", "2013-01-01 00:00:00+00", "2024-12-31 23:59:59+00")
AFTER = f"{START} <= TIMESTAMPTZ '{LATER[2]}' AND {END} >= TIMESTAMPTZ '{LATER[1]}'"
NORTH = [-180.0, 0.0, 180.0, 90.0]  # the northern hemisphere
SHAPES = {  # name -> (search arguments, WHERE, ORDER BY, footprint test)
    "default": ({}, "TRUE", NEWEST, None),
    "bbox": ({"bbox": BOX}, _overlap(BOX), NEWEST, shape({"type": "Polygon", "coordinates": [[
        [BOX[0], BOX[1]], [BOX[2], BOX[1]], [BOX[2], BOX[3]], [BOX[0], BOX[3]], [BOX[0], BOX[1]]]]})),
    "intersects": ({"intersects": TRIANGLE}, _overlap(shape(TRIANGLE).bounds), NEWEST, shape(TRIANGLE)),
    "datetime": ({"datetime": SPAN[0]}, WHEN, NEWEST, None),
    "filter": ({"filter": CLEAR}, CLEAR, NEWEST, None),
    "combined": ({"bbox": NORTH, "datetime": LATER[0], "filter": CLEAR, "sortby": "-eo:cloud_cover"},
                 f"{_overlap(NORTH)} AND {AFTER} AND {CLEAR}", CLOUDIEST, None),
    "sortby": ({"sortby": "eo:cloud_cover"}, "TRUE", CLEAREST, None),
    "collection": ({"collections": ["sentinel-2-l2a"]}, "collection = 'sentinel-2-l2a'", NEWEST, None),
}  # fmt: skip


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The real items, 60 copies each (2,760 rows): one wide file, PC parts, hive folders."""
    items = rs.real_items()
    tbl = rs.by_time(rs.repeated(rs.table(rs.copies(items, 1)), 60), "collection")
    root = tmp_path_factory.mktemp("shapes")
    described = rs.collections(items)
    one = rs.write(tbl, root / "one.parquet", described)
    pc = rs.write_pc_layout(tbl, root / "pc", 3, described)
    hive = rs.write_hive_layout(tbl, root / "hive", described)
    chosen = [tbl["id"][5].as_py(), tbl["id"][2000].as_py(), "nosuch"]
    SHAPES["ids"] = ({"ids": chosen}, "id IN (" + ", ".join(f"'{i}'" for i in chosen) + ")", NEWEST, None)
    return {"wide file": (one, [one]), "pc parts": (root / "pc", pc), "hive": (root / "hive", hive)}


def by_hand(files, where: str, order: str, area) -> tuple[list[str], int]:
    """The first page's ids and the count, by DuckDB's own SQL (and shapely for the footprints)."""
    listed = ", ".join(f"'{f}'" for f in files)
    source = f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rows = con.sql(f"SELECT id, geometry FROM {source} WHERE {where} {order}").fetchall()
    if area is not None:
        hits = shapely.intersects(shapely.from_wkb([r[1] for r in rows]), area)
        rows = [r for r, hit in zip(rows, hits, strict=True) if hit]
    return [r[0] for r in rows[:PAGE]], len(rows)


@pytest.mark.parametrize("name", [*SHAPES, "ids"])
@pytest.mark.parametrize("layout", ["wide file", "pc parts", "hive"])
def test_each_shape_answers_as_duckdb_by_hand(make_settings, sources, layout, name):
    path, files = sources[layout]
    args, where, order, area = SHAPES[name]
    ids, matched = by_hand(files, where, order, area)
    assert matched > 0  # each shape finds something to compare
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        page = session.search(catalog="gp", limit=PAGE, fields=["id"], **args)
        counted = session.search(catalog="gp", detail="count", **args).matched
        full = session.search(catalog="gp", limit=3, detail="full", **args)
    assert [i.id for i in page.items] == ids
    assert page.matched == matched and counted == matched
    assert [i["id"] for i in full.items] == ids[:3]  # whole items too, the same rows


PROBE = """
import json, re, sys
from stac_gdal_mcp import Session
from stac_gdal_mcp.settings import load_settings
path, workspace = sys.argv[1], sys.argv[2]
settings = load_settings(catalogs=[{"id": "gp", "path": path}], default_catalog="gp", workspace=workspace,
                         limits={"query_memory_mb": 256})
pages = []
with Session(settings) as s:
    cursor = None
    for _ in range(20):
        r = s.search(limit=100, filter='"eo:cloud_cover" < 50', cursor=cursor)
        pages.append(len(r.items))
        cursor = r.next_cursor
        if cursor is None:
            break
status = open("/proc/self/status").read()  # VmHWM: this program's peak RSS
print(json.dumps([pages, int(re.search(r"VmHWM:\\s*(\\d+) kB", status).group(1)) // 1024]))
"""


def test_a_conditional_walk_over_many_parts_stays_under_its_memory_bound(tmp_path):
    """A CQL2 walk over 27,600 real rows in 240 parts of ~115 columns (a folder of parts whose
    names say nothing: every part is read), 20 pages of summaries (whole rows read), in a fresh
    process: its peak RSS, DuckDB's buffers and footer cache included, stays under 512 MB (the
    server's bound; 417 MB measured with query_memory_mb=256) and query_memory_mb + MARGIN_MB."""
    items = rs.real_items()
    tbl = rs.by_time(rs.repeated(rs.table(rs.copies(items, 1)), 600), "collection")
    meta, n = rs._metadata(tbl, rs.collections(items)), -(-tbl.num_rows // 240)
    parts = [
        rs.write(tbl.slice(k * n, n), tmp_path / "pc" / f"part-{k:04d}.parquet", meta=meta)
        for k in range(240)
    ]
    expected = sum(1 for v in tbl["eo:cloud_cover"].to_pylist() if v is not None and v < 50)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), str(tmp_path / "pc"), str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pages, rss = json.loads(done.stdout)
    assert len(parts) == 240 and sum(pages) == min(expected, 2000) and pages[0] == 100
    assert rss < min(512, 256 + MARGIN_MB), f"peak RSS {rss} MB"


def test_parts_are_left_out_by_their_statistics(make_settings, sources):
    """A bbox over Tasmania and a CQL2 `eo:cloud_cover < 1` open only the parts whose rows' bbox
    extent meets the box and whose cloud cover can be below 1 (extents and minimums computed
    here from each part's rows), and the answers stay those of DuckDB by hand."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from stac_gdal_mcp.discovery.parquet_search import make_plan
    from stac_gdal_mcp.discovery.query import check_search

    path, files = sources["pc parts"]
    tasmania = [146.0, -44.0, 149.0, -40.0]
    meets, clear = [], []
    for f in files:
        t = pq.read_table(
            f, columns=["bbox", "eo:cloud_cover"] if "eo:cloud_cover" in pq.read_schema(f).names else ["bbox"]
        )
        box = [pc.min(t["bbox"].combine_chunks().field(k)).as_py() for k in ("xmin", "ymin")]
        box += [pc.max(t["bbox"].combine_chunks().field(k)).as_py() for k in ("xmax", "ymax")]
        if (
            box[0] <= tasmania[2]
            and box[2] >= tasmania[0]
            and box[1] <= tasmania[3]
            and box[3] >= tasmania[1]
        ):
            meets.append(str(f))
        low = pc.min(t["eo:cloud_cover"]).as_py() if "eo:cloud_cover" in t.column_names else None
        if low is not None and low < 1:
            clear.append(str(f))
    assert 0 < len(meets) < len(files) and 0 < len(clear) < len(files)
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        cat = session.core.catalogs.get("gp")
        with cat.pinned():
            by_box = make_plan(cat, check_search(bbox=tasmania)).files
            by_cloud = make_plan(
                cat, check_search(filter={"op": "<", "args": [{"property": "eo:cloud_cover"}, 1]})
            ).files
        page = session.search(catalog="gp", bbox=tasmania, limit=PAGE, fields=["id"])
    assert sorted(by_box) == sorted(meets) and sorted(by_cloud) == sorted(clear)
    area = shape(
        {"type": "Polygon", "coordinates": [[[146, -44], [149, -44], [149, -40], [146, -40], [146, -44]]]}
    )
    assert [i.id for i in page.items] == by_hand(files, _overlap(tasmania), NEWEST, area)[0]


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_a_search_by_ids_opens_only_the_parts_whose_ids_span_them(make_settings, sources, layout):
    """Items named by id are read only from the parts whose least..greatest id (each part's own,
    computed here from its rows) spans one of them - a part's footer statistics hold that range,
    so five ids over 780 parts over HTTP no longer open every part - and the answer is DuckDB's
    by hand over every part."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from stac_gdal_mcp.discovery.parquet_search import make_plan
    from stac_gdal_mcp.discovery.query import check_search

    path, files = sources[layout]
    ids = [pq.read_table(files[k], columns=["id"])["id"][0].as_py() for k in (0, len(files) // 2)]
    ids.append("nosuch")
    spans = {str(f): pc.min_max(pq.read_table(f, columns=["id"])["id"]).as_py() for f in files}
    spanning = sorted(f for f, s in spans.items() if any(s["min"] <= i <= s["max"] for i in ids))
    assert 2 <= len(spanning) < len(files) // 2
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        cat = session.core.catalogs.get("gp")
        with cat.pinned():
            opened = make_plan(cat, check_search(ids=ids)).files
        page = session.search(catalog="gp", ids=ids, limit=PAGE, fields=["id"])
    assert sorted(opened) == spanning
    where = "id IN (" + ", ".join(f"'{i}'" for i in ids) + ")"
    assert [i.id for i in page.items] == by_hand(files, where, NEWEST, None)[0]
    assert len(page.items) == 2


def test_a_page_of_ids_reads_only_ids_and_collections(make_settings, sources):
    """A page of ids (`fields=["id"]`, what a user lists matches with) reads the id and collection
    columns only - no bbox, no datetime - and answers as DuckDB by hand: ids and their collections
    in the order of a sort on a property, the summaries saying nothing else (as a STAC API's
    answer to `fields`)."""
    from stac_gdal_mcp.discovery.fields import parse_fields
    from stac_gdal_mcp.discovery.parquet_search import projection

    path, files = sources["wide file"]
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        cat = session.core.catalogs.get("gp")
        assert projection(cat.files.schema, parse_fields(["id"])) == ["id", "collection"]
        assert len(projection(cat.files.schema, parse_fields(["id", "datetime"]))) == 4  # + bbox
        page = session.search(catalog="gp", limit=PAGE, fields=["id"], sortby="eo:cloud_cover")
    listed = ", ".join(f"'{f}'" for f in files)
    rows = (
        duckdb.connect()
        .sql(f"SELECT id, collection FROM read_parquet([{listed}]) {CLEAREST} LIMIT {PAGE}")
        .fetchall()
    )
    assert [(i.id, i.collection) for i in page.items] == rows
    assert {(i.datetime, i.bbox) for i in page.items} == {(None, None)}


def test_a_count_with_too_many_doubtful_footprints_stops_early(make_settings, sources):
    """The count of a bbox leaves `matched` unknown past `most` footprints its bbox does not
    settle: the doubtful rows are probed for first (a scan that stops at the (most + 1)th) in
    files of more than PROBE_ROWS rows per footprint allowed, else the count's own scan decides;
    either way the count, when known, is DuckDB's by hand with shapely on the footprints."""
    from stac_gdal_mcp.discovery import parquet_count as pc
    from stac_gdal_mcp.discovery import parquet_search as ps
    from stac_gdal_mcp.discovery.query import check_search

    path, files = sources["wide file"]
    listed = ", ".join(f"'{f}'" for f in files)
    inside = "bbox.xmin >= -115 AND bbox.xmax <= -100 AND bbox.ymin >= 30 AND bbox.ymax <= 45"
    rows, doubtful = (
        duckdb.connect()
        .sql(
            f"SELECT count(*), count(*) FILTER (WHERE NOT ({inside})) FROM read_parquet([{listed}]) "
            f"WHERE {_overlap(BOX)}"
        )
        .fetchall()[0]
    )
    total = duckdb.connect().sql(f"SELECT count(*) FROM read_parquet([{listed}])").fetchall()[0][0]
    few = total // pc.PROBE_ROWS - 1  # files past PROBE_ROWS rows per footprint allowed: probed
    assert 0 < few < doubtful < rows
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        cat = session.core.catalogs.get("gp")
        with cat.pinned():
            plan = ps.make_plan(cat, check_search(bbox=BOX))
            source, sure = cat.source(plan.files), plan.sure
            probed = pc._too_doubtful(cat, plan, source, sure, plan.sure_params, few)
            unasked = pc._too_doubtful(cat, plan, source, sure, plan.sure_params, total)
            unknown, known = pc.count(cat, plan, few), pc.count(cat, plan, doubtful)
    assert probed and not unasked and unknown is None
    assert known == by_hand(files, _overlap(BOX), NEWEST, SHAPES["bbox"][3])[1]


def test_a_polygons_page_reads_its_candidates_once_and_its_count_stops_early(make_settings, sources):
    """A polygon's first page reads enough candidates for the footprint test to fill it in one
    query (about twice what its share of its bbox keeps: a thin diagonal band, a fiftieth), and its count, with more candidates
    than it may test, stops at the bbox columns without reading a footprint; page and count
    equal DuckDB's by hand with shapely on the footprints."""
    from stac_gdal_mcp.discovery import parquet_count as pc
    from stac_gdal_mcp.discovery import parquet_search as ps
    from stac_gdal_mcp.discovery.query import check_search

    band = {"type": "Polygon", "coordinates": [[[-125, 25], [-124, 25], [-70, 50], [-71, 50], [-125, 25]]]}
    path, files = sources["wide file"]
    answer = by_hand(files, _overlap(shape(band).bounds), NEWEST, shape(band))[0]
    matched = by_hand(files, _overlap(shape(TRIANGLE).bounds), NEWEST, shape(TRIANGLE))[1]
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        cat = session.core.catalogs.get("gp")
        asked: list[str] = []
        run = cat.run

        def recorded(sql, params=None, late=False):
            asked.append(sql)
            return run(sql, params, late)

        cat.run = recorded
        page = session.search(catalog="gp", limit=PAGE, fields=["id"], intersects=band)
        assert len(page.items) == PAGE and [i.id for i in page.items] == answer[:PAGE]
        assert sum(ps.FOOTPRINT in sql for sql in asked) == 1
        asked.clear()
        with cat.pinned():
            plan = ps.make_plan(cat, check_search(intersects=TRIANGLE))
            assert pc.count(cat, plan, matched // 2) is None
            assert not any("geometry" in sql for sql in asked)
            assert pc.count(cat, plan, pc.EXACT_COUNT_MAX) == matched
