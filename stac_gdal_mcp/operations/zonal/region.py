"""Zonal statistics at the scale of a region: the same call as `zonal`, for a zones file (GeoParquet,
GeoPackage, FlatGeobuf) of more than `limits.zonal_region_zones` features - a parcel registry -
with the memory of the calling process flat in the number of zones.

`applies` says whether a call's `geometries` is such a file (counted from its metadata); `check`
makes a `RegionRequest` (the file's size checked against `limits.max_region_zones`, the arguments
checked by `ZonalStats.request`), before anything but metadata is read. `run`:

1. the items are selected once, over the box of the zones' extent (the caller's items as given);
2. the zones stream from the file in groups of `GROUP_ZONES` neighbours along a Hilbert curve
   (`groups`), so the zones under one tile are measured, and the tile read, together;
3. each group is measured on every item that meets it by the ordinary path (`zonal.measure_items`:
   its windows, reads and exactextract; each item's work on the dask cluster at
   `settings.dask_scheduler` when set, else on the reader threads), its table made by
   `zonal.table`, `TABLE_ZONES` zones at a time (the same rows as one call over every zone gives);
4. each group's tables are made and written, on a thread of their own while the next group is
   measured, to a partitioned GeoParquet output, a folder of hive partitions
   `zone_group=<n>/part-<k>.parquet` (a file per table), in the workspace's temporary folder and
   renamed into place whole when the last group is written (nothing is left of a failed or
   cancelled run);
5. the answer is the first group's first table, its provenance counting every zone, row and item, and
   naming the output (`facts.saved_as`): `session.save` returns that output's record.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InvalidArgument, LimitExceeded
from ...processing.jobs import Job, timed
from ...words import counted
from .. import zonal
from .checks import Notes, Zones
from .files import count_zones, zones_path
from .groups import ZoneFile, released

SUFFIXES = (".parquet", ".geoparquet", ".gpkg", ".fgb")  # files read in batches
# zones measured together (and one partition of the output): a group of parcels covers about a
# COG tile of a Sentinel-2 scene at a million fields, so each item's tile is decoded once per group
# and its stored coverage serves every item of the grid
GROUP_ZONES = 10_000
PARTITION = "zone_group"
HEAD_ZONES = 2_000  # zones of the first group whose rows the answer holds
# zones of a group made into one table and written as one file of its partition (at least
# HEAD_ZONES: the answer's rows come from the first): a group's whole table at once (180,000
# rows of 36 items, with their ids and notes as text) was the server's peak, and the peak of
# a million zones rose above that of 100,000 with the number of groups
TABLE_ZONES = 2_500
WRITE_ROWS = 20_000  # rows of a table made into Arrow and written at a time (a row group)


def zones_file(core, geometries) -> tuple[Path, str] | None:
    """(the checked path, its label) of `geometries` when it names a file region scale can stream
    (GeoParquet, GeoPackage, FlatGeobuf), else None."""
    from ...processing.access import local_roots

    if not isinstance(geometries, (str, Path)) or str(geometries).lstrip().startswith(("{", "[")):
        return None
    if Path(str(geometries).strip()).suffix.lower() not in SUFFIXES:
        return None
    return zones_path(str(geometries).strip(), local_roots(core))


def applies(core, geometries) -> bool:
    """Whether a call over `geometries` runs at region scale: a zones file of more features than
    `limits.zonal_region_zones` (counted from its metadata)."""
    found = zones_file(core, geometries)
    try:
        return found is not None and count_zones(found[0]) > core.settings.limits.zonal_region_zones
    except Exception:  # a broken file: the ordinary path reads it and says so in one line
        return False


@dataclass(frozen=True)
class RegionRequest:
    """A zonal statistics call over a large zones file: the file, and the call's other arguments
    checked (`template`: a `ZonalRequest` whose zones are filled group by group)."""

    zones: ZoneFile
    template: zonal.ZonalRequest

    def group(self, zones: Zones) -> zonal.ZonalRequest:
        return dataclasses.replace(self.template, zones=zones)


def check(core, call, template: zonal.ZonalRequest) -> RegionRequest:
    """The zones file of `call` (a `stats.ZonalStats`: its `geometries`) with its size checked
    against its limit (only its metadata is read); `template`: the call's other arguments checked,
    zones left empty (`ZonalStats.request`)."""
    found = zones_file(core, call.geometries)
    if found is None:
        raise InvalidArgument(
            "region scale takes a GeoParquet, GeoPackage or FlatGeobuf file in the workspace"
        )
    path, label = found
    count = count_zones(path)
    limit = core.settings.limits.max_region_zones
    if count > limit:
        raise LimitExceeded(
            f"geometries file {label} has {count:,} features, more than limits.max_region_zones={limit:,}"
        )
    return RegionRequest(ZoneFile(path, label, count, template.call, core.settings.limits), template)


# --- running ---------------------------------------------------------------------------------------


@dataclass
class Totals:
    """What the answer says of the whole run: counts, notes, failures, sources (not the rows)."""

    rows: int = 0
    groups: int = 0
    written: int = 0  # bytes of the partitions written so far
    notes: Notes = dataclasses.field(default_factory=Notes)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    sources: dict[str, Any] = dataclasses.field(default_factory=dict)

    def add(self, rows: int, call: zonal.Call, metas: list) -> None:
        self.rows += rows
        self.groups += 1
        self.notes.add(call.request.zones.notes)
        for meta in filter(None, metas):
            if meta["error"]:
                self.failed.setdefault(meta["item_id"], meta["error"])
            else:
                self.sources.update({s.href: s for s in meta["sources"] if s.href not in self.sources})


def run(core, request: RegionRequest, job: Job | None = None) -> zonal.ZonalTable:
    """Every zone of the file on every item (see the module docstring); the first group's table,
    the whole output written into the workspace."""
    import contextlib

    job = timed(job, core)
    ordered = request.zones.sorted(check=job.check)  # (the file read once: places and extent)
    total = -(-request.zones.count // GROUP_ZONES)
    call, items = _selected(core, request, ordered)
    store, totals, head = core.outputs, Totals(), None
    job.progress(
        0, total, f"zonal statistics of {request.zones.count:,} zones on {counted(len(items), 'item')}"
    )
    with (
        store.writing(".parquet", stem="zonal-stats", dataset=True) as out,
        contextlib.closing(ordered.groups(GROUP_ZONES, check=job.check)) as groups,
        ThreadPoolExecutor(1, thread_name_prefix="zonal-region-write") as writer,
    ):
        pending = None  # (the last group's table and partition, made while the next is measured)
        for k, zones in enumerate(groups):
            job.check()
            part = _part(request, zones, call, items)
            metas, frames = zonal.measure_items(core, part, job, report=False)
            if pending is not None:
                head = _written(core, pending.result(), totals, head, job, total)
            pending = writer.submit(
                _table, core, part, metas, frames, out.path / f"{PARTITION}={k:05d}", k == 0
            )
            del frames  # (held by the writer only)
        if pending is not None:
            head = _written(core, pending.result(), totals, head, job, total)
        record = store.commit(out, **_record_args(request, head, totals))
    return _answer(request, head, totals, call, record.id, ordered.bounds)


def _table(core, part: zonal.Call, metas: list, frames: list, folder: Path, first: bool) -> tuple:
    """One group's partition (on the writer thread, while the next group is measured), made and
    written `TABLE_ZONES` zones at a time, a file each (`_slices`): (its rows, the partition's
    bytes, the answer's rows when it is the first group, the group's call and facts)."""
    rows, size, head = 0, 0, None
    folder.mkdir()
    for k, (zones, taken) in enumerate(_slices(part, frames, TABLE_ZONES)):
        frame = zonal.table(core, zones, metas, taken)  # (it empties `taken`)
        size += _write(frame, folder / f"part-{k}.parquet")
        rows += len(frame)
        head = _head(frame) if first and head is None else head
        del frame
        released()  # (what Arrow's pool kept of writing the file)
    return rows, size, head, part, metas


def _slices(part: zonal.Call, frames: list, size: int):
    """(call, frames) of each run of `size` of the group's zones in turn: the group's call on
    those zones alone, and each item's rows of them (its frame's `_zone` counted from the run's
    first zone; None as given). `frames` is emptied, each item's rows let go once cut."""
    zones = part.request.zones
    starts = range(0, len(zones), size)
    cut = [[] for _ in starts]
    for k, frame in enumerate(frames):
        frames[k] = None  # (the item's rows let go once cut)
        zone = None if frame is None else frame["_zone"].to_numpy()
        for runs, start in zip(cut, starts, strict=True):
            if frame is None:
                runs.append(None)
                continue
            inside = (zone >= start) & (zone < start + size)
            runs.append(frame[inside].assign(_zone=zone[inside] - start))
    del frames[:]
    for k, start in enumerate(starts):
        some = Zones(zones.ids[start : start + size], zones.geometries[start : start + size], zones.notes)
        taken, cut[k] = cut[k], None
        request = dataclasses.replace(part.request, zones=some)
        yield zonal.Call(request, part.catalog, part.items, part.notes, part.collections, part.limits), taken


