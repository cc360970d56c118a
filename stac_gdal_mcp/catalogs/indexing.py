"""Your files as a catalog: index a folder of GeoTIFFs / COGs as a STAC ItemCollection.

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
be read or have no CRS are reported and left out.

Re-running is incremental: an existing index is read, and a file whose size and modification
time are unchanged keeps its item without being opened; items of files that are gone are
dropped. The output is written atomically. Asset hrefs are relative to the index file, which
must be in the folder or above it (processing reads files only below a local catalog's folder).
A collection document (`<index>.collection.json`, extent and summaries) is written next to it;
items link to it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument

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
        """The report for a person (the CLI prints it)."""
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
        return out


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


def _footprint(crs, transform, width: int, height: int) -> tuple[dict, list[float]]:
    from rasterio.warp import transform as warp_points

    corners = [(0, 0), (width, 0), (width, height), (0, height), (0, 0)]
    xs, ys = [], []
    for (c0, r0), (c1, r1) in itertools.pairwise(corners):
        for k in range(8):
            col, row = c0 + (c1 - c0) * k / 8, r0 + (r1 - r0) * k / 8
            x, y = transform @ (col, row)
            xs.append(x)
            ys.append(y)
    lon, lat = warp_points(crs, "EPSG:4326", xs, ys)
    ring = [[round(a, 7), round(b, 7)] for a, b in zip(lon, lat, strict=True)]
    ring.append(ring[0])
    if _signed_area(ring) < 0:  # GeoJSON: exterior rings counter-clockwise
        ring.reverse()
    bbox = [min(lon), min(lat), max(lon), max(lat)]
    return {"type": "Polygon", "coordinates": [ring]}, [round(v, 7) for v in bbox]


def _signed_area(ring: list[list[float]]) -> float:
    return sum(a[0] * b[1] - b[0] * a[1] for a, b in itertools.pairwise(ring)) / 2


def _number(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _common_name(description: str | None, colorinterp: str | None) -> str | None:
    text = (description or "").strip().lower()
    if text in COMMON_NAMES:
        return text
    return colorinterp if colorinterp in ("red", "green", "blue") else None


def read_header(path: Path) -> dict[str, Any]:
    """The item facts of one GeoTIFF, from its header (no pixels are read)."""
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():  # a file without CRS is reported, not warned about
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path) as src:
            if src.crs is None:
                raise ValueError("no CRS (not georeferenced): it cannot be found by place")
            crs, transform = src.crs, src.transform
            geometry, bbox = _footprint(crs, transform, src.width, src.height)
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
                    band["nodata"] = _number(src.nodatavals[i])
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


def _cog_check(path: Path) -> tuple[bool, str]:
    from rio_cogeo import cog_validate

    try:
        valid, errors, _warnings = cog_validate(str(path), quiet=True)
    except Exception as exc:  # rio-cogeo raises on files it cannot open
        return False, f"{type(exc).__name__}: {exc}"
    return valid, "; ".join(errors)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._") or "files"


def _item_id(rel: Path) -> str:
    parts = [*rel.parent.parts, rel.stem]
    return "__".join(_slug(p) for p in parts if p not in ("", "."))


def _read_previous(output: Path) -> dict[str, dict]:
    """Items of an earlier index at `output`, by their asset's href (relative path)."""
    if not output.is_file():
        return {}
    try:
        if output.suffix == ".ndjson":
            items = [json.loads(line) for line in output.read_text().splitlines() if line.strip()]
        else:
            items = json.loads(output.read_text()).get("features", [])
    except (OSError, ValueError, AttributeError):
        return {}
    return {
        i["assets"]["data"]["href"]: i for i in items if isinstance(i, dict) and "data" in i.get("assets", {})
    }


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _collection(collection_id: str, items: list[dict], title: str) -> dict:
    boxes = [i["bbox"] for i in items if i.get("bbox")]
    times = sorted(i["properties"]["datetime"] for i in items)
    spatial = (
        [
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        ]
        if boxes
        else [-180.0, -90.0, 180.0, 90.0]
    )
    return {
        "type": "Collection",
        "stac_version": STAC_VERSION,
        "stac_extensions": [],
        "id": collection_id,
        "title": title,
        "description": f"GeoTIFF files indexed by `stac-gdal-mcp index` ({len(items)} files).",
        "license": "other",
        "extent": {
            "spatial": {"bbox": [spatial]},
            "temporal": {"interval": [[times[0] if times else None, times[-1] if times else None]]},
        },
        "summaries": {
            "proj:code": sorted(
                {i["properties"]["proj:code"] for i in items if "proj:code" in i["properties"]}
            ),
            "gsd": sorted({i["properties"]["gsd"] for i in items if "gsd" in i["properties"]}),
        },
        "links": [],
    }


