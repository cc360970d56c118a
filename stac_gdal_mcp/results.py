"""Results of the library for people: search results that page, tabulate and show themselves,
a cloud cover ranking (the tool's result, and a table), and a preview image that shows inline
in Jupyter. (JSON result models are in `models.py`.)"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .discovery.query import ItemSearch
from .discovery.summaries import item_summary
from .errors import InvalidArgument, LimitExceeded
from .models import ItemSummary, SearchResult
from .operations.cloud import CloudCover as CloudCover  # the results live with their operations
from .operations.preview import Preview as Preview
from .operations.result import Answer, Result, call

if TYPE_CHECKING:
    import pandas as pd

    from .core import Core
    from .outputs import OutputRecord
    from .processing.jobs import Job


class Searcher(Protocol):
    """What made the results (a `Session`): its services, and its search for the next page."""

    core: Core

    def search(self, **arguments: Any) -> SearchResults: ...


FRAME_COLUMNS = (
    "id",
    "collection",
    "datetime",
    "cloud_cover",
    "platform",
    "gsd",
    "proj_code",
    "bbox",
    "assets",
    "thumbnail",
)

#: A saved search's file: suffix and media type of each format (NDJSON: one item per line, as
#: local catalogs read it back).
SAVED_FORMATS = {
    "geoparquet": (".parquet", "application/vnd.apache.parquet"),
    "ndjson": (".ndjson", "application/x-ndjson"),
}
#: The most items one saved search holds, whatever max_items asks (limits.max_output_bytes and
#: limits.job_timeout_s bound it too).
SAVE_MAX_ITEMS = 1_000_000
#: `on_page(written, total, more)`: after each page of a save (`more`: items were left out).
PageReport = Callable[[int, int, bool], None]


class SearchResults(Result):
    """One page of an item search: iterate it for the items, `to_dataframe()` for a table,
    `next()` for the following page; in Jupyter it shows as a table with thumbnails.

    `page` is the same `SearchResult` the server's search_items tool returns: `items` (ItemSummary,
    or full STAC item dicts with detail="full"), `returned`, `matched`, `next_cursor`, `notes`.
    `to_geoparquet(path)`, `to_ndjson(path)` and `save()` take this page and the following ones
    away as a file. `search` is the search that gave it (`discovery.query.ItemSearch`, the one
    declaration of its parameters), `request` its parameters that are set; the map draws the
    page as the search_items call that found it (`map_layer()`: its footprints).
    """

    result_kind = "search"

    def __init__(self, page: SearchResult, session: Searcher, search: ItemSearch | None = None):
        self.page = page
        self._session = session
        #: The search that gave this page (to read the next page, or all of them in full); None:
        #: a page made by hand, which does not know it.
        self.search = search

    @property
    def _core(self) -> Core:
        return self._session.core

    @property
    def _asked(self) -> ItemSearch:
        return self.search if self.search is not None else ItemSearch.model_construct()

    # --- the page ------------------------------------------------------------------------------

    @property
    def items(self) -> list[ItemSummary | dict[str, Any]]:
        """The items of this page: summaries, or full STAC items (dicts) with detail="full"."""
        return self.page.items

    @property
    def summaries(self) -> list[ItemSummary]:
        """A compact summary of every item of this page (whatever the detail)."""
        return [i if isinstance(i, ItemSummary) else item_summary(i) for i in self.page.items]

    @property
    def search_arguments(self) -> dict[str, Any]:
        """The arguments of the search that gave these results (those that are set; not the
        catalog, the page size or detail): what a record of them, or a map of their AOI, says was
        asked."""
        return {k: v for k, v in self.request.items() if k not in ("catalog", "limit", "detail")}

    @property
    def request(self) -> dict[str, Any]:
        """The search's parameters that are set (none for a page made by hand)."""
        if self.search is None:
            return {}
        return {k: v for k in ItemSearch.model_fields if (v := getattr(self.search, k)) is not None}

    @property
    def ids(self) -> list[str]:
        """The ids of this page's items (pass them on as `ids=`)."""
        return [s.id for s in self.summaries]

    @property
    def matched(self) -> int | None:
        """How many items match in all (when the catalog says)."""
        return self.page.matched

    @property
    def next_cursor(self) -> str | None:
        """The cursor of the next page (pass it as `cursor=`), None on the last page."""
        return self.page.next_cursor

    @property
    def notes(self) -> list[str]:
        """What was translated or applied client-side, and other remarks on this search."""
        return self.page.notes

    def __iter__(self) -> Iterator[ItemSummary | dict[str, Any]]:
        return iter(self.page.items)

    def __len__(self) -> int:
        return len(self.page.items)

    def __getitem__(self, index):
        return self.page.items[index]

    def __repr__(self) -> str:
        more = f", matched={self.matched}" if self.matched is not None else ""
        return f"<SearchResults {len(self)} items{more}{', more pages' if self.next_cursor else ''}>"

    # --- paging ------------------------------------------------------------------------------

    def next(self) -> SearchResults | None:
        """The next page of the same search (same catalog, limit and detail), None after the last."""
        if not self.next_cursor:
            return None
        asked = self._asked
        return self._session.search(
            catalog=asked.catalog, cursor=self.next_cursor, limit=asked.limit, detail=asked.detail
        )

    def pages(self) -> Iterator[SearchResults]:
        """This page and every following one (each fetched when reached)."""
        page: SearchResults | None = self
        while page is not None:
            yield page
            page = page.next()

    # --- taking the results away -------------------------------------------------------------

    def full_items(
        self, max_items: int | None = None, *, on_page: PageReport | None = None
    ) -> Iterator[dict]:
        """The full STAC items of this page and the following ones, with the catalog's own asset
        hrefs (signing tokens expire: they are taken off, and reads sign again), read a page of
        limits.max_items at a time, up to `max_items` (default limits.max_items, at most
        SAVE_MAX_ITEMS); `on_page(written, total, more)` after each page."""
        max_items = self._max_items(max_items)
        written = 0
        for page in self._full_pages():
            if any("alone exceeded limits.max_result_bytes" in note for note in page.notes):
                raise LimitExceeded(
                    "an item is larger than limits.max_result_bytes and came cut: raise that limit to save it"
                )
            taken = page.items[: max_items - written]
            for item in taken:
                written += 1
                yield _unsigned({"assets": {}, "links": [], **item})  # required, even left out by fields
            more = len(taken) < len(page) or bool(page.next_cursor)
            total = min(max_items, page.matched) if page.matched is not None else max_items
            if on_page is not None:
                on_page(written, max(total, written), more and written >= max_items)
            if written >= max_items:
                return
        if not written:
            raise InvalidArgument("the search found no items: nothing to save")

    def _max_items(self, max_items: int | None) -> int:
        if max_items is None:
            return min(self._session.core.settings.limits.max_items, SAVE_MAX_ITEMS)
        if (
            isinstance(max_items, bool)
            or not isinstance(max_items, int)
            or not 1 <= max_items <= SAVE_MAX_ITEMS
        ):
            raise InvalidArgument(
                f"max_items must be an integer from 1 to {SAVE_MAX_ITEMS:,} (got {max_items!r:.40})"
            )
        return max_items

    def _full_pages(self) -> Iterator[SearchResults]:
        """This page and the following ones as full items, in pages of limits.max_items."""
        size = self._session.core.settings.limits.max_items
        catalog = self._asked.catalog
        if self._asked.detail == "full":
            page = self
        elif self.search is not None:  # a summary's fields choose its keys, not the item's
            again = {
                k: getattr(self.search, k) for k in ItemSearch.model_fields if k not in ("catalog", "fields")
            }
            page = self._session.search(catalog=catalog, **{**again, "limit": size, "detail": "full"})
        else:
            raise InvalidArgument("these results do not know their search: search again with detail='full'")
        while True:
            yield page
            if not page.next_cursor:
                return
            page = self._session.search(catalog=catalog, cursor=page.next_cursor, limit=size, detail="full")

    def to_geoparquet(
        self,
        path: str | os.PathLike,
        max_items: int | None = None,
        *,
        on_page: PageReport | None = None,
        partition_by: Sequence[str] | str | None = None,
        max_bytes: int | None = None,
    ) -> int:
        """Write this page and the following ones (full items, up to `max_items`, see
        `full_items`) as one stac-geoparquet file, streamed and renamed into place when complete;
        the collections of the items go into its metadata. Returns the number of items written.
        The file reads back as a catalog (`[[catalogs]] path = ...`), with stac-geoparquet,
        rustac, DuckDB or geopandas.

        `partition_by` (any of "collection", "year", "month"): `path` is a folder of hive folders
        (`collection=<c>/year=<y>/month=<m>/part-<n>.parquet`, rows sorted by datetime) that DuckDB
        opens with `hive_partitioning=true`. `max_bytes`: stop (nothing kept) once more is
        written. See `catalogs.snapshot_write`.
        """
        from .catalogs.snapshot_write import write_snapshot

        where: dict[str, Any] = {}  # collection id -> the catalog its items came from
        items = _noting_catalogs(self.full_items(max_items, on_page=on_page), where, self._asked.catalog)
        return write_snapshot(
            items,
            path,
            collections=lambda ids: [self._session.collection_json(c, where[c]) for c in ids],
            partition_by=partition_by,
            max_bytes=max_bytes,
        )

    def to_ndjson(
        self,
        path: str | os.PathLike,
        max_items: int | None = None,
        *,
        on_page: PageReport | None = None,
        max_bytes: int | None = None,
    ) -> int:
        """As `to_geoparquet`, as newline-delimited JSON: one item per line."""
        import json
        import tempfile

        from .catalogs.snapshot_write import cap_passed, temporary_prefix
        from .files import remove

        path = Path(path)
        written = 0
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=temporary_prefix(path), suffix=".tmp", delete=False, encoding="utf-8"
        ) as out:
            try:
                for item in self.full_items(max_items, on_page=on_page):
                    out.write(json.dumps(item, separators=(",", ":"), ensure_ascii=False) + "\n")
                    written += 1
                    if max_bytes is not None and out.tell() > max_bytes:
                        raise cap_passed(max_bytes, written)
            except BaseException:
                out.close()
                remove(Path(out.name))
                raise
        os.replace(out.name, path)
        return written

    def save(
        self,
        format: Literal["geoparquet", "ndjson"] = "geoparquet",
        *,
        max_items: int | None = None,
        output_name: str | None = None,
        job: Job | None = None,
        partition_by: Sequence[str] | str | None = None,
    ) -> OutputRecord:
        """Write this page and the following ones into the workspace (see `to_geoparquet`) as an
        output with a record: derived from the catalogs searched, the search in its parameters,
        the items written and matched in its properties. `job`: progress per page, cancellation
        (the partial file is removed), limits.job_timeout_s. limits.max_output_bytes holds while
        writing. `partition_by` (geoparquet): the output is a folder of hive folders."""
        from .catalogs.snapshot_write import partition_keys
        from .discovery.federated import catalog_ids
        from .outputs.records import SourceRef, package_versions
        from .processing.jobs import timed

        if format not in SAVED_FORMATS:
            raise InvalidArgument(f"format must be one of {', '.join(SAVED_FORMATS)} (got {format!r:.40})")
        core = self._session.core
        job = timed(job, core)
        suffix, media_type = SAVED_FORMATS[format]
        left_out = []

        def on_page(written: int, total: int, more: bool) -> None:
            left_out[:] = [more]
            job.progress(written, total, f"{written:,} items written")

        catalogs = catalog_ids(core, self._asked.catalog)
        keys = partition_keys(partition_by)
        if keys and format != "geoparquet":
            raise InvalidArgument("partition_by is for format='geoparquet' (hive folders of Parquet files)")
        writer = self.to_geoparquet if format == "geoparquet" else self.to_ndjson
        partitioned = {"partition_by": list(keys)} if keys else {}  # to_ndjson takes none
        cap = core.settings.limits.max_output_bytes
        with core.outputs.writing(suffix, output_name, stem="search", dataset=bool(keys)) as out:
            written = writer(out.path, max_items, on_page=on_page, max_bytes=cap, **partitioned)
            return core.outputs.commit(
                out,
                operation="save_search",
                parameters={
                    "catalog": catalogs,
                    **self.search_arguments,
                    "format": format,
                    "max_items": max_items,
                    **partitioned,
                },
                sources=[SourceRef(href=_search_href(core, c), catalog=c) for c in catalogs],
                media_type=media_type,
                title=f"{written:,} items of a search of {', '.join(catalogs)}",
                lineage=f"search of {', '.join(catalogs)} saved as {format}",
                properties={
                    "search:items": written,
                    "search:matched": self.matched,
                    "search:more": any(left_out),
                },
                software=package_versions("stac-geoparquet", "pyarrow") if format == "geoparquet" else None,
            )

    def _save(self, core: Core, format, output_name, job) -> OutputRecord:
        return self.save(format or "geoparquet", output_name=output_name, job=job)

    def _answer(self, core: Core, records, limits, quicklook: bool) -> Answer:
        """The page as its value, drawn as the map draws it (`map_layer`: its items' footprints)."""
        return Answer(self.page, layer=self.map_layer())

    def map_call(self) -> dict:
        """The page drawn as the search_items call that found it (its arguments: its AOI)."""
        from .models import MapLayer, map_area

        page = {k: v for k, v in self.page.model_dump(mode="json").items() if k != "items"}
        fields = {"area": map_area(self.search_arguments), "notes": page.get("notes") or []}
        layer = MapLayer.of_items(self.items, **fields)
        return call("search_items", self.search_arguments, page, layer=layer)

    # --- tables ------------------------------------------------------------------------------

    def to_dataframe(self) -> pd.DataFrame:
        """A pandas DataFrame, one row per item: id, collection, datetime (UTC), cloud_cover,
        platform, gsd, proj_code, bbox, assets (their keys), thumbnail."""
        import pandas as pd

        rows = []
        for s in self.summaries:
            row = s.model_dump(include=set(FRAME_COLUMNS) - {"assets"})
            row["assets"] = list(s.assets)
            rows.append(row)
        frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
        frame["datetime"] = pd.to_datetime(frame["datetime"], utc=True, format="ISO8601")
        frame.attrs.update(matched=self.matched, next_cursor=self.next_cursor, notes=list(self.notes))
        return frame

    def to_geodataframe(self) -> Any:
        """A geopandas GeoDataFrame (EPSG:4326) of `to_dataframe()` with each item's footprint
        (its geometry with detail="full", else its bbox). Needs geopandas."""
        try:
            import geopandas
        except ImportError:
            raise ImportError(
                "to_geodataframe needs geopandas, which is not installed: pip install geopandas "
                "(to_dataframe() works without it)"
            ) from None
        from shapely.geometry import box, shape

        geometries = []
        for item, summary in zip(self.page.items, self.summaries):
            if isinstance(item, dict) and item.get("geometry"):
                geometries.append(shape(item["geometry"]))
            elif summary.bbox:
                b = summary.bbox
                geometries.append(box(b[0], b[1], b[3], b[4]) if len(b) == 6 else box(*b))
            else:
                geometries.append(None)
        return geopandas.GeoDataFrame(self.to_dataframe(), geometry=geometries, crs="EPSG:4326")

    def _repr_html_(self) -> str:
        from . import html
        from .catalogs.security import check_local_path
        from .processing.access import local_roots

        roots = local_roots(self._session.core)

        def allowed(path) -> bool:
            try:
                check_local_path(str(path), roots)
            except Exception:
                return False
            return True

        summaries = self.summaries
        rows = [
            {
                **s.model_dump(include={"id", "collection", "datetime", "cloud_cover", "platform"}),
                "assets": list(s.assets),
            }
            for s in summaries
        ]
        matched = f" of {self.matched} matched" if self.matched is not None else ""
        return html.table(
            title="SearchResults",
            summary=f"{len(self)} items{matched}{'; more with next()' if self.next_cursor else ''}",
            columns=["id", "collection", "datetime", "cloud_cover", "platform", "assets"],
            rows=rows,
            thumbnails=[html.thumbnail_src(s.thumbnail, allowed) for s in summaries],
            notes=self.notes,
            total=self.matched,
        )


def _unsigned(item: dict) -> dict:
    """`item` with the signing tokens (SAS) taken off its asset hrefs."""
    from .catalogs.signing import strip_token, token_in

    assets = item.get("assets") or {}
    if not any(isinstance(a.get("href"), str) and token_in(a["href"]) for a in assets.values()):
        return item
    return {
        **item,
        "assets": {
            key: {**a, "href": strip_token(a["href"])} if isinstance(a.get("href"), str) else a
            for key, a in assets.items()
        },
    }


def _noting_catalogs(items: Iterator[dict], where: dict, catalog) -> Iterator[dict]:
    """`items`, noting in `where` which catalog each collection came from (a federated search
    names it on each item)."""
    for item in items:
        if item.get("collection") is not None:
            where.setdefault(item["collection"], item.get("catalog") or catalog)
        yield item


def _search_href(core: Core, catalog_id: str) -> str:
    """Where a catalog is searched: its API's /search, its file, or stac://<id>."""
    info = next((c for c in core.catalogs.info() if c.id == catalog_id), None)
    if info is not None and info.url:
        return info.url.rstrip("/") + "/search"
    return info.path if info is not None and info.path else f"stac://{catalog_id}"