def _written(core, done: tuple, totals: Totals, head, job: Job, total: int):
    """A group's partition counted (the output's size checked against its limit); the answer's
    rows (the first group's)."""
    rows, size, first, part, metas = done
    totals.written += size
    _check_size(totals.written, core.settings.limits.max_output_bytes)
    totals.add(rows, part, metas)
    job.progress(
        totals.groups, total, f"{totals.rows:,} rows of {totals.groups * GROUP_ZONES:,} zones written"
    )
    return first if head is None else head


def _head(frame):
    """The answer's table: the rows of the first group's first `HEAD_ZONES` zones (a copy: the
    table they come from is let go)."""
    zones = frame["zone_id"].drop_duplicates().iloc[:HEAD_ZONES]
    return frame.replaced(frame[frame["zone_id"].isin(zones)].copy())


def _selected(core, request: RegionRequest, ordered) -> tuple[zonal.Call, list[dict]]:
    """The items of every group, selected once over the box of the zones' extent, as full STAC
    dicts (the run and its dry run alike)."""
    from shapely.geometry import box

    call = zonal.select(core, request.group(Zones(("region",), (box(*ordered.bounds),))))
    return call, [_resolved(call, it) for it in call.items]


def _part(request: RegionRequest, zones: Zones, call: zonal.Call, items: list[dict]) -> zonal.Call:
    """One group's call on the items selected once (the collections' documents, fetched once
    for every group: `call.collections`)."""
    return zonal.Call(request.group(zones), call.catalog, items, [], call.collections, call.limits)


