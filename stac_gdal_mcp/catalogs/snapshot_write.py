"""Writing STAC items as stac-geoparquet: one file, or hive folders partitioned by collection,
year and month, as DuckDB, rustac or pyarrow open them with `hive_partitioning`.

    write_snapshot(items, "items.parquet")                       # one file, items in their order
    write_snapshot(items, "snap", partition_by=["collection", "year", "month"])
    # snap/collection=sentinel-2-l2a/year=2024/month=6/part-0.parquet, ...

Items are parsed by stac-geoparquet a chunk at a time into Parquet parts in a temporary folder
beside the output (items whose properties or assets differ are unified without holding them all),
then written to their final files in another temporary folder beside the output, renamed into
place when everything is written: a failed or cancelled write leaves nothing. In a partitioned
snapshot each part's rows are sorted by datetime (row groups of `row_group_size`), so the
row groups' min/max statistics prune a search by date; each file's metadata lists the
collections of its items (stac-geoparquet 1.1).

`max_bytes` holds while writing: the bytes on disk (the parts not yet rewritten and the final
files) are counted after each chunk and each row group, and the write stops once they pass it,
leaving nothing; under a cap the chunks are smaller (about max_bytes / 20 kB items, at least
10), so it is passed by little. The parts count: each carries a Parquet footer (a few hundred
bytes per column, much for a wide schema), so a write whose final file would just fit may stop.

Messy real items: a 3-D bbox (3DEP) cannot share a file with 2-D ones (stac-geoparquet holds one
bbox shape per file), so a partitioned write puts them in a part of their own; one file refuses
the mix in one line. A column whose values have types Parquet cannot unify (text in one item, a
number in another) is refused in one line naming the column.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AccessDenied, InvalidArgument, LimitExceeded

if TYPE_CHECKING:
    import pyarrow as pa

PARTITION_KEYS = ("collection", "year", "month")
NO_VALUE = "__HIVE_DEFAULT_PARTITION__"  # Hive's folder for a null key; DuckDB reads it as NULL
PLAIN_VALUE = re.compile(r"[A-Za-z0-9._-]{1,200}")
SLICE_BYTES = 64 * 2**20  # staged (compressed) bytes of a partition sorted in memory at once
STAGED_ROWS = 1_000  # rows of a staged part's row groups (partitioned writes)
Collections = Iterable[dict] | Callable[[list[str]], Iterable[dict]]


def partition_keys(partition_by: Iterable[str] | str | None) -> tuple[str, ...]:
    """The partition keys asked for, in folder order (collection, year, month); one line for a
    key that is not one of them, or a month without its year."""
    if partition_by is None:
        return ()
    given = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    unknown = [k for k in given if k not in PARTITION_KEYS]
    if unknown or not all(isinstance(k, str) for k in given):
        raise InvalidArgument(
            f"partition_by takes {', '.join(PARTITION_KEYS)} (got {str(unknown or given)[:80]})"
        )
    if "month" in given and "year" not in given:
        raise InvalidArgument("partition_by: month needs year too (year=2024/month=6)")
    return tuple(k for k in PARTITION_KEYS if k in given)


def write_snapshot(
    items: Iterable[dict],
    path: str | os.PathLike,
    *,
    collections: Collections = (),
    partition_by: Iterable[str] | str | None = None,
    max_bytes: int | None = None,
    row_group_size: int = 10_000,
    chunk_size: int | None = None,
) -> int:
    """Write STAC item dicts to `path` as stac-geoparquet (see the module docstring): one file,
    or with `partition_by` a folder of hive folders. `collections` (or a function of the
    collection ids of the items, called once they are read) go into the files' metadata.
    `chunk_size`: items parsed at a time (default 10,000; under `max_bytes`, fewer: about
    max_bytes / 20 kB, at least 10). Returns the number of items written."""
    keys = partition_keys(partition_by)
    path = Path(path)
    _check_target(path, folder=bool(keys))
    with tempfile.TemporaryDirectory(prefix=temporary_prefix(path), dir=path.parent) as work:
        stage = _Stage(Path(work), keys, max_bytes, chunk_size)
        written = stage.add_all(items)
        described = collections(list(stage.collection_ids)) if callable(collections) else collections
        by_id = {c["id"]: c for c in described if isinstance(c, dict) and "id" in c}
        out = Path(work) / "out"
        if keys:
            stage.write_partitions(out, by_id, row_group_size)
            _replace_folder(out, path)
        else:
            stage.write_one(out, by_id, row_group_size)
            os.replace(out, path)
    return written


def temporary_prefix(path: Path) -> str:
    """The name prefix of a temporary beside `path`: hidden, unless `path` is the store's pending
    output (`<pid>-<session>-...` in the workspace's .tmp/, whose entries are swept by owner, a
    hidden one as stale): then named after it, so it is its owner's and kept while it lives."""
    owned = re.match(r"\d+-[0-9a-f]{8}", path.name) is not None
    return f"{path.name}.work-" if owned else f".{path.name}-"


