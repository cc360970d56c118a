"""Catalog access, the foundation every layer above stands on: the named catalogs (`registry`:
`Catalogs`, opening remote STAC APIs from `remote` and local catalogs from `local`), the one
guarded HTTP client of STAC APIs and stac-geoparquet URLs (`http`), paging
helpers, the byte budget of one answer and signed cursors (`paging`, `bounds`, `cursors`), their
requests' network policy and path sandbox (`security`, `netguard`), the one redaction rule for
what leaves the server (`redact`), Planetary Computer signing (`signing`), GDAL's messages about
failed reads (`gdal_messages`), the workspace as a catalog (`workspace`) and the `index` command
that makes a catalog of a folder of GeoTIFFs (`indexing`)."""

from .bounds import ResultBudget
from .http import url_under
from .local import LocalCatalog
from .paging import PageTrail
from .registry import Catalogs
from .remote import RemoteCatalog, features_from_conformance, path_segment

__all__ = [
    "Catalogs",
    "LocalCatalog",
    "PageTrail",
    "RemoteCatalog",
    "ResultBudget",
    "features_from_conformance",
    "path_segment",
    "url_under",
]