def _resolved(call: zonal.Call, ref: dict) -> dict:
    """An item's full STAC dict, fetched once for every group (a failure is met again per group,
    where its rows carry it)."""
    try:
        return zonal.full_item(call, ref)
    except Exception:
        return ref


def _write(frame, path: Path) -> int:
    """A table as a GeoParquet file of its group's partition, written `WRITE_ROWS` rows at a time
    (a row group each, `geoparquet_parts`); its size in bytes."""
    import pyarrow.parquet as pq

    schema, parts = geoparquet_parts(frame, WRITE_ROWS)
    with pq.ParquetWriter(path, schema) as writer:
        for part in parts:
            writer.write_table(part)
    return path.stat().st_size


def geoparquet_parts(frame, rows: int) -> tuple:
    """(schema, tables): `frame` (a GeoDataFrame whose rows repeat their zone's shape, told by
    `zone_id`) as Arrow tables of GeoParquet 1.1 (as geopandas writes it) of `rows` rows each,
    made one at a time, all of the schema the whole frame has: text columns typed as text even
    when empty (so the partitions share a schema); the WKB of each zone encoded once and taken
    into its rows; the `geo` metadata from the zones' shapes; the frame's attrs kept as geopandas
    keeps them (`PANDAS_ATTRS`). Made whole, a group's table (180,000 rows of 36 items, each
    with its zone's WKB) took 60-70 MB at once on top of the frame: the server's peak."""
    import json

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import shapely

    geometry = frame.geometry
    codes, _ = pd.factorize(frame["zone_id"])
    shapes = geometry.array[np.unique(codes, return_index=True)[1]]  # (each zone's first row)
    wkb = pa.array(shapely.to_wkb(shapes.to_numpy(), flavor="iso"), pa.binary())
    crs = geometry.crs.to_json_dict() if geometry.crs else None
    extension = {"ARROW:extension:name": "geoarrow.wkb", "ARROW:extension:metadata": json.dumps({"crs": crs})}
    field = pa.field(geometry.name, pa.binary(), metadata=extension if crs else None)
    plain = pa.Schema.from_pandas(_typed(frame), preserve_index=False)  # (object columns' by their values)
    _without_member_ids(crs)
    kinds = [f"{kind} Z" if z else kind for kind, z in zip(shapes.geom_type, shapes.has_z, strict=True)]
    column = {
        "encoding": "WKB",
        "crs": crs,
        "geometry_types": sorted(set(kinds)),
        "bbox": [float(v) for v in shapes.total_bounds],
    }
    geo = {"primary_column": geometry.name, "columns": {geometry.name: column}, "version": "1.1.0"}
    metadata = {**(plain.metadata or {}), b"geo": json.dumps(geo).encode()}
    if frame.attrs:
        metadata[b"PANDAS_ATTRS"] = json.dumps(frame.attrs).encode()
    schema = plain.append(field).with_metadata(metadata)

    def tables():
        for start in range(0, len(frame), rows):
            part = pa.Table.from_pandas(
                _typed(frame.iloc[start : start + rows]), schema=plain, preserve_index=False
            )
            taken = wkb.take(pa.array(codes[start : start + rows]))
            yield part.append_column(field, taken).replace_schema_metadata(metadata)

    return schema, tables()


def _typed(frame):
    """`frame`'s columns but its geometry, as a DataFrame, its text columns typed as text."""
    import pandas as pd

    typed = pd.DataFrame(frame.drop(columns=frame.geometry.name))
    for column in ("date", "collection_id", "item_ids", "note", "error"):
        if column in typed:
            typed[column] = typed[column].astype(pd.StringDtype())
    return typed


