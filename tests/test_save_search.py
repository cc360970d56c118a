"""Results to take away: `save_search` (the MCP tool and `Session.save_search`) writes
every item of a search into the workspace, and the file reads back - by stac-geoparquet, rustac,
DuckDB and as a catalog - as the search that made it. The reference is the test bed's pgstac API,
read page by page through the library; the saved file is read by the other libraries, not ours.
"""

from __future__ import annotations

import copy
from datetime import datetime

import discovery_data as data
import pytest
from fastmcp import Client

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import OperationCancelled, StacGdalMcpError
from stac_gdal_mcp.processing.jobs import Job
from stac_gdal_mcp.server import build_server

S2, LS = "ss-s2", "ss-ls"  # this module's collection ids in the shared pgstac
BOTH = [S2, LS]
SEARCH = {"collections": BOTH, "filter": "eo:cloud_cover < 70", "sortby": "id"}
PAGE = 10  # limits.max_items: the save reads pages of 10, so a save spans several


@pytest.fixture(scope="module")
def stac_items():
    collections, items = data.build(seed=24)
    rename = {data.S2: S2, data.LS: LS}
    collections, items = copy.deepcopy(collections), copy.deepcopy(items)
    for collection in collections:
        collection["id"] = rename[collection["id"]]
    for item in items:
        item["collection"] = rename[item["collection"]]
        item["links"] = [
            link for link in item.get("links", []) if link.get("rel") not in ("collection", "parent")
        ]
    return collections, items


@pytest.fixture(scope="module")
def api(pgstac_api, stac_items):
    pgstac_api.load(*stac_items)
    return pgstac_api


@pytest.fixture
def session(make_settings, api):
    settings = make_settings(
        catalogs=[{"id": "api", "url": api.url}], default_catalog="api", limits={"max_items": PAGE}
    )
    with Session(settings) as s:
        yield s


def searched(session: Session, catalog: str, **args) -> list[dict]:
    """Every full item of a search, page after page, as the library gives them."""
    results = session.search(catalog=catalog, detail="full", limit=7, **args)
    items = []
    while results is not None:
        items += results.items
        results = results.next()
    return items


def same_items(got: list[dict], want: list[dict]) -> None:
    """The same items in the same order: ids, collections, footprints, asset hrefs, properties."""
    from shapely.geometry import shape

    assert [i["id"] for i in got] == [i["id"] for i in want]
    for a, b in zip(got, want):
        assert a["collection"] == b["collection"]
        assert shape(a["geometry"]).equals(shape(b["geometry"]))
        assert {k: v["href"] for k, v in a["assets"].items()} == {
            k: v["href"] for k, v in b["assets"].items()
        }
        for name in ("eo:cloud_cover", "platform", "proj:code"):
            assert a["properties"].get(name) == b["properties"].get(name)
        when = [
            datetime.fromisoformat(str(i["properties"]["datetime"]).replace("Z", "+00:00")) for i in (a, b)
        ]
        assert when[0] == when[1]


async def test_the_tool_saves_a_search_that_reads_back_everywhere(session, stac_items):
    import duckdb
    import pyarrow.parquet as pq
    import rustac
    from stac_geoparquet.arrow import stac_table_to_items

    progress = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with Client(build_server(session=session), progress_handler=on_progress) as client:
        result = await client.call_tool_mcp(
            "save_search", {"search": {"catalog": "api", **SEARCH}, "max_items": 1000}
        )
    assert not result.is_error, result.content
    record = result.structured_content
    want = searched(session, "api", **SEARCH)
    assert len(want) > 3 * PAGE  # the save read several pages
    assert record["properties"]["search:items"] == len(want) == record["properties"]["search:matched"]
    assert record["properties"]["search:more"] is False
    assert record["assets"]["data"]["type"] == "application/vnd.apache.parquet"
    assert [link["href"] for link in record["links"] if link["rel"] == "derived_from"] == [
        f"{session.settings.catalog('api').url}/search"
    ]
    links = [c.uri for c in result.content if c.type == "resource_link"]
    assert f"stac-gdal://outputs/{record['id']}" in [str(u) for u in links]
    assert progress and progress[-1][0] == len(want)

    path = session.outputs.path(record["id"])
    same_items(stac_table_to_items(pq.read_table(path)), want)
    same_items(rustac.read_sync(str(path))["features"], want)
    assert [r[0] for r in duckdb.sql(f"SELECT id FROM read_parquet('{path}')").fetchall()] == [
        i["id"] for i in want
    ]
    metadata = pq.read_schema(path).metadata[b"stac-geoparquet"]
    collections, _ = stac_items
    assert all(c["id"].encode() in metadata for c in collections)

    settings = session.settings.model_copy(
        update={
            "catalogs": [
                *session.settings.catalogs,
                type(session.settings.catalog("api"))(id="saved", path=path),
            ]
        }
    )
    with Session(settings) as again:
        same_items(searched(again, "saved", **SEARCH), want)
        for args in (
            {"bbox": [13.80, 45.90, 14.00, 46.10]},
            {"filter": f"{SEARCH['filter']} AND platform = 'sentinel-2a'", "sortby": "-eo:cloud_cover"},
        ):  # searches within the saved one: the file answers them as the API does
            args = {"collections": BOTH, "filter": SEARCH["filter"], **args}
            expected = [i["id"] for i in searched(again, "api", **args)]
            assert [i["id"] for i in searched(again, "saved", **args)] == expected and expected
        assert again.collection(S2, catalog="saved").license == collections[0]["license"]


