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

An output may also be a folder of files (`writing(..., dataset=True)`: a partitioned GeoParquet
dataset, hive folders): written whole under a temporary name in `.tmp/`, renamed into place whole
by `commit`; its record's checksum is of its files' checksums.

A process killed mid-write (kill -9, power loss) cannot clean up; the next store to start on the
workspace does (`sweep`): it removes the `.tmp/` entries of processes that no longer run (and of
earlier stores of its own pid, see `leftovers`), and, when no other live store uses the
workspace, files without a record and records without a file.

Nothing is read or written through a symbolic link: the `outputs`, `records` and `.tmp` folders
and every file in them must be real entries inside the workspace (AccessDenied otherwise), so a
link planted in the workspace cannot make a resource read return, or a write land in, a file
outside it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Unpack

from ..catalogs.security import check_output_name, shown
from ..errors import AccessDenied, LimitExceeded, NotFound, NotSupported, OutputExists, OutputNotFound
from ..files import file_checksum, read_plain, remove, remove_tree, slug, write_atomic
from ..settings import Settings
from . import leftovers
from .leftovers import TMP_DIR
from .records import Link, OutputRecord, RecordArgs, RecordLinks, build_record

log = logging.getLogger(__name__)


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


def _no_output(output_id: str) -> NotFound:
    return OutputNotFound(f"no output {shown(output_id, 80)}")


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
        leftovers.register(self.session)
        self._marker: Path | None = None
        if sweep:
            try:
                self.sweep()
            except (OSError, AccessDenied) as exc:
                log.warning("could not sweep the workspace %s: %s", self.workspace, exc)

    def close(self) -> None:
        """Forget this store (its `.tmp` entries become stale for later sweeps)."""
        if self._marker is not None:
            remove(self._marker)
        leftovers.unregister(self.session)

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

    def _entry(self, folder: Path, name: str, *, dataset: bool = False) -> Path:
        """`folder/name` if it is a plain file (or absent), never a link or something outside;
        `dataset`: a plain folder is accepted too (a partitioned output, see `writing`)."""
        path = folder / name
        if path.is_symlink():
            raise AccessDenied(f"'{folder.name}/{name}' in the workspace is a symbolic link; refused")
        plain = path.is_file() or (dataset and path.is_dir())
        if path.exists() and (not plain or path.resolve().parent != folder.resolve()):
            raise AccessDenied(f"'{folder.name}/{name}' in the workspace is not a plain file; refused")
        return path

    # --- leftovers of dead processes -----------------------------------------------------------

    def sweep(self) -> dict[str, list[str]]:
        """Remove what dead writers left (see the module docstring); returns what was removed
        (workspace-relative names) by kind: "temporary", "orphan_files", "orphan_records"."""
        removed: dict[str, list[str]] = {"temporary": [], "orphan_files": [], "orphan_records": []}
        tmp = self._folder(self.tmp, create=True)  # creates the workspace: the marker must exist
        for entry in sorted(tmp.iterdir()):
            if leftovers.stale(entry.name):
                remove_tree(entry)
                removed["temporary"].append(f"{TMP_DIR}/{entry.name}")
        self._marker = tmp / f"{self.prefix}.alive"
        self._marker.touch()
        atexit.register(self.close)
        for folder in (self.root, self.records):  # temporary names of earlier versions
            if folder.is_dir() and not folder.is_symlink():
                for entry in folder.glob(".*.tmp*"):
                    remove_tree(entry)
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
            if (file.is_file() or file.is_dir()) and not file.is_symlink():
                files[name] = file
            else:
                remove(record_path)
                removed["orphan_records"].append(f"records/{record_path.name}")
        for entry in self.root.iterdir():
            if entry.name not in files and not entry.name.startswith("."):
                remove_tree(entry)
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
        base = slug(stem or "output", limit=80)
        with self._lock:
            while True:
                output_id = f"{base}-{secrets.token_hex(3)}"
                file_name = output_id + suffix
                if not self._taken(output_id, file_name):
                    self._reserved.add(output_id)
                    return output_id, file_name

    @contextlib.contextmanager
    def writing(
        self, suffix: str, output_name: str | None = None, *, stem: str | None = None, dataset: bool = False
    ) -> Iterator[PendingOutput]:
        """Reserve a unique output and give a temporary path for it; clean up unless committed.

        suffix: the file's extension (".tif"); output_name: the caller's name (checked, must be
        new) or None for `<stem>-<random>`; `dataset`: the path is a folder (created here) whose
        files are the output, as a partitioned GeoParquet dataset is, renamed into place whole.
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
        if dataset:
            tmp.mkdir()
        try:
            yield pending
        finally:
            for p in pending.temporary_files():
                remove_tree(p)
            with self._lock:
                self._reserved.discard(output_id)
            if not pending.committed:
                log.info("output %s abandoned; temporary files removed", output_id)

    def commit(self, pending: PendingOutput, **what: Unpack[RecordArgs]) -> OutputRecord:
        """Move the written file into place and write its record (`what`: operation, parameters,
        sources, media_type and optionally lineage, raster, title, properties, software; see
        `records.RecordArgs`); return the record."""
        folder = pending.path.is_dir() and not pending.path.is_symlink()
        files = sorted(p for p in pending.path.rglob("*") if p.is_file()) if folder else [pending.path]
        size = sum(p.stat().st_size for p in files)
        limit = self.settings.limits.max_output_bytes
        if size > limit:
            raise LimitExceeded(
                f"the output file would be {size} bytes, more than limits.max_output_bytes={limit}; "
                "use a smaller bbox, a coarser resolution or fewer bands"
            )
        links = self.links(pending.output_id, what["media_type"], size)
        # (a folder's: of its files' checksums, in the order of their relative paths)
        checksum = file_checksum(pending.path) if not folder else _folder_checksum(pending.path, files)
        record = build_record(pending.output_id, str(pending.final_path), size, checksum, links, what)
        self._entry(self.root, pending.final_path.name, dataset=folder)  # still no link planted there
        os.replace(pending.path, pending.final_path)
        try:
            write_atomic(
                self._entry(self.records, f"{pending.output_id}.json"),
                record.model_dump_json(indent=1),
                tmp_dir=self.tmp,
                prefix=f"{self.prefix}-record-{pending.output_id}.",
            )
        except BaseException:
            remove(pending.final_path)
            raise
        pending.committed = True
        log.info("output %s written (%d bytes)", pending.output_id, size)
        return record

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
            return self._relinked(OutputRecord.model_validate_json(read_plain(path)))
        except FileNotFoundError:
            raise _no_output(output_id) from None

    def path(self, output_id: str) -> Path:
        """The file of one output: a plain file inside the outputs folder, never a link."""
        name = Path(self.get(output_id).file.href).name
        path = self._entry(self._folder(self.root, create=False), name, dataset=True)
        if not (path.is_file() or path.is_dir()):
            raise NotFound(f"the file of output '{output_id}' is missing from the workspace")
        return path

    def read_bytes(self, output_id: str) -> bytes:
        """The content of an output's file, opened without following a link (O_NOFOLLOW)."""
        path = self.path(output_id)
        if path.is_dir():
            raise NotSupported(
                f"output '{output_id}' is a folder (a partitioned dataset), not one file; read it from "
                f"the workspace's outputs/{path.name} (pyarrow, geopandas, DuckDB)"
            )
        return read_plain(path, binary=True)

    def list(self) -> list[OutputRecord]:
        """All outputs, newest first."""
        if not self.records.is_dir():
            return []
        records = self._folder(self.records, create=False)
        found = []
        for path in records.glob("*.json"):
            try:
                found.append(self._relinked(OutputRecord.model_validate_json(read_plain(path))))
            except (OSError, ValueError) as exc:
                log.warning("skipping unreadable output record %s: %s", path.name, exc)
        return sorted(found, key=lambda r: r.properties.created, reverse=True)

    def delete(self, output_id: str) -> OutputRecord:
        """Remove an output's file and record; return the record it had."""
        record = self.get(output_id)
        with self._lock:
            file = self.root / Path(record.file.href).name
            if not file.is_symlink():
                self._entry(self._folder(self.root, create=False), file.name, dataset=True)
            remove_tree(file)  # a link is removed itself, never what it points to
            remove(self._record_path(output_id))
        return record


def _folder_checksum(folder: Path, files: list[Path]) -> str:
    """sha2-256 multihash of a folder's files: their relative paths and checksums, one a line."""
    import hashlib

    lines = "".join(f"{p.relative_to(folder).as_posix()} {file_checksum(p)}\n" for p in files)
    return "1220" + hashlib.sha256(lines.encode()).hexdigest()
