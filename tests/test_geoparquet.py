"""stac-geoparquet catalogs: the same items in the test bed's pgstac and in a Parquet
file written by the stac-geoparquet library answer every search identically through the
library (`Session.search`): the same ids in the same order, the same `matched`, and paging at
limits 1, 7 and 50 without gaps or repeats. pgstac is the reference, not our code.

The tests without `pgstac_api` (the error cases, folders and globs, the exactness of footprint
tests against shapely) run in the fast lane.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import discovery_data as data
import pytest

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import CollectionNotFound, InvalidFilter, LimitExceeded, StacGdalMcpError

S2, LS = "gp-s2", "gp-ls"  # our own collection ids: other modules load theirs into the same pgstac
BOTH = [S2, LS]


def _items() -> tuple[list[dict], list[dict]]:
    """discovery_data's items under this module's collection ids."""
    collections, items = data.build(seed=21)
    rename = {data.S2: S2, data.LS: LS}
    collections = copy.deepcopy(collections)
    for collection in collections:
        collection["id"] = rename[collection["id"]]
    items = copy.deepcopy(items)
    for item in items:
        item["collection"] = rename[item["collection"]]
        item["links"] = [
            link for link in item.get("links", []) if link.get("rel") not in ("collection", "parent")
        ]
    return collections, items


def write_parquet(items: list[dict], path, collections: list[dict] | None = None):
    from stac_geoparquet.arrow import parse_stac_items_to_arrow, to_parquet

    to_parquet(
        parse_stac_items_to_arrow(items),
        path,
        collections={c["id"]: c for c in collections or []} or None,
    )
    return path


@pytest.fixture(scope="module")
def stac_items():
    return _items()


@pytest.fixture(scope="module")
def parquet(stac_items, tmp_path_factory):
    collections, items = stac_items
    return write_parquet(items, tmp_path_factory.mktemp("gp") / "items.parquet", collections)


@pytest.fixture(scope="module")
def loaded(pgstac_api, stac_items):
    pgstac_api.load(*stac_items)
    return pgstac_api


@pytest.fixture
def session(make_settings, loaded, parquet):
    settings = make_settings(
        catalogs=[{"id": "api", "url": loaded.url}, {"id": "gp", "path": str(parquet)}], default_catalog="api"
    )
    with Session(settings) as s:
        yield s


@pytest.fixture
def local_session(make_settings, parquet):
    with Session(make_settings(catalogs=[{"id": "gp", "path": str(parquet)}], default_catalog="gp")) as s:
        yield s


def pages(session: Session, catalog, limit: int, **args) -> tuple[list[str], int | None]:
    """Every id of a search, page after page, and the first page's `matched`."""
    results = session.search(catalog=catalog, limit=limit, collections=BOTH, **args)
    ids, matched = list(results.ids), results.matched
    while results.next_cursor:
        assert len(results.ids) == limit  # only the last page is short
        results = session.search(catalog=catalog, limit=limit, cursor=results.next_cursor)
        ids += results.ids
    assert len(ids) == len(set(ids)), "an item came twice"
    return ids, matched


AREA = {
    "type": "Polygon",
    "coordinates": [[[13.78, 45.95], [13.95, 46.02], [13.9, 46.2], [13.7, 46.1], [13.78, 45.95]]],
}

