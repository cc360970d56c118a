"""The output store: unique names, atomic writes, records, list/get/delete, cleanup on failure.

Checksums and sizes are recomputed here with hashlib/os; records are read back with pystac.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

import pystac
import pytest

from stac_gdal_mcp.errors import InvalidArgument, LimitExceeded, NotFound, OutputExists
from stac_gdal_mcp.outputs import OutputStore, RasterBand, RasterFacts, SourceRef

SOURCE = SourceRef(
    href="https://example.com/S2A_1/red.tif",
    asset="red",
    catalog="testbed",
    collection_id="s2",
    item_id="S2A_1",
    datetime="2024-06-01T10:00:00Z",
)
FACTS = RasterFacts(
    proj_code="EPSG:32633",
    proj_shape=[2, 3],
    proj_transform=[10, 0, 500000, 0, -10, 5000000],
    proj_bbox=[500000, 4999980, 500030, 5000000],
    bbox=[15.0, 45.1, 15.1, 45.2],
    geometry={
        "type": "Polygon",
        "coordinates": [[[15, 45.1], [15.1, 45.1], [15.1, 45.2], [15, 45.2], [15, 45.1]]],
    },
    bands=[RasterBand(data_type="uint16", nodata=0, scale=0.0001, offset=-0.1)],
)


@pytest.fixture
def store(make_settings):
    return OutputStore(make_settings())


def _files(store: OutputStore) -> list[str]:
    found = []
    for folder in (store.root, store.records, store.tmp):
        if folder.exists():
            found += sorted(p.name for p in folder.iterdir() if p.suffix != ".alive")
    return found


def _commit(store, out, **kw):
    args = dict(
        operation="test_op", parameters={"a": 1}, sources=[SOURCE], media_type="image/tiff", raster=FACTS
    )
    args.update(kw)
    return store.commit(out, **args)


def test_commit_writes_file_and_record(store):
    payload = b"0123456789" * 1000
    with store.writing(".tif", stem="reproject-red") as out:
        assert out.path.parent == store.tmp and out.path.name.startswith(store.prefix)
        out.path.write_bytes(payload)
        record = _commit(store, out, title="a test")
    assert record.id.startswith("reproject-red-")
    final = store.root / f"{record.id}.tif"
    assert final.read_bytes() == payload
    assert record.file.file_size == len(payload)
    assert record.file.file_checksum == "1220" + hashlib.sha256(payload).hexdigest()
    assert _files(store) == [final.name, f"{record.id}.json"]  # no temporary leftovers

    doc = json.loads((store.records / f"{record.id}.json").read_text())
    item = pystac.Item.from_dict(doc)
    assert item.id == record.id
    assert doc["properties"]["datetime"] == "2024-06-01T10:00:00Z"
    assert doc["properties"]["proj:code"] == "EPSG:32633"
    assert doc["properties"]["proj:shape"] == [2, 3]
    assert doc["properties"]["processing:expression"]["expression"] == {
        "operation": "test_op",
        "parameters": {"a": 1},
    }
    assert {"stac-gdal-mcp", "rasterio", "GDAL"} <= set(doc["properties"]["processing:software"])
    assert doc["assets"]["data"]["raster:bands"] == [
        {"data_type": "uint16", "nodata": 0, "scale": 0.0001, "offset": -0.1}
    ]
    assert doc["assets"]["data"]["file:size"] == len(payload)
    derived = [l["href"] for l in doc["links"] if l["rel"] == "derived_from"]
    assert derived == ["stac://testbed/collections/s2/items/S2A_1", "https://example.com/S2A_1/red.tif"]
    self_link = (store.records / f"{record.id}.json").as_uri()  # a library store: the record's file
    assert {"rel": "self", "href": self_link, "type": "application/geo+json"} in doc["links"]
    assert record.uri == self_link
    assert doc["bbox"] == FACTS.bbox


def test_failure_inside_block_leaves_nothing(store):
    with pytest.raises(RuntimeError):
        with store.writing(".tif") as out:
            out.path.write_bytes(b"partial")
            out.scratch(".tif").write_bytes(b"intermediate")
            raise RuntimeError("GDAL failed half way")
    assert _files(store) == []
    assert store.list() == []


def test_cancellation_inside_block_leaves_nothing(store):
    async def job():
        with store.writing(".tif") as out:
            out.path.write_bytes(b"partial")
            await asyncio.sleep(10)

    async def main():
        task = asyncio.create_task(job())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _files(store) == []


def test_leaving_without_commit_removes_the_file(store):
    with store.writing(".png") as out:
        out.path.write_bytes(b"x")
    assert _files(store) == []


def test_limit_on_output_bytes_checked_at_commit(make_settings):
    store = OutputStore(make_settings(limits={"max_output_bytes": 100}))
    with pytest.raises(LimitExceeded, match="max_output_bytes"):
        with store.writing(".tif") as out:
            out.path.write_bytes(b"x" * 101)
            _commit(store, out)
    assert _files(store) == []


def test_output_names(store):
    with store.writing(".tif", output_name="my-result") as out:
        out.path.write_bytes(b"x")
        record = _commit(store, out)
    assert record.id == "my-result" and (store.root / "my-result.tif").is_file()
    with pytest.raises(OutputExists, match="already exists"):
        with store.writing(".tif", output_name="my-result.tif"):
            pass
    with pytest.raises(OutputExists):  # same id, other format
        with store.writing(".png", output_name="my-result"):
            pass
    for bad in ["../escape", "a/b", "/etc/passwd", "..", ".hidden", "x" * 200, "", "a\\b", "a b"]:
        with pytest.raises(InvalidArgument):
            with store.writing(".tif", output_name=bad):
                pass
    assert _files(store) == ["my-result.tif", "my-result.json"]


def test_reserved_names_are_unique_while_writing(store):
    with store.writing(".tif", output_name="same"):
        with pytest.raises(OutputExists):
            with store.writing(".tif", output_name="same"):
                pass
    ids = set()
    for _ in range(50):
        with store.writing(".tif", stem="a/b c") as out:
            ids.add(out.output_id)
            assert out.output_id.startswith("a-b-c-")
    assert len(ids) == 50


def test_list_get_path_delete(store):
    ids = []
    for name in ["first", "second"]:
        with store.writing(".tif", output_name=name) as out:
            out.path.write_bytes(name.encode())
            ids.append(_commit(store, out).id)
    assert [r.id for r in store.list()] == ["second", "first"]  # newest first
    assert store.get("first").id == "first"
    assert store.path("first").read_bytes() == b"first"
    summary = store.get("first").summary()
    assert summary.uri == (store.records / "first.json").as_uri()
    assert summary.size == 5 and summary.operation == "test_op"

    deleted = store.delete("first")
    assert deleted.id == "first"
    assert _files(store) == ["second.tif", "second.json"]
    with pytest.raises(NotFound):
        store.get("first")
    with pytest.raises(NotFound):
        store.delete("first")
    with pytest.raises(NotFound):
        store.get("../records/second")


def test_record_without_raster_and_several_sources(store):
    later = SOURCE.model_copy(
        update={
            "datetime": "2024-07-01T10:00:00Z",
            "item_id": "S2A_2",
            "href": "https://example.com/S2A_2/red.tif",
        }
    )
    with store.writing(".csv") as out:
        out.path.write_text("a,b\n1,2\n")
        record = store.commit(
            out, operation="stats", parameters={}, sources=[SOURCE, later], media_type="text/csv"
        )
    props = record.properties
    assert props.datetime is None
    assert (props.start_datetime, props.end_datetime) == ("2024-06-01T10:00:00Z", "2024-07-01T10:00:00Z")
    assert record.bbox is None and record.file.raster_bands is None
    assert len([l for l in record.links if l.rel == "derived_from"]) == 4


def test_records_name_themselves_as_the_reading_store_does(make_settings):
    """A record written by a library session is listed by the server with the server's resource
    URIs (and the other way round): the self/enclosure links are the reading store's."""
    from stac_gdal_mcp.server.resources import record_links

    settings = make_settings()
    library, server = OutputStore(settings), OutputStore(settings, links=record_links(settings))
    with library.writing(".tif", output_name="shared") as out:
        out.path.write_bytes(b"12345")
        written = _commit(library, out)
    assert written.uri.startswith("file://")
    served = server.get("shared")
    assert served.uri == "stac-gdal://outputs/shared" and server.list()[0].uri == served.uri
    assert [(link.rel, link.href) for link in served.links[:2]] == [
        ("self", "stac-gdal://outputs/shared"),
        ("enclosure", "stac-gdal://outputs/shared/file"),
    ]
    assert [link.href for link in served.links if link.rel == "derived_from"] == [
        link.href for link in written.links if link.rel == "derived_from"
    ]
    assert library.get("shared").uri == written.uri
    library.close()
    server.close()
