"""The output store: files in the workspace, written atomically, each with a STAC Item-like record.

    store = OutputStore(settings)
    with store.writing(".tif", output_name=None, stem="reproject-red") as out:
        write_something(out.path)                 # a temporary name next to the final file
        record = store.commit(out, operation="reproject_asset", parameters={...},
                              sources=[source.source_ref()], media_type=COG_TYPE, raster=facts)

Files live in `<workspace>/outputs/`, records in `<workspace>/records/<output_id>.json`.
Leaving the block without `commit` (an error, a cancellation) removes the temporary file and
any scratch files: nothing partial is ever visible under a final name, and there is no record
without its file. `commit` renames the file into place, then writes the record (itself via a
temporary name); if the record cannot be written the file is removed again.

A record is a STAC Item (projection, raster, file and processing extensions) whose
`derived_from` links name the source items and asset hrefs, without credentials.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from .errors import LimitExceeded, NotFound, OutputExists
from .security import check_output_name
from .settings import Settings

log = logging.getLogger(__name__)

URI_PREFIX = "stac-gdal://outputs/"
STAC_EXTENSIONS = [
    "https://stac-extensions.github.io/projection/v2.0.0/schema.json",
    "https://stac-extensions.github.io/raster/v1.1.0/schema.json",
    "https://stac-extensions.github.io/file/v2.1.0/schema.json",
    "https://stac-extensions.github.io/processing/v1.2.0/schema.json",
]


def output_uri(output_id: str) -> str:
    """The MCP resource holding an output's record."""
    return f"{URI_PREFIX}{output_id}"


def file_uri(output_id: str) -> str:
    """The MCP resource holding an output's file (when it is small enough)."""
    return f"{URI_PREFIX}{output_id}/file"


class _Model(BaseModel):
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

    @property
    def file(self) -> OutputAsset:
        return self.assets["data"]

    @property
    def uri(self) -> str:
        return output_uri(self.id)

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


@dataclass
class PendingOutput:
    """An output being written: write to `path`; `final_path` is where `commit` puts it."""

    output_id: str
    path: Path
    final_path: Path
    scratch_paths: list[Path] = field(default_factory=list)
    committed: bool = False

    def scratch(self, suffix: str) -> Path:
        """A further temporary file (an intermediate), removed when the block ends."""
        p = self.path.with_name(f"{self.path.name}.scratch{len(self.scratch_paths)}{suffix}")
        self.scratch_paths.append(p)
        return p


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _slug(text: str) -> str:
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return (text or "output")[:80].rstrip("-._")


def file_checksum(path: Path) -> str:
    """sha2-256 multihash (hex), as the STAC file extension writes it."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1024 * 1024), b""):
            digest.update(chunk)
    return "1220" + digest.hexdigest()


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def package_versions(*packages: str) -> dict[str, str]:
    """The installed versions of `packages` (for `processing:software`); missing ones left out."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in packages:
        with contextlib.suppress(PackageNotFoundError):
            found[package] = version(package)
    return found


def _software(extra: dict[str, str] | None) -> dict[str, str]:
    from . import __version__

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


def _no_output(output_id: str) -> NotFound:
    return NotFound(f"no output '{output_id}'; list_outputs shows the outputs there are")