def test_ndjson_up_to_max_items_reads_back_as_a_local_catalog(session):
    record = session.save_search(catalog="api", format="ndjson", max_items=PAGE + 3, **SEARCH)
    want = searched(session, "api", **SEARCH)[: PAGE + 3]
    path = session.outputs.path(record.id)
    assert path.suffix == ".ndjson" and record.assets["data"].type == "application/x-ndjson"
    assert len(path.read_text().splitlines()) == PAGE + 3
    assert record.properties.model_extra["search:more"] is True  # max_items left items out
    settings = session.settings.model_copy(
        update={
            "catalogs": [
                *session.settings.catalogs,
                type(session.settings.catalog("api"))(id="lines", path=path),
            ]
        }
    )
    with Session(settings) as again:
        same_items(searched(again, "lines", sortby="id"), want)


def test_to_geoparquet_from_a_summary_page_takes_the_following_pages(session, tmp_path):
    """A page of summaries is read again in full; the file starts at that page."""
    import pyarrow.parquet as pq

    first = session.search(catalog="api", limit=4, **SEARCH)
    second = first.next()
    out = tmp_path / "rest.parquet"
    want = searched(session, "api", **SEARCH)[4:]
    assert second.to_geoparquet(out, max_items=1000) == len(want)
    assert pq.read_table(out, columns=["id"])["id"].to_pylist() == [i["id"] for i in want]
    assert {p.name for p in tmp_path.iterdir()} == {"rest.parquet"}


def test_cancelling_removes_the_partial_file(session):
    job = Job(lambda done, total, message: job.cancel())  # cancelled once the first page is read
    with pytest.raises(OperationCancelled):
        session.save_search(catalog="api", max_items=1000, job=job, **SEARCH)
    assert session.outputs.list() == []
    files = [p.name for p in session.workspace.rglob("*") if p.is_file() and p.suffix != ".alive"]
    folders = [p.name for p in (session.workspace / ".tmp").iterdir() if p.is_dir()]
    assert files == [] and folders == [], (files, folders)  # the store's liveness marker aside


@pytest.mark.parametrize("format", ["ndjson", "geoparquet"])
def test_a_store_starting_mid_save_leaves_the_partial_file_alone(session, format):
    """Another store starting on the workspace while a save is written (a second server) sweeps
    `.tmp/` of what dead writers left: the save's own temporaries are named after their owner,
    so they are kept and the save completes."""
    from stac_gdal_mcp.outputs.store import OutputStore

    def progress(done, total, message):
        OutputStore(session.settings).close()  # sweeps .tmp/ as it starts

    record = session.save_search(catalog="api", format=format, max_items=1000, job=Job(progress), **SEARCH)
    assert record.model_dump()["properties"]["search:items"] == len(searched(session, "api", **SEARCH))


async def test_bad_arguments_are_one_line(session):
    for args, words in (
        ({"format": "csv"}, "format must be one of geoparquet, ndjson"),
        ({"max_items": 0}, "max_items must be an integer from 1"),
        ({"max_items": 2_000_000}, "max_items must be an integer from 1"),
        ({"ids": ["nothing-has-this-id"]}, "the search found no items"),
        ({"partition_by": ["day"]}, "partition_by takes collection, year, month"),
        ({"partition_by": ["year"], "format": "ndjson"}, "partition_by is for format='geoparquet'"),
    ):
        with pytest.raises(StacGdalMcpError) as caught:
            session.save_search(catalog="api", collections=BOTH, **args)
        assert words in str(caught.value) and "\n" not in str(caught.value)
    async with Client(build_server(session=session)) as client:
        result = await client.call_tool_mcp(
            "save_search", {"search": {"catalog": "api", "bbox": [0, 0, 1, 1]}}
        )
    text = result.content[0].text
    assert result.is_error and len(text.splitlines()) == 1
    assert "unknown search argument" not in text  # it says where bbox belongs
    assert "save_search: `bbox`" in text, text
    assert session.outputs.list() == []


