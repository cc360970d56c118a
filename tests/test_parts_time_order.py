"""A search with a condition over many parts, in `datetime` order, reads first the parts whose
time spans rank first (Files.first_by_time) and keeps their rows beyond the bound every other
part lies behind; every page still equals DuckDB's own SQL over every part, walked page by page
with the cursors (the first parts holding the page, and pages past what they hold).

The rows: the real Planetary Computer items of tests/real_items, 60 copies 10 days apart (2,760
rows), with
`datetime` only (start_datetime and end_datetime dropped, a missing datetime taken from
start_datetime: the time order is then that of one column), in Planetary Computer parts and in
hive folders.
"""

from __future__ import annotations

from datetime import UTC, timedelta

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import real_snapshots as rs
import shapely
from shapely.geometry import shape

from stac_gdal_mcp import Session

NEWEST = "ORDER BY datetime DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST"
OLDEST = "ORDER BY datetime ASC NULLS LAST, collection ASC NULLS LAST, id ASC NULLS LAST"
BOX = [-115.0, 30.0, -100.0, 45.0]
TRIANGLE = {
    "type": "Polygon",
    "coordinates": [[[-125.0, 25.0], [-70.0, 25.0], [-100.0, 50.0], [-125.0, 25.0]]],
}
OVERLAP = "bbox.xmin <= {} AND bbox.xmax >= {} AND bbox.ymin <= {} AND bbox.ymax >= {}"
LIMIT, PAGES = 3, 8
SHAPES = {  # name -> (search arguments, WHERE, ORDER BY, footprint test)
    "bbox": ({"bbox": BOX}, OVERLAP.format(BOX[2], BOX[0], BOX[3], BOX[1]), NEWEST, None),
    "triangle": (
        {"intersects": TRIANGLE},
        OVERLAP.format(-70.0, -125.0, 50.0, 25.0),
        NEWEST,
        shape(TRIANGLE),
    ),
    "filter": ({"filter": '"eo:cloud_cover" < 20'}, '"eo:cloud_cover" < 20', NEWEST, None),
    "rare filter": ({"filter": '"eo:cloud_cover" < 0.05'}, '"eo:cloud_cover" < 0.05', NEWEST, None),
    "oldest first": (
        {"filter": '"eo:cloud_cover" < 20', "sortby": "datetime"},
        '"eo:cloud_cover" < 20',
        OLDEST,
        None,
    ),
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    items = rs.real_items()
    tbl = rs.table(rs.copies(items, 1))
    when = pc.coalesce(tbl["datetime"], tbl["start_datetime"])
    tbl = tbl.set_column(tbl.schema.get_field_index("datetime"), "datetime", when)
    tbl = rs.by_time(_spread(tbl.drop_columns(["start_datetime", "end_datetime"]), 60), "collection")
    root = tmp_path_factory.mktemp("time-order")
    described = rs.collections(items)
    return {
        "pc parts": (root / "pc", rs.write_pc_layout(tbl, root / "pc", 1, described)),
        "hive": (root / "hive", rs.write_hive_layout(tbl, root / "hive", described)),
    }


def _spread(tbl, n: int):
    """n copies of the rows, copy r with ids `<id>-r<r>` and datetimes 10 r days later (a part
    a month: about 20 parts a collection)."""
    import pyarrow as pa

    copies = []
    for r in range(n):
        when = pc.add(tbl["datetime"], pa.scalar(timedelta(days=10 * r), pa.duration("us")))
        copy = tbl.set_column(
            tbl.schema.get_field_index("datetime"), "datetime", when.cast(tbl["datetime"].type)
        )
        ids = pc.binary_join_element_wise(tbl["id"], f"-r{r}", "")
        copies.append(copy.set_column(copy.schema.get_field_index("id"), "id", ids))
    return pa.concat_tables(copies)


def by_hand(files, where: str, order: str, area) -> list[str]:
    listed = ", ".join(f"'{f}'" for f in files)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rows = con.sql(
        f"SELECT id, geometry FROM read_parquet([{listed}], union_by_name = true) WHERE {where} {order}"
    ).fetchall()
    if area is not None:
        hits = shapely.intersects(shapely.from_wkb([r[1] for r in rows]), area)
        rows = [r for r, hit in zip(rows, hits, strict=True) if hit]
    return [r[0] for r in rows]


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_each_page_in_time_order_answers_as_duckdb_by_hand(make_settings, sources, layout, name):
    path, files = sources[layout]
    args, where, order, area = SHAPES[name]
    expected = by_hand(files, where, order, area)
    assert len(files) > 20 and expected  # many parts, and something to compare
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    pages, cursor = [], None
    with Session(settings) as session:
        for _ in range(PAGES):
            page = session.search(catalog="gp", limit=LIMIT, fields=["id"], cursor=cursor, **args)
            pages += [i.id for i in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert page.matched == len(expected)
    assert pages == expected[: LIMIT * PAGES]


@pytest.mark.parametrize("descending", [True, False])
def test_the_parts_read_first_hold_every_row_beyond_the_bound(make_settings, sources, descending):
    """The parts taken first are fewer than all, and every row of the parts left lies at or behind
    the bound (read here from the rows themselves, not the footers)."""
    path, files = sources["pc parts"]
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        found = session.core.catalogs.get("gp").files.first_by_time(None, 200, descending)
    assert found is not None
    taken, bound = found
    assert 0 < len(taken) < len(files)
    beyond = 0
    for f in files:
        when = [w.astimezone(UTC) for w in pq.read_table(f, columns=["datetime"])["datetime"].to_pylist()]
        if str(f) not in taken:
            assert all((w <= bound) if descending else (w >= bound) for w in when), f
        else:
            beyond += sum(1 for w in when if (w > bound if descending else w < bound))
    assert beyond > 0
