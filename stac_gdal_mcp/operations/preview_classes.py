"""The preview of a class raster (Sentinel-2 SCL, ESA WorldCover, Landsat QA_PIXEL, an asset with
the classification extension): each class in its own colour (its `color_hint`, the publisher's
palette; `known_classes`) instead of a stretch, and a categorical legend naming the classes
shown, in place of a colour bar.

`class_picture` colours the pixels and lists the classes the preview shows (the record keeps
them as `preview:classes`: value, name, colour, share of the shown pixels); `with_legend` draws
the legend under the PNG the tool answers with; `describe_classes` is the line that says it;
`swatch_edge` outlines a light class dark, here and in zonal_stats' class fraction chart.
"""

from __future__ import annotations

CLASSES = "preview:classes"  # the record property of a class raster's preview: its classes shown
MAX_VALUES = 256  # distinct values over which a raster is drawn as numbers, not classes
LEGEND_ROWS = 24  # classes the legend names (the most common first), the rest counted


def class_picture(band, valid, source) -> tuple[object, object, list[dict]] | None:
    """(RGB uint8 image, valid mask, classes shown) of a one-band integer preview whose asset is
    a class raster, its nodata classes (SCL 0, QA_PIXEL fill) left transparent; None for any
    other raster (floats, no known classes, more than MAX_VALUES values)."""
    import numpy as np

    from ..processing.known_classes import asset_classes, name_values

    if band.dtype.kind not in "iu":
        return None
    classes, bitfields = asset_classes(source.item, source.asset_key)
    if not classes and not bitfields:
        return None
    values, counts = np.unique(np.asarray(band)[valid], return_counts=True)
    if values.size > MAX_VALUES:
        return None
    named = name_values(values, classes, bitfields)
    image = np.zeros((3, *band.shape), dtype="uint8")
    data = np.asarray(band)
    valid = valid.copy()
    for value, entry in named.items():
        where = valid & (data == value)
        if entry["nodata"]:
            valid &= ~where
            continue
        rgb = [int(entry["color"][i : i + 2], 16) for i in (1, 3, 5)]
        image[:, where] = np.array(rgb, dtype="uint8")[:, None]
    shown = int(sum(c for v, c in zip(values, counts) if not named[int(v)]["nodata"]))
    legend = [
        {
            "value": int(v),
            "name": named[int(v)]["name"],
            "color": named[int(v)]["color"],
            "share": round(c / shown, 4),
        }
        for v, c in sorted(zip(values, counts), key=lambda vc: -vc[1])
        if not named[int(v)]["nodata"]
    ]
    return image, valid, legend


def describe_classes(legend: list[dict]) -> str:
    """'classes in their own colours: 4 Vegetation (61 %), 6 Water (15 %), ...' (at most 5)."""
    parts = [f"{c['value']} {c['name']} ({100 * c['share']:.3g} %)" for c in legend[:5]]
    more = f", {len(legend) - 5} more" if len(legend) > 5 else ""
    return "classes in their own colours: " + (", ".join(parts) or "none shown") + more


def is_light(color: str) -> bool:
    """A colour a white page hides ("#ffffff", "#f0f0f0"): luminance over 0.85."""
    r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.85


def swatch_edge(color: str | None) -> tuple[str, float]:
    """The edge (colour, width) a patch of `color` takes: dark and wide enough to show a light
    class (white snow, white cloud) on a white page, thin grey for any other."""
    return ("0.15", 1.2) if color and is_light(color) else ("0.3", 0.3)


def with_legend(png: bytes, legend: list[dict]) -> bytes:
    """The class preview `png` with a legend under it: a swatch per class shown (the most common
    first, at most LEGEND_ROWS), light classes outlined, named "value name (share %)"."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.image import imread
    from matplotlib.patches import Patch

    picture = imread(io.BytesIO(png), format="png")
    height, width = picture.shape[:2]
    rows = legend[:LEGEND_ROWS]
    columns = 2 if width >= 880 else 1
    lines = -(-(len(rows) + (len(legend) > len(rows))) // columns)
    legend_h = 34 + 16 * max(lines, 1)
    dpi = 100
    fig_w = max(width, 440)
    figure = Figure(figsize=(fig_w / dpi, (height + legend_h) / dpi), dpi=dpi)
    FigureCanvasAgg(figure)
    share = legend_h / (height + legend_h)
    image_axes = figure.add_axes((0, share, 1, 1 - share))
    image_axes.imshow(picture, interpolation="nearest")
    image_axes.set_axis_off()
    handles = []
    for c in rows:
        edge, line = swatch_edge(c["color"])
        label = f"{c['value']} {c['name']} ({100 * c['share']:.3g} %)".replace("$", r"\$")
        handles.append(Patch(facecolor=c["color"], edgecolor=edge, linewidth=line, label=label))
    if len(legend) > len(rows):
        handles.append(Patch(facecolor="none", edgecolor="none", label=f"... {len(legend) - len(rows)} more"))
    figure.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.01, 0.0, 0.98, share * (legend_h - 6) / legend_h),
        ncol=columns,
        fontsize=8,
        frameon=False,
        title="classes (share of the shown pixels)",
        title_fontsize=8,
        mode="expand",
        borderaxespad=0.2,
    )
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=dpi)
    return out.getvalue()
