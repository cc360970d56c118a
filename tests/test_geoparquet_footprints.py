"""The marks that let the count of a bbox search settle footprints without reading them
(discovery/footprints.py), and the searches that use them, checked against shapely and DuckDB by
hand: the marks of crafted footprints, and on the wide file of real Planetary Computer items
(tests/real_items) and a file of rectangles (the benchmark's shape) every bbox count and page
once the file is marked equal to DuckDB's bbox overlap with shapely on the footprints.
"""

from __future__ import annotations

import struct
import time

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import real_snapshots as rs
import shapely
from shapely.geometry import box

from stac_gdal_mcp import Session
from stac_gdal_mcp.discovery import footprints
from testbed import serve_directory

RANGED = "(CASE WHEN start_datetime IS NOT NULL AND end_datetime IS NOT NULL THEN start_datetime ELSE datetime END)"
NEWEST = "ORDER BY {} DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST"  # pgstac's


def _ring(points, order: str = "<") -> bytes:
    """A polygon of one ring as WKB, little-endian ('<') or big-endian ('>')."""
    head = struct.pack(f"{order}BIII", 1 if order == "<" else 0, 3, 1, len(points))
    return head + b"".join(struct.pack(f"{order}dd", x, y) for x, y in points)


CORNERS = [(0.0, 0.0), (2.0, 0.0), (2.0, 1.0), (0.0, 1.0)]
CRAFTED = [  # (WKB, the row's bbox, its marks)
    (_ring([*CORNERS, CORNERS[0]]), (0, 0, 2, 1), footprints.BOX),  # anticlockwise
    (_ring([*CORNERS[::-1], CORNERS[-1]]), (0, 0, 2, 1), footprints.BOX),  # clockwise
    (_ring([*CORNERS[2:], *CORNERS[:2], CORNERS[2]]), (0, 0, 2, 1), footprints.BOX),  # another start
    (_ring([(0, 0), (2, 1), (0, 1), (2, 0), (0, 0)]), (0, 0, 2, 1), footprints.TIGHT),  # a bow tie
    (_ring([(0, 0), (2, 0), (0, 1), (0, 0)]), (0, 0, 2, 1), footprints.TIGHT),  # a triangle
    (_ring([(0, 0), (1, 0), (2, 0), (2, 1), (0, 1), (0, 0)]), (0, 0, 2, 1), footprints.TIGHT),  # 6 points
    (_ring([*CORNERS, CORNERS[0]], ">"), (0, 0, 2, 1), footprints.TIGHT),  # big-endian
    (_ring([*CORNERS, CORNERS[0]]), (-0.5, 0, 2, 1), footprints.OTHER),  # a looser bbox
    (_ring([*CORNERS, CORNERS[0]]), (0, 0, 2, 1.0000001), footprints.OTHER),
    (_ring([(0, 0), (2, 0), (2, 0), (0, 0), (0, 0)]), (0, 0, 2, 0), footprints.TIGHT),  # no area: no box
    (None, (0, 0, 2, 1), footprints.OTHER),  # no footprint
    (b"\x01\x03\x00", (0, 0, 2, 1), footprints.OTHER),  # not WKB
    (b"x" * 93, (0, 0, 2, 1), footprints.OTHER),  # the length of a ring of five, not one
]


