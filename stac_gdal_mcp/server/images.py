"""Image content beside a tool's structured result: the PNGs an operation's answer carries (the
time series chart, a zonal chart, a preview, the opt-in quicklook of a composite's or a
reprojection's output, `quicklook=true`: operations/registry.py) as MCP image content (base64)
a host shows and a model can look at. The structured content stays as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..operations.params import QuicklookArg as QuicklookArg  # declared with the operations' fields

if TYPE_CHECKING:
    from mcp.types import ImageContent


def png_content(png: bytes) -> ImageContent:
    """PNG bytes as an MCP image content block."""
    from fastmcp.utilities.types import Image

    return Image(data=png, format="png").to_image_content()
