"""Your files as a catalog: index a folder of GeoTIFFs / COGs as a STAC ItemCollection (or
NDJSON, or a stac-geoparquet file: by the output's suffix, .ndjson or .parquet).

    report = build_index("/data/cogs")                   # writes /data/cogs/stac-index.json
    # then, in the settings:  [[catalogs]] id = "mine"  path = "/data/cogs/stac-index.json"

One item per `.tif`/`.tiff` file (below the folder, recursively), with one asset `data`:

- geometry and bbox: the raster's footprint in WGS84 (edges densified, so a UTM grid's curved
  edges are followed);
- `proj:code` (or `proj:wkt2`), `proj:shape`, `proj:transform`, `proj:bbox` from the header;
- `raster:bands` (data type, nodata, scale, offset, unit, resolution) and `eo:bands` (name from
  the band description, common name from the description or the colour interpretation);
- `gsd` when the CRS is in metres; `file:size` and `updated` (the file's modification time);
- `datetime`: from the file's path when `datetime_pattern` is given and matches (strftime
  directives `%Y %m %d %H %M %S %j %y`, e.g. "%Y%m%d" finds 20240604 in "S2_20240604_red.tif"),
  else from the TIFFTAG_DATETIME header tag ("YYYY:MM:DD HH:MM:SS", taken as UTC), else the
  file's modification time (reported, so that a pattern can be given).

Files that are not Cloud-Optimized (`rio_cogeo.cog_validate`) are indexed with media type
`image/tiff; application=geotiff` and reported with a hint to convert them; files that cannot
be read, have no CRS or vanish while the index is built are reported and left out (the rest is
indexed). The footprint is the package's one (`stac.footprint`, as output records have it), the
collection's extent too (`stac.collection_extent`).

Nothing is read through a symbolic link: linked files and folders are skipped with a note, every
file is opened with O_NOFOLLOW and read (hashed, its header, its COG layout) through that one
descriptor; the index is written through a fresh temporary file (`files.write_atomic`: created
O_EXCL|O_NOFOLLOW under a random name, then renamed), so a link planted in the folder is never
written through. File names in the report are escaped (no line breaks, no terminal sequences).

Re-running is incremental: an existing index is read, and a file whose content is unchanged (its
sha2-256 `file:checksum`, not only its size and time) keeps its item without its header being
read again, if that item is exactly what this command writes (its id, one `data` asset naming
the file itself, the known properties; a planted or edited entry is redone); items of files that
are gone are dropped. Asset hrefs are relative to the index file, which must be in the folder or
above it (processing reads files only below a local catalog's folder). A collection document
(`<index>.collection.json`, extent and summaries) is written next to it; items link to it.
The file is read and written by `index_file` (with `partition_by`, a .parquet output is a folder
of hive folders, hrefs relative to the parts).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import stat as stat_mode
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import AccessDenied, InvalidArgument
from ..files import file_checksum, open_plain, slug, write_atomic
from ..stac import collection_extent, footprint
from .index_file import href_base, number, read_items, write_items

COG_TYPE = "image/tiff; application=geotiff; profile=cloud-optimized"
GTIFF_TYPE = "image/tiff; application=geotiff"
SUFFIXES = (".tif", ".tiff")
DEFAULT_NAME = "stac-index.json"
STAC_VERSION = "1.0.0"
EXTENSIONS = [
    "https://stac-extensions.github.io/projection/v2.0.0/schema.json",
    "https://stac-extensions.github.io/raster/v1.1.0/schema.json",
    "https://stac-extensions.github.io/eo/v1.1.0/schema.json",
    "https://stac-extensions.github.io/file/v2.1.0/schema.json",
]
COMMON_NAMES = {
    "coastal", "blue", "green", "red", "rededge", "yellow", "pan", "nir", "nir08", "nir09",
    "cirrus", "swir16", "swir22", "lwir", "lwir11", "lwir12",
}  # fmt: skip
CONVERT_HINT = (
    "convert it to a COG for fast partial reads: `rio cogeo create {name} {stem}.cog.tif`, "
    "or convert_asset(href=..., output_format='COG')"
)

_DIRECTIVES = {
    "Y": r"\d{4}",
    "m": r"\d{2}",
    "d": r"\d{2}",
    "H": r"\d{2}",
    "M": r"\d{2}",
    "S": r"\d{2}",
    "j": r"\d{3}",
    "y": r"\d{2}",
}


@dataclass
class IndexReport:
    """What `build_index` did."""

    output: Path
    collection_id: str
    items: int = 0
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    not_cog: list[dict[str, str]] = field(default_factory=list)  # path, reason, hint
    skipped: list[dict[str, str]] = field(default_factory=list)  # path, reason
    datetime_from_mtime: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report for a person (the CLI prints it), file names escaped (`shown`)."""
        out = [
            f"indexed {self.items} file(s) into {self.output} (collection '{self.collection_id}'): "
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.unchanged)} unchanged, "
            f"{len(self.removed)} removed"
        ]
        for entry in self.not_cog:
            out.append(f"not a COG: {entry['path']}: {entry['reason']}; {entry['hint']}")
        for entry in self.skipped:
            out.append(f"skipped: {entry['path']}: {entry['reason']}")
        if self.datetime_from_mtime:
            out.append(
                f"{len(self.datetime_from_mtime)} file(s) have no TIFFTAG_DATETIME and matched no "
                "--datetime-pattern: their datetime is the file's modification time"
            )
        return [shown(line) for line in out]


