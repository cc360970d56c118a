"""The index file of `stac-gdal-mcp index` (indexing.py): read and written whole as an
ItemCollection (.json), NDJSON (.ndjson) or stac-geoparquet (.parquet: one file, or with
partition_by a folder of hive folders, `snapshot_write`), never through a link.

A band's nodata is spelled as JSON spells it ("nan", "inf", "-inf": the raster extension's
strings) in JSON, and held as a double in Parquet (a column has one type: a float COG's NaN and
an integer COG's 0 are both doubles); read back, it is spelled as in JSON again.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from ..files import open_plain, read_plain, write_atomic


def number(value: Any) -> Any:
    """A float that JSON cannot hold (NaN, infinities) as the raster extension spells it."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def read_items(output: Path) -> Any:
    """The items of an index file: stac-geoparquet (.parquet, or a folder of hive-partitioned
    .parquet files), NDJSON or an ItemCollection."""
    if output.suffix == ".parquet":
        import pyarrow.parquet as pq
        from stac_geoparquet.arrow import stac_table_to_items

        from .geoparquet import without_nulls

        items = []
        for path in _parquet_files(output):
            with os.fdopen(open_plain(path), "rb") as f:  # a file object: no hive columns added
                items += [without_nulls(item) for item in stac_table_to_items(pq.read_table(f))]
        return _nodata_spelled(items, as_json=True)
    text = read_plain(output)
    if output.suffix == ".ndjson":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text).get("features", [])


def _parquet_files(output: Path) -> list[Path]:
    """`output` itself, or the .parquet files below it when it is a folder (a partitioned index),
    not through links (a linked file is refused when opened, a linked folder not entered)."""
    if output.is_symlink() or not output.is_dir():
        return [output]
    found = []
    for folder, _dirs, names in os.walk(output):  # os.walk does not enter linked folders
        found += [Path(folder) / n for n in names if n.endswith(".parquet")]
    return sorted(found)


def write_items(out: Path, items: list[dict], collection: dict, partition_by: tuple[str, ...] = ()) -> None:
    """The index file (or with `partition_by`, its hive folders), replaced whole (never written
    through a link planted at `out`)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        if not items:
            raise InvalidArgument(f"no GeoTIFF could be indexed: {out.name} (stac-geoparquet) needs one item")
        from .snapshot_write import write_snapshot

        rows = iter(_nodata_spelled(items, as_json=False))
        write_snapshot(rows, out, collections=[collection], partition_by=partition_by)
        return
    if out.suffix == ".ndjson":
        text = "".join(json.dumps(i, separators=(",", ":")) + "\n" for i in items)
    else:
        text = json.dumps({"type": "FeatureCollection", "features": items}, indent=1)
    write_atomic(out, text)


def _nodata_spelled(items: list[dict], *, as_json: bool) -> list[dict]:
    """The items with their bands' nodata as JSON spells it ("nan", "inf", "-inf": the raster
    extension's strings) or as Parquet holds it: a double (a column has one type, so a float
    COG's NaN and an integer COG's 0 are both doubles). Copies, the items given are unchanged."""
    out = []
    for item in items:
        item = {**item, "assets": {**item.get("assets", {})}}
        for key, asset in item["assets"].items():
            if isinstance(asset, dict) and isinstance(asset.get("raster:bands"), list):
                bands = [
                    {**b, "nodata": _nodata(b["nodata"], as_json)}
                    if isinstance(b, dict) and "nodata" in b
                    else b
                    for b in asset["raster:bands"]
                ]
                item["assets"][key] = {**asset, "raster:bands": bands}
        out.append(item)
    return out


def _nodata(value: Any, as_json: bool) -> Any:
    if as_json:
        return number(value) if isinstance(value, float) and not math.isfinite(value) else value
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def href_base(out: Path, partition_by: tuple[str, ...] = ()) -> Path:
    """The folder an index's relative hrefs start from: the folder of the file that holds the
    item. One file: its folder; hive folders: those of the parts, all as deep (the number of
    keys) below the output, so `../../../scenes/a.tif` is the same file from every part."""
    return out.joinpath(*["_"] * len(partition_by)) if partition_by else out.parent