def build_index(
    directory: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    collection_id: str | None = None,
    datetime_pattern: str | None = None,
    recursive: bool = True,
) -> IndexReport:
    """Index the GeoTIFFs below `directory` into the ItemCollection `output` (see the module
    docstring); returns what was added, updated, unchanged, removed, flagged and skipped."""
    folder = Path(directory).expanduser().resolve()
    if not folder.is_dir():
        raise InvalidArgument(f"{directory} is not a folder")
    out = Path(output).expanduser().resolve() if output else folder / DEFAULT_NAME
    if folder != out.parent and out.parent not in folder.parents:
        raise InvalidArgument(
            f"the index {out} must be in {folder} or a folder above it: processing reads only "
            "files below a local catalog's folder"
        )
    from rasterio.errors import RasterioError

    find_datetime = datetime_finder(datetime_pattern) if datetime_pattern else None
    cid = _slug(collection_id or folder.name)
    collection_href = out.with_name(out.name.rsplit(".", 1)[0] + ".collection.json")
    report = IndexReport(output=out, collection_id=cid)
    previous = _read_previous(out)

    files = sorted(
        p
        for p in (folder.rglob("*") if recursive else folder.iterdir())
        if p.suffix.lower() in SUFFIXES and p.is_file() and not p.name.startswith(".")
    )
    items: list[dict] = []
    used_ids: set[str] = set()
    seen_hrefs: set[str] = set()
    for path in files:
        rel_to_folder = path.relative_to(folder)
        href = os.path.relpath(path, out.parent)
        seen_hrefs.add(href)
        stat = path.stat()
        mtime = _mtime_iso(stat)
        old = previous.get(href)
        asset_old = (old or {}).get("assets", {}).get("data", {})
        if old and asset_old.get("file:size") == stat.st_size and asset_old.get("updated") == mtime:
            old["collection"] = cid
            items.append(old)
            used_ids.add(old["id"])
            report.unchanged.append(str(rel_to_folder))
            if asset_old.get("type") != COG_TYPE:
                report.not_cog.append(_flag(rel_to_folder, asset_old.get("description") or "not a COG"))
            continue
        try:
            facts = read_header(path)
        except (OSError, ValueError, RasterioError) as exc:  # unreadable, no raster, no CRS: reported
            report.skipped.append({"path": str(rel_to_folder), "reason": str(exc).splitlines()[0][:300]})
            continue
        valid, why = _cog_check(path)
        when = find_datetime(rel_to_folder.as_posix()) if find_datetime else None
        when = when or facts["tag_datetime"]
        if when is None:
            when = dt.datetime.fromtimestamp(stat.st_mtime, dt.UTC)
            report.datetime_from_mtime.append(str(rel_to_folder))
        item_id = old["id"] if old else _item_id(rel_to_folder)
        base, n = item_id, 2
        while item_id in used_ids:
            item_id, n = f"{base}-{n}", n + 1
        used_ids.add(item_id)
        asset = {
            "href": href,
            "type": COG_TYPE if valid else GTIFF_TYPE,
            "title": path.name,
            "roles": ["data"],
            "file:size": stat.st_size,
            "updated": mtime,
            "raster:bands": facts["raster:bands"],
            "eo:bands": facts["eo:bands"],
        }
        if not valid:
            asset["description"] = f"not a Cloud-Optimized GeoTIFF: {why or 'cog_validate failed'}"
            report.not_cog.append(_flag(rel_to_folder, asset["description"]))
        items.append(
            {
                "type": "Feature",
                "stac_version": STAC_VERSION,
                "stac_extensions": EXTENSIONS,
                "id": item_id,
                "collection": cid,
                "geometry": facts["geometry"],
                "bbox": facts["bbox"],
                "properties": {"datetime": _iso(when), **facts["properties"]},
                "links": [
                    {"rel": "collection", "href": f"./{collection_href.name}", "type": "application/json"}
                ],
                "assets": {"data": asset},
            }
        )
        (report.updated if old else report.added).append(str(rel_to_folder))
    report.removed = sorted(
        os.path.normpath(os.path.join(os.path.relpath(out.parent, folder), h))
        for h in previous
        if h not in seen_hrefs
    )
    report.items = len(items)
    items.sort(key=lambda i: i["id"])
    if out.suffix == ".ndjson":
        text = "".join(json.dumps(i, separators=(",", ":")) + "\n" for i in items)
    else:
        text = json.dumps({"type": "FeatureCollection", "features": items}, indent=1)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(out, text)
    _write_atomic(collection_href, json.dumps(_collection(cid, items, folder.name), indent=1))
    return report


def _flag(rel: Path, reason: str) -> dict[str, str]:
    return {
        "path": str(rel),
        "reason": reason,
        "hint": CONVERT_HINT.format(name=rel.name, stem=rel.with_suffix("").name),
    }
