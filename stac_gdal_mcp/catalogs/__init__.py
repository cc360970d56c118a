"""Catalog access, the foundation every layer above stands on: the named catalogs (remote STAC
APIs and local catalogs, `registry`), their requests' network policy and path sandbox
(`security`, `netguard`), Planetary Computer signing (`signing`), GDAL's messages about failed
reads (`gdal_messages`), the workspace as a catalog (`workspace`) and the `index` command that
makes a catalog of a folder of GeoTIFFs (`indexing`)."""

from .registry import (
    Catalogs,
    LocalCatalog,
    PageTrail,
    RemoteCatalog,
    ResultBudget,
    features_from_conformance,
    path_segment,
    url_under,
)

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
