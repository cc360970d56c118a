"""A partitioned stac-geoparquet snapshot of N items (default 10,000,000): one search of
one month of one collection, ours vs DuckDB's own best SQL by hand on the same files, on disk and
over the test bed's Range HTTP server.

The snapshot: narrow rows (id, collection, datetime, footprint and bbox, platform,
eo:cloud_cover, one asset), 13 collections (the real Planetary Computer collection ids of
tests/real_items) x 60 months (2020-2024), rows spread evenly and sorted by time within a part,
row groups of ROW_GROUP rows. Written twice, straight from Arrow (the schema of
stac-geoparquet's own conversion of one template item per collection, its metadata kept):

- `pc/<collection>.parquet/part-NNNN_<start>_<end>.parquet`, one part a quarter (the Planetary
  Computer's layout; its parts span a week to a year);
- `hive/collection=<c>/year=<y>/month=<m>/part-0.parquet` (rustac, DuckDB, pyarrow).

Cached in ~/.cache/stac-gdal-mcp-bench/snapshot-<N>/ between runs (`done` marks a whole one).

For each layout, on disk and over HTTP (`urls = [...]`, every part's URL): the search
(collection + one month, default order, limit 100; `matched` counted beside it, as every first
page) on a catalog whose files were checked once (footers read, timed apart as "open"), then:
parts and row groups opened of the totals, bytes read (disk: this process's `rchar` in
/proc/self/io; HTTP: bytes the server sent), requests (HTTP), time (first run on the new catalog,
then the median of common.ROUNDS), peak RSS. The baseline, in the same run: the SQL a DuckDB user writes
by hand (SELECT * ... WHERE datetime in the month ... ORDER BY ... LIMIT 100) over the
collection's folder (PC layout: DuckDB opens every part's footer and prunes row groups by
statistics) or over every part with hive_partitioning = true and the collection, year and month
filtered (DuckDB prunes files by their folder names), rows turned into items the same way; over
HTTP through a plain fsspec range-request filesystem (DuckDB's httpfs extension is downloaded
on first use, which this machine cannot).

Run: python benchmarks/bench_snapshot_scale.py [--items N] [--layouts pc,hive] [--no-http]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # testbed: the Range server

from common import bench_workspace, median_s  # noqa: E402

COLLECTIONS = (
    "3dep-lidar-dsm", "cop-dem-glo-30", "io-lulc", "io-lulc-annual-v02", "landsat-c2-l1",
    "landsat-c2-l2", "naip", "planet-nicfi-analytic", "sentinel-1-rtc", "sentinel-2-l2a",
    "umbra-sar", "us-census", "3dep-lidar-copc",
)  # fmt: skip
YEARS = range(2020, 2025)
ROW_GROUP = 4_000
PAGE = 100
WANTED = ("sentinel-2-l2a", 2023, 5)  # the search: one collection, one month
WARM = ("naip", 2021, 3)  # a search before it (imports, footers checked), not measured
CACHE = Path.home() / ".cache" / "stac-gdal-mcp-bench"


# --- the snapshot ----------------------------------------------------------------------------


def _template():
    """One narrow item per collection, as stac-geoparquet's Arrow table (the schema every part has)."""
    from stac_geoparquet.arrow import parse_stac_items_to_arrow

    items = [
        {
            "type": "Feature",
            "stac_version": "1.0.0",
            "stac_extensions": [],
            "id": f"{cid}-template",
            "collection": cid,
            "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]},
            "bbox": [0.0, 0.0, 1.0, 1.0],
            "properties": {"datetime": "2020-01-01T00:00:00Z", "platform": cid, "eo:cloud_cover": 1.0},
            "links": [],
            "assets": {"data": {"href": f"https://example.com/{cid}/data.tif", "type": "image/tiff"}},
        }
        for cid in COLLECTIONS
    ]
    return parse_stac_items_to_arrow(items).read_all()


def _footprints(rng, n: int):
    """n random 1-degree squares: (bbox struct array, WKB polygons), built in numpy."""
    import numpy as np
    import pyarrow as pa

    west, south = rng.uniform(-179, 178, n), rng.uniform(-60, 69, n)
    east, north = west + 1.0, south + 1.0
    wkb = np.zeros(
        n, dtype=np.dtype([("o", "u1"), ("t", "<u4"), ("r", "<u4"), ("p", "<u4"), ("c", "<f8", 10)])
    )
    wkb["o"], wkb["t"], wkb["r"], wkb["p"] = 1, 3, 1, 5
    wkb["c"] = np.stack([west, south, east, south, east, north, west, north, west, south], axis=1)
    size = wkb.dtype.itemsize
    polygons = pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), n, [None, pa.py_buffer(wkb.tobytes())])
    box = pa.StructArray.from_arrays(
        [pa.array(v) for v in (west, south, east, north)], names=["xmin", "ymin", "xmax", "ymax"]
    )
    return box, polygons.cast(pa.binary())