def shown(text: str) -> str:
    """`text` with every character that is not printable (line breaks, escape sequences, bytes
    that are not UTF-8) and the backslash written as a Python escape: one line, inert on a
    terminal."""
    return "".join(
        c if c.isprintable() and c != "\\" else c.encode("unicode_escape", "backslashreplace").decode()
        for c in text
    )


def datetime_finder(pattern: str):
    """A function finding the first datetime written as `pattern` (strftime directives) in a text."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument("datetime pattern must be a non-empty strftime pattern such as %Y%m%d")
    regex, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%":
            directive = pattern[i + 1 : i + 2]
            if directive == "%":
                regex += "%"
            elif directive in _DIRECTIVES:
                regex += _DIRECTIVES[directive]
            else:
                raise InvalidArgument(
                    f"datetime pattern {pattern!r}: unsupported directive %{directive}; "
                    f"use {' '.join('%' + d for d in _DIRECTIVES)}"
                )
            i += 2
        else:
            regex += re.escape(char)
            i += 1
    compiled = re.compile(regex)

    def find(text: str) -> dt.datetime | None:
        for match in compiled.finditer(text):
            try:
                return dt.datetime.strptime(match.group(0), pattern).replace(tzinfo=dt.UTC)
            except ValueError:
                continue  # digits in the right places but not a date (e.g. month 13)
        return None

    return find


def _iso(when: dt.datetime) -> str:
    when = when.astimezone(dt.UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{when.microsecond:06d}Z" if when.microsecond else "Z")


def _mtime_iso(stat: os.stat_result) -> str:
    return _iso(dt.datetime.fromtimestamp(stat.st_mtime_ns / 1e9, dt.UTC))


def _tag_datetime(tags: dict[str, str]) -> dt.datetime | None:
    value = (tags.get("TIFFTAG_DATETIME") or "").strip()
    for fmt in ("%Y:%m:%d %H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            return dt.datetime.strptime(value, fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
    return None


def _common_name(description: str | None, colorinterp: str | None) -> str | None:
    text = (description or "").strip().lower()
    if text in COMMON_NAMES:
        return text
    return colorinterp if colorinterp in ("red", "green", "blue") else None


def read_header(path: Path | str) -> dict[str, Any]:
    """The item facts of one GeoTIFF, from its header (no pixels are read)."""
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():  # a file without CRS is reported, not warned about
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path) as src:
            if src.crs is None:
                raise ValueError("no CRS (not georeferenced): it cannot be found by place")
            crs, transform = src.crs, src.transform
            geometry, bbox = footprint(crs, src.bounds)
            epsg = crs.to_epsg()
            props: dict[str, Any] = {
                "proj:shape": [src.height, src.width],
                "proj:transform": [round(v, 10) for v in list(transform)[:6]],
                "proj:bbox": [round(v, 6) for v in src.bounds],
            }
            if epsg:
                props["proj:code"] = f"EPSG:{epsg}"
            else:
                props["proj:wkt2"] = crs.to_wkt("WKT2_2019")
            resolution = abs(transform.a) if transform.b == 0 else math.hypot(transform.a, transform.d)
            metres = crs.is_projected and (crs.linear_units or "").lower() in ("metre", "meter", "m")
            if metres:
                props["gsd"] = round(resolution, 6)
            raster_bands, eo_bands = [], []
            for i in range(src.count):
                band: dict[str, Any] = {"data_type": src.dtypes[i]}
                if src.nodatavals[i] is not None:
                    band["nodata"] = number(src.nodatavals[i])
                if src.scales[i] not in (None, 1.0):
                    band["scale"] = src.scales[i]
                if src.offsets[i] not in (None, 0.0):
                    band["offset"] = src.offsets[i]
                if src.units[i]:
                    band["unit"] = src.units[i]
                if metres:
                    band["spatial_resolution"] = round(resolution, 6)
                raster_bands.append(band)
                description = src.descriptions[i]
                eo: dict[str, Any] = {"name": description or f"b{i + 1}"}
                common = _common_name(description, src.colorinterp[i].name)
                if common:
                    eo["common_name"] = common
                eo_bands.append(eo)
            tags = src.tags()
    return {
        "geometry": geometry,
        "bbox": bbox,
        "properties": props,
        "raster:bands": raster_bands,
        "eo:bands": eo_bands,
        "tag_datetime": _tag_datetime(tags),
    }


def _cog_check(path: Path | str) -> tuple[bool, str]:
    from rio_cogeo import cog_validate

    try:
        valid, errors, _warnings = cog_validate(str(path), quiet=True)
    except Exception as exc:  # rio-cogeo raises on files it cannot open
        return False, f"{type(exc).__name__}: {exc}"
    return valid, "; ".join(errors)


def _item_id(rel: Path) -> str:
    parts = [*rel.parent.parts, rel.stem]
    return "__".join(slug(p, "files") for p in parts if p not in ("", "."))


def _walk(folder: Path, recursive: bool, report: IndexReport) -> list[Path]:
    """The GeoTIFFs below `folder` (not hidden), never through a link: linked files and folders
    are reported as skipped."""
    found, pending = [], [folder]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError as exc:
            report.skipped.append({"path": str(Path(current).relative_to(folder)), "reason": _reason(exc)})
            continue
        for entry in entries:
            path = Path(entry.path)
            tiff = entry.name.lower().endswith(SUFFIXES) and not entry.name.startswith(".")
            if entry.is_symlink():
                if tiff or entry.is_dir():  # a link to a folder could lead anywhere
                    reason = "a symbolic link; not followed (index the files where they are)"
                    report.skipped.append({"path": str(path.relative_to(folder)), "reason": reason})
            elif entry.is_dir(follow_symlinks=False):
                if recursive:
                    pending.append(path)
            elif tiff and entry.is_file(follow_symlinks=False):
                found.append(path)
    report.skipped.sort(key=lambda e: e["path"])
    return sorted(found)


def _read_previous(output: Path, report: IndexReport) -> dict[str, dict]:
    """Items of an earlier index at `output` (never read through a link), by their asset's href."""
    try:
        items = read_items(output)
    except FileNotFoundError:
        return {}
    except AccessDenied:
        report.skipped.append(
            {"path": output.name, "reason": "the previous index is a symbolic link; not read"}
        )
        return {}
    except (OSError, ValueError, AttributeError):
        return {}
    previous = {}
    for item in items if isinstance(items, list) else []:
        href = ((item.get("assets") or {}).get("data") or {}).get("href") if isinstance(item, dict) else None
        if isinstance(href, str):
            previous[href] = item
    return previous


