"""Every query shape on stac-geoparquet, ours beside DuckDB's own SQL on the same files in the
same run (`python benchmarks/bench_geoparquet.py --matrix N`).

Sources: the narrow one-file catalog of bench_geoparquet.py (N items, one row group a 50,000),
and the partitioned snapshot of bench_snapshot_scale.py (N items in the Planetary Computer's
parts and in hive folders, cached), each on disk and over the test bed's Range HTTP server.

Shapes, each the first page of 100 with `fields=["id"]` (what a user asks to list matches): the
default (newest first), a bbox, an intersects polygon (a triangle), a quarter's datetime, a CQL2
filter `eo:cloud_cover < 5`, all four together sorted by cloud cover, a sortby on a property, five
ids, a collection, and the exact count of a bbox (`detail="count"`); then a 20-page walk with the
CQL2 filter. The baseline is the SQL a DuckDB user writes for the same answer (`SELECT id ... WHERE
... ORDER BY <pgstac's order> LIMIT 100`; the triangle's exact test with shapely over the bbox
candidates, DuckDB's spatial extension being unavailable here), over HTTP through a plain fsspec
range-request filesystem (httpfs cannot be downloaded here). Every page is checked equal to
DuckDB's. Our first page also carries `matched`, the count of every match: DuckDB's count by
hand of the same search (`count_by_hand`: the footprints of a bbox's or a polygon's candidates
tested exactly, as ours are) is timed beside it and checked equal, and each row gives the ratio
to DuckDB's page alone and to its page and count (the same answer; the page alone where ours
leaves `matched` unknown). The exact count of a bbox is set beside DuckDB's exact count too
(the count of the bbox overlap, no exact test, is printed for reference). Times are medians of ROUNDS runs taken in turn (the machine's load falls on both).
DuckDB by hand runs in a process of its own (`Hand`: spawned, asked through a pipe, its time
the wall time of a call, the pipe's round trip under a millisecond included), and so does the
Range server (`served_apart`), so each peak RSS is measured alone: ours is the server's process
(the catalog's DuckDB inside it counted), and DuckDB's by hand is its process's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from common import bench_workspace, median_s

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))  # more on a loaded machine
PAGE = 100
BOX = [-10.0, 30.0, 40.0, 60.0]
TRIANGLE = {"type": "Polygon", "coordinates": [[[-10.0, 30.0], [40.0, 30.0], [15.0, 60.0], [-10.0, 30.0]]]}
QUARTER = ("2023-01-01T00:00:00Z/2023-03-31T23:59:59Z", datetime(2023, 1, 1, tzinfo=UTC),
           datetime(2023, 3, 31, 23, 59, 59, tzinfo=UTC))  # fmt: skip
CLOUDY = '"eo:cloud_cover" < 5'
NEWEST = "ORDER BY datetime DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST"
CLEAREST = 'ORDER BY "eo:cloud_cover" ASC NULLS LAST, collection ASC NULLS LAST, id ASC NULLS LAST'
CLOUDIEST = 'ORDER BY "eo:cloud_cover" DESC NULLS FIRST, collection DESC NULLS FIRST, id DESC NULLS FIRST'
OVERLAP = "bbox.xmin <= {e} AND bbox.xmax >= {w} AND bbox.ymin <= {n} AND bbox.ymax >= {s}"
INSIDE = "bbox.xmin >= {w} AND bbox.xmax <= {e} AND bbox.ymin >= {s} AND bbox.ymax <= {n}"
SHAPES = [k for k in os.environ.get("BENCH_SHAPES", "").split(",") if k]  # only the rows named so (prefixes)


def _overlap(box) -> str:
    w, s, e, n = box
    return OVERLAP.format(w=w, s=s, e=e, n=n)


def _chosen(name: str) -> bool:
    """Whether the row `name` is measured (BENCH_SHAPES: the prefixes of the rows to measure)."""
    return not SHAPES or any(name.startswith(k) for k in SHAPES)


def _inside(box) -> str:
    w, s, e, n = box
    return INSIDE.format(w=w, s=s, e=e, n=n)


def shapes(collection: str, ids: list[str]) -> dict[str, tuple[dict, str, str]]:
    """name -> (our search arguments, DuckDB's WHERE, DuckDB's ORDER BY)."""
    when = f"datetime >= TIMESTAMPTZ '{QUARTER[1].isoformat()}' AND datetime <= TIMESTAMPTZ '{QUARTER[2].isoformat()}'"
    listed = ", ".join(f"'{i}'" for i in ids)
    return {
        "default (newest first)": ({}, "TRUE", NEWEST),
        "bbox": ({"bbox": BOX}, _overlap(BOX), NEWEST),
        "intersects (a triangle)": ({"intersects": TRIANGLE}, _overlap(BOX), NEWEST),
        "datetime (a quarter)": ({"datetime": QUARTER[0]}, when, NEWEST),
        "CQL2 filter cloud < 5": ({"filter": CLOUDY}, CLOUDY, NEWEST),
        "bbox+datetime+filter, sortby -cloud": (
            {"bbox": BOX, "datetime": QUARTER[0], "filter": CLOUDY, "sortby": "-eo:cloud_cover"},
            f"{_overlap(BOX)} AND {when} AND {CLOUDY}",
            CLOUDIEST,
        ),
        "sortby cloud": ({"sortby": "eo:cloud_cover"}, "TRUE", CLEAREST),
        "five ids": ({"ids": ids}, f"id IN ({listed})", NEWEST),
        "a collection": ({"collections": [collection]}, f"collection = '{collection}'", NEWEST),
    }


def count_by_hand(con, source: str, where: str, exact=None, inside: str | None = None) -> int:
    """DuckDB's own SQL for the count of a search; `exact`: a shapely geometry the footprints of
    the candidates are tested against, those `inside` (SQL: their bbox inside a search bbox)
    counted without it."""
    if exact is None:
        return con.sql(f"SELECT count(*) FROM {source} WHERE {where}").fetchall()[0][0]
    import shapely

    sure = (
        con.sql(f"SELECT count(*) FROM {source} WHERE {where} AND {inside}").fetchall()[0][0] if inside else 0
    )
    doubtful = con.sql(
        f"SELECT geometry FROM {source} WHERE {where} AND NOT ({inside or 'FALSE'})"
    ).fetchall()
    return sure + int(shapely.intersects(shapely.from_wkb([r[0] for r in doubtful]), exact).sum())


def by_hand(con, source: str, where: str, order: str, offset: int = 0, exact=None) -> list[str]:
    """DuckDB's own SQL for one page of ids; `exact`: a shapely geometry the footprints of the
    bbox candidates are tested against (read in chunks until the page is full)."""
    if exact is None:
        rows = con.sql(f"SELECT id FROM {source} WHERE {where} {order} LIMIT {PAGE} OFFSET {offset}")
        return [r[0] for r in rows.fetchall()]
    import shapely

    found, at = [], 0
    while len(found) < offset + PAGE:
        rows = con.sql(
            f"SELECT id, geometry FROM {source} WHERE {where} {order} LIMIT 1000 OFFSET {at}"
        ).fetchall()
        if rows:
            hits = shapely.intersects(shapely.from_wkb([r[1] for r in rows]), exact)
            found += [r[0] for r, hit in zip(rows, hits, strict=True) if hit]
        if len(rows) < 1000:
            break
        at += 1000
    return found[offset : offset + PAGE]


class Hand:
    """DuckDB's own SQL by hand in a spawned process of its own (its memory apart from ours):
    `page` and `scalar` run there, `peak_mb` is that process's peak RSS."""

    def __init__(self, http: bool):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=_hand_loop, args=(child, http), daemon=True)
        self.process.start()

    def _ask(self, *message):
        self.pipe.send(message)
        kind, value = self.pipe.recv()
        if kind == "error":
            raise RuntimeError(f"DuckDB by hand: {value}")
        return value

    def page(self, source: str, where: str, order: str, offset: int = 0, exact=None) -> list[str]:
        return self._ask("page", source, where, order, offset, exact)

    def scalar(self, sql: str):
        return self._ask("scalar", sql)

    def count(self, source: str, where: str, exact=None, inside: str | None = None) -> int:
        return self._ask("count", source, where, exact, inside)

    def peak_mb(self) -> float:
        return self._ask("peak")

    def reset(self) -> None:
        self._ask("reset")

    def close(self) -> None:
        self.pipe.send(None)
        self.process.join(30)


