"""Image content beside a tool's structured result: the time series chart, and the opt-in
quicklook of a composite's or a reprojection's output (`quicklook=true`), as MCP image content
(PNG, base64) a host shows and a model can look at. The structured content stays as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

if TYPE_CHECKING:
    from mcp.types import ImageContent

    from ..outputs import OutputRecord
    from ..session import Session

QuicklookArg = Annotated[
    bool,
    Field(description="true: also return a PNG of the output"),
]


def png_content(png: bytes) -> ImageContent:
    """PNG bytes as an MCP image content block."""
    from fastmcp.utilities.types import Image

    return Image(data=png, format="png").to_image_content()


def chart_content(session: Session, chart: OutputRecord) -> list[ImageContent]:
    """The chart output (a PNG file the time series wrote), as image content."""
    return [png_content(session.outputs.path(chart.id).read_bytes())]


def quicklook_content(session: Session, record: OutputRecord) -> list[ImageContent]:
    """A quicklook of the output's file, as image content."""
    from ..processing.quicklook import quicklook_png

    return [png_content(quicklook_png(session.outputs.path(record.id)))]