class OutputStore:
    """Output files and their records in the workspace. Thread-safe."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.root = Path(settings.workspace) / "outputs"
        self.records = Path(settings.workspace) / "records"
        self._lock = threading.Lock()
        self._reserved: set[str] = set()

    # --- writing -------------------------------------------------------------------------

    def _taken(self, output_id: str, file_name: str) -> bool:
        return (
            output_id in self._reserved
            or (self.records / f"{output_id}.json").exists()
            or (self.root / file_name).exists()
        )

    def _reserve(self, suffix: str, output_name: str | None, stem: str | None) -> tuple[str, str]:
        if output_name is not None:
            check_output_name(output_name)
            file_name = output_name if output_name.lower().endswith(suffix.lower()) else output_name + suffix
            output_id = file_name[: -len(suffix)] if suffix else file_name
            check_output_name(output_id)
            with self._lock:
                if self._taken(output_id, file_name):
                    raise OutputExists(
                        f"an output named '{output_id}' already exists; choose another output_name "
                        "or delete_output it first"
                    )
                self._reserved.add(output_id)
            return output_id, file_name
        base = _slug(stem or "output")
        with self._lock:
            while True:
                output_id = f"{base}-{secrets.token_hex(3)}"
                file_name = output_id + suffix
                if not self._taken(output_id, file_name):
                    self._reserved.add(output_id)
                    return output_id, file_name

    @contextlib.contextmanager
    def writing(
        self, suffix: str, output_name: str | None = None, *, stem: str | None = None
    ) -> Iterator[PendingOutput]:
        """Reserve a unique output and give a temporary path for it; clean up unless committed.

        suffix: the file's extension (".tif"); output_name: the caller's name (checked, must be
        new) or None for `<stem>-<random>`.
        """
        output_id, file_name = self._reserve(suffix, output_name, stem)
        self.root.mkdir(parents=True, exist_ok=True)
        self.records.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{output_id}.{secrets.token_hex(4)}.tmp{suffix}"
        pending = PendingOutput(output_id=output_id, path=tmp, final_path=self.root / file_name)
        try:
            yield pending
        finally:
            for p in [pending.path, *pending.scratch_paths]:
                _remove(p)
            with self._lock:
                self._reserved.discard(output_id)
            if not pending.committed:
                log.info("output %s abandoned; temporary files removed", output_id)

    def commit(
        self,
        pending: PendingOutput,
        *,
        operation: str,
        parameters: dict[str, Any],
        sources: list[SourceRef],
        media_type: str,
        lineage: str | None = None,
        raster: RasterFacts | None = None,
        title: str | None = None,
        properties: dict[str, Any] | None = None,
        software: dict[str, str] | None = None,
    ) -> OutputRecord:
        """Move the written file into place and write its record; return the record."""
        size = pending.path.stat().st_size
        limit = self.settings.limits.max_output_bytes
        if size > limit:
            raise LimitExceeded(
                f"the output file would be {size} bytes, more than limits.max_output_bytes={limit}; "
                "use a smaller bbox, a coarser resolution or fewer bands"
            )
        record = self._record(
            pending,
            size,
            file_checksum(pending.path),
            operation=operation,
            parameters=parameters,
            sources=sources,
            media_type=media_type,
            lineage=lineage,
            raster=raster,
            title=title,
            properties=properties,
            software=software,
        )
        os.replace(pending.path, pending.final_path)
        try:
            _write_atomic(self.records / f"{pending.output_id}.json", record.model_dump_json(indent=1))
        except BaseException:
            _remove(pending.final_path)
            raise
        pending.committed = True
        log.info("output %s written (%d bytes)", pending.output_id, size)
        return record

    def _record(
        self,
        pending: PendingOutput,
        size: int,
        checksum: str,
        *,
        operation,
        parameters,
        sources,
        media_type,
        lineage,
        raster,
        title,
        properties,
        software,
    ) -> OutputRecord:
        now = _now()
        datetime, start, end = _time_span(sources)
        props: dict[str, Any] = {
            "datetime": datetime,
            "start_datetime": start,
            "end_datetime": end,
            "created": now,
            "title": title,
            "processing:lineage": lineage
            or f"{operation} of {', '.join(s.href for s in sources) or 'no input'}",
            "processing:expression": {
                "format": "stac-gdal-mcp",
                "expression": {"operation": operation, "parameters": parameters},
            },
            "processing:software": _software(software),
            "processing:datetime": now,
        }
        if raster is not None:
            props.update(
                raster.model_dump(
                    include={"proj_code", "proj_wkt2", "proj_shape", "proj_transform", "proj_bbox"}
                )
            )
        props.update(properties or {})
        links = [Link(rel="self", href=output_uri(pending.output_id), type="application/geo+json")]
        if size <= self.settings.limits.max_resource_bytes:
            links.append(
                Link(
                    rel="enclosure",
                    href=file_uri(pending.output_id),
                    type=media_type,
                    title="the file, as an MCP resource",
                )
            )
        links += _derived_from(sources)
        return OutputRecord(
            id=pending.output_id,
            geometry=raster.geometry if raster else None,
            bbox=raster.bbox if raster else None,
            properties=OutputProperties.model_validate(props),
            assets={
                "data": OutputAsset(
                    href=str(pending.final_path),
                    type=media_type,
                    title=title,
                    file_size=size,
                    file_checksum=checksum,
                    raster_bands=raster.bands if raster else None,
                )
            },
            links=links,
        )

    # --- reading and deleting --------------------------------------------------------------

    def _record_path(self, output_id: str) -> Path:
        try:
            check_output_name(output_id)
        except Exception:
            raise _no_output(output_id) from None
        return self.records / f"{output_id}.json"

    def get(self, output_id: str) -> OutputRecord:
        """The record of one output (NotFound if there is none)."""
        path = self._record_path(output_id)
        try:
            return OutputRecord.model_validate_json(path.read_text())
        except FileNotFoundError:
            raise _no_output(output_id) from None

    def path(self, output_id: str) -> Path:
        """The file of one output."""
        path = self.root / Path(self.get(output_id).file.href).name
        if not path.is_file():
            raise NotFound(f"the file of output '{output_id}' is missing from the workspace")
        return path

    def list(self) -> list[OutputRecord]:
        """All outputs, newest first."""
        if not self.records.is_dir():
            return []
        found = []
        for path in self.records.glob("*.json"):
            try:
                found.append(OutputRecord.model_validate_json(path.read_text()))
            except (OSError, ValueError) as exc:
                log.warning("skipping unreadable output record %s: %s", path.name, exc)
        return sorted(found, key=lambda r: r.properties.created, reverse=True)

    def delete(self, output_id: str) -> OutputRecord:
        """Remove an output's file and record; return the record it had."""
        record = self.get(output_id)
        with self._lock:
            _remove(self.root / Path(record.file.href).name)
            _remove(self._record_path(output_id))
        return record