def _without_member_ids(crs) -> None:
    """The ids of a datum ensemble's members taken out of a PROJJSON (older PROJ versions do not
    know them; GeoParquet writers leave them out)."""
    for key, value in (crs or {}).items():
        if isinstance(value, dict):
            _without_member_ids(value)
        elif key == "members" and isinstance(value, list):
            for member in value:
                member.pop("id", None)


def _check_size(written: int, max_bytes: int) -> None:
    if written > max_bytes:
        raise LimitExceeded(
            f"the output would be more than limits.max_output_bytes={max_bytes:,} bytes ({written:,} "
            "written so far); measure fewer zones or items"
        )


def _facts(request: RegionRequest, head, totals: Totals, call_notes: list, items: int, saved_as) -> tuple:
    provenance = head.provenance
    failed = [{"item_id": i, "error": e} for i, e in totals.failed.items()]
    notes = [*call_notes, *totals.notes.listed()]
    if failed:
        notes.append(
            f"{counted(len(failed), 'item')} could not be read: their rows carry `error` and no statistic"
        )
    facts = {
        **provenance.facts,
        "zones": request.zones.count,
        "items": items - len(failed),
        "rows": totals.rows,
        "groups": totals.groups,
        "notes": notes,
        "failed_items": failed,
        "saved_as": saved_as,
    }
    parameters = {
        **provenance.parameters,
        "zones": request.zones.count,
        "geometries": request.zones.path.name,
    }
    return provenance, facts, parameters


def _record_args(request: RegionRequest, head, totals: Totals) -> dict:
    provenance, facts, parameters = _facts(request, head, totals, [], 0, None)
    return dict(
        operation="zonal_stats",
        parameters=parameters,
        sources=list(totals.sources.values()),
        software=provenance.software,
        media_type=zonal.MEDIA_TYPES["parquet"],
        title=provenance.title,
        lineage=f"{provenance.lineage}; {request.zones.count:,} zones in {totals.groups} groups of neighbours, "
        f"a hive partition ({PARTITION}=n) each",
        properties={
            "zonal:stats": facts["stats"],
            "zonal:expression": facts["expression"],
            "zonal:zones": request.zones.count,
            "zonal:rows": totals.rows,
            "zonal:partitioning": PARTITION,
        },
    )


def _answer(request: RegionRequest, head, totals: Totals, call, output_id: str, bounds: tuple):
    """The first zones' table, its provenance about the whole run (`bounds`: every zone's box)."""
    provenance, facts, parameters = _facts(request, head, totals, call.notes, len(call.items), output_id)
    facts["notes"].append(
        f"{request.zones.count:,} zones at region scale: this table holds the first zones' {len(head):,} of "
        f"{totals.rows:,} rows; every row is in the partitioned GeoParquet output '{output_id}'"
    )
    return head.replaced(
        provenance=provenance.model_copy(
            update={
                "facts": facts,
                "parameters": parameters,
                "sources": list(totals.sources.values()),
                "properties": {**provenance.properties, "zones_bbox": [round(v, 6) for v in bounds]},
            }
        )
    )


# --- dry run ----------------------------------------------------------------------------------------


def estimate(core, request: RegionRequest):
    """What `run` would read: the estimate of each group of zones (as `zonal.estimate`), summed; a
    file whose read size is unknown to a group's estimate stays unknown (listed first)."""
    from ...processing.estimate.result import MAX_FILES_LISTED, Estimate, OutputSize

    ordered = request.zones.sorted()
    call, items = _selected(core, request, ordered)
    result = Estimate(operation="zonal_stats", output=OutputSize(rows=0, format="partitioned GeoParquet"))
    ids, files, unknown, read, requests, notes = {}, {}, False, 0, 0, Notes()
    for zones in ordered.groups(GROUP_ZONES):
        group = _part(request, zones, call, items)
        part = zonal.estimate(core, group.request, call=group)
        ids.update(dict.fromkeys(part.item_ids))
        files.update({f.asset: f for f in part.files if f.asset not in files})
        result.output.rows += part.output.rows if part.output else 0
        unknown = unknown or part.read_bytes is None
        read, requests = read + (part.read_bytes or 0), requests + (part.read_requests or 0)
        notes.add([*zones.notes, *part.notes])
        result.would_refuse = result.would_refuse or part.would_refuse
        result.refusal = result.refusal or part.refusal
    result.notes = [*call.notes, *notes.listed()]
    result.item_ids = list(ids)
    result.read_bytes, result.read_requests = (None if unknown else read), requests
    result.files = sorted(files.values(), key=lambda f: f.bytes is not None)[:MAX_FILES_LISTED]
    result.notes.append(
        f"{request.zones.count:,} zones at region scale, in groups of {GROUP_ZONES:,} neighbours"
    )
    return result
