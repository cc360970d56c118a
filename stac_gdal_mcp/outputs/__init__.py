"""Outputs: the files the package writes into the workspace and their records.

- `records`: the record models (`OutputRecord`, a STAC Item with projection, raster, file and
  processing facts; `SourceRef`, `RasterFacts`, ...) and `build_record`;
- `store`: `OutputStore`, the workspace's outputs (atomic writes, reading, listing, deleting,
  sweeping what dead writers left);
- `leftovers`: which temporary entries belong to a writer that is gone.

The file helpers they use (atomic writes, checksums, reads without following links) are the
package's foundation, `stac_gdal_mcp.files`, shared with the workspace catalog and `index`.
"""

from ..files import file_checksum
from .records import (
    STAC_EXTENSIONS,
    Link,
    OutputAsset,
    OutputList,
    OutputProperties,
    OutputRecord,
    OutputSummary,
    RasterBand,
    RasterFacts,
    RecordLinks,
    SourceRef,
    build_record,
    package_versions,
)
from .store import OutputStore, PendingOutput

__all__ = [
    "STAC_EXTENSIONS",
    "Link",
    "OutputAsset",
    "OutputList",
    "OutputProperties",
    "OutputRecord",
    "OutputStore",
    "OutputSummary",
    "PendingOutput",
    "RasterBand",
    "RasterFacts",
    "RecordLinks",
    "SourceRef",
    "build_record",
    "file_checksum",
    "package_versions",
]
