"""Every catalog as a `Source` (source.py): the one place a catalog's kind chooses how it is
read (`SOURCES`, by the `kind` each catalog class of `catalogs/` declares), and several catalogs
searched as one (`FederatedSource`, federated.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..models import SearchResult
from .api_search import ApiSource
from .federated import catalog_ids, federated_search
from .local import LocalSource
from .parquet_source import ParquetSource
from .query import ItemSearch
from .source import Source

if TYPE_CHECKING:
    from ..core import Core

SOURCES: dict[str, type[Source]] = {"api": ApiSource, "local": LocalSource, "geoparquet": ParquetSource}


def open_source(core: Core, catalog: str | list[str] | None = None, *, several: bool = False) -> Source:
    """Catalog `catalog` (None: the default one) as a Source; with `several`, `catalog` may also
    name several (a list, comma-separated ids, "*": every configured catalog), searched as one."""
    if several:
        ids = catalog_ids(core, catalog)
        if len(ids) > 1:
            return FederatedSource(core, ids)
        catalog = ids[0]
    cat = core.catalogs.get(catalog)
    return SOURCES[cat.kind](core, cat)


class FederatedSource(Source):
    """Several catalogs as one (federated.py): a search fans out to each catalog's own Source
    (`member`) and merges their pages; a count adds theirs up. A page of no total counts
    (`matched_is` None). Collections, queryables and single items are one catalog's."""

    matched_is = None

    def __init__(self, core: Core, ids: list[str]):
        super().__init__(core, None)
        self._ids = ids

    @property
    def id(self) -> str:
        return "+".join(self._ids)

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def member(self, catalog_id: str) -> Source:
        """The Source of one of the catalogs, opened when its stream is first read."""
        return open_source(self.core, catalog_id)

    def search(self, request: ItemSearch, *, bounded: bool = True) -> SearchResult:
        return federated_search(self, request)

    def page(self, *args: Any, **kwargs: Any) -> Any:
        raise self.one_catalog("pages of items")

    def collection(self, collection_id: str) -> dict:
        raise self.one_catalog("collection")

    def item(self, collection_id: str, item_id: str) -> dict:
        raise self.one_catalog("item")

    def queryables(self, collection_id: str | None) -> Any:
        raise self.one_catalog("queryables")

    def collections_page(self, *args: Any, **kwargs: Any) -> Any:
        raise self.one_catalog("collections")

    def one_catalog(self, what: str) -> InvalidArgument:
        return InvalidArgument(
            f"only one catalog's {what} can be read: give one id, not {', '.join(self._ids)}"
        )
