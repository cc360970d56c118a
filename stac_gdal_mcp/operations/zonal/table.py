"""The long table of a zonal statistics call, from the rows `zonal.table` gathers: one row per
zone, collection and day when `per="day"` (`per_day`), the quality flag (`too_little`: under
`min_valid_fraction`, a note instead of statistics), the public columns, the zones' geometry and
the provenance (`finish`): a `ZonalTable` (result.py), whose notes are made from its `Quality`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .coverage import check_classes
from .pixels import Call
from .result import Quality, ZonalTable

if TYPE_CHECKING:
    import pandas as pd

    from ...processing.records import Provenance

SOFTWARE = ("exactextract", "rasterio", "shapely", "pandas")


def per_day(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per zone, collection and solar day: the day's mosaic (one per CRS: a day across
    UTM zones has one per zone) that saw most of the zone, with the ids of every item of the
    day over it."""
    keys = ["_zone", "collection_id", "date"]
    rows = rows.assign(_rank=rows["_count"].fillna(-1.0))
    best = rows.sort_values("_rank", ascending=False, kind="stable").drop_duplicates(keys)
    ids = (
        rows.dropna(subset=["item_ids"])
        .groupby(keys, dropna=False)["item_ids"]
        .agg(lambda v: " ".join(sorted(v)))
    )
    best = best.drop(columns=["item_ids", "_rank"]).join(ids, on=keys)
    return best.sort_values(["_zone", "datetime"], kind="stable")


def finish(core, call: Call, rows: pd.DataFrame, metas: list[dict]) -> ZonalTable:
    """The public columns, the zones' geometry, the provenance and the notes' `Quality`."""
    import geopandas
    import numpy as np
    import pandas as pd

    request = call.request
    zones = request.zones
    stats = [s.column for s in request.stats if s.name != "frac"]
    fracs = sorted((c for c in rows if c.startswith("frac_")), key=lambda c: (len(c), c))
    check_classes(request, len(fracs), core.settings.limits.max_classes)  # (over every window and item)
    if fracs:  # a class absent from a measured zone: 0 (unmeasured, failed: none)
        measured = (rows["_count"] > 0).to_numpy()[:, None]
        rows[fracs] = rows[fracs].where(rows[fracs].notna() | ~measured, 0.0)
    for column in [*stats, "valid_fraction", "cloud_fraction", "note", "error", "item_ids", "collection_id"]:
        if column not in rows:
            rows[column] = None
    for column in [*stats, "valid_fraction", "cloud_fraction"]:
        if column != "unique":
            rows[column] = pd.to_numeric(rows[column], errors="coerce")
    if "count" in stats:  # zones outside the rasters: count 0 (a failed read stays unknown)
        rows["count"] = rows["count"].fillna(rows["_count"])
    dropped = too_little(rows, [c for c in [*stats, *fracs] if c != "count"], request.call.min_valid_fraction)
    head = ["zone_id", "datetime"] + (["date"] if request.call.per == "day" else [])
    columns = [
        *head,
        "collection_id",
        "item_ids",
        *stats,
        *fracs,
        "valid_fraction",
        "cloud_fraction",
        "too_little_valid",
        "note",
        "error",
    ]
    zone = rows["_zone"].to_numpy()
    rows["zone_id"] = pd.Series(list(zones.ids)).to_numpy()[zone]
    shapes = np.empty(len(zones), dtype=object)
    shapes[:] = zones.geometries
    frame = geopandas.GeoDataFrame(
        {c: rows[c].array for c in columns},
        geometry=geopandas.array.from_shapely(shapes[zone], crs="EPSG:4326"),
        copy=False,
    )
    del rows
    metas = name_bit_values(frame, metas)
    failed = tuple((m["item_id"], m["error"]) for m in metas if m and m["error"])
    quality = Quality(
        tuple(call.notes), len(frame), dropped, request.call.min_valid_fraction, failed, not call.items
    )
    made = provenance(call, metas, quality, stats + (["frac"] if fracs else []))
    return ZonalTable(frame, made, core, quality=quality)


