"""stac-geoparquet snapshots built from the real Planetary Computer items of
tests/real_items/planetary-computer: all collections in one wide file (about 750 leaf
columns), and the same rows partitioned as the Planetary Computer publishes them
(`<collection>.parquet/part-NNNN_<start>_<end>.parquet`) and in hive folders
(`collection=…/year=…/month=…`).

Copy `r` of a real item has the id `<id>-r<r>` and its datetimes `r` hours later: `copies(items, n)`
makes the dicts pgstac loads, `repeated(table, n)` the same rows in Arrow (fast: the real items are
parsed by stac-geoparquet once and their table repeated, so 100,000 rows take a second or two).
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).parent / "real_items" / "planetary-computer"
TIMES = ("datetime", "start_datetime", "end_datetime")


def real_items(dims: int | None = 2) -> list[dict]:
    """The real items (those with a `dims`-D bbox; None: all), collection links dropped."""
    out = []
    for path in sorted(HERE.glob("*.json")):
        doc = json.loads(path.read_text())
        for item in doc if isinstance(doc, list) else []:
            if dims is None or len(item["bbox"]) == 2 * dims:
                item["links"] = [
                    x for x in item.get("links", []) if x.get("rel") not in ("collection", "parent")
                ]
                out.append(item)
    return out


def collections(items: list[dict]) -> list[dict]:
    """A Collection per collection id of `items`, its extent theirs (the real ones' are not all here)."""
    out = {}
    for cid in sorted({i["collection"] for i in items}):
        out[cid] = {
            "type": "Collection",
            "stac_version": "1.0.0",
            "id": cid,
            "description": f"real Planetary Computer items of {cid}",
            "license": "other",
            "extent": {"spatial": {"bbox": [[-180, -90, 180, 90]]}, "temporal": {"interval": [[None, None]]}},
            "links": [],
        }
    return list(out.values())


def _later(value: str | None, hours: int) -> str | None:
    if value is None:
        return None
    when = datetime.fromisoformat(value.replace("Z", "+00:00")) + timedelta(hours=hours)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def copies(items: list[dict], n: int) -> list[dict]:
    """`n` copies of every item: copy r has the id `<id>-r<r>`, its datetimes r hours later."""
    out = []
    for r in range(n):
        for item in items:
            c = copy.deepcopy(item)
            c["id"] = f"{item['id']}-r{r}"
            for key in TIMES:
                if c["properties"].get(key) is not None:
                    c["properties"][key] = _later(c["properties"][key], r)
            out.append(c)
    return out


def table(items: list[dict]):
    """The items as stac-geoparquet's Arrow table."""
    from stac_geoparquet.arrow import parse_stac_items_to_arrow

    return parse_stac_items_to_arrow(items).read_all()


def repeated(base, n: int):
    """The rows of `base` (copy 0 of the items, ids `<id>-r0`) as `copies` makes n copies, in Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    for r in range(n):
        part = base
        stem = pc.replace_substring_regex(base["id"], pattern="-r0$", replacement="")
        part = part.set_column(
            part.schema.get_field_index("id"), "id", pc.binary_join_element_wise(stem, f"-r{r}", "")
        )
        for key in TIMES:
            if key in part.schema.names:
                shifted = pc.add(part[key], pa.scalar(timedelta(hours=r), pa.duration("us")))
                part = part.set_column(
                    part.schema.get_field_index(key), key, shifted.cast(part.schema.field(key).type)
                )
        parts.append(part)
    return pa.concat_tables(parts)


def write(
    tbl, path: Path, described: list[dict] | None = None, row_group_size: int = 10_000, meta=None
) -> Path:
    """`tbl` (in time order, so row groups prune: see `by_time`) as one stac-geoparquet file,
    with the metadata stac-geoparquet writes (geo, stac-geoparquet and its collections)."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    meta = meta or _metadata(tbl, described)
    pq.write_table(tbl.replace_schema_metadata(meta), path, row_group_size=row_group_size)
    return path


def _metadata(tbl, described: list[dict] | None) -> dict:
    """The schema metadata stac-geoparquet writes for `tbl` (written for one row, read back)."""
    import tempfile

    import pyarrow.parquet as pq
    from stac_geoparquet.arrow import to_parquet

    with tempfile.TemporaryDirectory() as work:
        one = Path(work) / "one.parquet"
        to_parquet(tbl.slice(0, 1), one, collections={c["id"]: c for c in described or []} or None)
        return pq.read_schema(one).metadata


def by_time(tbl, *first):
    """The rows sorted by `first` columns, then datetime (start_datetime where it is null)."""
    import pyarrow.compute as pc

    when = pc.coalesce(*[tbl[k] for k in ("datetime", "start_datetime") if k in tbl.schema.names])
    keyed = tbl.append_column("__when", when)
    order = pc.sort_indices(keyed, sort_keys=[*[(c, "ascending") for c in first], ("__when", "ascending")])
    return tbl.take(order)


def _months(tbl):
    """(year, month) of every row's datetime (start_datetime where it is null), as Python lists."""
    import pyarrow.compute as pc

    when = pc.coalesce(*[tbl[k] for k in ("datetime", "start_datetime") if k in tbl.schema.names])
    return pc.year(when).to_pylist(), pc.month(when).to_pylist()


def _runs(keys: list) -> list[tuple[object, int, int]]:
    """(key, first row, row count) of each run of equal consecutive keys."""
    runs: list[list] = []
    for n, key in enumerate(keys):
        if runs and runs[-1][0] == key:
            runs[-1][2] += 1
        else:
            runs.append([key, n, 1])
    return [tuple(r) for r in runs]


def write_pc_layout(
    tbl, root: Path, months_per_part: int = 1, described: list[dict] | None = None
) -> list[Path]:
    """The Planetary Computer layout: `<root>/<collection>.parquet/part-NNNN_<start>_<end>.parquet`,
    one part per `months_per_part` months (start and end as the PC names them, %Y-%m-%dT%H:%M:%S).
    `tbl` sorted by collection and time (`by_time(tbl, "collection")`)."""
    meta = _metadata(tbl, described)
    years, months = _months(tbl)
    slots = [(y * 12 + m - 1) // months_per_part for y, m in zip(years, months, strict=True)]
    written, numbered = [], {}
    for (cid, s), first, n in _runs(list(zip(tbl["collection"].to_pylist(), slots, strict=True))):
        start, end = s * months_per_part, (s + 1) * months_per_part
        number = numbered[cid] = numbered.get(cid, -1) + 1
        name = (
            f"part-{number:04d}_{datetime(start // 12, start % 12 + 1, 1):%Y-%m-%dT%H:%M:%S}"
            f"_{datetime(end // 12, end % 12 + 1, 1):%Y-%m-%dT%H:%M:%S}.parquet"
        )
        written.append(write(tbl.slice(first, n), root / f"{cid}.parquet" / name, meta=meta))
    return written


def write_hive_layout(tbl, root: Path, described: list[dict] | None = None) -> list[Path]:
    """Hive folders `<root>/collection=<c>/year=<y>/month=<m>/part-<k>.parquet` (the columns kept
    in the files too, as stac-geoparquet writers keep them). `tbl` sorted as for `write_pc_layout`."""
    meta = _metadata(tbl, described)
    years, months = _months(tbl)
    keys = list(zip(tbl["collection"].to_pylist(), years, months, strict=True))
    written, numbered = [], {}
    for (c, y, m), first, n in _runs(keys):
        number = numbered[c, y, m] = numbered.get((c, y, m), -1) + 1
        folder = root / f"collection={c}" / f"year={y}" / f"month={m}"
        written.append(write(tbl.slice(first, n), folder / f"part-{number}.parquet", meta=meta))
    return written


def count_by_hand(files, bbox) -> int:
    """DuckDB's exact count of a bbox over `files`: the rows whose bbox overlaps it, their
    footprints tested with shapely."""
    import duckdb
    import shapely
    from shapely.geometry import box

    w, s, e, n = bbox
    listed = ", ".join(f"'{f}'" for f in files)
    rows = duckdb.sql(
        f"SELECT geometry FROM read_parquet([{listed}], union_by_name = true, hive_partitioning = false) "
        f"WHERE bbox.xmin <= {e} AND bbox.xmax >= {w} AND bbox.ymin <= {n} AND bbox.ymax >= {s}"
    ).fetchall()
    return int(shapely.intersects(shapely.from_wkb([r[0] for r in rows]), box(*bbox)).sum())


def write_layouts(root: Path, n: int) -> dict[str, list[Path]]:
    """The real items, `n` copies each, in Planetary Computer parts (a quarter a part) under
    `root/pc` and in hive folders under `root/hive`."""
    items = real_items()
    tbl = by_time(repeated(table(copies(items, 1)), n), "collection")
    return {
        "pc parts": write_pc_layout(tbl, root / "pc", 3, collections(items)),
        "hive": write_hive_layout(tbl, root / "hive", collections(items)),
    }
