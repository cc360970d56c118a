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


def with_colour_bar(png: bytes, stretch: dict) -> bytes:
    """The single-band preview `png` with a colour bar under it: the colormap from the darkest to
    the brightest value shown (the record's `preview:stretch`). For the client only: the saved
    PNG stays bare, so that a map places it at its bbox."""
    import io

    import numpy as np
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.image import imread

    picture = imread(io.BytesIO(png), format="png")
    height, width = picture.shape[:2]
    dpi = 100
    figure = Figure(figsize=(max(width, 320) / dpi, (height + 80) / dpi), dpi=dpi)
    FigureCanvasAgg(figure)
    bar_h = 80 / (height + 80)
    image_axes = figure.add_axes((0, bar_h, 1, 1 - bar_h))
    image_axes.imshow(picture, interpolation="nearest")
    image_axes.set_axis_off()
    bar_axes = figure.add_axes((0.08, 0.62 * bar_h, 0.84, 0.16 * bar_h))
    low, high = stretch["dark"], stretch["bright"]
    norm = Normalize(vmin=low, vmax=high if high > low else low + 1e-9)
    from matplotlib.cm import ScalarMappable

    bar = figure.colorbar(
        ScalarMappable(norm, colormaps[stretch["colormap"]]), cax=bar_axes, orientation="horizontal"
    )
    p0, p1 = stretch["percentiles"]
    bar.set_label(f"{stretch['colormap']}, {p0:g}-{p1:g} % stretch", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    bar.set_ticks(np.linspace(norm.vmin, norm.vmax, 5))
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=dpi)
    return out.getvalue()


def chart_content(session: Session, chart: OutputRecord) -> list[ImageContent]:
    """The chart output (a PNG file the time series wrote), as image content."""
    return [png_content(session.outputs.path(chart.id).read_bytes())]


def quicklook_content(session: Session, record: OutputRecord) -> list[ImageContent]:
    """A quicklook of the output's file, as image content."""
    from ..processing.quicklook import quicklook_png

    return [png_content(quicklook_png(session.outputs.path(record.id)))]