def test_marks_of_crafted_footprints():
    """Each footprint's mark; what BOX and TIGHT claim holds by shapely (the rectangle of the
    bbox; the bounds being the bbox)."""
    boxes = np.array([row[1] for row in CRAFTED], float)
    table = pa.table(
        {
            **{k: boxes[:, i] for i, k in enumerate(("xmin", "ymin", "xmax", "ymax"))},
            "geometry": pa.array([row[0] for row in CRAFTED], pa.binary()),
        }
    )
    codes = footprints.marked(table)
    assert codes.tolist() == [row[2] for row in CRAFTED]
    for (wkb, bounds, _), code in zip(CRAFTED, codes, strict=True):
        if code == footprints.BOX:
            assert shapely.equals(shapely.from_wkb(wkb), box(*bounds))
        if code != footprints.OTHER:
            assert shapely.bounds(shapely.from_wkb(wkb)).tolist() == list(bounds)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The real items, 60 copies each, in one wide file; 20,000 rectangles of 1 degree in one
    file (two row groups), as the benchmark's items."""
    root = tmp_path_factory.mktemp("footprints")
    items = rs.real_items()
    real = rs.write(
        rs.by_time(rs.repeated(rs.table(rs.copies(items, 1)), 60), "collection"), root / "real.parquet"
    )
    rng = np.random.default_rng(3)
    west, south = rng.uniform(-179, 178, 20_000), rng.uniform(-60, 69, 20_000)
    rectangles = pa.table(
        {
            "id": [f"r{i:05d}" for i in range(20_000)],
            "collection": ["rects"] * 20_000,
            "datetime": pa.array(np.arange(20_000) * 10**9, pa.timestamp("ns", "UTC")),
            "bbox": pa.StructArray.from_arrays(
                [pa.array(a) for a in (west, south, west + 1, south + 1)], ["xmin", "ymin", "xmax", "ymax"]
            ),
            "geometry": shapely.to_wkb(shapely.box(west, south, west + 1, south + 1)),
        }
    )
    pq.write_table(rectangles, root / "rects.parquet", row_group_size=10_000)
    return {"real": real, "rects": root / "rects.parquet"}


def _by_hand(path, bbox) -> tuple[list[str], int]:
    """The first page of 50 ids and the count of bbox: DuckDB's bbox overlap, shapely on the
    footprints."""
    w, s, e, n = bbox
    con = duckdb.connect()
    ranged = "start_datetime" in [
        r[0] for r in con.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
    ]
    rows = con.sql(
        f"SELECT id, geometry FROM read_parquet('{path}') WHERE bbox.xmin <= {e} AND bbox.xmax >= {w} "
        f"AND bbox.ymin <= {n} AND bbox.ymax >= {s} {NEWEST.format(RANGED if ranged else 'datetime')}"
    ).fetchall()
    hits = shapely.intersects(shapely.from_wkb([r[1] for r in rows]), box(*bbox))
    kept = [r[0] for r, hit in zip(rows, hits, strict=True) if hit]
    return kept[:50], len(kept)


def _marked(cat, timeout_s: float = 120.0):
    """The marks of the catalog's one file, once made (in the background)."""
    name = cat.files.sources[0]
    deadline = time.monotonic() + timeout_s
    while footprints.marks_of(cat).get(name) is None:
        assert time.monotonic() < deadline, "the file was not marked"
        time.sleep(0.05)
    return footprints.marks_of(cat).get(name)


BOXES = {
    "real": [[-115.0, 30.0, -100.0, 45.0], [146.0, -44.0, 149.0, -40.0], [-66.0, 18.0, -65.6, 18.3],
             [-180.0, 60.0, 0.0, 90.0], [14.0, 30.0, 15.0, 33.0], [-79.6, 8.95, -79.5, 9.1]],
    "rects": [[-10.0, 30.0, 40.0, 60.0], [0.5, 0.5, 1.5, 1.5], [-180.0, -90.0, 180.0, 90.0]],
}  # fmt: skip


@pytest.mark.parametrize("name", ["real", "rects"])
def test_counts_and_pages_of_a_marked_file_are_duckdbs_by_hand(make_settings, files, name):
    """Before and after the file is marked, every bbox's count and first page are DuckDB's with
    shapely; once marked, the footprints of rectangles are never read for a count."""
    from stac_gdal_mcp.discovery.parquet_count import listing
    from stac_gdal_mcp.discovery.parquet_search import make_plan
    from stac_gdal_mcp.discovery.query import check_search

    path = files[name]
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session:
        cat = session.core.catalogs.get("gp")
        for marked in (False, True):
            for bbox in BOXES[name]:
                ids, matched = _by_hand(path, bbox)
                page = session.search(limit=50, fields=["id"], bbox=bbox)
                counted = session.search(detail="count", bbox=bbox).matched
                assert ([i.id for i in page.items], page.matched, counted) == (ids, matched, matched), bbox
            if not marked:
                codes = _marked(cat)
        with cat.pinned():
            plan = make_plan(cat, check_search(bbox=BOXES[name][0]))
            settled = footprints.settle(cat, listing(cat, plan))
    marks = np.bincount(codes, minlength=3)
    if name == "rects":
        assert marks[footprints.BOX] == 20_000 and settled.left == 0 and not settled.unmarked
    else:  # the real footprints: some rectangles, some tight, some (Landsat's) neither
        assert min(marks) > 0 and not settled.unmarked


