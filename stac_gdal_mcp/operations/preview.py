"""preview: a quicklook PNG of an item or an asset, at most `max_size` pixels on its long side.

What is shown: the `assets` asked for (1 = single band, 3 = red/green/blue); else the item's
`visual` asset; else its red/green/blue bands (by common name); else its first data asset.
A class raster (SCL, ESA WorldCover, Landsat QA_PIXEL, an asset with the classification
extension) shows each class in its own colour, the record keeping the classes shown
(`preview:classes`) for a legend naming them (`preview_classes`); any other single band is
stretched (2-98 percentiles) through the viridis colormap, and the record keeps the stretch
(`preview:stretch`: colormap, percentiles, the values shown darkest and brightest, in the
asset's units) for a colour bar and the text that says it; RGB reflectances
share one stretch so colours stay balanced; 8-bit RGB (a `visual` asset) is shown as it is.
Reads are decimated, so GDAL reads the overviews, not the full-resolution tiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, ClassVar

from pydantic import Field

from ..outputs import OutputRecord
from ..processing.access import AssetSource, check_read_size, gdal_errors, open_reader
from ..processing.formats import FORMATS, colorize, stretch_to_8bit, write_8bit
from ..processing.grids import bbox_window
from ..processing.jobs import Job, timed
from ..processing.records import raster_bands, raster_facts
from .base import Tool
from .params import OnAsset, json_text
from .preview_classes import CLASSES, class_picture, describe_classes, with_legend
from .result import Answer, Result

if TYPE_CHECKING:
    from ..core import Core
    from ..processing.estimate import Estimate

MAX_PREVIEW_SIZE = 2048
PERCENTILES = (2, 98)
COLORMAP = "viridis"
STRETCH = "preview:stretch"  # the record property of a single-band preview: colormap and value range


def _stretch(band, valid, source: AssetSource, gdal_scale: tuple[float, float]) -> dict:
    """The single band's stretch: its PERCENTILES of the valid pixels (as stretch_to_8bit takes
    them), in the asset's values (its raster:bands scale and offset, else GDAL's, applied)."""
    import numpy as np

    from ..stac import raster_band

    values = np.asarray(band, dtype="float64")[valid]
    values = values[np.isfinite(values)]
    low, high = (float(v) for v in np.percentile(values, PERCENTILES)) if values.size else (0.0, 0.0)
    asset = ((source.item or {}).get("assets") or {}).get(source.asset_key or "", {})
    band_info = raster_band(asset)
    scale, offset = band_info.get("scale", gdal_scale[0]), band_info.get("offset", gdal_scale[1])
    return {
        "colormap": COLORMAP,
        "percentiles": list(PERCENTILES),
        "dark": round(low * scale + offset, 6),
        "bright": round(high * scale + offset, 6),
    }


def describe_stretch(stretch: dict) -> str:
    """'viridis, 2-98 % stretch: 0.012 (dark) to 0.41 (bright)'."""
    p0, p1 = stretch["percentiles"]
    return (
        f"{stretch['colormap']}, {p0:g}-{p1:g} % stretch: "
        f"{stretch['dark']:.4g} (dark) to {stretch['bright']:.4g} (bright)"
    )


def check_preview_read(
    source: AssetSource, src, window_pixels: float, scale: float, bands: int, settings
) -> None:
    """The source pixels a decimated read takes: GDAL reads the coarsest overview whose
    decimation is at most `scale`; without one, every full-resolution pixel of the window."""
    factors = [f for f in (src.overviews(1) if src.count else []) if f <= max(scale, 1.0) * (1 + 1e-6)]
    factor = max(factors, default=1)
    check_read_size(
        window_pixels / factor**2 * bands,
        settings,
        what=f"a preview of {source.label}",
        hint=f"pass a smaller bbox (the file has {'overviews ' + str(src.overviews(1)) if src.count and src.overviews(1) else 'no overviews'})",
    )


def _read_others(core: Core, sources, crs, area, size: tuple[int, int], resampling, job: Job) -> list:
    """The 2nd and 3rd sources of a preview, read (warped into the first one's CRS if need be)
    over `area` at `size` px."""
    from rasterio.vrt import WarpedVRT
    from rasterio.windows import from_bounds

    settings = core.settings
    out_w, out_h = size
    layers = []
    for number, other in enumerate(sources[1:], start=2):
        with open_reader(other, settings, job=job) as reader, gdal_errors(other, "previewing"):
            src = reader.src
            if src.crs != crs:

                def read_warped(s, other=other):
                    with WarpedVRT(s, crs=crs, resampling=resampling) as vrt:
                        part = from_bounds(*area, transform=vrt.transform)
                        check_preview_read(
                            other, s, part.width * part.height, part.width / out_w, 1, settings
                        )
                        return vrt.read(
                            [1], window=part, out_shape=(1, out_h, out_w), resampling=resampling, masked=True
                        )

                layers.append(reader.run(read_warped, "previewing"))
            else:
                part = from_bounds(*area, transform=src.transform)
                check_preview_read(other, src, part.width * part.height, part.width / out_w, 1, settings)
                layers.append(
                    reader.run(
                        lambda s, p=part: s.read(
                            [1], window=p, out_shape=(1, out_h, out_w), resampling=resampling, masked=True
                        ),
                        "previewing",
                    )
                )
        job.progress(number, len(sources) + 1, f"read {other.label}")

    return layers


def render(core: Core, request: PreviewImage, job: Job | None = None) -> tuple[OutputRecord, bytes]:
    """Read the request's sources decimated to at most `max_size` px, render to 8-bit PNG, store
    it; return the record and the PNG bytes."""
    import numpy as np
    from rasterio.enums import Resampling
    from rasterio.transform import Affine
    from rasterio.windows import Window
    from rasterio.windows import bounds as window_bounds

    job = timed(job, core)
    sources, bbox, max_size = request.sources, request.bbox, request.max_size
    settings = core.settings
    first = sources[0]
    with open_reader(first, settings, job=job) as reader, gdal_errors(first, "previewing"):
        src = reader.src
        window = (
            bbox_window(src, bbox, "EPSG:4326") if bbox is not None else Window(0, 0, src.width, src.height)
        )
        scale = max(window.width, window.height) / max_size
        scale = max(scale, 1.0)  # never enlarge
        out_w, out_h = max(1, round(window.width / scale)), max(1, round(window.height / scale))
        crs = src.crs
        gdal_scale = (src.scales[0] if src.scales else 1.0, src.offsets[0] if src.offsets else 0.0)
        area = window_bounds(window, src.transform)
        transform = src.window_transform(window) @ Affine.scale(window.width / out_w, window.height / out_h)
        rgb_in_one = len(sources) == 1 and src.count >= 3 and src.dtypes[0] == "uint8"
        indexes = [1, 2, 3] if rgb_in_one else [1]
        resampling = Resampling.average if (rgb_in_one or len(sources) == 3) else Resampling.nearest
        check_preview_read(first, src, window.width * window.height, scale, len(indexes), settings)
        layers = [
            reader.run(
                lambda s: s.read(
                    indexes,
                    window=window,
                    out_shape=(len(indexes), out_h, out_w),
                    resampling=resampling,
                    masked=True,
                ),
                "previewing",
            )
        ]
    job.progress(1, len(sources) + 1, f"read {first.label}")
    layers += _read_others(core, sources, crs, area, (out_w, out_h), resampling, job)
    data = np.ma.concatenate(layers)
    image, valid, shown, how = _picture(data, first, gdal_scale)
    fmt = FORMATS["PNG"]
    store = core.outputs
    stem = f"preview-{first.item_id or first.stem}"
    with store.writing(fmt.suffix, None, stem=stem) as out:
        write_8bit(fmt, out.path, image, valid, {}, crs=crs, transform=transform)
        png = out.path.read_bytes()
        facts = raster_facts(crs, transform, out_w, out_h, raster_bands(["uint8"] * 3, None))
        record = store.commit(
            out,
            operation="preview",
            parameters={
                "assets": [s.asset_key or s.href_unsigned for s in sources],
                "bbox": list(bbox) if bbox else None,
                "max_size": max_size,
            },
            sources=[s.source_ref() for s in sources],
            media_type=fmt.media_type,
            raster=facts,
            title=f"preview of {', '.join(s.label for s in sources)}",
            lineage=f"quicklook of {', '.join(s.label for s in sources)} at {out_w} x {out_h} px: {how}; nodata transparent",
            properties=shown,
        )
    job.progress(len(sources) + 1, len(sources) + 1, "written")
    return record, png


def _picture(data, first, gdal_scale) -> tuple:
    """(8-bit image, valid mask, the record's properties, how it was drawn) of the read bands: three
    bands as RGB, a class raster in its classes' colours, any other band stretched and coloured."""
    import numpy as np

    valid = ~np.ma.getmaskarray(data).any(axis=0)
    if data.shape[0] == 3:
        how = "RGB" + (
            " as stored (8-bit)" if data.dtype == np.uint8 else f", one {PERCENTILES} percentile stretch"
        )
        return stretch_to_8bit(data.filled(0), valid, PERCENTILES, joint=True), valid, None, how
    if (drawn := class_picture(data[0], valid, first)) is not None:
        image, valid, legend = drawn
        return image, valid, {CLASSES: legend}, f"single band, {describe_classes(legend)}"
    gray = stretch_to_8bit(data.filled(0).astype("float32"), valid, PERCENTILES)[0]
    shown = {STRETCH: _stretch(data[0], valid, first, gdal_scale)}
    return colorize(gray, valid, COLORMAP), valid, shown, f"single band, {describe_stretch(shown[STRETCH])}"


@dataclass(frozen=True)
class Preview(Result):
    """A quicklook PNG (also saved as an output, see `record`); shows inline in Jupyter.

    `png` holds the PNG bytes; `record` the output's STAC-like record; `width`, `height` its
    size in pixels; `save(path)` writes the PNG somewhere else too. The preview tool answers its
    record and the PNG; the map draws it at its bbox.
    """

    png: bytes = field(repr=False)
    record: OutputRecord = field(repr=False)
    _core: Core | None = field(default=None, repr=False, compare=False)
    result_kind: ClassVar[str] = "preview"

    @property
    def width(self) -> int:
        return int(self.record.properties.proj_shape[1])

    @property
    def height(self) -> int:
        return int(self.record.properties.proj_shape[0])

    @property
    def title(self) -> str:
        return self.record.properties.title or self.record.id

    @property
    def request(self) -> dict:
        """The parameters of the preview (assets, bbox, max_size), as its record keeps them."""
        from .saved import parameters_of

        return dict(parameters_of(self.record))

    def _repr_png_(self) -> bytes:
        return self.png

    def save(self, path) -> None:
        """Write the PNG to `path`."""
        from pathlib import Path

        Path(path).write_bytes(self.png)

    def __repr__(self) -> str:
        return f"<Preview {self.title!r} {self.width} x {self.height} px, output {self.record.id}>"

    def _outputs(self, core, job) -> tuple[OutputRecord]:
        """A preview is saved as it is made: its record."""
        return (self.record,)

    def _answer(self, core, records, limits, quicklook: bool) -> Answer:
        """The preview tool's answer: its record (no JSON text), the PNG (a single band's with a
        colour bar, a class raster's with its legend; the saved PNG stays bare, so that a map places
        it at its bbox) and a line saying what it shows."""
        from .saved import record_layer

        record = self.record
        note = f"{self.title} ({self.width} x {self.height} px); output {record.id}, record at {record.uri}"
        extra = record.properties.model_extra or {}
        stretch, legend = extra.get(STRETCH), extra.get(CLASSES)
        png = self.png
        if stretch:
            note += f"; {describe_stretch(stretch)}"
            png = with_colour_bar(png, stretch)
        elif legend is not None:
            note += f"; {describe_classes(legend)}"
            png = with_legend(png, legend)
        return Answer(record, records, (png,), note=note, as_text=False, layer=record_layer(record, 0))

    def map_call(self) -> dict:
        """A preview as the map draws it: its record at its bbox, with its picture."""
        from .saved import record_call

        return record_call(self.record, self.png)


def with_colour_bar(png: bytes, stretch: dict) -> bytes:
    """The single-band preview `png` with a colour bar under it: the colormap from the darkest to
    the brightest value shown (the record's `preview:stretch`)."""
    import io

    import numpy as np
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.cm import ScalarMappable
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


class PreviewImage(OnAsset):
    """A quicklook PNG of an item (true colour from its visual asset or red/green/blue) or of
    one asset (single band, colormap), at most `max_size` px; it shows inline in Jupyter and
    is saved as an output (`.record`). `assets`: 1 or 3 asset names to show. `dry_run=True`:
    an `Estimate` of what it would read and write.

    >>> image = session.preview(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), bbox=aoi, max_size=64)
    >>> image.png[:4], image.width <= 64
    (b'\\x89PNG', True)
    """

    name: ClassVar[str] = "preview"
    library_name: ClassVar[str] = "preview"
    tool: ClassVar[Tool] = Tool(task=False, confirm=False)
    description: ClassVar[str] = """A quick PNG of an item (true colour) or an asset (colormap, colour
    bar) from overviews, returned as an image and saved.

    Example: inspect_asset's example without asset (true colour)."""
    answer_model: ClassVar[type] = OutputRecord

    assets: json_text(
        list[str] | None,
        "1 asset (colormap) or 3 (RGB); default: visual or red, green, blue",
    ) = None
    bbox: json_text(
        Annotated[list[float], Field(min_length=4, max_length=4)] | None,
        "[west, south, east, north] in WGS84",
    ) = None
    max_size: Annotated[int, Field(ge=16, le=MAX_PREVIEW_SIZE, description="longest side in pixels")] = 512

    def resolve(self, core: Core) -> tuple[AssetSource, ...]:
        """What it shows: one asset, or an item's 1 or 3 (`inputs.preview_sources`)."""
        from .inputs import preview_sources

        return tuple(preview_sources(core, self.source, self.asset, self.assets, self.ref))

    @property
    def sources(self) -> tuple[AssetSource, ...]:
        return self.input

    def estimate(self, core: Core) -> Estimate:
        """What `run` would read and write (headers only)."""
        from ..processing.estimate import estimate_preview

        return estimate_preview(core, self.plan(core))

    def run(self, core: Core, job: Job | None = None) -> Preview:
        """The quicklook, saved (`render`)."""
        record, png = render(core, self.plan(core), job)
        return Preview(png=png, record=record, _core=core)
