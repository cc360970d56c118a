"""Output records: the STAC Item (projection, raster, file and processing extensions) written
beside every output file, and how one is made (`build_record`): its time span from the sources,
`processing:*` (operation, parameters, lineage, software versions) and `derived_from` links naming
the source items and asset hrefs, without credentials."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Required, TypedDict

from pydantic import ConfigDict, Field, model_serializer

from ..models import Model

STAC_EXTENSIONS = [
    "https://stac-extensions.github.io/projection/v2.0.0/schema.json",
    "https://stac-extensions.github.io/raster/v1.1.0/schema.json",
    "https://stac-extensions.github.io/file/v2.1.0/schema.json",
    "https://stac-extensions.github.io/processing/v1.2.0/schema.json",
]


class _Model(Model):
    """Serialized by alias (`proj:code`), without null fields except `datetime` (STAC needs it)."""

    model_config = ConfigDict(
        extra="forbid", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler):
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None or k == "datetime"}


class SourceRef(_Model):
    """Where an output's pixels came from: an asset href (unsigned) and, if known, its item."""

    href: str
    asset: str | None = None
    catalog: str | None = None
    collection_id: str | None = None
    item_id: str | None = None
    item_href: str | None = None
    datetime: str | None = None


class RasterBand(_Model):
    """One band, as the STAC raster extension describes it."""

    data_type: str
    nodata: float | str | None = None
    scale: float | None = None
    offset: float | None = None
    unit: str | None = None


class RasterFacts(_Model):
    """The georeferencing and bands of a raster output (see processing/records.py)."""

    proj_code: str | None = Field(None, alias="proj:code")
    proj_wkt2: str | None = Field(None, alias="proj:wkt2", description="only when there is no EPSG code")
    proj_shape: list[int] = Field(alias="proj:shape", description="[rows, columns]")
    proj_transform: list[float] = Field(alias="proj:transform")
    proj_bbox: list[float] = Field(alias="proj:bbox", description="bounds in the output CRS")
    bbox: list[float] | None = Field(None, description="WGS84 [west, south, east, north]; null without a CRS")
    geometry: dict[str, Any] | None = Field(None, description="WGS84 footprint polygon; null without a CRS")
    bands: list[RasterBand] = []


class OutputAsset(_Model):
    href: str = Field(description="path of the file on the server")
    type: str | None = None
    title: str | None = None
    roles: list[str] = ["data"]
    file_size: int = Field(alias="file:size")
    file_checksum: str = Field(alias="file:checksum", description="multihash: sha2-256 (1220 + hex)")
    raster_bands: list[RasterBand] | None = Field(None, alias="raster:bands")


class Link(_Model):
    model_config = ConfigDict(extra="allow", serialize_by_alias=True)
    rel: str
    href: str
    type: str | None = None
    title: str | None = None


class OutputProperties(_Model):
    model_config = ConfigDict(
        extra="allow", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )
    datetime: str | None = Field(description="datetime of the source(s); null with start/end for several")
    start_datetime: str | None = None
    end_datetime: str | None = None
    created: str
    title: str | None = None
    proj_code: str | None = Field(None, alias="proj:code")
    proj_wkt2: str | None = Field(None, alias="proj:wkt2")
    proj_shape: list[int] | None = Field(None, alias="proj:shape")
    proj_transform: list[float] | None = Field(None, alias="proj:transform")
    proj_bbox: list[float] | None = Field(None, alias="proj:bbox")
    processing_lineage: str = Field(alias="processing:lineage", description="what was done, in words")
    processing_expression: dict[str, Any] = Field(
        alias="processing:expression", description="{format, expression: {operation, parameters}}"
    )
    processing_software: dict[str, str] = Field(alias="processing:software")
    processing_datetime: str = Field(alias="processing:datetime")


class OutputRecord(_Model):
    """A STAC Item describing one output file: what, where, and derived from what."""

    type: str = "Feature"
    stac_version: str = "1.1.0"
    stac_extensions: list[str] = STAC_EXTENSIONS
    id: str
    geometry: dict[str, Any] | None = None
    bbox: list[float] | None = None
    properties: OutputProperties
    assets: dict[str, OutputAsset]
    links: list[Link] = []
    result_kind: ClassVar[str] = "output"  # answered and drawn by operations/saved.py

    @property
    def file(self) -> OutputAsset:
        return self.assets["data"]

    @property
    def uri(self) -> str:
        """Where the record is: its `self` link (a resource URI on the server, else a file URI)."""
        return next((link.href for link in self.links if link.rel == "self"), "")

    @property
    def operation(self) -> str | None:
        return (self.properties.processing_expression.get("expression") or {}).get("operation")

    def summary(self) -> OutputSummary:
        return OutputSummary(
            id=self.id,
            uri=self.uri,
            file=Path(self.file.href).name,
            media_type=self.file.type,
            size=self.file.file_size,
            created=self.properties.created,
            operation=self.operation,
            datetime=self.properties.datetime,
            title=self.properties.title,
        )


