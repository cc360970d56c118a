"""Pages sorted on a property over HTTP (parquet_threshold.py: the page's query run on the
candidates within the threshold, over the parts that can hold them) equal DuckDB's own `ORDER BY <key>,
collection, id LIMIT n OFFSET k` written by hand over the same files, ascending and descending,
whatever the NULLs (the real items without `eo:cloud_cover`) and the ties (each value 60 times,
in every layout's parts), page after page by cursor, with the search's other conditions, and
when the ties are too many for the threshold (the bound) too. The files: the 46 real items (34
without eo:cloud_cover) 60 times (2,760 rows, every value 60 times) as one wide file, PC parts
and hive folders (test_geoparquet_shapes.py's), served by the test bed's Range server.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import test_geoparquet_shapes
from shapely.geometry import box, shape
from test_geoparquet_shapes import (
    BOX,
    CLEAR,
    LATER,
    NORTH,
    TRIANGLE,
    WHEN,
    _overlap,
)
from test_parts_time_order import by_hand

from stac_gdal_mcp import Session
from stac_gdal_mcp.catalogs.geoparquet import GeoparquetCatalog
from stac_gdal_mcp.discovery import parquet_threshold
from testbed import serve_directory

KEY = '"eo:cloud_cover"'
UP = f"ORDER BY {KEY} ASC NULLS LAST, collection ASC NULLS LAST, id ASC NULLS LAST"
DOWN = f"ORDER BY {KEY} DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST"
sources = test_geoparquet_shapes.sources  # the fixture: the wide file, PC parts, hive folders
PLATFORM = "ORDER BY platform DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST"


@pytest.fixture(scope="module")
def served(sources):
    """The Range server over the folder of the three layouts."""
    with serve_directory(sources["wide file"][0].parent) as server:
        server.root = sources["wide file"][0].parent
        yield server


def over_http(served, files) -> dict:
    """The catalog of `files` by their URLs on the Range server."""
    return {"id": "gp", "urls": [f"{served.url}/{f.relative_to(served.root).as_posix()}" for f in files]}


def page_by_hand(files, order: str, offset: int, limit: int) -> list[str]:
    """One page, as `LIMIT limit OFFSET offset` in DuckDB."""
    listed = ", ".join(f"'{f}'" for f in files)
    rows = duckdb.sql(
        f"SELECT id FROM read_parquet([{listed}], union_by_name = true) {order} LIMIT {limit} OFFSET {offset}"
    ).fetchall()
    return [r[0] for r in rows]


def walk(session, limit: int, **args) -> list[list[str]]:
    """Every page of a search, by cursor."""
    pages, cursor = [], None
    while True:
        page = session.search(catalog="gp", limit=limit, fields=["id"], cursor=cursor, **args)
        pages.append([i.id for i in page.items])
        cursor = page.next_cursor
        if cursor is None:
            return pages


@pytest.fixture
def queries(monkeypatch):
    """The SQL of every query the catalogs run, in order."""
    seen: list[str] = []
    run = GeoparquetCatalog.run

    def recorded(self, sql, params=None, late=False):
        seen.append(sql)
        return run(self, sql, params, late)

    monkeypatch.setattr(GeoparquetCatalog, "run", recorded)
    return seen


@pytest.mark.parametrize("layout", ["wide file", "pc parts", "hive"])
@pytest.mark.parametrize(("sortby", "order"), [("eo:cloud_cover", UP), ("-eo:cloud_cover", DOWN)])
def test_every_page_by_cursor_is_duckdbs_offset_page(make_settings, sources, served, layout, sortby, order):
    """A walk through every page (19 of 150: the values, the ties, then the NULLs ascending;
    the NULLs first descending) answers DuckDB's `LIMIT 150 OFFSET k` pages, and the pages
    with a value as threshold are read within it."""
    files = sources[layout][1]
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    with Session(settings) as session:
        pages = walk(session, 150, sortby=sortby)
    assert len(pages) == 19
    for k, ids in enumerate(pages):
        assert ids == page_by_hand(files, order, 150 * k, 150), f"page {k}"


@pytest.mark.parametrize("layout", ["wide file", "pc parts", "hive"])
@pytest.mark.parametrize(
    ("name", "args", "where", "order", "area"),
    [
        ("bbox", {"bbox": BOX}, _overlap(BOX), UP, box(*BOX)),
        ("intersects", {"intersects": TRIANGLE}, _overlap(shape(TRIANGLE).bounds), DOWN, shape(TRIANGLE)),
        ("datetime", {"datetime": LATER[0]}, WHEN.replace("2021-06-01", "2013-01-01").replace(
            "2022-06-30", "2024-12-31"), UP, None),
        ("filter", {"filter": CLEAR}, CLEAR, DOWN, None),
        ("all", {"bbox": NORTH, "datetime": LATER[0], "filter": CLEAR}, f"{_overlap(NORTH)} AND {CLEAR}", UP, None),
        ("a residual", {"filter": {"op": "and", "args": [
            {"op": "s_intersects", "args": [{"property": "geometry"}, TRIANGLE]},
            {"op": ">=", "args": [{"property": "eo:cloud_cover"}, 0]}]}},
         f"{_overlap(shape(TRIANGLE).bounds)} AND {KEY} >= 0", DOWN, shape(TRIANGLE)),
    ],
)  # fmt: skip
def test_sorted_pages_with_the_searchs_other_conditions(
    make_settings, sources, served, layout, name, args, where, order, area
):
    """bbox (footprints tested after), a polygon, a datetime, a CQL2 filter, all together, a CQL2
    residual (tested on the items): the first page and the pages after it by cursor are DuckDB's
    by hand, in the order of the cloud cover."""
    files = sources[layout][1]
    expected = by_hand(files, where, order, area)
    assert len(expected) > 20
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    sortby = "eo:cloud_cover" if order == UP else "-eo:cloud_cover"
    with Session(settings) as session:
        pages = walk(session, 20, sortby=sortby, **args)
    assert [i for p in pages for i in p] == expected
    assert all(len(p) == 20 for p in pages[:-1])


def part_values(files) -> tuple[dict, dict, set, list]:
    """Each part's least and greatest cloud cover and the parts holding a NULL, computed from
    their rows; and every value, sorted."""
    low, high, nulls, values = {}, {}, set(), []
    for f in files:
        names = pq.read_schema(f).names
        column = (
            pq.read_table(f, columns=["eo:cloud_cover"])["eo:cloud_cover"] if KEY[1:-1] in names else None
        )
        if column is None or column.null_count:
            nulls.add(f)
        if column is not None and column.null_count < len(column):
            low[f], high[f] = pc.min(column).as_py(), pc.max(column).as_py()
            values += [v for v in column.to_pylist() if v is not None]
    return low, high, nulls, sorted(values)


def opened(served, session, sql: str) -> set[Path]:
    """The files a query's read_parquet lists, as paths under the served folder (a part's local
    copy, catalogs/local_copies.py, is named as the part it copies: `<folder>/<n>.parquet`)."""
    import re

    cat = session.core.catalogs.get("gp")
    named = dict(zip(cat.files.sources, cat.files.paths, strict=True))  # the URL of each
    listed = [p.strip().strip("'") for p in re.search(r"read_parquet\(\[(.*?)\]", sql).group(1).split(",")]
    sources = [p if p.startswith("stacgp://") else f"stacgp://{Path(p).name}" for p in listed]
    return {served.root / named[p][len(served.url) + 1 :] for p in sources}


def count_by_hand(files, where: str) -> int:
    listed = ", ".join(f"'{f}'" for f in files)
    return duckdb.sql(
        f"SELECT count(*) FROM read_parquet([{listed}], union_by_name = true) WHERE {where}"
    ).fetchall()[0][0]


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_the_page_reads_only_the_parts_that_can_hold_a_value_within_the_threshold(
    make_settings, sources, served, queries, layout
):
    """With a condition the parts' footers cannot tell every row of a part meets (`id like
    '%'`), the threshold is found by its query: ascending, the page's query runs within the
    50th value and opens only the parts whose smallest cloud cover (computed here from each
    part's rows) is at most it; descending past the NULLs, only the parts holding a NULL or a
    value at least the threshold. Both pages are DuckDB's."""
    files = sources[layout][1]
    low, high, nulls, values = part_values(files)
    offset = sum(pq.read_metadata(f).num_rows for f in files) - len(values)  # the NULLs, first descending
    within_up = {f for f, v in low.items() if v <= values[49]}
    within_down = nulls | {f for f, v in high.items() if v >= values[-50]}
    assert 0 < len(within_up) < len(files) and len(within_down) < len(files)
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    every = {"filter": {"op": "like", "args": [{"property": "id"}, "%"]}}
    with Session(settings) as session:
        queries.clear()
        up = session.search(catalog="gp", limit=50, fields=["id"], sortby="eo:cloud_cover", **every)
        opened_up = opened(served, session, _page_query(queries, "<= ?"))
        thresholds = [q for q in queries if "LIMIT 1 OFFSET" in q]
        before = session.search(
            catalog="gp", limit=offset // 5, fields=["id"], sortby="-eo:cloud_cover", **every
        )
        for _ in range(4):
            before = session.search(catalog="gp", limit=offset // 5, cursor=before.next_cursor)
        queries.clear()
        down = session.search(catalog="gp", limit=50, cursor=before.next_cursor)
        opened_down = opened(served, session, _page_query(queries, ">= ?"))
    assert offset % 5 == 0 and [i.id for i in up.items] == page_by_hand(files, UP, 0, 50)
    assert [i.id for i in down.items] == page_by_hand(files, DOWN, offset, 50)
    assert len(thresholds) == 1 and opened_up == within_up and opened_down == within_down


def _page_query(queries: list[str], within: str) -> str:
    """The page's query (the one within the bound, ordered)."""
    chosen = [q for q in queries if within in q and "ORDER BY" in q and "LIMIT 1 OFFSET" not in q]
    assert len(chosen) == 1, chosen
    return chosen[0]


@pytest.fixture
def calls(monkeypatch):
    """(SQL, parameters) of every query the catalogs run, in order."""
    seen: list[tuple[str, list]] = []
    run = GeoparquetCatalog.run

    def recorded(self, sql, params=None, late=False):
        seen.append((sql, list(params or [])))
        return run(self, sql, params, late)

    monkeypatch.setattr(GeoparquetCatalog, "run", recorded)
    return seen


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
@pytest.mark.parametrize(
    ("sortby", "offset", "within", "holds"),
    [
        ("eo:cloud_cover", 0, "<= ?", lambda value, bound: value <= bound),
        ("-eo:cloud_cover", 0, "IS NULL", None),  # the NULLs first: parts of NULLs bound it
        ("-eo:cloud_cover", 2040, ">= ?", lambda value, bound: value >= bound),  # past the NULLs
    ],
)
def test_the_parts_statistics_bound_the_page_without_the_threshold_query(
    make_settings, sources, served, calls, layout, sortby, offset, within, holds
):
    """Sorted on a property with no condition, the page's first key is bounded from the parts'
    footers (each part's least value is one of its rows; a part of NULLs ranks first
    descending): one query, the page's, within a bound that holds at least offset + 50 rows
    (counted here by DuckDB), over only the parts that can hold a row within it (computed here
    from their rows) - no query finds the threshold over every part. The page is DuckDB's."""
    files = sources[layout][1]
    low, high, nulls, values = part_values(files)
    assert offset in (0, sum(pq.read_metadata(f).num_rows for f in files) - len(values))
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    with Session(settings) as session:
        session.search(catalog="gp", limit=1, fields=["id"])  # the files checked first
        cursor = None
        for _ in range(5 if offset else 0):  # to the first value past the NULLs, 408 at a time
            cursor = session.search(
                catalog="gp", limit=offset // 5, fields=["id"], sortby=sortby, cursor=cursor
            ).next_cursor
        calls.clear()
        page = session.search(catalog="gp", limit=50, fields=["id"], sortby=sortby, cursor=cursor)
        (sql, params), *rest = [c for c in calls if "ORDER BY" in c[0]]
        chosen = opened(served, session, sql)
    order = UP if sortby == "eo:cloud_cover" else DOWN
    assert [i.id for i in page.items] == page_by_hand(files, order, offset, 50)
    assert within in sql and rest == [] and not any("OFFSET" in c[0] and "LIMIT 1" in c[0] for c in calls)
    if holds is None:  # within NULL: the parts holding one
        assert chosen == nulls and count_by_hand(files, f"{KEY} IS NULL") >= offset + 50
        return
    tied = '"collection"' in sql  # the ties at the bound taken up to a collection
    bound, last = (params[-3], params[-1]) if tied else (params[-1], None)

    def within(f) -> bool:  # a part that can hold a row within (bound, last)
        near = high[f] if order == DOWN else low[f]
        if not holds(near, bound):
            return False
        past = (named(f) < last) if order == DOWN else (named(f) > last)
        return last is None or near != bound or not past or (order == DOWN and f in nulls)

    expected = {f for f in low if within(f)}
    if order == DOWN:  # every part that may hold a NULL, ranked first
        expected |= nulls
        ties = f" AND ({KEY} > {bound} OR collection >= '{last}')" if tied else ""
        assert count_by_hand(files, f"{KEY} IS NULL OR ({KEY} >= {bound}{ties})") >= offset + 50
    else:
        ties = f" AND ({KEY} < {bound} OR collection <= '{last}')" if tied else ""
        assert count_by_hand(files, f"{KEY} <= {bound}{ties}") >= offset + 50
    assert chosen == expected and len(chosen) < len(files)


def named(f: Path) -> str:
    """The collection a part's folder names: `collection=<c>` (hive) or `<c>.parquet` (PC)."""
    folder = next(p for p in f.parts if p.startswith("collection=") or p.endswith(".parquet"))
    return folder.removeprefix("collection=").removesuffix(".parquet")


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_a_loose_bound_and_ties_are_read_within_the_threshold(
    make_settings, sources, served, queries, monkeypatch, layout
):
    """When the parts' bound would hold more than EXCESS_MAX rows past the page (here 0: the
    parts' values taken as spread evenly, 341 rows for a page of 50), the threshold is found by
    its query, and the page read within it though 180 candidates tie with it (0.0) - DuckDB's
    all the same; `platform`, a key of few values without statistics, too."""
    files = sources[layout][1]
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    monkeypatch.setattr(parquet_threshold, "EXCESS_MAX", 0)
    with Session(settings) as session:
        queries.clear()
        page = session.search(catalog="gp", limit=50, fields=["id"], sortby="eo:cloud_cover")
        thresholds = [q for q in queries if "LIMIT 1 OFFSET" in q]
        within = _page_query(queries, "<= ?")
        platforms = walk(session, 400, sortby="-platform")
    assert len(thresholds) == 1 and '"eo:cloud_cover" <= ?' in within
    assert [i.id for i in page.items] == page_by_hand(files, UP, 0, 50)
    assert count_by_hand(files, f"{KEY} = 0") == 180
    assert [i for p in platforms for i in p] == by_hand(files, "TRUE", PLATFORM, None)


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_a_search_of_one_part_is_one_query(make_settings, sources, served, queries, layout):
    """A search whose parts are one (a collection of one part): no part to leave out, so no
    bound and no threshold - the page's query alone. DuckDB's page."""
    files = sources[layout][1]
    one = [f for f in files if "landsat-c2-l1" in str(f)]
    assert len(one) == 1
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    with Session(settings) as session:
        session.search(catalog="gp", limit=1, fields=["id"])  # the files checked first
        queries.clear()
        page = session.search(
            catalog="gp", limit=50, fields=["id"], sortby="eo:cloud_cover", collections=["landsat-c2-l1"]
        )
    ordered = [q for q in queries if "ORDER BY" in q]
    assert len(ordered) == 1 and "<= ?" not in ordered[0]
    assert [i.id for i in page.items] == page_by_hand(one, UP, 0, 50)


def served_values(folder: Path, draw) -> tuple[list[str], dict]:
    """The real items 60 times with cloud covers `draw(collection, names)` each, in PC parts and
    hive folders under `folder`: the collections' names, and the layouts' files."""
    import pyarrow as pa
    import real_snapshots as rs

    items = rs.real_items()
    tbl = rs.by_time(rs.repeated(rs.table(rs.copies(items, 1)), 60), "collection")
    names = sorted(set(tbl["collection"].to_pylist()))
    values = pa.array([draw(c, names) for c in tbl["collection"].to_pylist()], pa.float64())
    tbl = tbl.set_column(tbl.schema.get_field_index("eo:cloud_cover"), "eo:cloud_cover", values)
    described = rs.collections(items)
    return names, {
        "pc parts": rs.write_pc_layout(tbl, folder / "pc", 1, described),
        "hive": rs.write_hive_layout(tbl, folder / "hive", described),
    }


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Cloud covers drawn per collection (seeded): a collection's values all NULL, few integers
    tied, some NULL, or tenths in a narrow span - parts whose [min, max] overlap, ties across
    parts - in hive folders and PC parts, served."""
    import random

    rng = random.Random(7)

    def drawn(collection: str, names: list[str]):
        kind = names.index(collection) % 4
        if kind == 0 or (kind == 2 and rng.random() < 0.3):
            return None
        if kind == 1:
            return float(rng.randint(names.index(collection), names.index(collection) + 6))
        if kind == 2:
            return float(rng.randint(0, 10))
        return round(rng.uniform(4.0, 6.0), 1)

    root = tmp_path_factory.mktemp("mixed")
    _, layouts = served_values(root, drawn)
    with serve_directory(root) as server:
        server.root = root
        yield server, layouts


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
@pytest.mark.parametrize(
    ("args", "where"),
    [
        ({}, "TRUE"),
        ({"filter": {"op": ">=", "args": [{"property": "eo:cloud_cover"}, 5]}}, f"{KEY} >= 5"),
        ({"collections": ["landsat-c2-l2", "sentinel-2-l2a", "naip"]},
         "collection IN ('landsat-c2-l2', 'sentinel-2-l2a', 'naip')"),
        ({"filter": {"op": "like", "args": [{"property": "id"}, "%r1%"]}}, "id LIKE '%r1%'"),
    ],
)  # fmt: skip
def test_pages_over_overlapping_parts_are_duckdbs(make_settings, mixed, calls, layout, args, where):
    """Every page, ascending and descending, by cursor, of parts whose values overlap, tie
    across parts and hold NULLs (some all NULL): DuckDB's `ORDER BY ... LIMIT OFFSET` pages of
    the same condition, whether the parts' footers bound the page or its threshold does (both
    taken in a walk, but for a condition the footers cannot tell a part's every row meets)."""
    served, layouts = mixed
    files = layouts[layout]
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    with Session(settings) as session:
        found = {order: walk(session, 200, sortby=sortby, **args) for sortby, order in (
            ("eo:cloud_cover", UP), ("-eo:cloud_cover", DOWN))}  # fmt: skip
    for order, pages in found.items():
        expected = by_hand(files, where, order, None)
        assert [i for p in pages for i in p] == expected and len(expected) > 200
        assert all(len(p) == 200 for p in pages[:-1])
    thresholds = [sql for sql, _ in calls if "LIMIT 1 OFFSET" in sql]
    bounded = [sql for sql, _ in calls if "ORDER BY" in sql and "LIMIT 1 OFFSET" not in sql and "?" in sql]
    if "LIKE" in where:  # no part's footer tells every row meets it: the threshold's query each page
        assert len(bounded) == len(thresholds) > 0
    else:
        assert thresholds and len(bounded) > len(thresholds)


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_on_disk_the_footers_bound_the_page_and_no_threshold_is_sought(
    make_settings, sources, queries, layout
):
    """On disk, too, a page the parts' footers bound is one query within the bound; with a
    condition the footers cannot tell a part's every row meets, the page is read in the whole
    order (on disk the threshold's query costs more than it saves). Both pages DuckDB's."""
    path, files = sources[layout]
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    every = {"filter": {"op": "like", "args": [{"property": "id"}, "%"]}}
    with Session(settings) as session:
        session.search(catalog="gp", limit=1, fields=["id"])  # the files checked first
        queries.clear()
        up = session.search(catalog="gp", limit=50, fields=["id"], sortby="eo:cloud_cover")
        bounded = [q for q in queries if "ORDER BY" in q]
        queries.clear()
        down = session.search(catalog="gp", limit=50, fields=["id"], sortby="-eo:cloud_cover", **every)
        whole = [q for q in queries if "ORDER BY" in q]
    assert len(bounded) == 1 and f"{KEY} <= ?" in bounded[0]
    assert len(whole) == 1 and f"{KEY} >= ?" not in whole[0] and f"{KEY} IS NULL" not in whole[0]
    assert [i.id for i in up.items] == page_by_hand(files, UP, 0, 50)
    assert [i.id for i in down.items] == page_by_hand(files, DOWN, 0, 50)


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    """Every collection's cloud covers 0-3 (seeded), no NULL: every part's least value 0, its
    greatest 3 - the ties at a bound span the parts of every collection. Served."""
    import random

    rng = random.Random(11)
    root = tmp_path_factory.mktemp("tied")
    names, layouts = served_values(root, lambda c, names: float(rng.randint(0, 3)))
    with serve_directory(root) as server:
        server.root = root
        yield server, names, layouts


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
@pytest.mark.parametrize(("sortby", "order"), [("eo:cloud_cover", UP), ("-eo:cloud_cover", DOWN)])
def test_ties_at_the_bound_open_only_the_collections_that_rank_first(
    make_settings, tied, calls, layout, sortby, order
):
    """The order goes on with the collection: with every part's least (greatest descending)
    value the same, a page of 4 needs 5 rows and is bounded at that value within the collection
    of the 5th part in the order by the parts' names - its query opens only the parts of those
    collections (computed here from the folders' names), not every part. DuckDB's pages, that
    one and every page after it."""
    served, names, layouts = tied
    files = layouts[layout]
    first = {named(f) for f in sorted(files, key=named, reverse=order == DOWN)[:5]}  # the 5 first parts'
    settings = make_settings(catalogs=[over_http(served, files)], default_catalog="gp")
    with Session(settings) as session:
        session.search(catalog="gp", limit=1, fields=["id"])  # the files checked first
        calls.clear()
        page = session.search(catalog="gp", limit=4, fields=["id"], sortby=sortby)
        (sql, _), *rest = [c for c in calls if "ORDER BY" in c[0]]
        chosen = opened(served, session, sql)
        pages = walk(session, 300, sortby=sortby)
    assert rest == [] and '"collection"' in sql
    assert chosen == {f for f in files if named(f) in first} and len(chosen) < len(files)
    assert [i.id for i in page.items] == page_by_hand(files, order, 0, 4)
    assert [i for p in pages for i in p] == by_hand(files, "TRUE", order, None)