class _Stage:
    """Items parsed into Parquet parts per group (partition values and bbox shape), bytes counted."""

    def __init__(self, work: Path, keys: tuple[str, ...], max_bytes: int | None, chunk: int | None):
        self.root, self.keys, self.max_bytes = work / "parts", keys, max_bytes
        self.root.mkdir()
        self.groups: dict[tuple, list[Path]] = {}
        self.collection_ids: dict[str, None] = {}
        self.bytes = 0
        self.items = 0
        self.parts = 0  # parts staged so far: their names, 0.parquet, 1.parquet... in item order
        # small chunks under a small cap, so the cap is passed by little before the write stops
        self.chunk = chunk or (10_000 if max_bytes is None else max(10, min(10_000, max_bytes // 20_000)))

    def add_all(self, items: Iterable[dict]) -> int:
        chunk: list[dict] = []
        for item in items:
            if not isinstance(item, dict):
                raise InvalidArgument(f"an item must be a STAC item object (got {type(item).__name__})")
            chunk.append(item)
            if len(chunk) >= self.chunk:
                self._flush(chunk)
                chunk = []
        if chunk:
            self._flush(chunk)
        if not self.items:
            raise InvalidArgument("no items to write")
        return self.items

    def _flush(self, chunk: list[dict]) -> None:
        import pyarrow as pa
        from stac_geoparquet.arrow import parse_stac_items_to_arrow, to_parquet

        self.items += len(chunk)
        grouped: dict[tuple, list[dict]] = {}
        for item in chunk:
            self.collection_ids.setdefault(item.get("collection"), None)
            grouped.setdefault(self._group(item), []).append(item)
        for group, members in grouped.items():
            try:
                table = parse_stac_items_to_arrow(members).read_all()
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError) as exc:
                raise _unwritable(members, exc) from None
            part = self.root / f"{self.parts}.parquet"
            self.parts += 1
            if self.keys:  # sorted in row groups of STAGED_ROWS: a time slice reads only its own
                ordered = _by_time(table).combine_chunks()
                to_parquet(
                    pa.RecordBatchReader.from_batches(ordered.schema, ordered.to_batches(STAGED_ROWS)), part
                )
            else:  # one file keeps the items' order
                to_parquet(table, part)
            self.groups.setdefault(group, []).append(part)
            self._count(part.stat().st_size)
        self.collection_ids.pop(None, None)

    def _count(self, size: int) -> None:
        """Count `size` more bytes written; stop once they pass max_bytes."""
        self.bytes += size
        self.check(self.bytes)

    def check(self, total: int) -> None:
        if self.max_bytes is not None and total > self.max_bytes:
            raise cap_passed(self.max_bytes, self.items)

    def _group(self, item: dict) -> tuple:
        values = []
        when = _when(item)
        for key in self.keys:
            if key == "collection":
                value = item.get("collection")
                if value is not None and not (isinstance(value, str) and PLAIN_VALUE.fullmatch(value)):
                    raise InvalidArgument(
                        f"collection id {str(value)[:80]!r} cannot name a hive folder: partition_by "
                        "collection needs ids of letters, digits, '.', '_' and '-'"
                    )
                values.append(value or NO_VALUE)
            else:
                values.append(NO_VALUE if when is None else str(when.year if key == "year" else when.month))
        bbox = item.get("bbox")
        return (*values, len(bbox) // 2 if isinstance(bbox, list) else 2)

    def schema(self, group: tuple) -> pa.Schema:
        """The group's parts' schemas unified (an int column and a float one become double);
        a column they cannot share refused in one line naming it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schemas = [pq.read_schema(p) for p in self.groups[group]]
        try:
            return pa.unify_schemas(schemas, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            names = re.findall(r"Field (\S+) has incompatible types", str(exc))
            column = ".".join(dict.fromkeys(names)) or "?"
            raise InvalidArgument(
                f"the items cannot be written as stac-geoparquet: column '{column[:120]}' has values "
                "of types that cannot share a Parquet column (e.g. text in one item, a number in "
                "another); make them agree, or save as ndjson"
            ) from None

    def write_one(self, out: Path, collections: dict[str, dict], row_group_size: int) -> None:
        """One file, the items in their order (the parts read one by one, each removed once read)."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        if len(self.groups) > 1:
            raise InvalidArgument(
                "these items have both 2-D and 3-D bboxes, which one stac-geoparquet file cannot "
                "hold (one bbox shape per file): give partition_by (each shape gets its own part), "
                "or save them apart"
            )
        (group,) = self.groups
        schema, parts = self.schema(group), sorted(self.groups[group], key=lambda p: int(p.stem))
        left = {p: p.stat().st_size for p in parts}  # parts not read yet, still on disk

        def batches() -> Iterator[pa.RecordBatch]:
            for part in parts:
                yield from ds.dataset([str(part)], schema=schema, format="parquet").to_batches(
                    batch_size=row_group_size
                )
                part.unlink()
                del left[part]

        _write(
            pa.RecordBatchReader.from_batches(schema, batches()),
            out,
            collections,
            lambda size: self.check(size + sum(left.values())),
        )

    def write_partitions(self, out: Path, collections: dict[str, dict], row_group_size: int) -> None:
        """A hive folder per group's partition values; in each, a file per bbox shape, its rows
        sorted by datetime in row groups of `row_group_size`."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        staged, finished = self.bytes, 0  # bytes of the parts not yet rewritten, of the final files
        for group in sorted(self.groups, key=str):
            *values, _dims = group
            folder = out.joinpath(*(f"{k}={v}" for k, v in zip(self.keys, values, strict=True)))
            folder.mkdir(parents=True, exist_ok=True)
            parts = self.groups[group]
            dataset = ds.dataset([str(p) for p in parts], schema=self.schema(group), format="parquet")
            mine = sum(p.stat().st_size for p in parts)
            ids = (
                set(dataset.to_table(columns=["collection"])["collection"].to_pylist())
                if "collection" in dataset.schema.names
                else set()
            )
            batches = _in_time_order(dataset, mine, row_group_size)
            file = folder / f"part-{len(list(folder.iterdir()))}.parquet"
            described = {k: v for k, v in collections.items() if k in ids}
            done = staged + finished
            _write(
                pa.RecordBatchReader.from_batches(dataset.schema, batches),
                file,
                described,
                lambda size, done=done: self.check(done + size),
            )
            for part in parts:
                part.unlink()
            staged -= mine
            finished += file.stat().st_size


def cap_passed(max_bytes: int, items: int) -> LimitExceeded:
    """The error of a write stopped by its byte cap (here, and in `SearchResults.to_ndjson`)."""
    return LimitExceeded(
        f"the items written passed {max_bytes:,} bytes (limits.max_output_bytes) after {items:,} "
        "items: stopped, nothing kept; save fewer items (max_items) or narrow the search"
    )


def _write(reader: pa.RecordBatchReader, out: Path, collections: dict, check: Callable[[int], None]) -> None:
    """`reader` as a stac-geoparquet file; `check(bytes of the file so far)` before each row group
    and at the end."""
    import pyarrow as pa
    from stac_geoparquet.arrow import to_parquet

    def counted() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            check(out.stat().st_size if out.exists() else 0)
            yield batch

    to_parquet(
        pa.RecordBatchReader.from_batches(reader.schema, counted()), out, collections=collections or None
    )
    check(out.stat().st_size)


def _when(item: dict) -> datetime | None:
    """The item's datetime (else start_datetime) in UTC, as the datetime column holds it."""
    props = item.get("properties") or {}
    for key in ("datetime", "start_datetime"):
        value = props.get(key)
        if isinstance(value, str):
            try:
                when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                continue
            return when.astimezone(UTC) if when.tzinfo else when
    return None


def _in_time_order(dataset: Any, staged: int, row_group_size: int) -> Iterator[pa.RecordBatch]:
    """The rows of a partition's parts in datetime order, in batches of `row_group_size`, sorted
    in memory a time slice at a time: as many equal slices of its time range as its parts hold
    SLICE_BYTES (compressed), so memory does not grow with the partition. A slice is read by a
    filter on the time column; the parts are sorted by time in row groups of STAGED_ROWS, so their
    statistics leave out the row groups of other slices. Rows without a time come last."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    names = [k for k in ("datetime", "start_datetime") if k in dataset.schema.names]
    slices = min(-(-staged // SLICE_BYTES), 1024)
    key = (
        (pc.coalesce(*[ds.field(k) for k in names]) if len(names) > 1 else ds.field(names[0]))
        if names
        else None
    )
    if key is None or slices <= 1:
        yield from _by_time(dataset.to_table()).combine_chunks().to_batches(max_chunksize=row_group_size)
        return
    when = key.cast(pa.int64())
    span = pc.min_max(dataset.to_table(columns={"t": when})["t"]).as_py()
    if span["min"] is not None:
        lo, width = span["min"], span["max"] - span["min"] + 1
        edges = [lo + width * i // slices for i in range(slices + 1)]
        for start, end in itertools.pairwise(edges):
            rows = dataset.to_table(filter=(when >= start) & (when < end))
            yield from _by_time(rows).combine_chunks().to_batches(max_chunksize=row_group_size)
    yield from (
        dataset.to_table(filter=when.is_null()).combine_chunks().to_batches(max_chunksize=row_group_size)
    )


def _by_time(table: pa.Table) -> pa.Table:
    """Rows in datetime order (start_datetime where datetime is null), nulls last."""
    import pyarrow.compute as pc

    names = [k for k in ("datetime", "start_datetime") if k in table.schema.names]
    if not names:
        return table
    when = pc.coalesce(*[table[k] for k in names]) if len(names) > 1 else table[names[0]]
    return table.take(pc.array_sort_indices(when, order="ascending", null_placement="at_end"))


def _unwritable(items: list[dict], exc: Exception) -> InvalidArgument:
    """Why stac-geoparquet could not parse these items, in one line naming the column."""
    column = _conflicting_column(items)
    if column is None:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return InvalidArgument(f"the items cannot be written as stac-geoparquet: {first}")
    name, kinds = column
    return InvalidArgument(
        f"the items cannot be written as stac-geoparquet: column '{name[:120]}' holds "
        f"{' and '.join(sorted(kinds))} values in different items, which one Parquet column "
        "cannot; make them agree, or save as ndjson"
    )


def _conflicting_column(items: list[dict]) -> tuple[str, set[str]] | None:
    """The first column (properties at the top, as stac-geoparquet puts them; nested fields
    dotted) whose values are of JSON types Parquet cannot unify."""
    kinds: dict[str, set[str]] = {}

    def walk(value: Any, name: str) -> None:
        if value is None:
            return
        if isinstance(value, dict):
            kinds.setdefault(name, set()).add("object")
            for key, inner in value.items():
                walk(inner, f"{name}.{key}")
            return
        if isinstance(value, list):
            kinds.setdefault(name, set()).add("array")
            for inner in value:
                walk(inner, f"{name}[]")
            return
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        kinds.setdefault(name, set()).add("number" if number else type(value).__name__.replace("str", "text"))

    for item in items:
        for key, value in {**item, **(item.get("properties") or {})}.items():
            if key not in ("properties", "geometry"):
                walk(value, key)
    for name, found in kinds.items():
        if len(found) > 1:
            return name, found
    return None


def _check_target(path: Path, *, folder: bool) -> None:
    """A link at `path` is refused for a folder (a file replaces a link, never writes through
    it); an existing folder is replaced only if it holds nothing but a snapshot's hive folders."""
    if not path.parent.is_dir():
        raise InvalidArgument(f"{path.parent} is not a folder")
    if folder and path.is_symlink():
        raise AccessDenied(f"{path.name} is a symbolic link; a snapshot folder is never written through one")
    if not folder and path.is_dir() and not path.is_symlink():
        raise InvalidArgument(f"{path.name} is a folder: give a .parquet file name, or partition_by")
    if folder and path.exists() and not _replaceable(path):
        raise InvalidArgument(
            f"{path.name} exists and is not a partitioned snapshot (hive folders of .parquet files): "
            "give a new folder"
        )


def _replaceable(path: Path) -> bool:
    if not path.is_dir():
        return False
    for entry in path.rglob("*"):
        if entry.is_symlink():
            return False
        if entry.is_dir() and entry.name.split("=", 1)[0] not in PARTITION_KEYS:
            return False
        if entry.is_file() and entry.suffix != ".parquet":
            return False
    return True


def _replace_folder(new: Path, path: Path) -> None:
    """`new` renamed to `path`; an earlier snapshot there (checked by `_check_target`) moved aside
    first and removed once the new one is in place."""
    if path.is_dir() and any(path.iterdir()):
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.replace(path, old)
        try:
            os.replace(new, path)
        except BaseException:
            os.replace(old, path)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    os.replace(new, path)  # onto nothing, or onto an empty folder (the store's pending output)
