"""Every catalog as a `Source` (source.py): the one place a catalog's kind chooses how it is
read (`SOURCES`, by the `kind` each catalog class of `catalogs/` declares)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .api_search import ApiSource
from .local import LocalSource
from .parquet_search import ParquetSource
from .source import Source

if TYPE_CHECKING:
    from ..core import Core

SOURCES: dict[str, type[Source]] = {"api": ApiSource, "local": LocalSource, "geoparquet": ParquetSource}


def open_source(core: Core, catalog: str | None = None) -> Source:
    """Catalog `catalog` (None: the default one) as a Source."""
    cat = core.catalogs.get(catalog)
    return SOURCES[cat.kind](core, cat)
