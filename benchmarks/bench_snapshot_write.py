"""Writing stac-geoparquet snapshots: `catalogs.snapshot_write.write_snapshot`, side by
side with what a user of stac-geoparquet and DuckDB would run by hand, on the same items in the
same run.

Items: the real Planetary Computer items of tests/real_items (the 2-D-bbox ones: 12 collections,
about 750 leaf columns together), copied `--items` times over with ids and datetimes shifted a
day a copy (made lazily: neither side holds them all as dicts).

1. one file: ours vs stac-geoparquet's `parse_stac_items_to_parquet(schema="ChunksToDisk")`;
2. hive folders collection/year/month, rows sorted by datetime: ours vs stac-geoparquet's one
   file followed by DuckDB's `COPY (SELECT *, year, month ... ORDER BY datetime) TO ...
   (PARTITION_BY (collection, year, month))` (which drops the geo and stac-geoparquet metadata);

each: wall time, peak RSS during the write (benchmarks/measure.py), bytes written, and the
ratio ours / baseline.

Run: python benchmarks/bench_snapshot_write.py [--items N]
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

ALL = ["collection", "year", "month"]


def items(base: list[dict], n: int) -> Iterator[dict]:
    """`n` items: copy r of the base items has ids `<id>-r<r>` and datetimes r days later."""
    from real_snapshots import TIMES, _later

    made = 0
    r = 0
    while made < n:
        for item in base:
            if made >= n:
                return
            c = copy.deepcopy(item)
            c["id"] = f"{item['id']}-r{r}"
            for key in TIMES:
                if c["properties"].get(key) is not None:
                    c["properties"][key] = _later(c["properties"][key], r)
            made += 1
            yield c
        r += 1


def size(path: Path) -> int:
    return (
        path.stat().st_size
        if path.is_file()
        else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    )


def measured(label: str, run) -> tuple[float, float, int]:
    from measure import peak_rss_mb, reset_peak

    reset_peak()
    start = time.perf_counter()
    out = run()
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    written = size(out)
    print(f"  {label:<44} {seconds:7.2f} s  peak RSS {peak:7.0f} MiB  {written / 2**20:7.1f} MiB")
    return seconds, peak, written


def main() -> None:
    import duckdb
    from real_snapshots import collections, real_items
    from stac_geoparquet.arrow import parse_stac_items_to_parquet

    from stac_gdal_mcp.catalogs.snapshot_write import write_snapshot

    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20_000)
    n = parser.parse_args().items
    base = real_items(2)
    described = {c["id"]: c for c in collections(base)}
    print(f"{n:,} items: copies of {len(base)} real Planetary Computer items, {len(described)} collections")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def theirs_file() -> Path:
            out = root / "theirs.parquet"
            with tempfile.TemporaryDirectory(dir=root) as work:
                parse_stac_items_to_parquet(
                    items(base, n), output_path=out, schema="ChunksToDisk", tmpdir=work, collections=described
                )
            return out

        def ours_file() -> Path:
            out = root / "ours.parquet"
            write_snapshot(items(base, n), out, collections=described.values())
            return out

        def theirs_hive() -> Path:
            out = root / "theirs-hive"
            one = theirs_file()
            duckdb.sql(
                "SET preserve_insertion_order = false; "
                f"COPY (SELECT *, year(datetime) AS year, month(datetime) AS month FROM read_parquet('{one}') "
                f"ORDER BY datetime) TO '{out}' (FORMAT parquet, PARTITION_BY (collection, year, month))"
            )
            one.unlink()
            return out

        def ours_hive() -> Path:
            out = root / "ours-hive"
            write_snapshot(items(base, n), out, collections=described.values(), partition_by=ALL)
            return out

        for title, ours, theirs in (
            ("one file", ours_file, theirs_file),
            ("hive folders collection/year/month", ours_hive, theirs_hive),
        ):
            print(title)
            b = measured(
                "baseline (stac-geoparquet" + (" + DuckDB COPY)" if "hive" in title else ")"), theirs
            )
            o = measured("ours (write_snapshot)", ours)
            print(
                f"  ratio ours/baseline: time {o[0] / b[0]:.2f}x, peak RSS {o[1] / b[1]:.2f}x, bytes {o[2] / b[2]:.2f}x"
            )
        count = duckdb.sql(
            f"SELECT count(*) FROM read_parquet('{root}/ours-hive/**/*.parquet', hive_partitioning = true, "
            "union_by_name = true)"
        ).fetchall()[0][0]
        assert count == n, count


if __name__ == "__main__":
    main()
