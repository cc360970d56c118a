"""The zones of a large file (GeoParquet, GeoPackage, FlatGeobuf) in groups of neighbours, read in
batches so that memory does not grow with the number of zones (zonal statistics at region scale).

The file is read as `files` reads it for a small call (its batches: only the geometry and id
columns; its CRS brought to WGS84; ids `id_property`, else a GeoParquet's pandas index, else the
position), twice:

1. `ZoneFile.sorted`: every zone checked as a small call's are (`checks.zones_of`: vertices,
   finite coordinates, area, WGS84 bounds), its place on a Hilbert curve over the zones' extent
   (the centre of its bounding box; geopandas' `hilbert_distance`), 16 bytes a zone, and the
   extent;
2. `SortedZones.groups`: each batch's rows, tagged with their place, written to temporary Arrow
   IPC files (written batch by batch, where Parquet would hold a bucket's row group in memory),
   one file per bucket of `BUCKET_ZONES` neighbours; each
   bucket is then read alone, ordered along the curve and cut into groups of neighbours, each
   checked by `checks.zones_of` as a small call's zones are. Ids must be unique over the whole file
   (their hashes compared, 8 bytes a zone, once before the first group; then the ids of a
   repeated hash). After each batch and group Arrow's pool hands freed memory back (`released`).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InvalidArgument
from .checks import Zones, check_unique, one_id_type, zones_of
from .files import BATCH_ZONES, batches, wgs84_transform

BUCKET_ZONES = 20_000  # rows of one bucket, read whole when its groups are cut


@dataclass(frozen=True)
class ZoneFile:
    """A zones file read in groups: its path (checked by `files.zones_path`), its label in
    messages, its feature count (from its metadata), the zonal_stats call (`stats.ZonalStats`,
    whose `id_property` names the id column), the limits."""

    path: Path
    label: str
    count: int
    call: Any
    limits: Any

    @property
    def id_property(self) -> str | None:
        return self.call.id_property

    def batches(self, check) -> Iterator[tuple]:
        """(WKB array, ids or None, position of the first) per batch (`files.batches`)."""
        return batches(self.path, self.label, self.id_property, check)

    def sorted(self, check=lambda: None) -> SortedZones:
        """The first pass: each zone checked (`zones_of`), its place along the curve, and the
        zones' extent in WGS84."""
        import geopandas
        import numpy as np
        import shapely

        to_wgs84 = wgs84_transform(self.path, self.label)
        centres, lows, highs = [], [], []
        for wkb, ids, start in self.batches(check):
            geoms = shapely.from_wkb(wkb, on_invalid="ignore")
            geoms = geoms if to_wgs84 is None else to_wgs84(geoms)
            # every zone's checks (vertices, coordinates, area, bounds) before any pixel is read
            zones_of(ids or list(range(start, start + len(wkb))), geoms, self.limits, unique=False)
            released()
            bounds = shapely.bounds(geoms)
            centres.append((bounds[:, :2] + bounds[:, 2:]) / 2)
            lows.append(np.nanmin(bounds[:, :2], axis=0))
            highs.append(np.nanmax(bounds[:, 2:], axis=0))
        if not centres:
            raise InvalidArgument(f"geometries file {self.label} has no features")
        xy = np.concatenate(centres)
        del centres
        extent = (*np.min(lows, axis=0), *np.max(highs, axis=0))
        key = np.concatenate(  # (a batch of points at a time: not a shapely point per zone at once)
            [
                geopandas.GeoSeries(shapely.points(xy[k : k + BATCH_ZONES]))
                .hilbert_distance(total_bounds=extent)
                .to_numpy()
                for k in range(0, len(xy), BATCH_ZONES)
            ]
        )
        del xy
        place = np.empty(len(key), dtype="int64")
        place[np.argsort(key, kind="stable")] = np.arange(len(key))
        del key
        released()  # (the heap the batches and the curve's keys took: 50 MB at a million zones)
        return SortedZones(self, place, tuple(float(v) for v in extent))


