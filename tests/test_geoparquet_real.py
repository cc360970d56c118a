"""stac-geoparquet snapshots of real Planetary Computer items: all 13 collections in one
wide file (about 750 leaf columns: every collection brings its own assets with nested bands), and
the same rows partitioned in the Planetary Computer layout and in hive folders.

- 230 items (5 copies of each real item, tests/real_snapshots.py) in pgstac and in the three
  snapshots: every search gives pgstac's ids, order and `matched` at limits 1, 50, 250 and the
  server's largest page, under the default limits.query_memory_mb.
- 101,200 rows (2,200 copies): pages deep into the files at every limit are DuckDB's own answer
  to the same SQL written by hand, in a subprocess whose peak RSS stays under query_memory_mb, and
  a one-month one-collection search reads only the parts whose names allow it.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import real_snapshots as rs

from stac_gdal_mcp import Session
from stac_gdal_mcp.settings import load_settings
from testbed.rangeserver import serve_directory

PREFIX = "real-"  # our own collection ids: other modules load theirs into the same pgstac
LAYOUTS = ("one", "pc", "hive")


def _renamed(items: list[dict]) -> list[dict]:
    out = copy.deepcopy(items)
    for item in out:
        item["collection"] = PREFIX + item["collection"]
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """230 real items (5 copies), their collections, and the three snapshots of them."""
    items = rs.copies(_renamed(rs.real_items()), 5)
    described = rs.collections(items)
    tbl = rs.by_time(rs.table(items), "collection")
    root = tmp_path_factory.mktemp("real")
    rs.write(tbl, root / "one.parquet", described)
    rs.write_pc_layout(tbl, root / "pc", described=described)
    rs.write_hive_layout(tbl, root / "hive", described=described)
    return items, described, {"one": root / "one.parquet", "pc": root / "pc", "hive": root / "hive"}


@pytest.fixture(scope="module")
def loaded(pgstac_api, small):
    items, described, _ = small
    pgstac_api.load(described, items)
    return pgstac_api


@pytest.fixture(scope="module")
def session(loaded, small, tmp_path_factory):
    _, _, paths = small
    catalogs = [{"id": "api", "url": loaded.url}] + [{"id": k, "path": str(v)} for k, v in paths.items()]
    settings = load_settings(
        catalogs=catalogs,
        default_catalog="api",
        workspace=tmp_path_factory.mktemp("ws"),
        network={"allow_private_hosts": True},
    )
    with Session(settings) as s:
        yield s


def walk(session: Session, catalog: str, limit: int, pages: int | None = None, **args):
    """The ids of a search page after page (at most `pages`), and the first page's `matched`."""
    results = session.search(catalog=catalog, limit=limit, **args)
    ids, matched, n = list(results.ids), results.matched, 1
    while results.next_cursor and (pages is None or n < pages):
        assert len(results.ids) == limit
        results = session.search(catalog=catalog, limit=limit, cursor=results.next_cursor)
        ids += results.ids
        n += 1
    return ids, matched


REAL = sorted({PREFIX + i["collection"] for i in rs.real_items()})
S2, S1, NAIP = PREFIX + "sentinel-2-l2a", PREFIX + "sentinel-1-rtc", PREFIX + "naip"
CASES = {
    "everything": {},
    "one-collection-one-day": {"collections": [S2], "datetime": "2024-04-19/2024-04-19T23:59:59Z"},
    "bbox": {"bbox": [-125, 24, -66, 50]},  # the USA: NAIP, 3DEP, census, Landsat, ...
    "ranges-of-time": {"datetime": "2019-01-01/2020-12-31"},  # items with start/end_datetime
    "cloud-cover-sar-without": {"filter": "eo:cloud_cover < 30", "sortby": "eo:cloud_cover"},
    "intersects": {
        "intersects": {"type": "Polygon", "coordinates": [[[14, 30], [16, 31], [15, 34], [14, 30]]]},
        "collections": [S2, S1],
    },
    "sortby-platform": {"sortby": ["-platform", "id"]},
}


@pytest.mark.parametrize("limit", [1, 50, 250, 500])  # 500: limits.max_items, the largest page
@pytest.mark.parametrize("case", list(CASES))
def test_same_answers_as_pgstac(session, case, limit):
    pages = 3 if limit == 1 else None  # one item at a time: the first pages (the walk is proved at 50)
    args = {"collections": REAL, **CASES[case]}  # pgstac holds other modules' items too
    want, want_matched = walk(session, "api", limit, pages, **args)
    assert want, "a case that matches nothing proves little"
    for layout in LAYOUTS:
        got, got_matched = walk(session, layout, limit, pages, **args)
        assert got_matched == want_matched, layout
        diff = [(n, a, b) for n, (a, b) in enumerate(zip(got, want)) if a != b][:5]
        assert got == want, (layout, diff)


