"""convert_asset: another format, optionally a bbox subset and some bands, in the native CRS.

Only the window covering `bbox` is read (GDAL fetches just the tiles that intersect it). COG,
GTiff and netCDF keep values and georeferencing; PNG and JPEG are rendered for people: a
2-98 percentile stretch per band to 8 bits (8-bit data kept as is), nodata transparent in PNG.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field

from ..errors import InvalidArgument
from ..outputs import OutputRecord
from ..processing import formats
from ..processing.access import check_read_size, gdal_errors, open_reader
from ..processing.formats import finish, row_strips, stretch_to_8bit, write_8bit, write_chunks
from ..processing.grids import bbox_window, check_output_size
from ..processing.jobs import Job, timed
from ..processing.records import describe_raster, raster_bands, raster_facts
from .params import BBoxArg, BBoxCrsArg, OnAsset, OutputNameArg, json_text

if TYPE_CHECKING:
    from ..core import Core
    from ..processing.estimate import Estimate

PERCENTILES = (2, 98)


def _eight_bit(reader, request: ConvertAsset, out, indexes, window, transform, job: Job):
    """Write the window as an 8-bit PNG/JPEG picture; (its raster facts, how it was rendered)."""
    import numpy as np

    fmt, path = request.fmt, out.path
    data = reader.run(lambda s: s.read(indexes, window=window, masked=True))
    valid = ~np.ma.getmaskarray(data).any(axis=0)
    job.progress(1, 2, "read")
    image = stretch_to_8bit(data.filled(0), valid, PERCENTILES, joint=len(indexes) == 3)
    write_8bit(fmt, path, image, valid, request.options, crs=reader.src.crs, transform=transform)
    nodata = 0 if fmt.driver == "JPEG" else None
    width, height = int(window.width), int(window.height)
    facts = raster_facts(
        reader.src.crs, transform, width, height, raster_bands(["uint8"] * len(indexes), nodata)
    )
    how = (
        f"8-bit rendering: uint8 kept, others stretched between the {PERCENTILES[0]}th and "
        f"{PERCENTILES[1]}th percentiles to 1-255 (one range for RGB); nodata "
        + ("transparent (alpha band)" if fmt.driver == "PNG" else "black (0)")
    )
    return facts, how


def band_indexes(bands: Sequence[int] | None, count: int, eight_bit: bool) -> list[int]:
    """1-based band numbers to read; PNG/JPEG take 1 band (gray) or 3 (RGB)."""
    if bands is None:
        return [1, 2, 3] if eight_bit and count >= 3 else ([1] if eight_bit else list(range(1, count + 1)))
    indexes = list(bands)
    bad = [b for b in indexes if not isinstance(b, int) or not 1 <= b <= count]
    if not indexes or bad:
        raise InvalidArgument(f"bands must be band numbers from 1 to {count}; got {list(bands)}")
    if eight_bit and len(indexes) not in (1, 3):
        raise InvalidArgument("PNG and JPEG take 1 band (gray) or 3 bands (red, green, blue)")
    return indexes


class ConvertAsset(OnAsset):
    """Write an asset (its window inside `bbox`, its `bands`) in another format, in its own
    CRS and resolution; PNG/JPEG are 8-bit renderings. Returns the output's record
    (`dry_run=True`: an `Estimate` of what it would read and write).

    >>> record = session.convert(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "red",
    ...                          output_format="PNG", bbox=aoi)
    >>> record.file.type
    'image/png'
    """

    name: ClassVar[str] = "convert_asset"
    library_name: ClassVar[str] = "convert"
    description: ClassVar[str] = """Convert an asset (some bands, its window in bbox; nothing
    resampled) to another format.

    Example: inspect_asset's example with asset="visual", output_format="PNG"."""
    answer_model: ClassVar[type] = OutputRecord

    output_format: Annotated[
        Literal["COG", "GTiff", "PNG", "JPEG", "netCDF"],
        Field(description="PNG/JPEG: stretched 8-bit; others keep the values"),
    ]
    bbox: BBoxArg = None
    bbox_crs: BBoxCrsArg = "EPSG:4326"
    bands: json_text(list[int] | None, "band numbers from 1; PNG/JPEG: 1 or 3") = None
    creation_options: json_text(
        dict[str, str | int] | None, 'GDAL creation options, e.g. {"COMPRESS": "ZSTD"}'
    ) = None
    output_name: OutputNameArg = None

    def plan(self, core: Core) -> ConvertAsset:
        """The input resolved, then the output format and its creation options checked."""
        super().plan(core)
        options = self.options
        for name in self.creation_options or {}:
            check_creation_option(self.fmt.driver, str(name).upper(), options[str(name).upper()])
        return self

    @cached_property
    def fmt(self):
        return formats.output_format(self.output_format)

    @cached_property
    def options(self) -> dict:
        return formats.creation_options(self.fmt, self.creation_options)

    def band_indexes(self, count: int) -> list[int]:
        """The band numbers read of a file of `count` bands (checked)."""
        return band_indexes(self.bands, count, self.fmt.eight_bit)

    def estimate(self, core: Core) -> Estimate:
        """What `run` would read and write (header only)."""
        from ..processing.estimate import estimate_convert

        return estimate_convert(core, self.plan(core))

    def run(self, core: Core, job: Job | None = None) -> OutputRecord:
        """The output's record (`convert`)."""
        return convert(core, self.plan(core), job)