def name_bit_values(frame: pd.DataFrame, metas: list[dict]) -> list[dict]:
    """`metas` with the classes of a bit-field raster (Landsat QA_PIXEL) named: each value the
    table holds (frac_<value> columns, majority, minority, mode, unique) by its set flags and its
    colour (`known_classes.bit_value_name`); as given for other rasters."""
    from ...processing.known_classes import bit_value_color, bit_value_name

    bitfields = next((m["bitfields"] for m in metas if m and m.get("bitfields")), None)
    if not bitfields:
        return metas
    values = {int(c.removeprefix("frac_")) for c in frame.columns if c.startswith("frac_")}
    for column in ("majority", "minority", "mode"):
        if column in frame:
            values |= {int(v) for v in frame[column].dropna() if float(v).is_integer()}
    if "unique" in frame:
        values |= {int(v) for u in frame["unique"].dropna() for v in u}
    names = {str(v): bit_value_name(v, bitfields) for v in sorted(values)}
    classes = {v: {"name": n, "color": f"#{bit_value_color(n)}"} for v, n in names.items() if n != "fill"}
    return [{**m, "classes": {**classes, **m.get("classes", {})}} if m else m for m in metas]


def provenance(call: Call, metas: list[dict], quality: Quality, shown: list[str]) -> Provenance:
    """The table's provenance: sources, parameters, and the facts its answer tells (its notes from
    `quality`)."""
    from ...outputs import package_versions
    from ...processing.records import Provenance

    request, zones = call.request, call.request.zones
    failed = [m for m in metas if m and m["error"]]
    sources = [s for m in metas if m and not m["error"] for s in m["sources"]]
    title = f"{', '.join(shown)} of {request.expression} per zone"
    return Provenance(
        kind="zonal_stats",
        operation="zonal_stats",
        parameters=request.parameters(),
        sources=sources,
        title=title,
        lineage=f"{title} and {request.call.per}, exact (coverage-weighted) statistics with exactextract "
        f"on the native grids of {len(sources)} assets",
        software=package_versions(*SOFTWARE),
        properties={"zones_bbox": [round(v, 6) for v in zones.bounds()]},
        facts={
            "expression": request.expression,
            "stats": [s.column for s in request.stats],
            "per": request.call.per,
            "mask_clouds": request.call.mask_clouds,
            "zones": len(zones),
            "items": len(call.items) - sum(len(m["item_id"].split()) for m in failed),
            "notes": quality.notes(),
            "failed_items": [{"item_id": m["item_id"], "error": m["error"]} for m in failed],
            "classes": {k: c["name"] for m in metas if m for k, c in m.get("classes", {}).items()},
            "class_colors": {
                k: c["color"] for m in metas if m for k, c in m.get("classes", {}).items() if c["color"]
            },
        },
    )


def too_little(rows: pd.DataFrame, columns: list[str], least: float) -> int:
    """Rows whose valid (clear, with data) share of the zone is under `least` lose `columns`
    (every statistic but count), are flagged in `too_little_valid` (what the chart reads) and get
    a note saying why; how many did."""
    import numpy as np
    import pandas as pd

    low = rows["error"].isna() & rows["note"].isna() & (rows["valid_fraction"] < least)
    rows["too_little_valid"] = low.to_numpy(dtype=bool)
    if not low.any():
        return 0
    rows.loc[low, columns] = None
    # (a note per distinct share, each row taking its own: not a string made per row)
    shares, unique = pd.factorize(rows.loc[low, "valid_fraction"].to_numpy())
    notes = [
        f"only {v * 100:.3g}% of the zone valid (clear, with data), under min_valid_fraction={least:g}: "
        "no statistics"
        for v in unique
    ]
    rows.loc[low, "note"] = np.array(notes, dtype=object)[shares]
    return int(low.sum())