def _hand_loop(pipe, http: bool) -> None:
    """The by-hand process: one DuckDB connection, answering `Hand`'s messages until None."""
    from measure import peak_rss_mb, reset_peak

    con = _connection(http)
    while (message := pipe.recv()) is not None:
        kind, *args = message
        try:
            if kind == "page":
                answer = by_hand(con, *args)
            elif kind == "scalar":
                answer = con.sql(args[0]).fetchall()[0][0]
            elif kind == "count":
                answer = count_by_hand(con, *args)
            elif kind == "peak":
                answer = peak_rss_mb()
            else:
                answer = reset_peak()
            pipe.send(("ok", answer))
        except Exception as exc:  # the benchmark stops, saying what DuckDB said
            pipe.send(("error", f"{type(exc).__name__}: {exc}"))
    con.close()


@contextmanager
def served_apart(root: Path) -> Iterator[str]:
    """The test bed's Range server on `root` in a spawned process of its own (the bytes it reads
    for ours and for DuckDB by hand are not counted in either's memory): its URL."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    pipe, child = context.Pipe()
    process = context.Process(target=_serve, args=(child, str(root)), daemon=True)
    process.start()
    try:
        yield pipe.recv()
    finally:
        pipe.send(None)
        process.join(30)


def _serve(pipe, root: str) -> None:
    from testbed import serve_directory

    with serve_directory(root, nodelay=True) as server:
        pipe.send(server.url)
        pipe.recv()


def _connection(http: bool):
    import duckdb
    from bench_snapshot_scale import plain_http

    con = duckdb.connect(config={"memory_limit": "512MB"})
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET parquet_metadata_cache = true")  # as ours keeps footers
    if http:
        con.register_filesystem(plain_http())
    return con


def matrix(label: str, catalog: dict, files: list[str], collection: str, walk: bool = True) -> dict:
    """The shapes on one source: prints a row per shape, returns the figures."""
    from measure import peak_rss_mb, reset_peak
    from shapely.geometry import box, shape

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.settings import load_settings

    hand = Hand(files[0].startswith("plainhttp://"))
    source = (
        "read_parquet(["
        + ", ".join(f"'{f}'" for f in files)
        + "], union_by_name = true, hive_partitioning = false)"
    )
    ids = hand.scalar(f"SELECT list(id) FROM (SELECT id FROM {source} USING SAMPLE 5 ROWS)")
    settings = load_settings(
        catalogs=[{"id": "gp", **catalog}],
        default_catalog="gp",
        network={"allow_private_hosts": True},
        workspace=bench_workspace(),
    )
    out: dict = {"rows": []}
    with Session(settings) as session:
        started = time.perf_counter()
        session.search(limit=1, fields=["id"])  # the files checked (footers), timed apart
        opened = time.perf_counter() - started
        hand.page(source, "TRUE", NEWEST)  # DuckDB's footers read once too
        print(f"{label}: catalog opened in {opened:.2f} s; first page of {PAGE} ids, median of {ROUNDS}")
        if _chosen("exact count of a bbox"):
            _first_count(session)
        reset_peak()
        hand.reset()
        for name, (args, where, order) in shapes(collection, ids).items():
            if not _chosen(name):
                continue
            exact = shape(TRIANGLE) if "intersects" in args else box(*BOX) if "bbox" in args else None
            inside = _inside(BOX) if "bbox" in args else None
            polygon = exact if "intersects" in args else None  # a bbox's footprints are its squares
            (ours_s, page), (hand_s, answer), (count_s, matched) = median_s(
                lambda args=args: session.search(limit=PAGE, fields=["id"], **args),
                lambda where=where, order=order, polygon=polygon: hand.page(source, where, order, 0, polygon),
                lambda where=where, exact=exact, inside=inside: hand.count(source, where, exact, inside),
                rounds=ROUNDS,
            )
            assert [i.id for i in page.items] == answer, f"{label} {name}: ours and DuckDB differ"
            assert page.matched in (matched, None), (
                f"{label} {name}: matched {page.matched}, DuckDB {matched}"
            )
            same = hand_s + (count_s if page.matched is not None else 0)
            _row(out, name + ("" if page.matched is not None else " (matched unknown)"), ours_s, hand_s, same)
        if _chosen("exact count of a bbox"):
            (ours_s, counted), (hand_s, answer), (overlap_s, _) = median_s(
                lambda: session.search(detail="count", bbox=BOX).matched,
                lambda: hand.count(source, _overlap(BOX), box(*BOX), _inside(BOX)),
                lambda: hand.scalar(f"SELECT count(*) FROM {source} WHERE {_overlap(BOX)}"),
                rounds=ROUNDS,
            )
            # None: the footprints to test were past the count's bounds (count limits, query_timeout_s)
            assert counted in (answer, None), f"{label} count: ours {counted}, DuckDB {answer}"
            name = "exact count of a bbox" + (" (unknown)" if counted is None else "")
            _row(out, name, ours_s, hand_s, hand_s)
            print(
                f"  {'':38s} (DuckDB's count of the bbox overlap alone, no exact test: {overlap_s * 1000:.0f} ms)"
            )
        if walk and _chosen("20-page walk"):
            ours_s, hand_s = _walk(session, hand, source)
            _row(out, "20-page walk, CQL2 filter", ours_s, hand_s)
        out["rss"], out["hand_rss"] = peak_rss_mb(), hand.peak_mb()
    hand.close()
    print(
        f"  peak RSS: ours (the server's process, its DuckDB inside) {out['rss']:.0f} MiB; "
        f"DuckDB by hand (its own process) {out['hand_rss']:.0f} MiB"
    )
    return out


def _first_count(session) -> None:
    """The first count of a bbox (every doubtful footprint read), then the time the footprints'
    marks take in the background (discovery/footprints.py: files on disk); the shapes after
    are measured with them."""
    started = time.perf_counter()
    session.search(detail="count", bbox=BOX)
    first = time.perf_counter() - started
    try:
        from stac_gdal_mcp.discovery.footprints import marks_of
    except ImportError:  # a version of the package without marks, measured beside this one
        return print(f"  the first count of a bbox {first * 1000:.0f} ms (no marks)")
    cat = session.core.catalogs.get("gp")
    marks = marks_of(cat)
    while not marks.idle:
        time.sleep(0.02)
    copies = getattr(getattr(cat, "reader", None), "copies", None)  # HTTP parts copied (local_copies.py)
    if cat.urls is not None and copies is not None:
        copies.wait()
    print(
        f"  the first count of a bbox {first * 1000:.0f} ms; footprints marked"
        f"{'' if copies is None or cat.urls is None else ' and parts copied'} in the background "
        f"{time.perf_counter() - started - first:.2f} s after"
    )


def _walk(session, hand: Hand, source: str) -> tuple[float, float]:
    """20 pages of the CQL2 filter, ours through the cursors and DuckDB by OFFSET, each page checked."""
    started, cursor, pages = time.perf_counter(), None, []
    for _ in range(20):
        page = session.search(limit=PAGE, fields=["id"], filter=CLOUDY, cursor=cursor)
        pages.append([i.id for i in page.items])
        cursor = page.next_cursor
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    answers = [hand.page(source, CLOUDY, NEWEST, k * PAGE) for k in range(20)]
    hand_s = time.perf_counter() - started
    assert pages == answers, "the walks differ"
    return ours_s, hand_s


def _row(out: dict, name: str, ours_s: float, hand_s: float, same_s: float | None = None) -> None:
    """A row: ours, DuckDB's page (or query) alone and the ratio; with `same_s`, DuckDB's time
    for the same answer (its page and its count) and the ratio to it."""
    same_s = hand_s if same_s is None else same_s
    out["rows"].append((name, ours_s, hand_s, same_s))
    print(
        f"  {name:38s} ours {ours_s * 1000:7.0f} ms   DuckDB {hand_s * 1000:7.0f} ms   {ours_s / hand_s:5.2f}x"
        f"   with its count {same_s * 1000:7.0f} ms   {ours_s / same_s:5.2f}x"
    )


def run(
    items: int,
    layouts: tuple[str, ...] = ("file", "pc", "hive"),
    http: bool = True,
    walk: bool = True,
    disk: bool = True,
) -> None:
    """The matrix at `items` items: each layout on disk, then over HTTP."""
    import os
    import tempfile

    from bench_geoparquet import generate

    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    sources = []
    if "file" in layouts:
        path = generate(Path(tempfile.gettempdir()) / f"bench-geoparquet-{items}.parquet", items)
        sources.append(("one file", path.parent, [path], "sentinel-2-l2a"))
    if {"pc", "hive"} & set(layouts):
        from bench_snapshot_scale import _parts
        from bench_snapshot_scale import generate as snapshot

        root = snapshot(items)
        for layout in ("pc", "hive"):
            if layout in layouts:
                sources.append((f"{layout} parts", root, _parts(root / layout), "sentinel-2-l2a"))
    for label, root, paths, collection in sources:
        whole = {"path": str(paths[0] if len(paths) == 1 else root / label.split()[0])}
        if disk:
            matrix(f"{label}, {items:,} items, on disk", whole, [str(p) for p in paths], collection, walk)
        if http:
            with served_apart(root) as served:
                urls = [f"{served}/{p.relative_to(root).as_posix()}" for p in paths]
                catalog = {"url": urls[0]} if len(urls) == 1 else {"urls": urls}
                plain = [u.replace("http://", "plainhttp://") for u in urls]
                matrix(f"{label}, {items:,} items, over HTTP", catalog, plain, collection, walk)
        print(f"  load average now: {os.getloadavg()[0]:.1f}")