CASES = {
    "bbox": {"bbox": [13.80, 45.90, 14.00, 46.10]},
    "intersects": {"intersects": AREA},
    "datetime-interval": {"datetime": "2024-05-10/2024-06-15"},
    "datetime-open-start": {"datetime": "../2024-05-20T12:00:00Z"},
    "datetime-open-end": {"datetime": "2024-06-01/.."},
    "datetime-instant": {"datetime": "2024-05-06T10:01:00Z"},
    "ids": {"ids": ["S2B_T33T1_20240506", "LC09_L2SP_191028_20240517", "missing"]},
    "cql2-text": {"filter": "eo:cloud_cover < 40 AND platform = 'sentinel-2a'"},
    "cql2-json-or-not-in": {
        "filter": {
            "op": "or",
            "args": [
                {"op": "in", "args": [{"property": "platform"}, ["landsat-8", "sentinel-2b"]]},
                {"op": "not", "args": [{"op": "<", "args": [{"property": "eo:cloud_cover"}, 70]}]},
            ],
        }
    },
    "cql2-between-like": {"filter": "eo:cloud_cover BETWEEN 10 AND 60 AND id LIKE 'LC09%'"},
    "cql2-s_intersects": {
        "filter": "s_intersects(geometry, POLYGON((13.8 45.95, 13.9 45.95, 13.9 46.0, 13.8 45.95)))"
    },
    "cql2-t_intersects": {
        "filter": "t_intersects(datetime, INTERVAL('2024-05-15T00:00:00Z', '2024-05-31T00:00:00Z'))"
    },
    "query": {"query": {"eo:cloud_cover": {"lt": 50}, "platform": {"neq": "landsat-9"}}},
    "max_cloud_cover": {"max_cloud_cover": 35, "bbox": [13.6, 45.9, 13.9, 46.0]},
    "sortby-cloud-asc": {"sortby": "eo:cloud_cover"},
    "sortby-cloud-desc": {"sortby": "-eo:cloud_cover", "datetime": "2024-05-01/2024-05-31"},
    "sortby-platform-ties": {"sortby": "-platform"},  # many ties: broken by collection and id
    "sortby-id-asc": {"sortby": "id", "max_cloud_cover": 80},
    "sortby-two-keys": {"sortby": ["platform", "-datetime"]},
}


@pytest.mark.parametrize("limit", [7, 50])
@pytest.mark.parametrize("case", list(CASES))
def test_same_answers_as_pgstac(session, case, limit):
    want, want_matched = pages(session, "api", limit, **CASES[case])
    got, got_matched = pages(session, "gp", limit, **CASES[case])
    assert got == want
    assert got_matched == want_matched
    assert want or case in ("datetime-instant",), "a case that matches nothing proves little"


@pytest.mark.parametrize("case", ["bbox", "sortby-platform-ties", "cql2-s_intersects"])
def test_paging_one_item_at_a_time(session, case):
    want, _ = pages(session, "api", 50, **CASES[case])
    got, _ = pages(session, "gp", 1, **CASES[case])
    assert got == want


def test_full_items_are_the_items(session, stac_items):
    _, items = stac_items
    by_id = {i["id"]: i for i in items}
    results = session.search(catalog="gp", collections=BOTH, limit=10, detail="full", sortby="id")
    for item in results.page.items:
        original = by_id[item["id"]]
        assert item["properties"]["eo:cloud_cover"] == original["properties"]["eo:cloud_cover"]
        assert item["assets"]["red"]["href"] == original["assets"]["red"]["href"]
        assert item["bbox"] == pytest.approx(original["bbox"])
    api_item = session.get_item(S2, "S2A_T33T2_20240610", catalog="api")
    gp_item = session.get_item(S2, "S2A_T33T2_20240610", catalog="gp")
    assert gp_item["assets"] == api_item["assets"]
    from shapely.geometry import shape

    assert shape(gp_item["geometry"]).equals_exact(shape(api_item["geometry"]), 1e-9)


def test_federated_search_over_an_api_and_a_geoparquet_catalog(session):
    """Both catalogs hold the same acquisitions: the merged result is the API's, each item once,
    with its copy in the other catalog in `also_in`."""
    want, _ = pages(session, "api", 50, datetime="2024-05-01/2024-05-31")
    results = session.search(
        catalog=["api", "gp"], collections=BOTH, datetime="2024-05-01/2024-05-31", limit=100
    )
    page = results.page
    ids = [item["id"] for item in page.items]
    assert sorted(ids) == sorted(want) and len(ids) == len(set(ids))
    counts = {c.id: c for c in page.catalogs}
    assert counts["api"].matched == counts["gp"].matched == len(want)
    assert counts["api"].returned + counts["gp"].returned == len(want)
    assert counts["api"].duplicates + counts["gp"].duplicates == len(want)
    for item in page.items:
        other = {"api": "gp", "gp": "api"}[item["catalog"]]
        assert [(c["catalog"], c["id"]) for c in item["also_in"]] == [(other, item["id"])]