ITEM_KEYS = {"type", "stac_version", "stac_extensions", "id", "collection", "geometry", "bbox", "properties", "links", "assets"}  # fmt: skip
PROPERTY_KEYS = {"datetime", "proj:code", "proj:wkt2", "proj:shape", "proj:transform", "proj:bbox", "gsd"}
ASSET_KEYS = {"href", "type", "title", "roles", "file:size", "file:checksum", "updated", "raster:bands", "eo:bands", "description"}  # fmt: skip
ITEM_ID = re.compile(r"[A-Za-z0-9._-]{1,300}")


def _valid_id(item_id: Any) -> bool:
    return isinstance(item_id, str) and ITEM_ID.fullmatch(item_id) is not None


def _reusable(
    old: dict | None, path: Path, href: str, stat: os.stat_result, checksum: str, links: list[dict]
) -> bool:
    """Whether `old` (the previous index's entry for `href`) is exactly what this command
    writes for this file: its content checksum, size and modification time, an id of the item id
    alphabet, one `data` asset naming the file itself, the collection link only, no other
    properties."""
    if not isinstance(old, dict) or set(old) != ITEM_KEYS or not _valid_id(old.get("id")):
        return False
    asset, props = (old.get("assets") or {}).get("data"), old.get("properties")
    return (
        list(old["assets"]) == ["data"]
        and isinstance(asset, dict)
        and set(asset) <= ASSET_KEYS
        and asset.get("href") == href
        and asset.get("file:checksum") == checksum
        and asset.get("file:size") == stat.st_size
        and asset.get("updated") == _mtime_iso(stat)
        and asset.get("type") in (COG_TYPE, GTIFF_TYPE)
        and asset.get("title") == path.name
        and asset.get("roles") == ["data"]
        and isinstance(props, dict)
        and set(props) <= PROPERTY_KEYS
        and isinstance(props.get("datetime"), str)
        and old["type"] == "Feature"
        and old["stac_version"] == STAC_VERSION
        and old["stac_extensions"] == EXTENSIONS
        and old["links"] == links
        and (old.get("geometry") or {}).get("type") in ("Polygon", "MultiPolygon")
        and isinstance(old.get("bbox"), list)
        and len(old["bbox"]) == 4
        and all(isinstance(v, (int, float)) for v in old["bbox"])
    )


