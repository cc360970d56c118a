"""Core errors. Nothing here knows about the server: it maps them to tool errors once.

Every message is meant for the person (or agent) who made the request: it says what was
wrong and what to do about it.
"""


class StacGdalMcpError(Exception):
    """Root of every error this package raises on purpose."""


class InvalidArgument(StacGdalMcpError, ValueError):
    """An argument has the wrong form or value."""


class InvalidBBox(InvalidArgument):
    """A bbox is not [west, south, east, north] within the valid range."""


class InvalidDatetime(InvalidArgument):
    """A datetime or interval is not RFC 3339 / ISO 8601."""


class InvalidFilter(InvalidArgument):
    """A CQL2 filter or a query expression cannot be parsed."""


class InvalidCursor(InvalidArgument):
    """A pagination cursor was not produced by this server or belongs to another catalog."""


class ConfigError(StacGdalMcpError):
    """The configuration file or environment is invalid."""


class NotFound(StacGdalMcpError, LookupError):
    """Something named by the caller does not exist."""


class CatalogNotFound(NotFound):
    """No catalog with that id is configured."""


class CollectionNotFound(NotFound):
    """The catalog has no collection with that id."""


class ItemNotFound(NotFound):
    """The collection has no item with that id."""


class AssetNotFound(NotFound):
    """The item has no asset with that key or band common name."""


class NotSupported(StacGdalMcpError):
    """The catalog does not implement what the request needs (see its conformance classes)."""


class Unreachable(StacGdalMcpError):
    """A remote host could not be resolved or reached."""


class CatalogUnavailable(Unreachable):
    """The catalog could not be reached, timed out or kept failing after retries."""


class AccessDenied(StacGdalMcpError, PermissionError):
    """A path, URL or output name is outside what the security policy allows."""


class LimitExceeded(StacGdalMcpError):
    """A request would exceed a configured limit (pixels, bytes, items)."""


class CallRefused(LimitExceeded):
    """A limit that refuses the whole call, not one item's work (every item would meet it): the
    item pipeline raises it instead of keeping it in the item's rows."""


class MaskNotFound(AssetNotFound):
    """The item has no asset that can be read as a cloud mask (no classification, no known mask key)."""


class AssetUnreadable(StacGdalMcpError):
    """GDAL could not open or read an asset (not a supported raster, missing, or an HTTP failure)."""


class ProcessingFailed(StacGdalMcpError):
    """GDAL failed while computing or writing an output; nothing was kept."""


class OperationCancelled(StacGdalMcpError):
    """The caller cancelled a long operation; no file and no record were kept."""


class OutputExists(InvalidArgument):
    """An output with that name already exists in the workspace."""


class OutputNotFound(NotFound):
    """The workspace has no output with that id."""


class GeoparquetError(StacGdalMcpError):
    """A stac-geoparquet file cannot be used (unreadable, not stac-geoparquet, missing a column)."""