def convert_asset(core: Core, source, *, job: Job | None = None, **arguments) -> OutputRecord:
    """The record of `source` converted as `arguments` say."""
    return ConvertAsset.of(source, **arguments).run(core, job)


_RANGE = re.compile(r"(-?\d+)\s*(?:\([^)]*\))?\s*-\s*(-?\d+)")  # "1-12", "1(fast)-22(slow)"
_BOOLEAN = ("YES", "NO", "TRUE", "FALSE", "ON", "OFF", "1", "0")


@functools.cache
def driver_options(driver: str) -> dict:
    """The creation options GDAL's `driver` declares (its DMD_CREATIONOPTIONLIST): name -> the
    <Option> element (type, min/max or a range in its description, its <Value>s)."""
    import ctypes
    import xml.etree.ElementTree as ET

    from ..processing.gdal_calls import _lib

    lib = _lib()
    lib.GDALGetMetadataItem.restype = ctypes.c_char_p
    lib.GDALGetMetadataItem.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.GDALAllRegister()
    handle = lib.GDALGetDriverByName(driver.encode())
    text = lib.GDALGetMetadataItem(handle, b"DMD_CREATIONOPTIONLIST", None) if handle else None
    if not text:
        return {}
    return {o.get("name", "").upper(): o for o in ET.fromstring(text).iter("Option")}


def check_creation_option(driver: str, name: str, value: str) -> None:
    """Refuse, in one line, a creation option `driver` does not declare or a value outside what
    it declares (type, range, choices); GDAL itself would only warn and go on without it."""
    declared = driver_options(driver)
    option = declared.get(name)
    if option is None:
        if declared:
            raise InvalidArgument(f"creation option {name} is not one the {driver} driver takes")
        return
    kind = option.get("type", "string")
    choices = [v.text.upper() for v in option.iter("Value") if v.text]
    wrong = f"creation option {name}={value[:40]!r} is not valid for {driver}"
    if kind == "string-select" and choices and value.upper() not in choices:
        raise InvalidArgument(f"{wrong}: use one of {', '.join(choices)}")
    if kind == "boolean" and value.upper() not in _BOOLEAN:
        raise InvalidArgument(f"{wrong}: use YES or NO")
    if kind in ("int", "integer", "float"):
        try:
            number = int(value) if kind != "float" else float(value)
        except ValueError:
            raise InvalidArgument(
                f"{wrong}: it takes {'an integer' if kind != 'float' else 'a number'}"
            ) from None
        found = _RANGE.search(option.get("description", ""))
        low = option.get("min") or (found and found.group(1))
        high = option.get("max") or (found and found.group(2))
        if (low is not None and number < float(low)) or (high is not None and number > float(high)):
            span = (
                f"at least {low}"
                if high is None
                else f"at most {high}"
                if low is None
                else f"{low} to {high}"
            )
            raise InvalidArgument(f"{wrong}: it takes {span}")


