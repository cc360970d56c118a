"""Part names with glob characters read as the names they are: the project lists a snapshot's
parts itself and hands DuckDB literal paths, so hive folders `collection=[ab]` beside
`collection=a`, `collection=q?` beside `collection=qz` and a Planetary Computer folder
`s2*.parquet` beside `s2x.parquet` (in a folder `snap[1]?`) each give every item once, and counts
are right.

Expected answers are computed from the rows written, not from the catalog.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import real_snapshots as rs

from stac_gdal_mcp import Session


@pytest.fixture(scope="module")
def base():
    """The real items as one Arrow table, and the collection each name stands for."""
    items = rs.real_items()
    return rs.table(items)


def _write_as(tbl: pa.Table, collection: str, path) -> list[str]:
    """`tbl`'s rows with `collection` as their collection and ids prefixed by it, at `path`."""
    n = tbl.num_rows
    ids = [f"{collection}/{i}" for i in tbl.column("id").to_pylist()]
    renamed = tbl.set_column(
        tbl.schema.get_field_index("collection"), "collection", pa.array([collection] * n)
    )
    renamed = renamed.set_column(renamed.schema.get_field_index("id"), "id", pa.array(ids))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(renamed.replace_schema_metadata(tbl.schema.metadata), path)
    return ids


def _all(session: Session) -> tuple[list[str], int | None]:
    ids, cursor, matched = [], None, None
    while True:
        page = session.search(catalog="gp", limit=37, cursor=cursor)
        matched = page.matched if matched is None else matched
        ids += [i.id for i in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return ids, matched


@pytest.mark.parametrize(
    "names",
    [
        ("collection=[ab]/year=2023/part-0.parquet", "collection=a/year=2023/part-0.parquet"),
        ("collection=q?/year=2023/part-0.parquet", "collection=qz/year=2023/part-0.parquet"),
        ("s2*.parquet/part-0000_2015-01-01T00:00:00Z_2030-01-01T00:00:00Z.parquet",
         "s2x.parquet/part-0000_2015-01-01T00:00:00Z_2030-01-01T00:00:00Z.parquet"),
    ],
    ids=["hive-brackets", "hive-question-mark", "pc-star"],
)  # fmt: skip
def test_parts_named_with_glob_characters_give_each_item_once(make_settings, base, tmp_path, names):
    root = tmp_path / "snap[1]?"  # the catalog's own folder too
    half = base.num_rows // 2
    expected = {}
    for name, rows in zip(names, (base.slice(0, half), base.slice(half)), strict=True):
        collection = name.split("/")[0].removeprefix("collection=").removesuffix(".parquet")
        expected[collection] = _write_as(rows, collection, root / name)
    settings = make_settings(catalogs=[{"id": "gp", "path": str(root)}], default_catalog="gp")
    with Session(settings) as session:
        ids, matched = _all(session)
        every = sorted(i for c in expected for i in expected[c])
        assert sorted(ids) == every and len(ids) == len(set(ids))
        assert matched == len(every)
        for collection, wanted in expected.items():
            page = session.search(catalog="gp", collections=[collection], limit=500)
            assert sorted(i.id for i in page.items) == sorted(wanted), collection
            assert page.matched == len(wanted)
