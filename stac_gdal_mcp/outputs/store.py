"""The output store: files in the workspace, written atomically, each with a STAC Item-like record.

    store = OutputStore(settings)
    with store.writing(".tif", output_name=None, stem="reproject-red") as out:
        write_something(out.path)                 # a temporary name next to the final file
        record = store.commit(out, operation="reproject_asset", parameters={...},
                              sources=[source.source_ref()], media_type=COG_TYPE, raster=facts)

Files live in `<workspace>/outputs/`, records in `<workspace>/records/<output_id>.json`.
Everything being written (the output under a temporary name, scratch files, GDAL's own
temporary files next to them, records before their rename) lives in `<workspace>/.tmp/`, named
`<pid>-<session>-...` after the process and store that wrote it. Leaving the block without
`commit` (an error, a cancellation) removes the temporary file and any scratch files: nothing
partial is ever visible under a final name, and there is no record without its file. `commit`
renames the file into place, then writes the record (itself via a temporary name); if the record
cannot be written the file is removed again.

A process killed mid-write (kill -9, power loss) cannot clean up; the next store to start on the
workspace does (`sweep`): it removes the `.tmp/` entries of processes that no longer run (and of
earlier stores of its own pid), and, when no other live store uses the workspace, files without
a record and records without a file.

Nothing is read or written through a symbolic link: the `outputs`, `records` and `.tmp` folders
and every file in them must be real entries inside the workspace (AccessDenied otherwise), so a
link planted in the workspace cannot make a resource read return, or a write land in, a file
outside it.

A record is a STAC Item (projection, raster, file and processing extensions) whose
`derived_from` links name the source items and asset hrefs, without credentials.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import hashlib
import logging
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, model_serializer

from .catalogs.security import check_output_name
from .errors import AccessDenied, LimitExceeded, NotFound, OutputExists, OutputNotFound
from .models import Model
from .settings import Settings

log = logging.getLogger(__name__)

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

    def temporary_files(self) -> list[Path]:
        """Every file this write may have left: the output, scratch files and what GDAL puts
        next to them (`<name>.ovr.tmp`, `<name>.aux.xml`, ...)."""
        found = {self.path, *self.scratch_paths}
        with contextlib.suppress(OSError):
            found.update(self.path.parent.glob(f"{self.path.name}*"))
        return sorted(found)


TMP_DIR = ".tmp"
# stores alive in this process (their session ids): leftovers of another session of the same
# pid (a restarted server that got the same pid, e.g. in a container) are stale
_LIVE_SESSIONS: set[str] = set()
_LIVE_LOCK = threading.Lock()


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    try:  # a zombie (ended, not yet reaped by its parent) is dead too
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _owner(name: str) -> tuple[int, str] | None:
    """(pid, session) from a `.tmp` entry name `<pid>-<session>-...`, None if not one of ours."""
    match = re.match(r"^(\d+)-([0-9a-f]{8})(?:[-.]|$)", name)
    return (int(match.group(1)), match.group(2)) if match else None


def _stale(name: str) -> bool:
    owner = _owner(name)
    if owner is None:
        return True  # not a name this store writes: nothing may live here
    pid, session = owner
    if pid == os.getpid():
        with _LIVE_LOCK:
            return session not in _LIVE_SESSIONS
    return not _pid_alive(pid)


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


def _write_atomic(path: Path, text: str, tmp: Path | None = None) -> None:
    """Write `text` to `tmp` (default: a hidden name next to `path`), then rename it to `path`."""
    tmp = tmp or path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
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
    from ._version import __version__

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
    return OutputNotFound(f"no output '{output_id}'")


# How a record links to itself: (output_id, media type, file size) -> its `self` (and other) links.
RecordLinks = Callable[[str, "str | None", int], "list[Link]"]


class OutputStore:
    """Output files and their records in the workspace. Thread-safe.

    `links` says how a record names itself (its `self` link, and `uri`): by default the file URI
    of the record; the MCP server sets its resource URIs. Records are re-linked when read, so
    every record a store returns names itself the way that store does."""

    def __init__(self, settings: Settings, *, sweep: bool = True, links: RecordLinks | None = None):
        self.settings = settings
        self.links: RecordLinks = links or self._file_links
        self.workspace = Path(settings.workspace).expanduser().resolve()
        self.root = self.workspace / "outputs"
        self.records = self.workspace / "records"
        self.tmp = self.workspace / TMP_DIR
        self._lock = threading.Lock()
        self._reserved: set[str] = set()
        self.session = secrets.token_hex(4)
        with _LIVE_LOCK:
            _LIVE_SESSIONS.add(self.session)
        self._marker: Path | None = None
        if sweep:
            try:
                self.sweep()
            except (OSError, AccessDenied) as exc:
                log.warning("could not sweep the workspace %s: %s", self.workspace, exc)

    def close(self) -> None:
        """Forget this store (its `.tmp` entries become stale for later sweeps)."""
        if self._marker is not None:
            _remove(self._marker)
        with _LIVE_LOCK:
            _LIVE_SESSIONS.discard(self.session)

    @property
    def prefix(self) -> str:
        """Start of the names of this store's `.tmp` entries."""
        return f"{os.getpid()}-{self.session}"

    # --- the workspace's folders, never through a link ---------------------------------------

    def _folder(self, path: Path, *, create: bool) -> Path:
        """`path` (outputs, records or .tmp) as a real folder inside the workspace."""
        if create:
            self.workspace.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise AccessDenied(
                f"the workspace folder '{path.name}' is a link or not a folder; refused "
                "(move it away and let the server create a plain folder)"
            )
        if create:
            path.mkdir(exist_ok=True)
        real = path.resolve()
        if path.exists() and real != self.workspace / path.name:
            raise AccessDenied(f"the workspace folder '{path.name}' leads outside the workspace; refused")
        return path

    def _entry(self, folder: Path, name: str) -> Path:
        """`folder/name` if it is a plain file (or absent), never a link or something outside."""
        path = folder / name
        if path.is_symlink():
            raise AccessDenied(f"'{folder.name}/{name}' in the workspace is a symbolic link; refused")
        if path.exists() and (not path.is_file() or path.resolve().parent != folder.resolve()):
            raise AccessDenied(f"'{folder.name}/{name}' in the workspace is not a plain file; refused")
        return path

    # --- leftovers of dead processes -----------------------------------------------------------

    def sweep(self) -> dict[str, list[str]]:
        """Remove what dead writers left (see the module docstring); returns what was removed
        (workspace-relative names) by kind: "temporary", "orphan_files", "orphan_records"."""
        removed: dict[str, list[str]] = {"temporary": [], "orphan_files": [], "orphan_records": []}
        tmp = self._folder(self.tmp, create=True)  # creates the workspace: the marker must exist
        for entry in sorted(tmp.iterdir()):
            if _stale(entry.name):
                _remove_tree(entry)
                removed["temporary"].append(f"{TMP_DIR}/{entry.name}")
        self._marker = tmp / f"{self.prefix}.alive"
        self._marker.touch()
        atexit.register(self.close)
        for folder in (self.root, self.records):  # temporary names of earlier versions
            if folder.is_dir() and not folder.is_symlink():
                for entry in folder.glob(".*.tmp*"):
                    _remove_tree(entry)
                    removed["temporary"].append(f"{folder.name}/{entry.name}")
        others = [e.name for e in tmp.glob("*.alive") if e.name != self._marker.name]
        if others:
            log.info("workspace shared with live stores %s: orphans left alone", others)
        else:
            self._sweep_orphans(removed)
        total = sum(len(v) for v in removed.values())
        if total:
            log.warning("swept the workspace after an unclean stop: %s", removed)
        return removed

    def _sweep_orphans(self, removed: dict[str, list[str]]) -> None:
        if not (self.root.is_dir() and self.records.is_dir()):
            return
        if self.root.is_symlink() or self.records.is_symlink():
            return
        files: dict[str, Path] = {}
        for record_path in self.records.glob("*.json"):
            if record_path.is_symlink():
                continue
            try:
                record = OutputRecord.model_validate_json(record_path.read_text())
            except (OSError, ValueError):
                continue  # unreadable: list() reports it; not ours to judge
            name = Path(record.file.href).name
            file = self.root / name
            if file.is_file() and not file.is_symlink():
                files[name] = file
            else:
                _remove(record_path)
                removed["orphan_records"].append(f"records/{record_path.name}")
        for entry in self.root.iterdir():
            if entry.name not in files and not entry.name.startswith("."):
                _remove_tree(entry)
                removed["orphan_files"].append(f"outputs/{entry.name}")

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
                        f"an output named '{output_id}' already exists; choose another output_name"
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
        try:
            root = self._folder(self.root, create=True)
            self._folder(self.records, create=True)
            tmp_dir = self._folder(self.tmp, create=True)
            final = self._entry(root, file_name)
        except BaseException:
            with self._lock:
                self._reserved.discard(output_id)
            raise
        tmp = tmp_dir / f"{self.prefix}-{output_id}.{secrets.token_hex(4)}.tmp{suffix}"
        pending = PendingOutput(output_id=output_id, path=tmp, final_path=final)
        try:
            yield pending
        finally:
            for p in pending.temporary_files():
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
        self._entry(self.root, pending.final_path.name)  # still no link planted there
        os.replace(pending.path, pending.final_path)
        try:
            _write_atomic(
                self._entry(self.records, f"{pending.output_id}.json"),
                record.model_dump_json(indent=1),
                tmp=self.tmp / f"{self.prefix}-record-{pending.output_id}.{secrets.token_hex(4)}.tmp",
            )
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
        links = self.links(pending.output_id, media_type, size) + _derived_from(sources)
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
        return self._entry(self._folder(self.records, create=False), f"{output_id}.json")

    def _file_links(self, output_id: str, media_type: str | None, size: int) -> list[Link]:
        record = self.records / f"{output_id}.json"
        return [Link(rel="self", href=record.as_uri(), type="application/geo+json")]

    def _relinked(self, record: OutputRecord) -> OutputRecord:
        """`record` with this store's own links to itself (whoever wrote it)."""
        own = self.links(record.id, record.file.type, record.file.file_size)
        kinds = {link.rel for link in own} | {"self", "enclosure"}
        record.links = own + [link for link in record.links if link.rel not in kinds]
        return record

    def get(self, output_id: str) -> OutputRecord:
        """The record of one output (OutputNotFound if there is none)."""
        path = self._record_path(output_id)
        try:
            return self._relinked(OutputRecord.model_validate_json(_read_plain(path)))
        except FileNotFoundError:
            raise _no_output(output_id) from None

    def path(self, output_id: str) -> Path:
        """The file of one output: a plain file inside the outputs folder, never a link."""
        name = Path(self.get(output_id).file.href).name
        path = self._entry(self._folder(self.root, create=False), name)
        if not path.is_file():
            raise NotFound(f"the file of output '{output_id}' is missing from the workspace")
        return path

    def read_bytes(self, output_id: str) -> bytes:
        """The content of an output's file, opened without following a link (O_NOFOLLOW)."""
        return _read_plain(self.path(output_id), binary=True)

    def list(self) -> list[OutputRecord]:
        """All outputs, newest first."""
        if not self.records.is_dir():
            return []
        records = self._folder(self.records, create=False)
        found = []
        for path in records.glob("*.json"):
            try:
                found.append(self._relinked(OutputRecord.model_validate_json(_read_plain(path))))
            except (OSError, ValueError) as exc:
                log.warning("skipping unreadable output record %s: %s", path.name, exc)
        return sorted(found, key=lambda r: r.properties.created, reverse=True)

    def delete(self, output_id: str) -> OutputRecord:
        """Remove an output's file and record; return the record it had."""
        record = self.get(output_id)
        with self._lock:
            file = self.root / Path(record.file.href).name
            if not file.is_symlink():
                self._entry(self._folder(self.root, create=False), file.name)
            _remove(file)  # a link is removed itself, never what it points to
            _remove(self._record_path(output_id))
        return record


def _read_plain(path: Path, *, binary: bool = False):
    """Read a file, refusing a symbolic link at the last moment (O_NOFOLLOW)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a link
            raise AccessDenied(f"'{path.name}' in the workspace is a symbolic link; refused") from None
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    return data if binary else data.decode("utf-8")


def _remove_tree(path: Path) -> None:
    """Remove a file, a link (not its target) or a folder of them."""
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        _remove(path)
