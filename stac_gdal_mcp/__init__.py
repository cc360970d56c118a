"""stac-gdal-mcp: find imagery in STAC catalogs and process its COG assets with GDAL.

The library and the MCP server are two faces of one API: the server's tools call the methods
of a `Session`, and so can you, in a notebook or a script.

    >>> import stac_gdal_mcp
    >>> session = stac_gdal_mcp.Session(default_catalog="sample")   # the bundled offline catalog
    >>> aoi = [13.60, 45.92, 13.62, 45.935]                          # WGS84 bbox: a few fields

Find imagery (results iterate, page with next(), become a DataFrame, show with thumbnails):

    >>> results = session.search(collections=["sentinel-2-l2a"], bbox=aoi, datetime="2024-06-01/2024-09-30")
    >>> len(results), results.to_dataframe().columns[:3].tolist()
    (5, ['id', 'collection', 'datetime'])

Rank scenes by cloud cover inside the area (a DataFrame), load them lazily (an xarray
Dataset on dask, clouds masked, reflectances), make an NDVI time series (a DataFrame) and a
composite (a DataArray):

    >>> ranking = session.cloud_cover(aoi, collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-09-30")
    >>> ds = session.load(aoi, ["red", "nir"], collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-09-30")
    >>> ndvi = session.time_series(aoi, "ndvi", collections=["sentinel-2-l2a"], datetime="2024-06-01/2024-09-30")
    >>> rgb = session.composite(aoi, ["red", "green", "blue"], collections=["sentinel-2-l2a"])

Nothing above wrote a file. Saving is explicit, and every output gets a STAC-like record
saying where each pixel came from:

    >>> record = session.save(rgb)                       # a COG in the workspace
    >>> record.properties.processing_expression["expression"]["operation"]
    'composite'

Processing by item reference writes outputs directly: `session.reproject(item, "red",
dst_crs="EPSG:4326")`, `session.convert(...)`, `session.preview(...)` (an image that shows
inline in Jupyter); `session.inspect(...)` reads a header. See `help(stac_gdal_mcp.Session)`.

The MCP server over the same API: `stac_gdal_mcp.server.build_server(settings)`, or the
command `stac-gdal-mcp serve`.
"""

from ._version import __version__
from .errors import StacGdalMcpError
from .models import ItemSummary, SearchResult
from .outputs import OutputRecord
from .processing.estimate import Estimate
from .results import Preview, SearchResults
from .session import Session
from .settings import Settings, load_settings

__all__ = [
    "Estimate",
    "ItemSummary",
    "OutputRecord",
    "Preview",
    "SearchResult",
    "SearchResults",
    "Session",
    "Settings",
    "StacGdalMcpError",
    "__version__",
    "load_settings",
]


def __dir__() -> list[str]:
    return list(__all__)