def test_collections_and_queryables(local_session, stac_items):
    collections, _ = stac_items
    listed = local_session.collections(catalog="gp")
    assert sorted(c.id for c in listed.collections) == sorted(BOTH)
    detail = local_session.collection(LS, catalog="gp")
    assert detail.license == collections[1]["license"]  # from the file's metadata, not implied
    queryables = {q.name: q.type for q in local_session.queryables(catalog="gp").queryables}
    assert queryables["eo:cloud_cover"] == "number"
    assert queryables["datetime"] == "datetime"
    assert queryables["platform"] == "string"
    assert "assets" not in queryables


def test_a_search_written_as_geoparquet_reads_back_everywhere(session, stac_items, tmp_path):
    """All pages of an API search (full items) streamed into a file by write_snapshot, in
    chunks smaller than the result so that differing properties are unified: stac-geoparquet,
    rustac and DuckDB read the same items back, and the file searched as a catalog answers as the
    API does."""
    import duckdb
    import pyarrow.parquet as pq
    import rustac
    from stac_geoparquet.arrow import stac_table_to_items

    from stac_gdal_mcp.catalogs.snapshot_write import write_snapshot

    def every_item():
        results = session.search(catalog="api", collections=BOTH, limit=9, detail="full", sortby="id")
        while results is not None:
            yield from results.page.items
            results = results.next()

    out = tmp_path / "saved.parquet"
    collections, _ = stac_items
    assert write_snapshot(every_item(), out, collections=collections, chunk_size=10) == len(stac_items[1])
    want, _ = pages(session, "api", 50, sortby="id")
    assert [i["id"] for i in stac_table_to_items(pq.read_table(out))] == want
    assert [i["id"] for i in rustac.read_sync(str(out))["features"]] == want
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}')").fetchall() == [(len(want),)]
    assert {p.name for p in tmp_path.iterdir()} == {"saved.parquet"}  # no parts left behind
    settings = session.settings.model_copy(
        update={
            "catalogs": [*session.settings.catalogs, type(session.settings.catalogs[0])(id="saved", path=out)]
        }
    )
    with Session(settings) as again:
        for case in ("bbox", "cql2-text", "sortby-platform-ties"):
            assert pages(again, "saved", 7, **CASES[case]) == pages(again, "api", 7, **CASES[case])
        assert again.collection(S2, catalog="saved").license == collections[0]["license"]


# --------------------------------------------------------------------------- without pgstac


def test_bbox_and_datetime_match_an_independent_computation(local_session, stac_items):
    _, items = stac_items
    bbox = [13.80, 45.90, 14.00, 46.10]
    got, matched = pages(
        local_session, "gp", 7, bbox=bbox, datetime="2024-05-10/2024-06-15", max_cloud_cover=40
    )
    want = data.expected(
        items,
        bbox=bbox,
        start=datetime(2024, 5, 10, tzinfo=UTC),
        end=datetime(2024, 6, 15, 23, 59, 59, 999999, tzinfo=UTC),
        max_cloud=40,
    )
    assert sorted(got) == sorted(want) and matched == len(want) and want


