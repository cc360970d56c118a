"""A zones file in the workspace, read for `zones.read_zones`: GeoJSON, GeoPackage, FlatGeobuf
(pyogrio, as Arrow) or GeoParquet (pyarrow).

Its features are counted from its metadata before any geometry is read (refused past
`limits.max_zones`); then only the geometry column and the id column are read, `BATCH_ZONES`
features at a time, with `job.check()` between batches (the job's time limit and cancellation:
a dry run's too). Zones are brought to WGS84 (a CRS that cannot be, such as a Mars one: one
line). Ids: `id_property`, else a GeoParquet's pandas index (a file written from a
GeoDataFrame), else the position. Messages name the file as the workspace lists it; a library's
own message is stripped of the server's folders (`security.scrubbed`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ...catalogs.security import check_local_path, relative_label, scrubbed, shown
from ...errors import InvalidArgument, LimitExceeded, StacGdalMcpError
from .checks import Zones, one_id_type, property_id, zones_of

SUFFIXES = (".geojson", ".json", ".gpkg", ".fgb", ".parquet", ".geoparquet")
PARQUET = (".parquet", ".geoparquet")
BATCH_ZONES = 10_000
READ_BUFFER = 64 * 1024  # bytes of a Parquet column chunk read at a time


def zones_path(given: str, roots: list[Path]) -> tuple[Path, str]:
    """The file `given` names (relative to the workspace, or absolute inside an allowed folder),
    checked, and its label for messages."""
    if "\x00" in given:
        raise InvalidArgument(f"geometries path {shown(given)} contains a NUL character")
    candidate = Path(given)
    if given.startswith("~"):
        try:
            candidate = candidate.expanduser()
        except RuntimeError:  # "~nosuchuser"
            raise InvalidArgument(
                f"geometries path {shown(given)} names no known home folder; give a path in the workspace"
            ) from None
    resolved = check_local_path(
        candidate if candidate.is_absolute() else roots[0] / candidate, roots, label=given
    )
    label = shown(relative_label(resolved, roots))
    if resolved.suffix.lower() not in SUFFIXES:
        raise InvalidArgument(
            f"geometries file {label} is not GeoJSON, GeoPackage, FlatGeobuf or GeoParquet ({', '.join(SUFFIXES)})"
        )
    if not resolved.is_file():
        raise InvalidArgument(f"geometries file {label} was not found in the workspace")
    return resolved, label


def read_zone_file(given: str, roots: list[Path], limits, *, id_property=None, job=None) -> Zones:
    """The zones of a workspace file (see the module docstring)."""
    import numpy as np
    import shapely

    from ...processing.jobs import Job

    path, label = zones_path(given, roots)
    job = job or Job()
    job.limit_time(limits.job_timeout_s)  # (a dry run's reading too; the first limit set wins)
    try:
        count = count_zones(path, label)
        if count > limits.max_zones:
            raise LimitExceeded(
                f"geometries file {label} has {count:,} features, more than limits.max_zones="
                f"{limits.max_zones:,}"
            )
        to_wgs84 = wgs84_transform(path, label)
        ids, shapes = [], []
        for wkb, found, start in batches(path, label, id_property, job.check):
            geoms = shapely.from_wkb(wkb, on_invalid="ignore")
            shapes.append(geoms if to_wgs84 is None else to_wgs84(geoms))
            ids += list(range(start, start + len(wkb))) if found is None else found
    except StacGdalMcpError:  # the checks' own (a limit, the job's time limit or cancellation)
        raise
    except Exception as exc:  # a broken file (pyogrio, pyarrow): one line naming it
        raise unreadable(exc, path, label) from None
    if not ids:
        raise InvalidArgument(f"geometries file {label} has no features")
    return zones_of(one_id_type(ids), np.concatenate(shapes), limits, id_property=id_property)


def unreadable(exc: BaseException, path: Path, label: str | None = None) -> InvalidArgument:
    """One line for a file a library cannot read, its message without the server's folders."""
    message = scrubbed(str(exc).replace(str(path), path.name), [path.parent])
    return InvalidArgument(
        f"geometries file {label or shown(path.name)} cannot be read: {shown(message, 200)}"
    )


def count_zones(path: Path, label: str | None = None) -> int:
    """The number of features, from the file's metadata (GeoJSON: OGR counts them)."""
    try:
        if path.suffix.lower() in PARQUET:
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).metadata.num_rows
        import pyogrio

        return int(pyogrio.read_info(path, force_feature_count=True)["features"])
    except Exception as exc:  # a broken file: one line naming it
        raise unreadable(exc, path, label) from None


def _crs(path: Path):
    if path.suffix.lower() not in PARQUET:
        import pyogrio

        return pyogrio.read_info(path)["crs"]
    import pyarrow.parquet as pq

    meta = json.loads((pq.read_schema(path).metadata or {}).get(b"geo", b"{}"))
    column = meta.get("columns", {}).get(meta.get("primary_column", "geometry"), {})
    return column.get("crs", "OGC:CRS84")