def test_real_items_read_back_whole(session, small):
    """Every item of the wide file is the item written: geometry, bbox, properties (SAR without
    eo:cloud_cover, ranges without datetime) and its own assets (they differ per collection)."""
    items, _, _ = small
    written = {i["id"]: i for i in items}
    results = session.search(catalog="one", limit=500, detail="full")
    read = list(results.full_items())
    assert len(read) == len(items)
    for item in read:
        original = written[item["id"]]
        assert item["bbox"] == pytest.approx(original["bbox"])
        assert item["geometry"]["type"] == original["geometry"]["type"]
        assert set(item["assets"]) == set(original["assets"])
        for key, asset in original["assets"].items():
            assert item["assets"][key]["href"] == asset["href"]
            assert item["assets"][key].get("raster:bands") == asset.get("raster:bands")
        assert set(item["properties"]) == set(original["properties"]) - {
            k for k, v in original["properties"].items() if v is None
        }
        assert ("eo:cloud_cover" in item["properties"]) == ("eo:cloud_cover" in original["properties"])


def test_a_page_of_100_reads_its_rows_whole_in_one_query(small, make_settings, monkeypatch):
    """Each whole-row read decodes every column of the row groups it touches, however few of its
    rows it keeps (0.3-0.45 s a row group at 750 columns): a page of 100 reads its rows in one
    query (the 20-page walk at 0.9x DuckDB, not 1.55x), a page of 150 in two (100,
    then as many as 16 MB holds); the pages are DuckDB's own answer to the SQL by hand."""
    import duckdb

    from stac_gdal_mcp.catalogs.geoparquet import GeoparquetCatalog

    _, _, paths = small
    whole = []
    real_run = GeoparquetCatalog.run
    monkeypatch.setattr(
        GeoparquetCatalog,
        "run",
        lambda cat, sql, p=None, late=False: (
            whole.append(sql.startswith("SELECT *")) or real_run(cat, sql, p, late)
        ),
    )
    when = "(CASE WHEN start_datetime IS NOT NULL AND end_datetime IS NOT NULL THEN start_datetime ELSE datetime END)"
    by_hand = duckdb.sql(
        f"SELECT id FROM read_parquet('{paths['one']}') ORDER BY {when} DESC NULLS FIRST, collection DESC, id DESC LIMIT 150"
    ).fetchall()
    settings = make_settings(catalogs=[{"id": "one", "path": str(paths["one"])}], default_catalog="one")
    with Session(settings) as s:
        s.search(limit=1)
        for limit, reads in ((100, 1), (150, 2)):
            whole.clear()
            assert s.search(limit=limit).ids == [r[0] for r in by_hand[:limit]]
            assert sum(whole) == reads, limit


def test_a_collection_named_by_its_parts_is_searched_without_reading_every_part(
    small, make_settings, monkeypatch
):
    """A search naming a collection checks it exists; where a part's name says it (Planetary
    Computer or hive layout), no item is read for that (the items' extents read every part's
    collection, bbox and datetime columns: 700 MB of a 10,000,000-item snapshot); an unknown
    collection is still refused, and the one-file catalog still reads the extents to know."""
    from stac_gdal_mcp.catalogs.geoparquet import GeoparquetCatalog
    from stac_gdal_mcp.errors import CollectionNotFound

    items, _, paths = small
    scans = []
    real = GeoparquetCatalog._implied_collections
    monkeypatch.setattr(
        GeoparquetCatalog, "_implied_collections", lambda cat, f: scans.append(cat.id) or real(cat, f)
    )
    catalogs = [{"id": k, "path": str(v)} for k, v in paths.items()]
    with Session(make_settings(catalogs=catalogs, default_catalog="pc")) as s:
        for layout in LAYOUTS:
            page = s.search(
                catalog=layout, collections=[S2], datetime="2024-04-19/2024-04-19T23:59:59Z", limit=5
            )
            want = [
                i for i in items if i["collection"] == S2 and i["properties"]["datetime"][:10] == "2024-04-19"
            ]
            assert page.matched == len(want) > 0
            with pytest.raises(CollectionNotFound):
                s.search(catalog=layout, collections=[PREFIX + "nope"], limit=1)
    assert scans == ["one", "pc", "hive"]  # the parts' names answered pc and hive until "nope"