def test_a_folder_a_glob_and_a_sidecar(make_settings, stac_items, tmp_path):
    collections, items = stac_items
    folder = tmp_path / "parts"
    (folder / "2024").mkdir(parents=True)
    write_parquet([i for i in items if i["collection"] == S2], folder / "s2.parquet")
    write_parquet([i for i in items if i["collection"] == LS], folder / "2024" / "ls.parquet")
    (folder / "collections.json").write_text(json.dumps({"collections": collections}))
    whole = write_parquet(items, tmp_path / "whole.parquet")
    settings = make_settings(
        catalogs=[
            {"id": "folder", "path": str(folder)},
            {"id": "glob", "path": str(folder / "*.parquet")},
            {"id": "whole", "path": str(whole)},
        ],
        default_catalog="whole",
    )
    with Session(settings) as s:
        want, _ = pages(s, "whole", 7, sortby="eo:cloud_cover")
        assert pages(s, "folder", 7, sortby="eo:cloud_cover")[0] == want
        glob_ids = s.search(catalog="glob", limit=100, sortby="eo:cloud_cover").ids  # s2.parquet only
        assert glob_ids == [i for i in want if i.startswith("S2")]
        assert s.collection(S2, catalog="folder").license == collections[0]["license"]  # sidecar
        implied = s.collection(S2, catalog="whole")  # from the items: no metadata, no sidecar
        boxes = [i["bbox"] for i in items if i["collection"] == S2]
        west, south = min(b[0] for b in boxes), min(b[1] for b in boxes)
        east, north = max(b[2] for b in boxes), max(b[3] for b in boxes)
        assert implied.spatial_extent == [pytest.approx([west, south, east, north])]
        assert implied.temporal_extent == [
            [
                min(i["properties"]["datetime"] for i in items if i["collection"] == S2),
                max(i["properties"]["datetime"] for i in items if i["collection"] == S2),
            ]
        ]
        assert [c.kind for c in s.catalogs() if c.id in ("folder", "glob", "whole")] == ["geoparquet"] * 3


def test_a_search_lists_its_folder_once_and_sees_a_new_part(make_settings, stac_items, tmp_path, monkeypatch):
    """A page (and the count beside it) reads one version of a folder's parts: listed once, not
    at every column the SQL names; a part added after
    it is read by the next search."""
    import glob

    _, items = stac_items
    folder = tmp_path / "parts"
    folder.mkdir()
    s2 = [i for i in items if i["collection"] == S2]
    for n in range(4):
        write_parquet(s2[n::5], folder / f"part-{n}.parquet")
    listings = []
    real_glob = glob.glob
    monkeypatch.setattr(glob, "glob", lambda *a, **k: listings.append(a[0]) or real_glob(*a, **k))
    settings = make_settings(catalogs=[{"id": "folder", "path": str(folder)}], default_catalog="folder")
    with Session(settings) as s:
        s.search(limit=1)  # the footers checked
        listings.clear()
        page = s.search(
            collections=[S2], bbox=[-180, -90, 180, 90], datetime="2000-01-01T00:00:00Z/..", limit=3
        )
        assert len(listings) == 1 and page.matched == sum(len(s2[n::5]) for n in range(4))
        write_parquet(s2[4::5], folder / "part-4.parquet")
        assert s.search(collections=[S2], limit=1).matched == len(s2)


def test_parts_whose_columns_differ_in_order_are_matched_by_name(make_settings, stac_items, tmp_path):
    """Parts of one schema are read as they are (no union_by_name: DuckDB would read every part's
    schema at each query); parts whose columns come in another order are matched by name."""
    import pyarrow.parquet as pq

    _, items = stac_items
    one = write_parquet(items, tmp_path / "one.parquet")
    table = pq.read_table(one)
    for name, order in (("same", table.column_names), ("mixed", table.column_names[::-1])):
        (tmp_path / name).mkdir()
        pq.write_table(table.slice(0, 30), tmp_path / name / "a.parquet")
        pq.write_table(table.slice(30).select(order), tmp_path / name / "b.parquet")
    catalogs = [{"id": k, "path": str(tmp_path / k)} for k in ("one", "same", "mixed")]
    catalogs[0]["path"] = str(one)
    with Session(make_settings(catalogs=catalogs, default_catalog="one")) as s:
        want = s.search(limit=200, sortby="eo:cloud_cover")
        for name, uniform in (("same", True), ("mixed", False)):
            got = s.search(catalog=name, limit=200, sortby="eo:cloud_cover")
            assert got.ids == want.ids and got.matched == want.matched == len(items)
            assert s.core.catalogs.get(name).files.uniform is uniform


