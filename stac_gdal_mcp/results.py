"""Results of the library for people: search results that page, tabulate and show themselves,
a cloud cover ranking (the tool's result, and a table), and a preview image that shows inline
in Jupyter. (JSON result models are in `models.py`.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .discovery.summaries import item_summary
from .models import ItemSummary, SearchResult

if TYPE_CHECKING:
    import pandas as pd

    from .core import Core
    from .outputs import OutputRecord
    from .processing.cloud import CloudCoverResult, ItemCloudCover


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


class SearchResults:
    """One page of an item search: iterate it for the items, `to_dataframe()` for a table,
    `next()` for the following page; in Jupyter it shows as a table with thumbnails.

    `page` is the same `SearchResult` the server's search_items tool returns: `items` (ItemSummary,
    or full STAC item dicts with detail="full"), `returned`, `matched`, `next_cursor`, `notes`.
    """

    def __init__(
        self, page: SearchResult, session: Searcher, *, catalog: str | None, limit: int | None, detail: str
    ):
        self.page = page
        self._session = session
        self._catalog = catalog
        self._limit = limit
        self._detail = detail

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
        return self._session.search(
            catalog=self._catalog, cursor=self.next_cursor, limit=self._limit, detail=self._detail
        )

    def pages(self) -> Iterator[SearchResults]:
        """This page and every following one (each fetched when reached)."""
        page: SearchResults | None = self
        while page is not None:
            yield page
            page = page.next()

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


@dataclass(frozen=True)
class Preview:
    """A quicklook PNG (also saved as an output, see `record`); shows inline in Jupyter.

    `png` holds the PNG bytes; `record` the output's STAC-like record; `width`, `height` its
    size in pixels; `save(path)` writes the PNG somewhere else too.
    """

    png: bytes = field(repr=False)
    record: OutputRecord = field(repr=False)

    @property
    def width(self) -> int:
        return int(self.record.properties.proj_shape[1])

    @property
    def height(self) -> int:
        return int(self.record.properties.proj_shape[0])

    @property
    def title(self) -> str:
        return self.record.properties.title or self.record.id

    def _repr_png_(self) -> bytes:
        return self.png

    def save(self, path) -> None:
        """Write the PNG to `path`."""
        from pathlib import Path

        Path(path).write_bytes(self.png)

    def __repr__(self) -> str:
        return f"<Preview {self.title!r} {self.width} x {self.height} px, output {self.record.id}>"


class CloudCover:
    """Cloud cover inside an AOI, one row per item (clearest first by default): `result` is the
    same `CloudCoverResult` the server's cloud_cover_stats tool returns; `to_dataframe()` makes
    the ranking table (its `attrs`: aoi_bbox, sort, failed, notes).

    It reads as that table too - `ranking["clear_fraction"]`, `ranking.iloc[0]`, `len(ranking)`,
    `ranking.attrs` and the other DataFrame attributes go to `to_dataframe()` - so code written
    for the table keeps working; in Jupyter it shows as the table.
    """

    def __init__(self, result: CloudCoverResult):
        self.result = result
        self._frame: pd.DataFrame | None = None

    @property
    def items(self) -> list[ItemCloudCover]:
        """The rows: per item, the cloud, shadow, cirrus, snow, water, clear and no-data fractions."""
        return self.result.items

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    def to_dataframe(self) -> pd.DataFrame:
        """The ranking as a DataFrame, one row per item in its order (a copy each call)."""
        from .processing.tables import cloud_cover_frame

        if self._frame is None:
            self._frame = cloud_cover_frame(self.result)
        return self._frame.copy()

    def _table(self) -> pd.DataFrame:
        if self._frame is None:
            self.to_dataframe()
        return self._frame  # type: ignore[return-value]

    def __getitem__(self, key):
        return self._table()[key]

    def __len__(self) -> int:
        return len(self.result.items)

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("result", "_frame"):
            raise AttributeError(name)
        return getattr(self._table(), name)

    def _repr_html_(self) -> str:
        return self._table()._repr_html_()

    def __repr__(self) -> str:
        return f"<CloudCover {len(self)} items, {self.result.failed} failed, sort={self.result.sort!r}>"
