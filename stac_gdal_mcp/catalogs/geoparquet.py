"""A stac-geoparquet catalog: one Parquet file, a folder of them or a glob, or a file's URL,
searched in DuckDB.

    [[catalogs]]
    id = "s2-snapshot"
    path = "~/data/sentinel-2-l2a.parquet"     # or a folder, or "parts/*.parquet"
    # url = "https://example.com/s2/items.parquet"   # read with HTTP range requests (httpfs.py)

Nothing is loaded into memory: each search is one SQL query over the files (DuckDB reads only
the columns and row groups it needs, Parquet statistics prune the rest), bounded in memory and
time by `limits.query_memory_mb` and `limits.query_timeout_s`. The answers are those of a STAC
API serving the same items (pgstac's rules): the footprint test is exact (bbox overlap in SQL,
then shapely on the WKB geometry of the rows found), the order is `sortby` then collection and
id in the direction of the first key (default: datetime descending), NULLS as PostgreSQL puts
them, and a cursor holds the position in that order, so pages have no gaps and no repeats.

Collections come from the files' own metadata (stac-geoparquet 1.1 `collections`), else a
sidecar `collections.json` beside them (a list, an object with `collections`, or one
Collection), else they are implied by the `collection` column (with their extents).

Every file is checked once per version (size and modification time; over HTTP, size, ETag and
Last-Modified; asked again of the files read, httpfs.py): a corrupt or truncated file, or one that
is not stac-geoparquet, is refused in one line naming it.
"""

from __future__ import annotations

import glob
import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import (
    ConfigError,
    GeoparquetError,
    InvalidFilter,
    ItemNotFound,
    LimitExceeded,
    StacGdalMcpError,
)
from ..models import Queryable
from ..settings import CatalogConfig, Settings
from .local import LocalCatalog
from .query_watch import watched
from .security import shown
from .snapshot_files import Files, check_files, files_named, first_line, in_parallel

if TYPE_CHECKING:
    import pyarrow as pa

NOT_QUERYABLE = {"type", "stac_version", "stac_extensions", "links", "assets", "bbox"}
BARE = {"id", "collection"}  # columns turned into items without stac-geoparquet (`rows_as_items`)