def test_three_dimensional_bboxes(make_settings, tmp_path):
    """3DEP items have 3-D bboxes: read and searched by bbox without loss."""
    items = rs.real_items(dims=3)
    assert items
    path = rs.write(rs.table(items), tmp_path / "3d.parquet", rs.collections(items))
    with Session(make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")) as s:
        results = s.search(limit=50, detail="full", bbox=items[0]["bbox"][:2] + items[0]["bbox"][3:5])
        got = {i["id"]: i["bbox"] for i in results.page.items}
    assert got[items[0]["id"]] == pytest.approx(items[0]["bbox"])
    assert all(len(b) == 6 for b in got.values())


# --- 100,000 rows ----------------------------------------------------------------------------------

BIG_COPIES = 2_200  # x 46 real items = 101,200 rows


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """101,200 rows in the three layouts, built once (real items, copies in Arrow)."""
    items = rs.real_items()
    tbl = rs.by_time(rs.repeated(rs.table(rs.copies(items, 1)), BIG_COPIES), "collection")
    root = tmp_path_factory.mktemp("big")
    described = rs.collections(items)
    return {
        "one": [rs.write(tbl, root / "one.parquet", described)],
        "pc": rs.write_pc_layout(tbl, root / "pc", described=described),
        "hive": rs.write_hive_layout(tbl, root / "hive", described=described),
        "root": root,
    }


PROBE = """
import json, re, sys
from stac_gdal_mcp import Session
from stac_gdal_mcp.settings import load_settings
path, workspace, searches = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
settings = load_settings(catalogs=[{"id": "gp", "path": path}], default_catalog="gp", workspace=workspace)
out = []
with Session(settings) as s:
    for args in searches:
        limit, cursor_pages = args.pop("limit"), args.pop("skip", 0)
        r = s.search(limit=limit, **args)
        for _ in range(cursor_pages):
            r = s.search(limit=limit, cursor=r.next_cursor)
        out.append({"ids": list(r.ids), "matched": r.matched})
# VmHWM: this program's peak RSS (ru_maxrss would count the forked pytest process's pages)
status = open("/proc/self/status").read()
out.append(int(re.search(r"VmHWM:\\s*(\\d+) kB", status).group(1)) // 1024)
print(json.dumps(out))
"""


def _probe(path: Path, searches: list[dict], tmp_path) -> tuple[list[dict], int]:
    """Searches run in a fresh server process: their answers and its peak RSS in MB."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), str(path), str(tmp_path / "ws"), json.dumps(searches)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    *answers, rss = json.loads(done.stdout)
    return answers, rss


ORDER = "ORDER BY coalesce(datetime, start_datetime) DESC NULLS FIRST, collection DESC, id DESC"


def _by_hand(files: list[Path], where: str, params: list, limit: int, offset: int) -> tuple[list[str], int]:
    """DuckDB's own answer to the search, written by hand: ids of one page and the count."""
    import duckdb

    listed = ", ".join(f"'{f}'" for f in files)
    source = f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    ids = [
        r[0]
        for r in con.execute(
            f"SELECT id FROM {source} WHERE {where} {ORDER} LIMIT {limit} OFFSET {offset}", params
        ).fetchall()
    ]
    n = con.execute(f"SELECT count(*) FROM {source} WHERE {where}", params).fetchone()[0]
    return ids, n


@pytest.mark.parametrize("layout", LAYOUTS)
def test_100k_rows_pages_deep_in_the_files_are_duckdbs_answer_in_bounded_memory(big, layout, tmp_path):
    """Each limit, on the first page and 3 pages deep, within query_memory_mb (default 512 MB,
    the process's whole peak RSS, Python and libraries included)."""
    target = big["root"] / ("one.parquet" if layout == "one" else layout)
    if layout == "one":
        searches = [{"limit": limit, "skip": skip} for limit in (1, 50, 250, 500) for skip in (0, 3)]
    else:  # the parts: two deep pages (the one file proves every limit; each search costs time)
        searches = [{"limit": 50, "skip": 3}, {"limit": 500, "skip": 1}]
    searches.append({"limit": 100, "collections": ["naip"], "datetime": "2023-01-01/2023-01-31T23:59:59Z"})
    answers, rss = _probe(target, [dict(s) for s in searches], tmp_path)
    for search, answer in zip(searches, answers, strict=True):
        limit, offset = search["limit"], search.get("skip", 0) * search["limit"]
        where, params = "TRUE", []
        if "collections" in search:
            where = "collection = ? AND coalesce(datetime, start_datetime) <= ? AND coalesce(end_datetime, datetime) >= ?"
            params = ["naip", "2023-01-31T23:59:59Z", "2023-01-01T00:00:00Z"]
        assert (answer["ids"], answer["matched"]) == _by_hand(big[layout], where, params, limit, offset)
    assert answers[-1]["matched"] > 100
    assert rss < 512, f"peak RSS {rss} MB"


@pytest.mark.parametrize("layout", ["pc", "hive"])
def test_a_one_month_search_of_one_collection_opens_only_its_parts(big, layout, tmp_path):
    """The parts a search reads are those whose names hold the collection and the month."""
    from stac_gdal_mcp.catalogs.geoparquet import GeoparquetCatalog
    from stac_gdal_mcp.discovery import params as p

    settings = load_settings(catalogs=[{"id": "gp", "path": str(big["root"] / layout)}], workspace=tmp_path)
    catalog = GeoparquetCatalog(settings.catalog("gp"), settings)
    start, end = p.datetime_interval("2023-01-01T00:00:00Z/2023-01-31T23:59:59Z")
    read = catalog.parts(["naip"], start, end)
    parts = [str(f) for f in big[layout]]
    if layout == "pc":  # naip.parquet/part-NNNN_2023-01-01T00:00:00_2023-02-01T00:00:00.parquet
        want = [f for f in parts if "/naip.parquet/" in f and "_2023-01-01T00:00:00_" in f]
    else:
        want = [f for f in parts if "/collection=naip/year=2023/month=1/" in f]
    assert want and sorted(read) == sorted(want)
    assert len(read) < len(parts) / 10


def test_without_duckdbs_spatial_extension_footprints_are_tested_by_shapely(make_settings, small):
    """DuckDB's `spatial` extension is not installed here (it would be downloaded): the catalog
    finds that out by loading it, with downloads off and in well under a second, and keeps the
    bbox prefilter in SQL with shapely's exact test after (the answers are pgstac's, above)."""
    import duckdb

    from stac_gdal_mcp.discovery.parquet_search import make_plan
    from stac_gdal_mcp.discovery.query import check_search

    listed = "SELECT installed FROM duckdb_extensions() WHERE extension_name = 'spatial'"
    independent = duckdb.connect().execute(listed).fetchall()
    assert independent == [(False,)], "spatial is installed here: this test checks its absence"
    _, _, paths = small
    with Session(
        make_settings(catalogs=[{"id": "gp", "path": str(paths["one"])}], default_catalog="gp")
    ) as s:
        catalog = s.core.catalogs.get("gp")
        started = time.monotonic()
        assert catalog.spatial is False
        assert time.monotonic() - started < 1.0
        setting = catalog.database.execute(
            "SELECT current_setting('autoinstall_known_extensions')"
        ).fetchall()
        assert setting == [(False,)]
        plan = make_plan(catalog, check_search(bbox=[-125, 24, -66, 50]))
        assert plan.area is not None and "ST_Intersects" not in plan.where and "bbox.xmin" in plan.where


def test_parts_given_one_by_one_as_paths_or_urls(make_settings, small):
    """`paths = [...]` (folders and files) and `urls = [...]` (parts over the Range server) give
    the answers of the one file, for the collections they hold."""
    _, _, layouts = small
    folders = [layouts["pc"] / f"{S2}.parquet", layouts["pc"] / f"{S1}.parquet"]
    files = sorted(f for f in folders[1].glob("*.parquet"))
    args = {"collections": [S2, S1], "limit": 7}
    with serve_directory(layouts["pc"]) as server:
        urls = [
            f"{server.url}/{f.relative_to(layouts['pc'])}" for f in [*folders[0].glob("*.parquet"), *files]
        ]
        catalogs = [
            {"id": "one", "path": str(layouts["one"])},
            {"id": "paths", "paths": [str(folders[0]), *map(str, files)]},
            {"id": "urls", "urls": urls},
        ]
        with Session(make_settings(catalogs=catalogs, default_catalog="one")) as s:
            want = walk(s, "one", **args)
            assert want[0] and want[1] == 4 * 5 + 4 * 5  # four real items of each, five copies
            assert walk(s, "paths", **args) == want
            assert walk(s, "urls", **args) == want
