"""Local copies of the small parts an HTTP catalog's searches open (catalogs/local_copies.py),
read by DuckDB as local files: on the real Planetary Computer items (tests/real_items) in
Planetary Computer parts and hive folders served by the test bed's Range server, every answer
after the copies equals the answers before them, the same files' answers on disk and DuckDB's
count by hand, and fetches no byte; a copy that fails keeps nothing; the copies stay within
their bound and leave nothing behind when the process ends; where no copy can be made, nothing
is said and the files are read by range.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest
import real_snapshots as rs

from stac_gdal_mcp import Session
from stac_gdal_mcp.catalogs import httpfs, local_copies
from stac_gdal_mcp.errors import CatalogUnavailable
from testbed import serve_directory

BBOX = [-100.0, 20.0, 20.0, 60.0]
TRIANGLE = {"type": "Polygon", "coordinates": [[[-100, 20], [20, 20], [-40, 60], [-100, 20]]]}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """The real items, 20 copies each, in Planetary Computer parts and in hive folders."""
    root = tmp_path_factory.mktemp("copies")
    return root, rs.write_layouts(root, 20)


def _answers(session, catalog: str, ids: list[str]) -> list:
    """A default page, a bbox's exact count and its page of whole items sorted on cloud cover, a
    polygon's page, and a search by ids."""
    search = session.search
    return [
        search(catalog=catalog, limit=40, fields=["id"]).ids,
        search(catalog=catalog, detail="count", bbox=BBOX).matched,
        [i.model_dump() for i in search(catalog=catalog, limit=15, bbox=BBOX, sortby="eo:cloud_cover").items],
        search(catalog=catalog, limit=30, fields=["id"], intersects=TRIANGLE).ids,
        sorted(search(catalog=catalog, ids=ids, fields=["id"]).ids),
    ]