class GeoparquetCatalog:
    """Items in stac-geoparquet files, searched with SQL (see the module docstring)."""

    kind = "geoparquet"

    def __init__(self, config: CatalogConfig, settings: Settings):
        self.config = config
        self.settings = settings
        self._lock = threading.RLock()  # collections read the files under it
        self._files: Files | None = None
        self._implied: tuple[tuple, dict[str, dict]] | None = None
        self._held: tuple[tuple, set[str]] = ((), set())  # collections seen to have items (a version's)
        self._pinned = threading.local()  # the Files one search reads (`pinned`)

    @property
    def id(self) -> str:
        return self.config.id

    features = LocalCatalog.features  # every search argument, as a local catalog takes them

    # --- files ---------------------------------------------------------------------------------

    @property
    def patterns(self) -> list[str]:
        """The files as globs: every .parquet under a folder, a file itself, or the glob given (a
        folder's or a file's own name is escaped: `collection=[ab]` is that folder, not a or b)."""
        out = []
        for given in self.config.paths or [self.config.path]:
            path = Path(given).expanduser()
            if path.is_dir():
                out.append(os.path.join(glob.escape(str(path.resolve())), "**", "*.parquet"))
            elif path.is_file():
                out.append(glob.escape(str(path.resolve())))
            else:
                out.append(str(path if path.is_absolute() else path.resolve()))
        return out

    @property
    def urls(self) -> list[str] | None:
        """The files' URLs (`url` or `urls`), None for files on disk."""
        return self.config.urls or ([self.config.url] if self.config.url is not None else None)

    @property
    def files(self) -> Files:
        """The files, checked again when one was added, removed or changed (inside `pinned`: the
        version that block started with)."""
        pinned = getattr(self._pinned, "files", None)
        if pinned is not None:
            return pinned
        if self.urls is not None:
            return self._remote_files()
        found = {p for pattern in self.patterns for p in glob.glob(pattern, recursive=True)}
        stamp = tuple(s for s in map(_stamp, sorted(found)) if s is not None)
        paths = [s[0] for s in stamp]
        if not paths:
            raise ConfigError(
                f"catalog '{self.id}': no stac-geoparquet file matches {', '.join(self.patterns)}"
            )
        with self._lock:  # tool calls run in threads: check the files once per version
            if self._files is None or self._files.stamp != stamp:
                self._new_version(check_files(self.id, paths, stamp, self.max_footer, cache=self.part_cache))
            return self._files

    @contextmanager
    def pinned(self, files: Files | None = None) -> Iterator[Files]:
        """One version of the files (`files`, else the current one) for the block, in this thread:
        a search lists and stats its parts once, not at every column it names (a folder of 780
        parts: 90 ms a listing)."""
        outer = getattr(self._pinned, "files", None)
        self._pinned.files = chosen = files or self.files
        try:
            yield chosen
        finally:
            self._pinned.files = outer
            if outer is None and files is None and self.urls is not None:  # a search's own
                self.freshness.after_search(self._versions_changed)
                chosen.filesystem.copy_opened()

    def _new_version(self, files: Files) -> None:
        """Keep the checked `files`; drop what was cached of the previous version (the connection
        with its footer cache, the spatial probe)."""
        self._files = files
        self.__dict__.pop("database", None)
        self.__dict__.pop("spatial", None)

    @property
    def part_cache(self) -> Path:
        """The file keeping what the parts' footers say between processes (part_cache.py)."""
        from .part_cache import cache_path

        return cache_path(self.settings.workspace, self.id)

    @property
    def max_footer(self) -> int:
        """Bytes a file's footer may have: limits.query_memory_mb / 8."""
        return self.settings.limits.query_memory_mb * 1024**2 // 8

    @cached_property
    def reader(self):
        """HTTP range reads of the catalog's URLs (httpfs.py), through a guarded client (http.py)
        whose root is the `url`, or the common folder of the `urls`: the configured headers go to
        the URLs under it only."""
        from .httpfs import RangeReader

        config = self.config.model_copy(update={"url": self.root}) if self.config.urls else self.config
        return RangeReader(config, self.settings)

    @property
    def root(self) -> str:
        """The folder (or URL folder) the files are below, '' when they share none."""
        if self.urls is not None:  # the folders (path segments) every URL shares
            common = []
            for segments in zip(*(u.split("/")[:-1] for u in self.urls)):
                if len(set(segments)) > 1:
                    break
                common.append(segments[0])
            return "/".join(common) + "/"
        if self.config.path is not None and Path(self.config.path).expanduser().is_dir():
            return str(Path(self.config.path).expanduser().resolve()) + "/"
        return ""

    @cached_property
    def freshness(self):
        """When the versions of the URLs are asked again (httpfs.Freshness)."""
        from .httpfs import Freshness

        return Freshness()

    def _remote_files(self) -> Files:
        """The files at `url` / `urls`: every version asked (one range request each) at first,
        when a read or a check found one changed, and when the last sweep is STALE_S old (else
        they are asked after searches, httpfs.Freshness). Checked again when one differs."""
        from .httpfs import RangeFileSystem, checked_url

        with self._lock:
            if self._files is None or self.reader.changed or self.freshness.expired(time.monotonic()):
                self.reader.changed = False
                started = time.monotonic()
                self.reader.take_opened()
                versions = tuple(
                    in_parallel(lambda u: self.reader.version(checked_url(self.id, u)), self.urls)
                )
                self.freshness.asked(started, every=True)
                if self._files is None or self._files.stamp != versions:
                    filesystem = RangeFileSystem(self.reader, list(versions))
                    urls = [v.url for v in versions]
                    self._new_version(
                        check_files(self.id, urls, versions, self.max_footer, filesystem, self.part_cache)
                    )
            return self._files

    def _versions_changed(self, every: bool) -> bool:
        """Ask the versions of the files opened since the last check (every file's: `every`);
        one that changed makes the next search ask them all first (`_remote_files`)."""
        known = {v.url: v for v in self._files.stamp}
        opened = self.reader.take_opened()
        asked = self.urls if every else opened
        changed = any(v != known.get(v.url) for v in in_parallel(self.reader.version, asked))
        if changed:
            self.reader.changed = True
        return changed

    def parts(
        self, collections: list[str] | None, start, end, area=None, wanted=None, ids=None
    ) -> list[str] | None:
        """The parts a search of `collections` in [start, end] (within `area`, its values in the
        `wanted` bounds, one of its item `ids`: snapshot_files.Files.parts) must read (None: every
        file)."""
        return self.files.parts(self.root, collections, start, end, area, wanted, ids)

    def column(self, name: str) -> str:
        """The SQL of a property: its column (datetime and end_datetime as pgstac reads them)."""
        schema = self.files.schema
        name = name.removeprefix("properties.")
        ranged = "start_datetime" in schema and "end_datetime" in schema
        if name in ("datetime", "end_datetime") and ranged:  # pgstac: a range wins over datetime
            bound = quote("start_datetime" if name == "datetime" else "end_datetime")
            if "datetime" not in schema:
                return bound
            return f'(CASE WHEN "start_datetime" IS NOT NULL AND "end_datetime" IS NOT NULL THEN {bound} ELSE "datetime" END)'
        if name == "end_datetime" and "datetime" in schema:
            return '"datetime"'
        if name not in schema:
            raise InvalidFilter(
                f"catalog '{self.id}': no column '{name}' in {files_named(self.files.paths)}; "
                "get_queryables lists the columns"
            )
        return quote(name)

    # --- collections and items -----------------------------------------------------------------

    @property
    def collections(self) -> dict[str, dict]:
        """Collections described by the files or a sidecar, and those implied by the items."""
        files = self.files
        with self._lock:
            if self._implied is None or self._implied[0] != files.stamp:
                self._implied = (files.stamp, self._implied_collections(files))
            implied = self._implied[1]
        return {**implied, **{k: v for k, v in files.described.items() if k in implied or not implied}}

    def _implied_collections(self, files: Files) -> dict[str, dict]:
        if "collection" not in files.schema:
            return {}
        box = (
            "min(bbox.xmin), min(bbox.ymin), max(bbox.xmax), max(bbox.ymax)"
            if "bbox" in files.schema
            else "NULL, NULL, NULL, NULL"
        )
        when = self.column("datetime")
        rows = self.run(
            f"SELECT collection, {box}, min({when}), max({self.column('end_datetime')}) "
            f"FROM {self.source()} WHERE collection IS NOT NULL GROUP BY collection ORDER BY collection"
        ).to_pylist()
        out = {}
        for row in rows:
            cid, *bounds, start, end = row.values()
            described = files.described.get(cid)
            out[cid] = described or _implied(cid, bounds, start, end)
        return out

    collection = LocalCatalog.collection  # one of `collections`, or CollectionNotFound listing them

    def check_collection(self, cid: str) -> None:
        """CollectionNotFound unless the catalog has items of `cid`: a part named for it, or a row
        of it, says so at once; else `collection` (its items' extents read once per version: every
        part's collection, bbox and datetime columns, 700 MB of a 10,000,000-item snapshot)."""
        files = self.files
        if cid not in files.named(self.root) and not self._has_items(files, cid):
            self.collection(cid)

    def _has_items(self, files: Files, cid: str) -> bool:
        """Whether a row of collection `cid` exists, by one query that stops at the first (row
        groups whose statistics exclude it skipped; the listing of `collections` reads every
        row's collection, bbox and datetime), remembered for the files' version."""
        if "collection" not in files.schema:
            return False
        if self._held[0] != files.stamp:
            self._held = (files.stamp, set())
        held = self._held[1]
        if cid not in held:
            found = self.run(f"SELECT 1 AS found FROM {self.source()} WHERE collection = ? LIMIT 1", [cid])
            if not found.num_rows:
                return False
            held.add(cid)
        return True

    def item(self, collection_id: str, item_id: str) -> dict:
        self.collection(collection_id)
        table = self.run(
            f"SELECT * FROM {self.source()} WHERE collection = ? AND id = ? LIMIT 1",
            [collection_id, item_id],
        )
        found = self.items(table)
        if not found:
            raise ItemNotFound(
                f"item {shown(item_id, 80)} not found in collection {shown(collection_id, 80)} "
                f"of catalog '{self.id}'"
            )
        return found[0]

    sign = LocalCatalog.sign  # hrefs as they are

    def items(self, table: pa.Table) -> list[dict]:
        """Rows as STAC item dicts (stac-geoparquet's conversion, see `rows_as_items`): the nulls
        Parquet gives fields an item did not have (its schema is the union of all items') left out,
        relative asset hrefs made absolute against the catalog's folder."""
        from urllib.parse import urljoin

        first = self.files.paths[0]
        out = []
        for item in self._converted(table):
            item["properties"] = without_nulls(item["properties"])
            item["assets"] = without_nulls(item.get("assets") or {})
            for asset in item["assets"].values():
                href = asset.get("href") or ""
                if href and "://" not in href and not href.startswith("/"):
                    local = self.urls is None
                    asset["href"] = (
                        str((Path(first).parent / href).resolve()) if local else urljoin(first, href)
                    )
            out.append(item)
        return out

    def _converted(self, table: pa.Table) -> list[dict]:
        """`rows_as_items`, a value that is not WKB refused in one line naming the files."""
        import shapely

        try:
            return list(rows_as_items(table))
        except shapely.errors.ShapelyError as exc:
            raise self.not_wkb(exc) from None

    def not_wkb(self, exc: Exception) -> GeoparquetError:
        return GeoparquetError(
            f"catalog '{self.id}': {files_named(self.files.paths)} holds a geometry that is not WKB "
            f"({first_line(exc)[:120]}); not stac-geoparquet"
        )

    def queryables(self, collection_id: str | None = None) -> list[Queryable]:
        """The columns that can be filtered and sorted on, typed from the Parquet schema."""
        if collection_id is not None:
            self.collection(collection_id)
        return [
            Queryable(name=name, type=_json_type(kind))
            for name, kind in sorted(self.files.schema.items())
            if name not in NOT_QUERYABLE
        ]

    # --- SQL -----------------------------------------------------------------------------------

    def source(self, paths: list[str] | None = None, numbered: bool = False) -> str:
        """The files (or those of `paths`, as read_parquet reads them) as a DuckDB table function,
        paths inlined as SQL string literals; `numbered`: with each row's `filename` and
        `file_row_number`. Each path is literal (DuckDB globs every path it is given: its glob
        characters are escaped, `literal`). Hive folder names are not read as columns (the files hold them).
        Columns are matched by name where the files' schemas differ (union_by_name: DuckDB then
        reads every file's schema at each query, 2.5x the time of a page over 780 parts). Files
        read over HTTP are read from their local copies where there are some (local_copies.py)."""
        files = self.files
        chosen = files.sources if paths is None else paths
        local = chosen if files.filesystem is None else [files.filesystem.native(p) for p in chosen]
        listed = ", ".join("'" + literal(p).replace("'", "''") + "'" for p in local)
        extra = ", filename = true, file_row_number = true" if numbered else ""
        union = "false" if files.uniform else "true"
        found = f"read_parquet([{listed}], union_by_name = {union}, hive_partitioning = false{extra})"
        if numbered and local != chosen:  # a local copy's rows named by the file they copy
            return f"(SELECT * REPLACE ({files.filesystem.FILENAME} AS filename) FROM {found})"
        return found

    @cached_property
    def database(self):
        """The catalog's DuckDB (in memory): one memory limit for its queries, Parquet footers
        cached between them; over HTTP the blocks read are kept within the same budget
        (limits.query_memory_mb: httpfs.cache_bytes of it, DuckDB the rest)."""
        import duckdb

        filesystem = self.files.filesystem
        budget = self.settings.limits.query_memory_mb
        if filesystem is not None:
            budget -= filesystem.reader.bound // 1024**2
        database = duckdb.connect(config={"memory_limit": f"{budget}MB"})
        database.execute("SET GLOBAL TimeZone = 'UTC'")
        database.execute("SET GLOBAL parquet_metadata_cache = true")
        database.execute("SET GLOBAL autoinstall_known_extensions = false")  # nothing downloaded
        if filesystem is not None:  # the url, read with range requests (httpfs.py)
            database.register_filesystem(filesystem)
            # a page's rows fetched by row id after the top-N (DuckDB's default: LIMIT <= 50
            # only): the columns not filtered or sorted on are read for the rows kept, not for
            # every candidate (measured: half the bytes of an unfiltered first page of 100)
            database.execute(f"SET GLOBAL late_materialization_max_rows = {self.late_rows}")
        return database

    @cached_property
    def spatial(self) -> bool:
        """Whether DuckDB's `spatial` extension is installed here and takes the files' footprints:
        loaded (LOAD, never installed: nothing is downloaded) and an ST_Intersects over the
        geometry column bound without reading a row. Then bbox/intersects are tested exactly in
        SQL (parquet_search._spatial); else by the bbox prefilter in SQL and shapely after."""
        import duckdb

        con = self.database.cursor()
        try:
            con.execute("LOAD spatial")
            point = bytes.fromhex("0101000000" + "00" * 16)  # POINT (0 0) as WKB
            sql = f"SELECT ST_Intersects(ST_GeomFromWKB(geometry), ST_GeomFromWKB(?)) FROM {self.source()} LIMIT 0"
            con.execute(sql, [point]).fetchall()
            return True
        except duckdb.Error:
            return False
        finally:
            con.close()

    @property
    def late_rows(self) -> int:
        """The rows of a top-N whose other columns DuckDB reads after it, by row number
        (late materialization): parquet_search.page's largest chunk."""
        return max(2 * self.settings.limits.max_items + 1, 50)

    def run(self, sql: str, params: list | None = None, late: bool | None = False) -> pa.Table:
        """One query under limits.query_memory_mb and limits.query_timeout_s; DuckDB's errors
        become one line naming the catalog and what went wrong. `late`: the columns of a top-N
        not sorted on read after it for the rows kept (late materialization; on disk worth it
        over one file, over many parts it rescans them all); None: none read late (a top-N over
        few candidates, whose second scan would only rescan the parts); False: as `database` sets it."""
        import duckdb

        limits = self.settings.limits
        con = self.database.cursor()  # its own connection: interrupting it stops this query only
        try:
            if late is not False:
                con.execute(f"SET late_materialization_max_rows = {self.late_rows if late else 0}")
            with watched(limits.query_timeout_s, con.interrupt):
                return con.sql(sql, params=params or []).to_arrow_table()
        except duckdb.Error as exc:
            raise self._query_error(exc) from None
        finally:
            con.close()

    def _query_error(self, exc: Exception) -> StacGdalMcpError:
        """A DuckDB error as one line naming the catalog: an HTTP read's own error where one
        failed under the query (DuckDB reports it without its kind), else what DuckDB says."""
        import duckdb

        limits = self.settings.limits
        failure = self.reader.failure if self.urls is not None else None
        if failure is not None:
            self.reader.failure = None
            return failure
        if isinstance(exc, duckdb.InterruptException):
            return LimitExceeded(
                f"catalog '{self.id}': the query took longer than limits.query_timeout_s="
                f"{limits.query_timeout_s:g} s; narrow the search (collections, bbox, datetime)"
            )
        if isinstance(exc, duckdb.OutOfMemoryException):
            return LimitExceeded(
                f"catalog '{self.id}': the query needed more than limits.query_memory_mb="
                f"{limits.query_memory_mb} MB; narrow the search or sort on fewer rows"
            )
        if isinstance(exc, duckdb.InvalidInputException) and "binary data" in str(exc):
            return self.not_wkb(exc)  # DuckDB reads a GeoParquet geometry column as GEOMETRY
        if isinstance(exc, (duckdb.ConversionException, duckdb.BinderException)):
            return InvalidFilter(f"catalog '{self.id}': {first_line(exc)}")
        return GeoparquetError(
            f"catalog '{self.id}': reading {files_named(self.files.paths)} failed: {first_line(exc)}"
        )