def test_footers_and_versions_are_read_a_few_at_a_time_in_order():
    """`in_parallel` (a snapshot's footers, a `urls` catalog's versions: a round trip each over
    HTTP): the results in the values' order, at most `workers` calls at once, and the error of
    the first failing value in order raised, as one by one would."""
    import threading
    import time

    from stac_gdal_mcp.catalogs.snapshot_files import in_parallel

    lock, running, most = threading.Lock(), [0], [0]

    def slow(n: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.002 * (n % 5))  # later values finish first within a batch
        with lock:
            running[0] -= 1
        if n in (11, 9):  # 11 fails first in time, 9 first in order (the same batch)
            raise ValueError(f"bad {n}")
        return n * n

    assert list(in_parallel(slow, list(range(9)), workers=4)) == [n * n for n in range(9)]
    assert 1 < most[0] <= 4
    with pytest.raises(ValueError, match="bad 9"):
        list(in_parallel(slow, list(range(20)), workers=4))


def _error(session: Session, **args) -> str:
    with pytest.raises(StacGdalMcpError) as caught:
        session.search(catalog="bad", **args)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture
def bad(make_settings, tmp_path):
    def make(path, **limits):
        settings = make_settings(
            catalogs=[{"id": "bad", "path": str(path)}], default_catalog="bad", limits=limits
        )
        return Session(settings)

    return make


def test_a_corrupt_or_truncated_file_is_named(bad, parquet, tmp_path):
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1" + b"\x00" * 1000)
    assert f"{garbage} is not a readable Parquet file" in _error(bad(garbage))
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(parquet.read_bytes()[: parquet.stat().st_size // 2])
    assert f"{truncated} is not a readable Parquet file" in _error(bad(truncated))


def test_a_parquet_file_that_is_not_stac_geoparquet_is_named(bad, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"name": ["a", "b"], "value": [1, 2]}), plain)
    message = _error(bad(plain))
    assert f"{plain} is not stac-geoparquet" in message and "'id'" in message


def test_a_missing_column_or_an_unsupported_operator_is_one_line(bad, parquet):
    session = bad(parquet)
    message = _error(session, filter="cloudiness < 10")
    assert "no column 'cloudiness'" in message and str(parquet) in message
    assert "no column 'nothing'" in _error(session, sortby="nothing")
    message = _error(session, filter="a_contains(instruments, ('msi'))")
    assert "'a_contains' is not supported" in message
    with pytest.raises(CollectionNotFound):
        session.search(catalog="bad", collections=["nope"])
    with pytest.raises(InvalidFilter):
        session.search(catalog="bad", filter="platform > 3")  # a string column against a number


def test_every_query_is_bounded_in_time_and_memory(bad, parquet):
    session = bad(parquet, query_timeout_s=0.3, query_memory_mb=64)
    catalog = session.core.catalogs.get("bad")
    with pytest.raises(LimitExceeded, match="query_timeout_s=0.3"):
        catalog.run("SELECT count(*) FROM range(100000000000) t(x) WHERE x % 7 = 3")
    assert session.search(catalog="bad", limit=3).ids  # the catalog still answers
    # the memory bound with time to reach it (on a loaded machine 0.3 s could come first)
    roomy = bad(parquet, query_timeout_s=300, query_memory_mb=64).core.catalogs.get("bad")
    with pytest.raises(LimitExceeded, match="query_memory_mb=64"):
        roomy.run("SELECT list(x || 'padding padding padding') FROM range(10000000) t(x)")


def test_write_snapshot_keeps_the_order_of_many_chunks(stac_items, tmp_path):
    """More than ten chunks (stac-geoparquet reads its parts back as a folder, whose names sort as
    text: 10.parquet before 2.parquet): the file holds the items in the order given, and the
    collections of the items seen when `collections` is a function of their ids."""
    import pyarrow.parquet as pq

    from stac_gdal_mcp.catalogs.snapshot_write import write_snapshot

    collections, items = stac_items
    asked = []

    def described(ids):
        asked.append(ids)
        return [c for c in collections if c["id"] in ids]

    out = tmp_path / "ordered.parquet"
    assert len(items) > 12 * 3
    assert write_snapshot(iter(items), out, collections=described, chunk_size=3) == len(items)
    assert pq.read_table(out, columns=["id"])["id"].to_pylist() == [i["id"] for i in items]
    assert asked == [list(dict.fromkeys(i["collection"] for i in items))]
    meta = json.loads(pq.read_schema(out).metadata[b"stac-geoparquet"])
    assert sorted(meta["collections"]) == sorted(c["id"] for c in collections)