@dataclass
class _Run:
    """One run of `build_index`: where, what was there before, what is made."""

    folder: Path
    out: Path
    collection_id: str
    report: IndexReport
    previous: dict[str, dict]
    find_datetime: Any = None
    base: Path | None = None  # the folder hrefs are relative to (see `href_base`)
    items: list[dict] = field(default_factory=list)
    used_ids: set[str] = field(default_factory=set)

    @property
    def collection_path(self) -> Path:
        return self.out.with_name(self.out.name.rsplit(".", 1)[0] + ".collection.json")

    @property
    def links(self) -> list[dict]:
        href = os.path.relpath(self.collection_path, self.base)
        return [
            {
                "rel": "collection",
                "href": href if href.startswith(".") else f"./{href}",
                "type": "application/json",
            }
        ]

    def add(self, path: Path) -> None:
        """Index one file (through one descriptor opened without following a link)."""
        rel, href = path.relative_to(self.folder), os.path.relpath(path, self.base)
        old = self.previous.get(href)
        fd = open_plain(path)
        try:
            stat = os.fstat(fd)
            if not stat_mode.S_ISREG(stat.st_mode):
                raise ValueError("not a regular file")
            checksum = file_checksum(fd)
            if _reusable(old, path, href, stat, checksum, self.links) and old["id"] not in self.used_ids:
                self._keep(old, rel)
                return
            opened = f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else str(path)
            facts = read_header(opened)
            valid, why = _cog_check(opened)
        finally:
            os.close(fd)
        item_id = old["id"] if isinstance(old, dict) and _valid_id(old.get("id")) else _item_id(rel)
        self.items.append(self._item(path, rel, href, item_id, stat, checksum, facts, valid, why))
        (self.report.updated if old else self.report.added).append(str(rel))

    def _keep(self, old: dict, rel: Path) -> None:
        old["collection"] = self.collection_id
        self.items.append(old)
        self.used_ids.add(old["id"])
        self.report.unchanged.append(str(rel))
        asset = old["assets"]["data"]
        if asset["type"] != COG_TYPE:
            self.report.not_cog.append(_flag(rel, asset.get("description") or "not a COG"))

    def _item(self, path, rel, href, item_id, stat, checksum, facts, valid, why) -> dict:
        when = self.find_datetime(rel.as_posix()) if self.find_datetime else None
        when = when or facts["tag_datetime"]
        if when is None:
            when = dt.datetime.fromtimestamp(stat.st_mtime, dt.UTC)
            self.report.datetime_from_mtime.append(str(rel))
        base, n = item_id, 2
        while item_id in self.used_ids:
            item_id, n = f"{base}-{n}", n + 1
        self.used_ids.add(item_id)
        asset = {
            "href": href,
            "type": COG_TYPE if valid else GTIFF_TYPE,
            "title": path.name,
            "roles": ["data"],
            "file:size": stat.st_size,
            "file:checksum": checksum,
            "updated": _mtime_iso(stat),
            "raster:bands": facts["raster:bands"],
            "eo:bands": facts["eo:bands"],
        }
        if not valid:
            asset["description"] = f"not a Cloud-Optimized GeoTIFF: {why or 'cog_validate failed'}"
            self.report.not_cog.append(_flag(rel, asset["description"]))
        return {
            "type": "Feature",
            "stac_version": STAC_VERSION,
            "stac_extensions": EXTENSIONS,
            "id": item_id,
            "collection": self.collection_id,
            "geometry": facts["geometry"],
            "bbox": facts["bbox"],
            "properties": {"datetime": _iso(when), **facts["properties"]},
            "links": self.links,
            "assets": {"data": asset},
        }