def test_signing_tokens_are_taken_off_asset_hrefs():
    """Saved hrefs are the catalog's own: a SAS token expires, and reads sign again."""
    from stac_gdal_mcp.results import _unsigned

    blob = "https://acct.blob.core.windows.net/sentinel2-l2/a/B04.tif"
    item = {
        "id": "a",
        "assets": {
            "red": {"href": f"{blob}?st=2024-01-01&se=2024-01-02&sp=rl&sv=2021&sr=c&sig=abc%2Fdef"},
            "meta": {"href": "https://example.com/a.xml?version=2"},
            "none": {"title": "no href"},
        },
    }
    got = _unsigned(item)
    assert got["assets"] == {
        "red": {"href": blob},
        "meta": {"href": "https://example.com/a.xml?version=2"},
        "none": {"title": "no href"},
    }
    assert item["assets"]["red"]["href"].endswith("sig=abc%2Fdef")  # the original is left as it was
    plain = {"id": "b", "assets": {"meta": {"href": "https://example.com/a.xml?version=2"}}}
    assert _unsigned(plain) is plain


async def test_the_tool_saves_hive_folders_that_duckdb_opens(session):
    """partition_by: the output is a folder of collection=/year=/month= folders; DuckDB's
    hive_partitioning reads the search's items, each in the folder of its own collection and
    month; the answer links the record only (a folder is no file resource)."""
    import duckdb

    args = {
        "search": {"catalog": "api", **SEARCH},
        "max_items": 1000,
        "partition_by": ["collection", "year", "month"],
    }
    async with Client(build_server(session=session)) as client:
        result = await client.call_tool_mcp("save_search", args)
    assert not result.is_error, result.content
    record = result.structured_content
    parameters = record["properties"]["processing:expression"]["expression"]["parameters"]
    assert parameters["partition_by"] == ["collection", "year", "month"]
    assert [str(c.uri) for c in result.content if c.type == "resource_link"] == [
        f"stac-gdal://outputs/{record['id']}"
    ]
    folder = session.outputs.path(record["id"])
    assert folder.is_dir() and record["properties"]["search:items"] == len(searched(session, "api", **SEARCH))
    rows = duckdb.sql(
        f"SELECT id, collection, year, month, datetime FROM read_parquet('{folder}/**/*.parquet', "
        "hive_partitioning = true, union_by_name = true)"
    ).fetchall()
    want = searched(session, "api", **SEARCH)
    assert sorted(r[0] for r in rows) == sorted(i["id"] for i in want)
    by_id = {i["id"]: i for i in want}
    for item_id, collection, year, month, when in rows:
        assert collection == by_id[item_id]["collection"] and (year, month) == (when.year, when.month)
    assert record["assets"]["data"]["file:size"] == sum(p.stat().st_size for p in folder.rglob("*.parquet"))
    settings = session.settings.model_copy(
        update={
            "catalogs": [
                *session.settings.catalogs,
                type(session.settings.catalog("api"))(id="hive", path=folder),
            ]
        }
    )
    with Session(settings) as again:  # the folder is a catalog, answering as the API did
        same_items(searched(again, "hive", **SEARCH), want)


@pytest.mark.parametrize("format", ["geoparquet", "ndjson"])
def test_max_output_bytes_holds_while_writing(make_settings, api, format):
    """A cap far below the search's size: the save stops at the page that passes it (progress
    never reaches the items matched), says so in one line, and leaves nothing in the workspace."""
    settings = make_settings(
        catalogs=[{"id": "api", "url": api.url}],
        default_catalog="api",
        limits={"max_items": PAGE, "max_output_bytes": 20_000},
    )
    progress = []
    with Session(settings) as session:
        matched = len(searched(session, "api", **SEARCH))
        job = Job(lambda done, total, message: progress.append(done))
        with pytest.raises(StacGdalMcpError) as caught:
            session.save_search(catalog="api", max_items=1000, job=job, format=format, **SEARCH)
        assert "20,000 bytes" in str(caught.value) and "\n" not in str(caught.value)
        assert max(progress, default=0) < matched, (progress, matched)
        assert session.outputs.list() == []
        left = [p.name for p in session.workspace.rglob("*") if p.is_file() and p.suffix != ".alive"]
        assert left == []