def _rows(template, index: int, cid: str, start: datetime, end: datetime, n: int, rng):
    """n rows of collection `cid` (template row `index`), datetimes spread over [start, end), sorted."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    tbl = template.take(pa.array(np.full(n, index)))
    low, high = int(start.timestamp() * 1e6), int(end.timestamp() * 1e6)
    when = np.sort(rng.integers(low, high, n)).astype("datetime64[us]")
    number = pa.array(np.arange(n)).cast(pa.string())
    stem = f"{cid}-{start:%Y%m%d}-"
    box, polygons = _footprints(rng, n)
    columns = {
        "id": pc.binary_join_element_wise(stem, number, ""),
        "datetime": pa.array(when).cast(tbl.schema.field("datetime").type),
        "bbox": box.cast(tbl.schema.field("bbox").type),
        "geometry": polygons,
        "eo:cloud_cover": pa.array(np.round(rng.uniform(0, 100, n), 2)),
    }
    for name, values in columns.items():
        tbl = tbl.set_column(tbl.schema.get_field_index(name), name, values)
    return tbl


def generate(n: int) -> Path:
    """The snapshot of n items in both layouts (see the module docstring), cached."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import real_snapshots as rs

    root = CACHE / f"snapshot-{n}"
    if (root / "done").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    template = _template()
    meta = rs._metadata(template, rs.collections([{"collection": c} for c in COLLECTIONS]))
    rng = np.random.default_rng(27)
    slots = [(c, y, m) for c in range(len(COLLECTIONS)) for y in YEARS for m in range(1, 13)]
    each, extra = divmod(n, len(slots))
    numbered: dict[str, int] = {}
    for k in range(0, len(slots), 3):  # a quarter at a time: one PC part, three hive folders
        c, year, month = slots[k]
        cid = COLLECTIONS[c]
        months = []
        for j in range(3):
            first = datetime(year, month + j, 1, tzinfo=UTC)
            after = datetime(year + (month + j) // 12, (month + j) % 12 + 1, 1, tzinfo=UTC)
            rows = _rows(template, c, cid, first, after, each + (k + j < extra), rng)
            months.append(rows.replace_schema_metadata(meta))
            folder = root / "hive" / f"collection={cid}" / f"year={year}" / f"month={month + j}"
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(months[-1], folder / "part-0.parquet", row_group_size=ROW_GROUP)
        number = numbered[cid] = numbered.get(cid, -1) + 1
        end = datetime(year + (month + 2) // 12, (month + 2) % 12 + 1, 1)
        name = (
            f"part-{number:04d}_{datetime(year, month, 1):%Y-%m-%dT%H:%M:%S}_{end:%Y-%m-%dT%H:%M:%S}.parquet"
        )
        (root / "pc" / f"{cid}.parquet").mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.concat_tables(months), root / "pc" / f"{cid}.parquet" / name, row_group_size=ROW_GROUP
        )
    (root / "done").touch()
    print(f"generated {n:,} items in {time.perf_counter() - started:.0f} s: {root}", flush=True)
    return root


# --- what a search opens ----------------------------------------------------------------------


def _parts(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("part-*.parquet") if p.is_file())


def _month(wanted=WANTED) -> tuple[datetime, datetime, str]:
    """[start, after) of the month and the search's datetime: the whole month, to its last
    microsecond (an end at 23:59:59 leaves out the rows of the last second, as the 128,205 rows a
    month of 100,000,000 items have)."""
    _, year, month = wanted
    start = datetime(year, month, 1, tzinfo=UTC)
    after = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return (
        start,
        after,
        f"{start:%Y-%m-%dT%H:%M:%SZ}/{after - timedelta(microseconds=1):%Y-%m-%dT%H:%M:%S.%fZ}",
    )


class RowGroups:
    """Every part's row groups: byte spans (to tell which ones a read touched) and how many can
    hold the search (collection from the path, datetime statistics overlapping the month)."""

    def __init__(self, root: Path, files: list[Path]):
        import pyarrow.parquet as pq

        start, after, _ = _month()
        self.spans: dict[str, list[tuple[int, int]]] = {}
        self.total = self.can_hold = 0
        for f in files:
            footer = pq.read_metadata(f)
            column = footer.schema.names.index("datetime")
            name = "/" + f.relative_to(root).as_posix()
            self.spans[name] = []
            for g in range(footer.num_row_groups):
                group = footer.row_group(g)
                chunks = [group.column(i) for i in range(group.num_columns)]
                low = min(c.dictionary_page_offset or c.data_page_offset for c in chunks)
                high = max(
                    (c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size for c in chunks
                )
                self.spans[name].append((low, high))
                stats = group.column(column).statistics
                self.total += 1
                ours = f"{WANTED[0]}.parquet" in name or f"collection={WANTED[0]}/" in name
                self.can_hold += ours and stats.min < after and stats.max >= start

    def touched(self, log: list[tuple[str, str | None, int]]) -> tuple[int, int]:
        """(parts, row groups) the logged range requests read bytes of (footers are not row groups)."""
        groups, parts = set(), set()
        for path, header, sent in log:
            parts.add(path)
            first = int(header.split("=")[1].split("-")[0]) if header else 0
            last = first + sent
            groups |= {
                (path, g)
                for g, (low, high) in enumerate(self.spans.get(path, []))
                if first < high and last > low
            }
        return len(parts), len(groups)


def _rchar() -> int:
    """Bytes this process has read with read()/pread() so far (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


# --- DuckDB by hand --------------------------------------------------------------------------


def plain_http():
    """An fsspec filesystem of plain HTTP range requests (httpx, one pooled client), as a DuckDB
    user registers one where the httpfs extension cannot be installed: `plainhttp://host/path`."""
    import threading

    import httpx
    from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

    client = httpx.Client()

    class PlainFile(AbstractBufferedFile):
        # DuckDB's threads share one file object and read in two calls, seek then read: each
        # thread keeps its own position (`loc`), or a read may get another's bytes ("Out of buffer")
        def __init__(self, *args, **kwargs):
            self._where = threading.local()
            super().__init__(*args, **kwargs)

        @property
        def loc(self) -> int:
            return getattr(self._where, "loc", 0)

        @loc.setter
        def loc(self, value: int) -> None:
            self._where.loc = value

        def _fetch_range(self, start: int, end: int) -> bytes:
            got = client.get("http://" + self.path, headers={"Range": f"bytes={start}-{end - 1}"})
            got.raise_for_status()
            return got.content

    class PlainHTTP(AbstractFileSystem):
        protocol = "plainhttp"

        def info(self, path, **kwargs):
            path = self._strip_protocol(path)
            size = int(client.head("http://" + path).headers["content-length"])
            return {"name": path, "size": size, "type": "file"}

        def modified(self, path):
            return datetime(1970, 1, 1, tzinfo=UTC)  # the files do not change during a run

        def glob(self, path, **kwargs):
            return [self._strip_protocol(path)]

        def _open(self, path, mode="rb", **kwargs):
            path = self._strip_protocol(path)
            return PlainFile(self, path, mode, cache_type="none", size=self.info(path)["size"])

    return PlainHTTP()


def by_hand(con, layout: str, files: list[str], wanted=WANTED) -> list[str]:
    """The search as a DuckDB user writes it (see the module docstring); the rows as items."""
    from stac_gdal_mcp.catalogs.geoparquet import rows_as_items

    cid, year, month = wanted
    start, after, _ = _month(wanted)
    listed = ", ".join(f"'{f}'" for f in files)
    if layout == "hive":
        source = f"read_parquet([{listed}], hive_partitioning = true)"
        where = f"collection = '{cid}' AND year = {year} AND month = {month} AND "
    else:
        source = f"read_parquet([{listed}])"
        where = ""
    columns = "* EXCLUDE (year, month)" if layout == "hive" else "*"
    table = con.sql(
        f"SELECT {columns} FROM {source} WHERE {where}datetime >= ? AND datetime < ? "
        f"ORDER BY datetime DESC NULLS FIRST, collection DESC, id DESC LIMIT {PAGE}",
        params=[start, after],
    ).to_arrow_table()
    return [item["id"] for item in rows_as_items(table)]


# --- the runs --------------------------------------------------------------------------------


def _settings(catalog: dict):
    """One temporary workspace a run (`bench_workspace`): no part cache kept from another run."""
    from stac_gdal_mcp.settings import load_settings

    return load_settings(
        catalogs=[{"id": "snap", **catalog}],
        default_catalog="snap",
        network={"allow_private_hosts": True},
        workspace=bench_workspace(),
    )


def _served(server, before: int) -> dict:
    """Bytes read since `before` (disk: rchar) or sent by the server (and its requests, parts)."""
    if server is None:
        return {"bytes": _rchar() - before, "requests": 0, "log": None}
    stats = server.stats()
    return {"bytes": stats["bytes"], "requests": stats["requests"], "log": server.request_log()}


def ours(catalog: dict, groups: RowGroups, server=None) -> dict:
    """Our figures for the month's search on a new catalog (see the module docstring)."""
    from measure import peak_rss_mb, reset_peak

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.discovery import params as p

    cid, (_, _, interval) = WANTED[0], _month()
    out: dict = {}
    with Session(_settings(catalog)) as session:
        server and server.reset_stats()
        started, before = time.perf_counter(), _rchar()
        session.search(collections=[WARM[0]], datetime=_month(WARM)[2], limit=PAGE)
        out["cold_s"], out["cold"] = time.perf_counter() - started, _served(server, before)
        server and server.reset_stats()
        reset_peak()
        started, before = time.perf_counter(), _rchar()
        out["page"] = session.search(collections=[cid], datetime=interval, limit=PAGE)
        out["first_s"], out["read"], out["rss"] = (
            time.perf_counter() - started,
            _served(server, before),
            peak_rss_mb(),
        )
        kept = session.core.catalogs.get("snap").parts([cid], *p.datetime_interval(interval))
        out["parts"] = len(groups.spans) if kept is None else len(kept)
        ((out["warm_s"], _),) = median_s(
            lambda: session.search(collections=[cid], datetime=interval, limit=PAGE)
        )
    with Session(_settings(catalog)) as session:  # a new catalog: the footers' facts in the cache file
        started = time.perf_counter()
        session.search(collections=[WARM[0]], datetime=_month(WARM)[2], limit=PAGE)
        out["cached_s"] = time.perf_counter() - started
    return out


def by_hand_month(layout: str, files: list[str], server=None) -> dict:
    """DuckDB's figures for the same search by hand (its footers read once before, not measured)."""
    import duckdb

    con = duckdb.connect(config={"memory_limit": "512MB"})
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET parquet_metadata_cache = true")  # as ours keeps footers
    if server:
        con.register_filesystem(plain_http())
    by_hand(con, layout, files, (WANTED[0], *WARM[1:]))
    server and server.reset_stats()
    before, started = _rchar(), time.perf_counter()
    out = {"ids": by_hand(con, layout, files)}
    out["first_s"], out["read"] = time.perf_counter() - started, _served(server, before)
    ((out["warm_s"], again),) = median_s(lambda: by_hand(con, layout, files))
    assert again == out["ids"]
    con.close()
    return out


def _mib(read: dict) -> str:
    return f"{read['bytes'] / 1024**2:.2f} MiB read" + (
        f" in {read['requests']} requests" if read["log"] is not None else ""
    )


def run(name: str, layout: str, catalog: dict, groups: RowGroups, server=None, hand_files=None) -> None:
    """Three lines of figures: a new catalog's first search, ours, DuckDB by hand on the same files."""
    o = ours(catalog, groups, server)
    h = by_hand_month(layout, hand_files, server)
    assert list(o["page"].ids) == h["ids"] and len(h["ids"]) == PAGE, "ours and DuckDB by hand differ"
    total = len(groups.spans)
    cold = o["cold"]
    print(
        f"  {name}: a new catalog's first search ({WARM[0]}, {WARM[1]}-{WARM[2]:02d}; every part's footer "
        f"checked, once per version): {o['cold_s']:.2f} s, {_mib(cold)}"
        + (f" to {len({p for p, *_ in cold['log']})} parts" if server else "")
        + f"; another new catalog on the same files (the footers' facts from the part cache): {o['cached_s']:.2f} s"
    )
    if server:
        parts, groups_read = groups.touched(o["read"]["log"])
        opened = f"{parts} of {total} parts, {groups_read} of {groups.total} row groups"
        hand_parts, hand_groups = groups.touched(h["read"]["log"])
        hand_opened = f"{hand_parts} parts, {hand_groups} row groups, "
    else:
        opened = f"{o['parts']} of {total} parts ({groups.can_hold} of {groups.total} row groups can hold it)"
        hand_opened = ""
    print(
        f"    ours: {opened}, {_mib(o['read'])}; first {o['first_s'] * 1000:.0f} ms, again "
        f"{o['warm_s'] * 1000:.0f} ms; peak RSS {o['rss']:.0f} MiB; matched {o['page'].matched:,}"
    )
    print(
        f"    DuckDB by hand: {hand_opened}{_mib(h['read'])}; first {h['first_s'] * 1000:.0f} ms, again "
        f"{h['warm_s'] * 1000:.0f} ms -> ours {o['first_s'] / h['first_s']:.2f}x / {o['warm_s'] / h['warm_s']:.2f}x, "
        f"bytes {o['read']['bytes'] / max(1, h['read']['bytes']):.2f}x"
    )


def walk_figures(name: str, catalog: dict, files: list[str], server=None) -> None:
    """The first page and a 20-page walk of the default search (everything, datetime desc) at
    limit 100, ours vs DuckDB's SELECT * ... ORDER BY ... LIMIT 100 OFFSET k by hand on the files
    on disk (over plain HTTP range requests it reads the sort columns of every part a page: 21,500
    requests for a walk over 260 parts of 1,000,000 items)."""
    import duckdb
    from measure import peak_rss_mb, reset_peak

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.catalogs.geoparquet import rows_as_items

    with Session(_settings(catalog)) as session:
        session.search(limit=1)  # footers checked, not measured
        server and server.reset_stats()
        reset_peak()
        started, before = time.perf_counter(), _rchar()
        page = session.search(limit=PAGE)
        first_s, ids = time.perf_counter() - started, [page.ids]
        for _ in range(19):
            page = session.search(limit=PAGE, cursor=page.next_cursor)
            ids.append(page.ids)
        walk_s, read, rss = time.perf_counter() - started, _served(server, before), peak_rss_mb()
    con = duckdb.connect(config={"memory_limit": "512MB"})
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET parquet_metadata_cache = true")
    listed = ", ".join(f"'{f}'" for f in files)
    con.sql(f"SELECT count(*) FROM read_parquet([{listed}])").fetchall()  # footers read, not measured
    started, before, hand_first_s = time.perf_counter(), _rchar(), None
    for k in range(20):
        table = con.sql(
            f"SELECT * FROM read_parquet([{listed}]) ORDER BY datetime DESC NULLS FIRST, collection DESC, "
            f"id DESC LIMIT {PAGE} OFFSET {k * PAGE}"
        ).to_arrow_table()
        assert [item["id"] for item in rows_as_items(table)] == list(ids[k]), f"page {k + 1} differs"
        hand_first_s = hand_first_s or time.perf_counter() - started
    hand_s, hand_read = time.perf_counter() - started, _served(None, before)
    con.close()
    print(
        f"  {name}, default search: first page {first_s * 1000:.0f} ms vs DuckDB {hand_first_s * 1000:.0f} ms "
        f"({first_s / hand_first_s:.2f}x); 20 pages {walk_s:.1f} s vs {hand_s:.1f} s ({walk_s / hand_s:.2f}x); "
        f"{_mib(read)} vs {_mib(hand_read)}{' on disk' if server else ''}; peak RSS (ours) {rss:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--layouts", default="pc,hive")
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--walk", action="store_true", help="also the default search's 20-page walk")
    args = parser.parse_args()
    scale(args.items, args.layouts.split(","), http=not args.no_http, walk=args.walk)


def scale(items: int, layouts=("pc", "hive"), http: bool = True, walk: bool = True) -> None:
    """Every figure of the module docstring for a snapshot of `items` items (bench_geoparquet.py
    --snapshot-scale N runs it too)."""
    from stac_gdal_mcp import Session
    from testbed import serve_directory

    root = generate(items)
    with Session(_settings({"path": str(_parts(root / "pc")[0])})) as session:
        session.search(limit=PAGE)  # imports (their reads count in rchar), not measured
    cid, year, month = WANTED
    print(f"search: collection {cid}, {year}-{month:02d}, limit {PAGE} (default order, matched counted)")
    for layout in layouts:
        files = _parts(root / layout)
        size = sum(f.stat().st_size for f in files)
        print(f"{layout}: {items:,} items, {len(files)} parts, {size / 1024**2:.0f} MiB on disk")
        groups = RowGroups(root, files)
        mine = [f for f in files if f"{cid}.parquet" in str(f)] if layout == "pc" else files
        run("on disk", layout, {"path": str(root / layout)}, groups, hand_files=[str(f) for f in mine])
        if walk:
            walk_figures("on disk", {"path": str(root / layout)}, [str(f) for f in files])
        if not http:
            continue
        with serve_directory(root, nodelay=True) as server:
            urls = [f"{server.url}/{f.relative_to(root).as_posix()}" for f in files]
            hand = [
                u.replace("http://", "plainhttp://")
                for u in urls
                if f"{cid}.parquet" in u or layout == "hive"
            ]
            run("over HTTP", layout, {"urls": urls}, groups, server, hand)
            if walk:
                walk_figures("over HTTP", {"urls": urls}, [str(f) for f in files], server)


if __name__ == "__main__":
    main()