def rows_as_items(table: pa.Table) -> Iterator[dict]:
    """stac-geoparquet rows as item dicts: stac-geoparquet's own conversion back to JSON columns,
    then each row's WKB geometries (the footprint, `proj:geometry` of the item and of its assets)
    as GeoJSON, a null one left null (stac-geoparquet 0.8 fails on an asset without
    `proj:geometry` in a file where another item's asset has one). Ids alone (the BARE
    columns) are items of those fields, as a STAC API answers `fields` (stac-geoparquet's
    conversion needs a bbox and a property column)."""
    import pyarrow as pa
    import shapely
    from stac_geoparquet.arrow._batch import StacArrowBatch

    if set(table.column_names) <= BARE:
        yield from ({**row, "properties": {}} for row in table.to_pylist())
        return
    for batch in pa.RecordBatchReader.from_stream(table):
        inner = StacArrowBatch(batch).to_json_batch().inner
        for row in inner.to_pylist():
            for holder, key in _wkb_places(row):
                value = holder.get(key)
                if isinstance(value, bytes):
                    holder[key] = json.loads(shapely.to_geojson(shapely.from_wkb(value)))
            assets = row.get("assets")
            if isinstance(assets, dict):
                row["assets"] = {k: v for k, v in assets.items() if v is not None}
            yield row