def _reason(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def _collection(collection_id: str, items: list[dict], title: str) -> dict:
    return {
        "type": "Collection",
        "stac_version": STAC_VERSION,
        "stac_extensions": [],
        "id": collection_id,
        "title": title,
        "description": f"GeoTIFF files indexed by `stac-gdal-mcp index` ({len(items)} files).",
        "license": "other",
        "extent": collection_extent(items),
        "summaries": {
            "proj:code": sorted(
                {i["properties"]["proj:code"] for i in items if "proj:code" in i["properties"]}
            ),
            "gsd": sorted({i["properties"]["gsd"] for i in items if "gsd" in i["properties"]}),
        },
        "links": [],
    }


def _output(folder: Path, output: str | os.PathLike | None) -> Path:
    """Where the index goes: its folder resolved, never its own name (a link planted there is
    replaced by the index, not followed)."""
    if not output:
        return folder / DEFAULT_NAME
    given = Path(output).expanduser()
    if given.name in ("", ".", ".."):
        raise InvalidArgument(f"the index {output} must name a file (.json, .ndjson or .parquet)")
    out = given.parent.resolve() / given.name
    if folder != out.parent and out.parent not in folder.parents:
        raise InvalidArgument(
            f"the index {out} must be in {folder} or a folder above it: processing reads only "
            "files below a local catalog's folder"
        )
    return out


def build_index(
    directory: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    collection_id: str | None = None,
    datetime_pattern: str | None = None,
    recursive: bool = True,
    partition_by: Iterable[str] | str | None = None,
) -> IndexReport:
    """Index the GeoTIFFs below `directory` into the ItemCollection `output` (see the module
    docstring); returns what was added, updated, unchanged, removed, flagged and skipped.
    `partition_by` (any of collection, year, month; output `<name>.parquet`): the output is a
    folder of hive folders (`year=2024/month=6/part-0.parquet`, see `snapshot_write`)."""
    from .snapshot_write import partition_keys

    keys = partition_keys(partition_by)
    folder = Path(directory).expanduser().resolve()
    if not folder.is_dir():
        raise InvalidArgument(f"{directory} is not a folder")
    out = _output(folder, output)
    if keys and out.suffix != ".parquet":
        raise InvalidArgument(
            f"partition_by writes stac-geoparquet folders: name the output <name>.parquet (got {out.name})"
        )
    from rasterio.errors import RasterioError

    find_datetime = datetime_finder(datetime_pattern) if datetime_pattern else None
    report = IndexReport(output=out, collection_id=slug(collection_id or folder.name, "files"))
    base = href_base(out, keys)
    run = _Run(folder, out, report.collection_id, report, _read_previous(out, report), find_datetime, base)
    for path in _walk(folder, recursive, report):
        try:
            run.add(path)
        except (OSError, ValueError, RasterioError, AccessDenied) as exc:  # unreadable, gone, no CRS
            report.skipped.append({"path": str(path.relative_to(folder)), "reason": _reason(exc)})
    seen = {i["assets"]["data"]["href"] for i in run.items} | {
        os.path.relpath(folder / e["path"], base) for e in report.skipped
    }
    report.removed = sorted(
        os.path.normpath(os.path.join(os.path.relpath(base, folder), h))
        for h in run.previous
        if h not in seen
    )
    items = sorted(run.items, key=lambda i: i["id"])
    report.items = len(items)
    collection = _collection(report.collection_id, items, folder.name)
    write_items(out, items, collection, keys)
    write_atomic(run.collection_path, json.dumps(collection, indent=1))
    return report


def _flag(rel: Path, reason: str) -> dict[str, str]:
    return {
        "path": str(rel),
        "reason": reason,
        "hint": CONVERT_HINT.format(name=rel.name, stem=rel.with_suffix("").name),
    }
