"""stac-geoparquet catalog figures. Prints ratios against baselines run side by side.

On a generated 1,000,000-item stac-geoparquet file (written once by stac-geoparquet, cached in
the temp directory), one query - bbox + datetime + cloud filter + sortby, first page of 100:

1. ours: `search_items` on a `[[catalogs]] path = "....parquet"` catalog (plan, SQL, exact
   footprint test, Arrow -> STAC items, summaries), median of 5, vs the same query written by
   hand in DuckDB SQL over the same file and turned into items the same way (target <= 2.0x,
   and under 1 s);
2. rustac's `DuckdbClient.search` on the same file (reported when it can run: it needs DuckDB's
   `spatial` extension, which it downloads from extensions.duckdb.org);
3. paging 20 pages deep through the cursors: every page under 1 s;
4. peak RSS of this process during the searches (benchmarks/measure.py), target under 1 GiB;
5. the file as a `url = "http://.../x.parquet"` catalog, served by the test bed's Range server
   (tests/testbed, TCP_NODELAY as production servers) with delay_s 0 and 50 ms a request: the
   first page (a new catalog each round: version, footer and row groups read over HTTP, median
   of 5) vs the local file's first page (a new catalog each round too), the bytes it read, and
   the same page again (blocks cached).

Run: python benchmarks/bench_geoparquet.py [--items N]

`--matrix N` (bench_query_shapes.py): every query shape; `--layouts`, `--no-http`, `--no-disk`,
`--no-walk` choose the sources, BENCH_SHAPES=bbox,CQL2,exact (prefixes of the rows' names) the rows.

`--snapshots N`: N rows of the real Planetary Computer items of 13 collections
(tests/real_snapshots.py: about 750 leaf columns) written as one wide file and in the Planetary
Computer's part layout; for each, on disk (and the wide file over the Range server): the first
page and a 20-page walk at limit 100, ours vs DuckDB's own best SQL by hand (SELECT * ... ORDER BY
... LIMIT 100 OFFSET k, with late_materialization_max_rows raised so it fits in 512 MB), the parts
a one-month one-collection search opens, and peak RSS (ours only, measured before DuckDB's run).
Over HTTP DuckDB's baseline reads the local file: its httpfs extension is downloaded on first use,
which this machine cannot.

`--snapshot-scale N` (10,000,000 in docs/figures.md): a partitioned snapshot of N narrow
items in both published layouts, on disk and over the Range server: the parts, row groups and
bytes a one-month one-collection search opens, its time, the default search's first page and
20-page walk at limit 100, and peak RSS, each beside DuckDB's own SQL by hand on the same files
(benchmarks/bench_snapshot_scale.py, whose docstring says how).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # testbed: the Range server

from common import ROUNDS, bench_workspace, median_s  # noqa: E402

PAGE = 100
BBOX = [-10.0, 30.0, 40.0, 60.0]
DATETIME = "2023-01-01/2023-12-31"
MAX_CLOUD = 50.0
SORTBY = "-eo:cloud_cover"
START = datetime(2020, 1, 1, tzinfo=UTC)


def _item(index: int, rng: random.Random) -> dict:
    """A Sentinel-2-like item: a ~1 degree square footprint somewhere on land-ish latitudes."""
    west, south = rng.uniform(-179, 178), rng.uniform(-60, 69)
    east, north = west + 1.0, south + 1.0
    when = START + timedelta(seconds=index * 157)  # ~5 years, in time order like real snapshots
    return {
        "type": "Feature",
        "stac_version": "1.0.0",
        "stac_extensions": [],
        "id": f"S2_{index:07d}",
        "collection": "sentinel-2-l2a",
        "geometry": {
            "type": "Polygon",
            "coordinates": [[[west, south], [east, south], [east, north], [west, north], [west, south]]],
        },
        "bbox": [west, south, east, north],
        "properties": {
            "datetime": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "platform": "sentinel-2a" if index % 2 else "sentinel-2b",
            "eo:cloud_cover": round(rng.uniform(0, 100), 2),
            "proj:code": "EPSG:32633",
        },
        "links": [],
        "assets": {
            band: {"href": f"https://example.com/S2_{index:07d}/{band}.tif", "type": "image/tiff"}
            for band in ("red", "green", "blue", "nir")
        },
    }


def generate(path: Path, n: int) -> Path:
    """`n` items written as stac-geoparquet by the stac-geoparquet library, streamed."""
    from stac_geoparquet.arrow import parse_stac_items_to_arrow, to_parquet

    if path.exists():
        return path
    rng = random.Random(21)
    started = time.perf_counter()
    reader = parse_stac_items_to_arrow(
        (_item(i, rng) for i in range(n)), chunk_size=50_000, schema="FirstBatch"
    )
    part = path.with_suffix(".part")
    to_parquet(reader, part)  # one row group per batch of 50,000
    part.rename(path)
    print(f"generated {n:,} items in {time.perf_counter() - started:.0f} s: {path}", flush=True)
    return path


def direct_sql(con, path: Path) -> list[dict]:
    """The same query written by hand in DuckDB SQL (one connection kept, as ours keeps one),
    rows turned into items by stac-geoparquet."""
    from stac_geoparquet.arrow import stac_table_to_items

    west, south, east, north = BBOX
    table = con.sql(
        f"""SELECT * FROM read_parquet('{path}')
        WHERE bbox.xmin <= ? AND bbox.xmax >= ? AND bbox.ymin <= ? AND bbox.ymax >= ?
          AND datetime >= ? AND datetime <= ? AND "eo:cloud_cover" <= ?
        ORDER BY "eo:cloud_cover" DESC, collection DESC, id DESC LIMIT {PAGE}""",
        params=[
            east,
            west,
            north,
            south,
            datetime(2023, 1, 1, tzinfo=UTC),
            datetime(2023, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            MAX_CLOUD,
        ],
    ).to_arrow_table()
    return list(stac_table_to_items(table))


def ours(session, cursor=None):
    from stac_gdal_mcp.discovery.query import ItemSearch
    from stac_gdal_mcp.discovery.sources import open_source

    request = ItemSearch.of(
        bbox=BBOX, datetime=DATETIME, max_cloud_cover=MAX_CLOUD, sortby=SORTBY, limit=PAGE, cursor=cursor
    )
    return open_source(session, "big").search(request)


def rustac_search(path: Path):
    import rustac

    client = rustac.DuckdbClient()
    return client.search(
        str(path),
        bbox=BBOX,
        datetime=DATETIME,
        filter=f'"eo:cloud_cover" <= {MAX_CLOUD}',
        sortby=SORTBY,
        limit=PAGE,
    )


def over_http(path: Path) -> None:
    """Row 5: the first page over HTTP range requests vs the local file's."""
    from stac_gdal_mcp.core import Core
    from stac_gdal_mcp.settings import load_settings
    from testbed import serve_directory

    def fresh(catalog: dict) -> Core:
        network = {"allow_private_hosts": True}  # the Range server is on loopback
        return Core(
            load_settings(
                catalogs=[{"id": "big", **catalog}],
                default_catalog="big",
                network=network,
                workspace=bench_workspace(),
            )
        )

    print(f"over HTTP range requests (first page, a new catalog each time, median of {ROUNDS}):")
    for delay_s in (0.0, 0.05):
        with serve_directory(path.parent, delay_s=delay_s, nodelay=True) as server:
            url = {"url": f"{server.url}/{path.name}"}
            ours(fresh(url))  # imports and the first connection, not measured
            server.reset_stats()
            (http_s, page), (local_s, local) = median_s(
                lambda url=url: ours(fresh(url)), lambda: ours(fresh({"path": str(path)}))
            )
            assert [i.id for i in page.items] == [i.id for i in local.items], "HTTP and the file differ"
            stats = server.stats()
            core = fresh(url)
            ours(core)
            ((again_s, _),) = median_s(lambda core=core: ours(core))
            print(
                f"  delay {delay_s * 1000:.0f} ms: HTTP {http_s * 1000:.0f} ms vs local {local_s * 1000:.0f} ms "
                f"({http_s / local_s:.1f}x); {stats['bytes'] / ROUNDS / 1024**2:.1f} MiB in "
                f"{stats['requests'] / ROUNDS:.0f} requests a page ({stats['bytes'] / ROUNDS / path.stat().st_size:.0%} "
                f"of the file); the page again (cached) {again_s * 1000:.0f} ms"
            )