def test_every_item_newest_first_reads_only_the_parts_that_hold_the_page(
    make_settings, stac_items, tmp_path, monkeypatch
):
    """The default search (every item, datetime descending) of a snapshot in parts finds each
    page among the parts whose time spans put its rows first (Files.leading), not in every part:
    the same ids in the same order as the one file and as DuckDB by hand over the parts, with
    ties in time across parts and one part spanning the whole month."""
    import duckdb

    from stac_gdal_mcp.catalogs.geoparquet import GeoparquetCatalog

    collections, items = stac_items
    broad, rest = (
        items[::7],
        sorted((i for n, i in enumerate(items) if n % 7), key=lambda i: i["properties"]["datetime"]),
    )
    (tmp_path / "parts").mkdir()
    parts = [broad] + [rest[at : at + 9] for at in range(0, len(rest), 9)]
    for n, part in enumerate(parts):
        write_parquet(part, tmp_path / "parts" / f"part-{n}.parquet", collections)
    write_parquet(items, tmp_path / "one.parquet", collections)
    catalogs = [
        {"id": "parts", "path": str(tmp_path / "parts")},
        {"id": "one", "path": str(tmp_path / "one.parquet")},
    ]
    sql: list[str] = []
    run = GeoparquetCatalog.run
    monkeypatch.setattr(
        GeoparquetCatalog, "run", lambda cat, query, *a, **k: sql.append(query) or run(cat, query, *a, **k)
    )
    with Session(make_settings(catalogs=catalogs)) as s:
        walked = {}
        for catalog in ("one", "parts"):
            results = s.search(catalog=catalog, limit=5)
            ids = list(results.ids)
            while results.next_cursor:
                results = s.search(catalog=catalog, limit=5, cursor=results.next_cursor)
                ids += results.ids
            walked[catalog] = ids
    listed = ", ".join(f"'{p}'" for p in sorted((tmp_path / "parts").glob("*.parquet")))
    by_hand = duckdb.sql(
        f"SELECT id FROM read_parquet([{listed}]) ORDER BY datetime DESC, collection DESC, id DESC"
    ).fetchall()
    assert walked["parts"] == walked["one"] == [r[0] for r in by_hand] and len(by_hand) == len(items)
    first_page = next(q for q in sql if q.startswith("SELECT filename") and "part-" in q)
    assert 1 < first_page.count("part-") < len(parts)  # the broad part and the latest ones


def test_parts_that_touch_in_time_are_both_read():
    """A part whose span only touches the next one's (the same instant at the edge) cannot rank
    first alone: an item of the other at that instant may come before it by collection and id."""
    from datetime import UTC, datetime, timedelta

    from stac_gdal_mcp.catalogs.snapshot_files import Files

    t = [datetime(2024, 5, d, tzinfo=UTC) for d in (1, 2, 3)]
    hour = timedelta(hours=1)

    def leading(a, b, needed=5, descending=True, undated=()):
        spans = {"a": a, "b": b}
        files = Files((), ["a", "b"], {}, {}, spans, rows={"a": 5, "b": 5}, undated=set(undated))
        return files.leading(needed, descending)

    assert leading((t[1], t[2]), (t[0], t[1])) is None  # touching at t[1]
    assert leading((t[1] + hour, t[2]), (t[0], t[1])) == ["a"]
    assert leading((t[1] + hour, t[2]), (t[0], t[1]), needed=6) is None  # a holds 5 rows
    assert leading((t[0], t[1]), (t[1], t[2]), descending=False) is None
    assert leading((t[0], t[1]), (t[1] + hour, t[2]), descending=False) == ["a"]
    assert leading((t[0], t[1]), (t[1] + hour, t[2]), descending=False, undated="b") is None  # ranked last