def wgs84_transform(path: Path, label: str):
    """A function taking shapely geometries to WGS84 (None: they already are); checked on the file's
    CRS before any geometry is read."""
    import pyproj
    import shapely

    crs = _crs(path)
    if crs is None:
        return None
    try:
        source = pyproj.CRS.from_user_input(crs)
        if source.equals("EPSG:4326", ignore_axis_order=True) or source.equals("OGC:CRS84"):
            return None
        transformer = pyproj.Transformer.from_crs(source, "EPSG:4326", always_xy=True)
    except (pyproj.exceptions.CRSError, pyproj.exceptions.ProjError) as exc:
        raise InvalidArgument(
            f"geometries file {label} has a CRS that cannot be brought to WGS84 longitude/latitude "
            f"({shown(str(exc).split(': (')[-1], 160)})"
        ) from None
    return lambda geoms: shapely.transform(geoms, transformer.transform, interleaved=False)


def batches(path: Path, label: str, id_property: str | None, check=lambda: None) -> Iterator[tuple]:
    """(WKB array, ids or None, position of the first) of at most BATCH_ZONES features, only the
    needed columns read, the ids checked (`checked_id`); `check()` between batches (the job's)."""
    start = 0
    for wkb, found in _read_batches(path, label, id_property):
        check()
        ids = None if found is None else [property_id(v, start + k, id_property) for k, v in enumerate(found)]
        yield wkb, ids, start
        start += len(wkb)


def _read_batches(path: Path, label: str, id_property: str | None) -> Iterator[tuple]:
    """(WKB array, ids as stored or None) of at most BATCH_ZONES features."""
    if path.suffix.lower() in PARQUET:
        yield from _parquet_batches(path, label, id_property)
        return
    import pyogrio

    names = list(pyogrio.read_info(path)["fields"])
    _has(names, id_property, label)
    columns = [id_property] if id_property else []
    with pyogrio.open_arrow(path, columns=columns, batch_size=BATCH_ZONES, use_pyarrow=True) as (
        meta,
        reader,
    ):
        geometry = meta["geometry_name"] or "wkb_geometry"
        for batch in reader:
            wkb = batch.column(batch.schema.get_field_index(geometry)).to_numpy(zero_copy_only=False)
            ids = batch.column(batch.schema.get_field_index(id_property)).to_pylist() if id_property else None
            yield wkb, ids


def _parquet_batches(path: Path, label: str, id_property: str | None) -> Iterator[tuple]:
    import pyarrow.parquet as pq

    # (no pre-buffering: it read a row group's whole column chunk - geopandas writes up to ~1M rows
    # in one - where a buffered stream holds about a batch: 17 -> 7.5 MB at 100,000 fields)
    source = pq.ParquetFile(path, buffer_size=READ_BUFFER, pre_buffer=False)
    metadata = source.schema_arrow.metadata or {}
    geo = json.loads(metadata.get(b"geo", b"{}"))
    geometry = geo.get("primary_column", "geometry")
    names = source.schema_arrow.names
    _has(names, id_property, label, geometry)
    if geometry not in names:
        raise InvalidArgument(f"geometries file {label} has no geometry column (GeoParquet's 'geo' metadata)")
    index = [
        c for c in json.loads(metadata.get(b"pandas", b"{}")).get("index_columns", []) if isinstance(c, str)
    ]
    id_column = id_property or (index[0] if index and index[0] in names else None)
    columns = [geometry] + ([id_column] if id_column else [])
    encoding = str(geo.get("columns", {}).get(geometry, {}).get("encoding", "WKB")).upper()
    if encoding != "WKB":  # GeoArrow native (GeoParquet 1.1): geopandas decodes it, whole
        yield from _native_batches(path, columns, id_column)
        return
    for batch in source.iter_batches(BATCH_ZONES, columns=columns, use_threads=False):
        wkb = batch.column(0).to_numpy(zero_copy_only=False)
        yield wkb, (batch.column(1).to_pylist() if id_column else None)


def _native_batches(path: Path, columns: list[str], id_column: str | None) -> Iterator[tuple]:
    """The batches of a GeoParquet whose geometries are GeoArrow native (not WKB), read whole (its
    count is already checked) and handed on as WKB."""
    import geopandas
    import shapely

    frame = geopandas.read_parquet(path, columns=columns)
    for start in range(0, len(frame), BATCH_ZONES):
        part = frame.iloc[start : start + BATCH_ZONES]
        yield shapely.to_wkb(part.geometry.to_numpy()), (part[id_column].tolist() if id_column else None)


def _has(names: list[str], id_property: str | None, label: str, geometry: str | None = None) -> None:
    if id_property is not None and id_property == geometry:
        raise InvalidArgument(
            f"id_property {shown(id_property, 80)} is the geometry column of geometries file {label}, "
            "not a property naming each zone"
        )
    if id_property is not None and id_property not in names:
        raise InvalidArgument(
            f"geometries file {label} has no property {shown(id_property, 80)} (id_property)"
        )
