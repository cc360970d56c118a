"""What the parts' footers say is kept between catalogs (catalogs/part_cache.py): a new catalog
on the same files - the server started again - takes it from the workspace's cache file instead
of reading the footers, re-reads a part that changed, and reads every footer again when the
cache file is damaged; the answers stay those of the files."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
import real_snapshots as rs

from stac_gdal_mcp import Session
from stac_gdal_mcp.catalogs.part_cache import cache_path


@pytest.fixture
def parts(tmp_path):
    items = rs.real_items()
    tbl = rs.by_time(rs.table(items), "collection")
    return tmp_path / "pc", rs.write_pc_layout(tbl, tmp_path / "pc", 12, rs.collections(items))


def _files(make_settings, root, workspace):
    settings = make_settings(
        catalogs=[{"id": "gp", "path": str(root)}], default_catalog="gp", workspace=workspace
    )
    with Session(settings) as session:
        files = session.core.catalogs.get("gp").files
        matched = session.search(catalog="gp", limit=1).matched
    return files, matched


def test_a_new_catalog_takes_the_footers_facts_from_the_cache(make_settings, parts, tmp_path):
    root, written = parts
    workspace = tmp_path / "ws"
    first, matched = _files(make_settings, root, workspace)
    cached = cache_path(workspace, "gp")
    assert cached.is_file() and len(json.loads(cached.read_text())["files"]) == len(written)
    again, matched_again = _files(make_settings, root, workspace)
    for name in ("spans", "rows", "boxes", "ranges", "undated", "schema", "described", "uniform"):
        assert getattr(again, name) == getattr(first, name), name
    assert matched_again == matched == sum(pq.read_metadata(p).num_rows for p in written)
    # what the cache says is what a new catalog uses: a count kept there (and nowhere else) is read
    doc = json.loads(cached.read_text())
    name = next(iter(doc["files"]))
    doc["files"][name][1] += 1000
    cached.write_text(json.dumps(doc))
    assert (
        _files(make_settings, root, workspace)[0].rows[json.loads(name)[0]]
        == first.rows[json.loads(name)[0]] + 1000
    )


def test_a_changed_part_and_a_damaged_cache_are_read_again(make_settings, parts, tmp_path):
    root, written = parts
    workspace = tmp_path / "ws"
    first, _ = _files(make_settings, root, workspace)
    changed = written[0]
    tbl = pq.read_table(changed)
    pq.write_table(tbl.slice(0, 1).replace_schema_metadata(tbl.schema.metadata), changed)
    os.utime(changed, ns=(1, 1))  # another version, whatever the clock's resolution
    again, matched = _files(make_settings, root, workspace)
    assert again.rows[str(changed)] == 1 and matched == sum(pq.read_metadata(p).num_rows for p in written)
    cache_path(workspace, "gp").write_text('{"format": 1, "schemas": {"x": "not base64!"}, "files": []}')
    damaged, matched_damaged = _files(make_settings, root, workspace)
    assert damaged.rows == again.rows and damaged.spans == again.spans and matched_damaged == matched
    assert len(json.loads(cache_path(workspace, "gp").read_text())["files"]) == len(written)  # rewritten