@pytest.mark.parametrize("layout", ["pc parts", "hive"])
def test_searches_after_the_copies_read_them_and_fetch_nothing(make_settings, layouts, layout):
    """Every answer after the parts are copied equals the answer read by range before, and the
    same files' on disk (and the count DuckDB's by hand); the searches' SQL names the copies and
    the server sees no request but the versions' (bytes=0-0)."""
    root, files = layouts[0], layouts[1][layout]
    picked = [(files[len(files) // 2], 3), (files[0], 1)]
    ids = [
        r[0]
        for f, n in picked
        for r in duckdb.sql(f"SELECT id FROM read_parquet('{f}') LIMIT {n}").fetchall()
    ]
    with serve_directory(root, nodelay=True) as served:
        urls = [f"{served.url}/{p.relative_to(root).as_posix()}" for p in files]
        folder = root / ("pc" if layout == "pc parts" else "hive")
        disk = {"id": "disk", "path": str(folder / "**" / "*.parquet")}
        settings = make_settings(catalogs=[{"id": "gp", "urls": urls}, disk], default_catalog="gp")
        with Session(settings) as session:
            cat = session.core.catalogs.get("gp")
            by_range = _answers(session, "gp", ids)
            cat.reader.copies.wait(60)
            assert len(cat.reader.copies._kept) == len(files)  # every part was opened by a search
            served.reset_stats()
            copied = _answers(session, "gp", ids)
            fetched = [r for r in served.request_log() if r[1] != "bytes=0-0"]
            named = cat.source()
            listed = cat.run(f"SELECT DISTINCT filename FROM {cat.source(numbered=True)}")[
                "filename"
            ].to_pylist()
            assert set(listed) == set(cat.files.sources)  # rows named by the files they copy
            on_disk = _answers(session, "disk", ids)
    assert copied == by_range == on_disk
    assert by_range[1] == rs.count_by_hand(files, BBOX) > 0 and len(by_range[4]) == 4
    assert fetched == []
    assert "stacgp://" not in named and str(Path(settings.workspace) / "cache" / "http-copies") in named


def test_a_copy_that_fails_keeps_nothing(make_settings, layouts, monkeypatch):
    """The copier's reads fail (a server gone mid-copy): no copy is kept, no file is left in
    the copies' folder, and the searches after read by range, their answers unchanged."""
    root, files = layouts[0], layouts[1]["pc parts"]
    read = httpfs.RangeReader.read

    def failing(self, version, start, end):
        if threading.current_thread().name.startswith("http-copies"):
            raise CatalogUnavailable("the server went away")
        return read(self, version, start, end)

    monkeypatch.setattr(httpfs.RangeReader, "read", failing)
    with serve_directory(root, nodelay=True) as served:
        urls = [f"{served.url}/{p.relative_to(root).as_posix()}" for p in files]
        with Session(make_settings(catalogs=[{"id": "gp", "urls": urls}], default_catalog="gp")) as session:
            cat = session.core.catalogs.get("gp")
            first = _answers(session, "gp", [])
            cat.reader.copies.wait(60)
            again = _answers(session, "gp", [])
            left = [
                p
                for p in (Path(session.settings.workspace) / "cache" / "http-copies").rglob("*")
                if p.is_file()
            ]
            assert not cat.reader.copies._kept and "stacgp://" in cat.source()
    assert first == again and left == []


def test_the_copies_stay_within_their_bound_and_leave_nothing_behind(make_settings, layouts, tmp_path):
    """With room for a few parts, the copies kept (and the files in their folder) never pass the
    bound; the folder of a process no longer running is removed when a new one is made, and a
    process's own when it ends."""
    root, files = layouts[0], layouts[1]["hive"]
    workspace = tmp_path / "ws"
    stale = workspace / "cache" / "http-copies" / "999999999-dead"
    stale.mkdir(parents=True)
    (stale / "0.parquet").write_bytes(b"left by a process killed")
    sizes = sorted(p.stat().st_size for p in files)
    assert sizes[-1] < 1024**2 < sum(sizes)  # room for some parts, not all
    script = f"""
import sys
sys.path[:0] = {sys.path!r}
from pathlib import Path
from stac_gdal_mcp import Session
from stac_gdal_mcp.settings import load_settings
urls = {[f"URL/{p.relative_to(root).as_posix()}" for p in files]!r}
settings = load_settings(catalogs=[{{"id": "gp", "urls": [u.replace("URL", sys.argv[1]) for u in urls]}}],
    default_catalog="gp", workspace={str(workspace)!r}, network={{"allow_private_hosts": True}},
    limits={{"http_copies_mb": 1}})
with Session(settings) as session:
    copies = session.core.catalogs.get("gp").reader.copies
    for bbox in ([-180, -90, 0, 90], [0, -90, 180, 90]):
        session.search(detail="count", bbox=bbox)
        copies.wait(60)
        on_disk = sum(p.stat().st_size for p in copies._folder.rglob("*.parquet"))
        print(len(copies._kept), copies.held, on_disk, copies._folder)
"""
    with serve_directory(root, nodelay=True) as served:
        run = subprocess.run(
            [sys.executable, "-c", script, served.url], capture_output=True, text=True, timeout=300
        )
    assert run.returncode == 0, run.stderr
    lines = [line.split() for line in run.stdout.splitlines()]
    assert len(lines) == 2 and int(lines[-1][0]) > 0
    for kept, held, on_disk, _ in lines:
        assert int(held) == int(on_disk) <= 1024**2 and int(kept) < len(files)
    assert not stale.exists() and not Path(lines[-1][3]).exists()
    assert sizes[-1] <= local_copies.COPY_MAX


def test_a_workspace_where_no_copy_can_be_made_reads_by_range_and_says_nothing(
    make_settings, layouts, tmp_path, caplog
):
    """The copies' folder cannot be made (the workspace's `cache` is a file): no copy, no
    warning a file, and the answers those of the files read by range."""
    root, files = layouts[0], layouts[1]["hive"]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "cache").write_text("not a folder")
    with serve_directory(root, nodelay=True) as served:
        urls = [f"{served.url}/{p.relative_to(root).as_posix()}" for p in files]
        limits = {"http_disk_cache_mb": 0}  # the disk tier's folder is in the cache too
        catalogs = [{"id": "gp", "urls": urls}]
        settings = make_settings(catalogs=catalogs, default_catalog="gp", workspace=workspace, limits=limits)
        with Session(settings) as session:
            cat = session.core.catalogs.get("gp")
            first = _answers(session, "gp", [])
            cat.reader.copies.wait(60)
            assert _answers(session, "gp", []) == first and not cat.reader.copies._kept
    assert first[1] == rs.count_by_hand(files, BBOX)
    assert not [r for r in caplog.records if "no local copy" in r.getMessage()]