@dataclass
class SortedZones:
    """A zones file's zones in order along the curve (`ZoneFile.sorted`): `groups` reads them."""

    file: ZoneFile
    place: Any  # each zone's place along the curve, by its position in the file (until cut)
    bounds: tuple[float, float, float, float]  # the zones' extent, WGS84

    def groups(self, group_zones: int, check=lambda: None) -> Iterator[Zones]:
        """`Zones` of at most `group_zones` neighbours each, every zone once, along the curve."""
        if self.place is None:
            raise RuntimeError("a file's sorted zones are cut into groups once")
        with tempfile.TemporaryDirectory(prefix="zone-groups-") as tmp:
            folder = Path(tmp)
            self._bucketed(folder, check)
            self.place = None  # (each zone's place is in its bucket now: 8 bytes a zone let go)
            self._unique_ids(folder)
            released()
            to_wgs84 = wgs84_transform(self.file.path, self.file.label)
            for bucket in sorted(folder.iterdir(), key=lambda p: int(p.stem)):
                yield from self._cut(bucket, group_zones, to_wgs84)

    def _bucketed(self, folder: Path, check) -> None:
        """The file's rows (position, WKB, id), with their place, written to one Arrow IPC file
        per bucket, batch by batch as the file is read (pyarrow's
        `write_dataset` queued the batches ahead of its writes, +9 MB at 100,000 zones)."""
        import numpy as np
        import pandas as pd
        import pyarrow as pa

        with contextlib.ExitStack() as stack:
            writers = {}
            for wkb, ids, start in self.file.batches(check):
                rows = np.arange(start, start + len(wkb))
                at = self.place[rows]
                columns = {"_row": rows, "_wkb": pa.array(wkb, pa.binary()), "_place": at}
                if ids is not None:
                    columns["_id"] = pa.array(one_id_type(ids))
                    columns["_id_hash"] = pd.util.hash_array(columns["_id"].to_numpy(zero_copy_only=False))
                table, buckets = pa.table(columns), at // BUCKET_ZONES
                for bucket in np.unique(buckets):
                    part = table.filter(pa.array(buckets == bucket))
                    if bucket not in writers:
                        sink = folder / f"{bucket}.arrow"
                        writers[bucket] = stack.enter_context(pa.ipc.new_file(sink, part.schema))
                    writers[bucket].write_table(part)
                del table, part
                released()

    def _unique_ids(self, folder: Path) -> None:
        """Refuse repeated zone ids: their hashes compared (8 bytes a zone), then the ids of the
        repeated hashes alone counted by Arrow."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        dataset = ds.dataset(folder, format="arrow")
        if "_id" not in dataset.schema.names:
            return  # positions
        hashes = np.sort(dataset.to_table(columns=["_id_hash"], use_threads=False)["_id_hash"].to_numpy())
        twice = np.unique(hashes[1:][hashes[1:] == hashes[:-1]])
        del hashes
        if not twice.size:
            return
        found = dataset.to_table(columns=["_id"], filter=ds.field("_id_hash").isin(pa.array(twice)))
        counts = found.group_by("_id").aggregate([("_id", "count")])
        repeated = counts.filter(pc.greater(counts["_id_count"], 1))["_id"].to_pylist()[:5]
        if repeated:  # (the message of a small call's: each repeated id given twice)
            check_unique(repeated * 2, self.file.id_property)

    def _cut(self, bucket: Path, group_zones: int, to_wgs84) -> Iterator[Zones]:
        import pyarrow.compute as pc
        import pyarrow.dataset as ds
        import shapely

        table = ds.dataset(bucket, format="arrow").to_table(use_threads=False)
        order = pc.sort_indices(table["_place"])  # (each group taken in turn: no sorted copy)
        for start in range(0, table.num_rows, group_zones):
            part = table.take(order.slice(start, group_zones))
            released()
            geoms = shapely.from_wkb(part["_wkb"].to_numpy(zero_copy_only=False), on_invalid="ignore")
            ids = part["_id" if "_id" in part.column_names else "_row"].to_pylist()
            yield zones_of(
                one_id_type(ids),
                geoms if to_wgs84 is None else to_wgs84(geoms),
                self.file.limits,
                id_property=self.file.id_property,
                unique=False,
            )


def released() -> None:
    """Hand the memory Arrow's pool keeps after a batch back to the system: the system allocator's
    (the server's, `cli.server_allocator`) trims its heap; mimalloc (Arrow's default elsewhere)
    frees the calling thread's pages only (measured +20 MB at 100,000 zones without this)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