def _wkb_places(row: dict) -> Iterator[tuple[dict, str]]:
    """(dict, key) of each WKB geometry of a row: geometry, properties' and assets' proj:geometry."""
    yield row, "geometry"
    for holder in (row.get("properties"), *(row.get("assets") or {}).values()):
        if isinstance(holder, dict) and "proj:geometry" in holder:
            yield holder, "proj:geometry"


def without_nulls(value: Any) -> Any:
    """`value` with every None in its objects left out, at any depth."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def literal(path: str) -> str:
    """`path` as a pattern DuckDB's glob matches only to itself: `[`, `*` and `?` each in a class
    of its own (`[[]`, `[*]`, `[?]`), so a part named `collection=[ab]` or `s2*.parquet` is read
    once, and not its neighbours `collection=a` or `s2x.parquet`."""
    return re.sub(r"([\[*?])", r"[\1]", path)


def quote(name: str) -> str:
    """A SQL identifier: double-quoted, inner quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def _implied(cid: str, bounds: list, start, end) -> dict:
    def iso(value):
        return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")

    return {
        "type": "Collection",
        "id": cid,
        "description": "",
        "license": "other",
        "extent": {
            "spatial": {"bbox": [bounds] if None not in bounds else [[-180, -90, 180, 90]]},
            "temporal": {"interval": [[iso(start), iso(end)]]},
        },
        "links": [],
    }


def _json_type(kind: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return "datetime"
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return "number"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return "geometry"
    return "array" if pa.types.is_list(kind) or pa.types.is_large_list(kind) else "object"


def _stamp(path: str) -> tuple[str, int, int] | None:
    """(path, modification time, size) of a file; None for a folder or a file gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None