def test_a_named_collection_is_found_without_listing_the_collections(make_settings, files):
    """A search naming a collection the file holds answers without reading every row's extent
    (the collections' listing); one it does not hold is refused, naming those it has."""
    from stac_gdal_mcp.errors import CollectionNotFound

    settings = make_settings(catalogs=[{"id": "gp", "path": str(files["rects"])}], default_catalog="gp")
    with Session(settings) as session:
        cat = session.core.catalogs.get("gp")
        page = session.search(collections=["rects"], limit=5, fields=["id"])
        listed_before = cat._implied
        with pytest.raises(CollectionNotFound, match="it has: rects"):
            session.search(collections=["nosuch"], limit=5)
    assert [i.id for i in page.items] == ["r19999", "r19998", "r19997", "r19996", "r19995"]
    assert page.matched == 20_000 and listed_before is None


def test_a_marking_pass_that_fails_unexpectedly_is_said_once_and_counts_stay_exact(
    make_settings, files, monkeypatch, caplog
):
    """A marking pass that breaks (here: its read raises) leaves the file unmarked, says so once on
    the log, and the counts go on reading the footprints: DuckDB's with shapely."""

    def broken(*args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(footprints.Marks, "_codes", staticmethod(broken))
    path, bbox = files["rects"], BOXES["rects"][0]
    settings = make_settings(catalogs=[{"id": "gp", "path": str(path)}], default_catalog="gp")
    with Session(settings) as session, caplog.at_level("WARNING", logger=footprints.__name__):
        cat = session.core.catalogs.get("gp")
        for _ in range(2):
            assert session.search(detail="count", bbox=bbox).matched == _by_hand(path, bbox)[1]
            deadline = time.monotonic() + 60
            while not footprints.marks_of(cat).idle:
                assert time.monotonic() < deadline, "the marking pass never ended"
                time.sleep(0.05)
        assert footprints.marks_of(cat).get(cat.files.sources[0]) is None
    said = [r for r in caplog.records if "left unmarked" in r.getMessage()]
    assert len(said) == 1 and "disk on fire" in said[0].getMessage()


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """The real items, 60 copies each, in Planetary Computer parts and in hive folders."""
    root = tmp_path_factory.mktemp("footprint-layouts")
    return root, rs.write_layouts(root, 60)


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_counts_over_http_mark_the_parts_and_read_no_footprint_again(make_settings, layouts, layout):
    """Parts read over HTTP, the catalog keeping blocks on disk: each bbox's count equals DuckDB's
    with shapely before and after the parts are marked; those with doubtful rows are marked (their
    footprints read once, into the disk tier), and the counts after fetch no byte."""
    root, files = layouts[0], layouts[1][layout]
    with serve_directory(root, nodelay=True) as served:
        urls = [f"{served.url}/{p.relative_to(root).as_posix()}" for p in files]
        settings = make_settings(catalogs=[{"id": "gp", "urls": urls}], default_catalog="gp")
        with Session(settings) as session:
            cat = session.core.catalogs.get("gp")
            for bbox in BOXES["real"]:
                counted = session.search(detail="count", bbox=bbox).matched
                assert counted == rs.count_by_hand(files, bbox), bbox
            deadline = time.monotonic() + 120
            while not footprints.marks_of(cat).idle:
                assert time.monotonic() < deadline, "the parts were never marked"
                time.sleep(0.05)
            marked = [footprints.marks_of(cat).get(name) is not None for name in cat.files.sources]
            served.reset_stats()
            for bbox in BOXES["real"]:
                counted = session.search(detail="count", bbox=bbox).matched
                assert counted == rs.count_by_hand(files, bbox), bbox
            fetched = [r for r in served.request_log() if r[1] != "bytes=0-0"]  # not versions asked
    assert len(marked) == len(files) > 3 and sum(marked) > 3  # those a count found doubtful rows in
    assert fetched == []