def by_hand(con, source: str, offset: int) -> list[str]:
    """DuckDB's own best SQL for one page of the default search (datetime desc, pgstac's ties),
    the rows turned into items (stac-geoparquet's conversion, as `rows_as_items` does it)."""
    from stac_gdal_mcp.catalogs.geoparquet import rows_as_items

    when = "(CASE WHEN start_datetime IS NOT NULL AND end_datetime IS NOT NULL THEN start_datetime ELSE datetime END)"
    table = con.sql(
        f"SELECT * FROM {source} ORDER BY {when} DESC NULLS FIRST, collection DESC, id DESC "
        f"LIMIT {PAGE} OFFSET {offset}"
    ).to_arrow_table()
    return [item["id"] for item in rows_as_items(table)]  # turned into items, as ours are


def snapshots(rows: int) -> None:
    """The --snapshots rows (see the module docstring)."""
    import duckdb
    import real_snapshots as rs
    from measure import peak_rss_mb, reset_peak

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.discovery import params as p
    from stac_gdal_mcp.settings import load_settings

    root = Path(tempfile.gettempdir()) / f"bench-snapshots-{rows}"
    items = rs.real_items()
    if not (root / "done").exists():
        tbl = rs.by_time(rs.repeated(rs.table(rs.copies(items, 1)), -(-rows // len(items))), "collection")
        rs.write(tbl, root / "one.parquet", rs.collections(items))
        rs.write_pc_layout(tbl, root / "pc", described=rs.collections(items))
        (root / "done").touch()
        del tbl
    parts = sorted(f for f in (root / "pc").rglob("*.parquet") if f.is_file())
    print(
        f"snapshot: {rows:,} rows of the real items; one file {(root / 'one.parquet').stat().st_size / 1024**2:.0f} MiB, "
        f"{len(parts)} parts {sum(f.stat().st_size for f in parts) / 1024**2:.0f} MiB"
    )

    def run(name: str, catalog: dict, files: list[Path]) -> None:
        settings = load_settings(
            catalogs=[{"id": "gp", **catalog}],
            default_catalog="gp",
            network={"allow_private_hosts": True},
            workspace=bench_workspace(),
        )
        con = duckdb.connect(config={"memory_limit": "512MB"})
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET late_materialization_max_rows = 10000")
        listed = ", ".join(f"'{f}'" for f in files)
        source = f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"
        with Session(settings) as session:
            session.search(limit=1)  # the files checked once (footers), not measured
            reset_peak()
            ((first_s, page),) = median_s(lambda: session.search(limit=PAGE))
            started, cursor = time.perf_counter(), page.next_cursor
            for _ in range(19):
                cursor = session.search(limit=PAGE, cursor=cursor).next_cursor
            walk_s = time.perf_counter() - started + first_s
            rss = peak_rss_mb()  # ours only: DuckDB by hand runs after
            ((hand_s, ids),) = median_s(lambda: by_hand(con, source, 0))
            assert list(page.ids) == ids, "ours and DuckDB differ"
            started = time.perf_counter()
            for k in range(20):
                by_hand(con, source, k * PAGE)
            hand_walk_s = time.perf_counter() - started
            cat = session.core.catalogs.get("gp")
            start, end = p.datetime_interval("2023-01-01T00:00:00Z/2023-01-31T23:59:59Z")
            kept = cat.parts(["naip"], start, end)
            kept = files if kept is None else kept
        print(
            f"  {name}: first page {first_s * 1000:.0f} ms vs DuckDB {hand_s * 1000:.0f} ms ({first_s / hand_s:.2f}x); "
            f"20 pages {walk_s:.1f} s vs {hand_walk_s:.1f} s ({walk_s / hand_walk_s:.2f}x); peak RSS {rss:.0f} MiB; "
            f"naip January 2023 opens {len(kept)} of {len(files)} files"
        )

    run("one wide file on disk", {"path": str(root / "one.parquet")}, [root / "one.parquet"])
    run("Planetary Computer parts on disk", {"path": str(root / "pc")}, parts)
    from testbed import serve_directory

    with serve_directory(root, nodelay=True) as server:
        run("one wide file over HTTP", {"url": f"{server.url}/one.parquet"}, [root / "one.parquet"])


def main() -> None:
    import duckdb
    from measure import peak_rss_mb, reset_peak

    from stac_gdal_mcp.core import Core
    from stac_gdal_mcp.settings import load_settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--http-only", action="store_true", help="only row 5 (over HTTP)")
    parser.add_argument("--snapshots", type=int, help="N rows of the real items, wide and in parts")
    parser.add_argument("--snapshot-scale", type=int, help="a partitioned snapshot of N narrow items")
    parser.add_argument("--matrix", type=int, help="every query shape at N items, beside DuckDB by hand")
    parser.add_argument("--layouts", default="file,pc,hive", help="--matrix: of file, pc, hive")
    parser.add_argument("--no-http", action="store_true", help="--matrix: on disk only")
    parser.add_argument("--no-walk", action="store_true", help="--matrix: first pages only")
    parser.add_argument("--no-disk", action="store_true", help="--matrix: over HTTP only")
    args = parser.parse_args()
    if args.matrix:
        from bench_query_shapes import run

        run(
            args.matrix,
            tuple(args.layouts.split(",")),
            http=not args.no_http,
            walk=not args.no_walk,
            disk=not args.no_disk,
        )
        return
    if args.snapshot_scale:
        from bench_snapshot_scale import scale

        scale(args.snapshot_scale)
        return
    if args.snapshots:
        snapshots(args.snapshots)
        return
    path = generate(Path(tempfile.gettempdir()) / f"bench-geoparquet-{args.items}.parquet", args.items)
    print(f"file: {path.stat().st_size / 1024**2:.0f} MiB, {args.items:,} items")
    if args.http_only:
        over_http(path)
        return

    core = Core(
        load_settings(
            catalogs=[{"id": "big", "path": str(path)}], default_catalog="big", workspace=bench_workspace()
        )
    )
    reset_peak()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    (ours_s, page), (sql_s, rows) = median_s(lambda: ours(core), lambda: direct_sql(con, path))
    assert [i.id for i in page.items] == [r["id"] for r in rows], "ours and the SQL differ"
    print(f"first page ({PAGE}) bbox+datetime+cloud+sortby, median of {ROUNDS}:")
    print(f"  ours {ours_s * 1000:.0f} ms, direct DuckDB SQL {sql_s * 1000:.0f} ms: {ours_s / sql_s:.2f}x")
    try:
        ((rustac_s, found),) = median_s(lambda: rustac_search(path))
        print(
            f"  rustac {rustac_s * 1000:.0f} ms ({len(found)} items): ours / rustac {ours_s / rustac_s:.2f}x"
        )
    except Exception as exc:  # reported, not a failure of ours
        print(f"  rustac: could not run here ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
    slowest, cursor, seen = 0.0, page.next_cursor, len(page.items)
    for _ in range(20):
        started = time.perf_counter()
        page = ours(core, cursor)
        slowest = max(slowest, time.perf_counter() - started)
        seen += len(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    print(f"paging 20 pages deep ({seen} items): slowest page {slowest * 1000:.0f} ms")
    print(f"peak RSS during the searches: {peak_rss_mb():.0f} MiB")
    over_http(path)


if __name__ == "__main__":
    main()