class OutputSummary(_Model):
    """One line of list_outputs."""

    id: str
    uri: str = Field(description="resource with the full record; the file is at <uri>/file")
    file: str
    media_type: str | None = None
    size: int
    created: str
    operation: str | None = None
    datetime: str | None = None
    title: str | None = None


class OutputList(_Model):
    outputs: list[OutputSummary]
    workspace: str = Field(description="folder of the output files on the server")


# How a record links to itself: (output_id, media type, file size) -> its `self` (and other) links.
RecordLinks = Callable[[str, "str | None", int], "list[Link]"]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def package_versions(*packages: str) -> dict[str, str]:
    """The installed versions of `packages` (for `processing:software`); missing ones left out."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in packages:
        with contextlib.suppress(PackageNotFoundError):
            found[package] = version(package)
    return found


def _software(extra: dict[str, str] | None) -> dict[str, str]:
    from .._version import __version__

    found = {"stac-gdal-mcp": __version__, **package_versions("rasterio", "rio-cogeo")}
    try:
        import rasterio

        found["GDAL"] = rasterio.__gdal_version__
    except ImportError:  # pragma: no cover - rasterio is a dependency
        pass
    found.update(extra or {})
    return found


def _time_span(sources: list[SourceRef]) -> tuple[str | None, str | None, str | None]:
    times = sorted({s.datetime for s in sources if s.datetime})
    if len(times) == 1:
        return times[0], None, None
    if not times:
        return None, None, None
    return None, times[0], times[-1]


def _derived_from(sources: list[SourceRef]) -> list[Link]:
    links, seen = [], set()
    for s in sources:
        item = s.item_href or (
            f"stac://{s.catalog}/collections/{s.collection_id}/items/{s.item_id}"
            if s.item_id and s.collection_id and s.catalog
            else None
        )
        if item and item not in seen:
            seen.add(item)
            links.append(
                Link(
                    rel="derived_from",
                    href=item,
                    type="application/geo+json",
                    title=f"item {s.item_id}" if s.item_id else None,
                )
            )
        if s.href not in seen:
            seen.add(s.href)
            title = f"asset {s.asset} of item {s.item_id}" if s.item_id else "source file"
            links.append(Link(rel="derived_from", href=s.href, title=title))
    return links


class RecordArgs(TypedDict, total=False):
    """What a record says besides its file: the operation and its parameters, the sources, the
    file's media type; optionally the lineage in words (default: "<operation> of <hrefs>"), the
    raster facts, a title, extra properties and software versions."""

    operation: Required[str]
    parameters: Required[dict[str, Any]]
    sources: Required[list[SourceRef]]
    media_type: Required[str]
    lineage: str | None
    raster: RasterFacts | None
    title: str | None
    properties: dict[str, Any] | None
    software: dict[str, str] | None


def build_record(
    output_id: str, href: str, size: int, checksum: str, links: list[Link], what: RecordArgs
) -> OutputRecord:
    """The record of the file at `href` (`size` bytes, `checksum`), linking to itself with
    `links` and to its sources with `derived_from` links."""
    unknown = set(what) - set(RecordArgs.__annotations__)
    if unknown:
        raise TypeError(f"build_record: unknown record arguments {sorted(unknown)}")
    operation, sources, raster = what["operation"], what["sources"], what.get("raster")
    title = what.get("title")
    now = _now()
    datetime, start, end = _time_span(sources)
    props: dict[str, Any] = {
        "datetime": datetime,
        "start_datetime": start,
        "end_datetime": end,
        "created": now,
        "title": title,
        "processing:lineage": what.get("lineage")
        or f"{operation} of {', '.join(s.href for s in sources) or 'no input'}",
        "processing:expression": {
            "format": "stac-gdal-mcp",
            "expression": {"operation": operation, "parameters": what["parameters"]},
        },
        "processing:software": _software(what.get("software")),
        "processing:datetime": now,
    }
    if raster is not None:
        props.update(
            raster.model_dump(include={"proj_code", "proj_wkt2", "proj_shape", "proj_transform", "proj_bbox"})
        )
    props.update(what.get("properties") or {})
    return OutputRecord(
        id=output_id,
        geometry=raster.geometry if raster else None,
        bbox=raster.bbox if raster else None,
        properties=OutputProperties.model_validate(props),
        assets={
            "data": OutputAsset(
                href=href,
                type=what["media_type"],
                title=title,
                file_size=size,
                file_checksum=checksum,
                raster_bands=raster.bands if raster else None,
            )
        },
        links=links + _derived_from(sources),
    )