def convert(core: Core, request: ConvertAsset, job: Job | None = None) -> OutputRecord:
    """Write the request's input (its `bbox` window, its `bands`) in its format; return the
    output's record."""
    from rasterio.windows import Window

    job = timed(job, core)
    source, fmt, bbox, bbox_crs = request.input, request.fmt, request.bbox, request.bbox_crs
    settings = core.settings
    store = core.outputs
    with open_reader(source, settings, job=job) as reader, gdal_errors(source, "converting"):
        src = reader.src
        window = bbox_window(src, bbox, bbox_crs) if bbox is not None else Window(0, 0, src.width, src.height)
        indexes = request.band_indexes(src.count)
        dtype = src.dtypes[indexes[0] - 1]
        if len({src.dtypes[i - 1] for i in indexes}) > 1:
            raise InvalidArgument("the chosen bands have different data types; convert them separately")
        width, height = int(window.width), int(window.height)
        check_output_size(width, height, len(indexes), "uint8" if fmt.eight_bit else dtype, settings.limits)
        check_read_size(
            width * height * len(indexes),
            settings,
            what=f"converting {source.label}",
            hint="pass a smaller bbox or fewer bands",
        )
        transform = src.window_transform(window)
        parameters = _parameters(request, indexes, window)
        job.progress(0, 1, "planned")
        with store.writing(fmt.suffix, request.output_name, stem=f"convert-{source.stem}") as out:
            write = _eight_bit if fmt.eight_bit else _values
            facts, how = write(reader, request, out, indexes, window, transform, job)
            job.progress(1, 1, "written")
            subset = f" window {parameters['window']} (bbox {list(bbox)} in {bbox_crs})" if bbox else ""
            lineage = f"{source.label} bands {indexes}{subset} written as {fmt.name}; {how}"
            return commit_raster(store, out, request, "convert_asset", parameters, facts, lineage)


def _values(reader, request: ConvertAsset, out, indexes, window, transform, job: Job):
    """Write the window's values in the request's format, strip by strip through a working
    GeoTIFF; (its raster facts, how it was written)."""
    from rasterio.windows import Window

    fmt, src = request.fmt, reader.src
    width, height = int(window.width), int(window.height)
    dtype = src.dtypes[indexes[0] - 1]
    parts = row_strips(width, height, len(indexes), dtype)
    strips, total = len(parts), len(parts) + 1

    def window_strips():
        for r0, h in parts:
            part = Window(window.col_off, window.row_off + r0, width, h)
            yield Window(0, r0, width, h), reader.run(lambda s, w=part: s.read(indexes, window=w))

    write_chunks(
        out.scratch(".tif"),
        crs=src.crs,
        transform=transform,
        width=width,
        height=height,
        count=len(indexes),
        dtype=dtype,
        nodata=src.nodata,
        chunks=window_strips(),
        descriptions=[src.descriptions[i - 1] for i in indexes],
        scales=[src.scales[i - 1] for i in indexes],
        offsets=[src.offsets[i - 1] for i in indexes],
        on_chunk=lambda n: job.progress(n, total, f"read strip {n}/{strips}"),
    )
    job.check()
    options = formats.with_predictor(fmt, request.options, dtype)
    finish(fmt, out.scratch_paths[0], out.path, options, job=job, step=strips, total=total)
    return describe_raster(out.path), "values unchanged"


def _parameters(request: ConvertAsset, indexes: list[int], window) -> dict:
    """The record's parameters of a conversion."""
    bbox = request.bbox
    return {
        "output_format": request.fmt.name,
        "bbox": list(bbox) if bbox else None,
        "bbox_crs": request.bbox_crs if bbox else None,
        "bands": indexes,
        "creation_options": request.options,
        "window": {
            "col_off": int(window.col_off),
            "row_off": int(window.row_off),
            "width": int(window.width),
            "height": int(window.height),
        },
    }


def commit_raster(
    store, out, request, operation: str, parameters: dict, facts: dict, lineage: str
) -> OutputRecord:
    """Commit the raster `out` written from the request's one source asset: its record names
    the operation, its parameters, the source, the format's media type, facts and lineage."""
    return store.commit(
        out,
        operation=operation,
        parameters=parameters,
        sources=[request.input.source_ref()],
        media_type=request.fmt.media_type,
        raster=facts,
        lineage=lineage,
    )
