"""A change's table: exactextract per zone on the grid (`zone_statistics`), the items of each
period per zone, the public columns and notes (`finish`), the rasters as georeferenced arrays
(`arrays`) and the provenance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...processing.load import FailedItem, GridInfo
from ...processing.records import Provenance

if TYPE_CHECKING:
    import pandas as pd

    from . import ChangeRequest, Plan

M2_PER_HA = 10_000.0
SOFTWARE = ("odc-stac", "dask", "exactextract", "rasterio")


# --- per zone ------------------------------------------------------------------------------------------


def zone_statistics(request: ChangeRequest, gbox, rasters: dict) -> pd.DataFrame:
    """Per zone (exactextract on the grid, coverage-weighted): the means of before, after and the
    change over the pixels valid in both, the valid share, and the hectares of each class. The
    arrays go to exactextract with NaN where not valid (it may drop a masked array's mask for a
    multipolygon with a part off the raster)."""
    import numpy as np
    import pandas as pd
    import shapely
    from exactextract import exact_extract
    from exactextract.operation import Operation
    from exactextract.raster import NumPyRasterSource
    from rasterio.crs import CRS
    from shapely.geometry import mapping

    from ..zonal.pixels import project_zones

    before, after = rasters["before"], rasters["after"]
    both = np.isfinite(before) & np.isfinite(after)
    delta = np.where(both, after - before, np.nan)
    classes = {"increase": (request.call.threshold, None), "decrease": (None, -request.call.threshold)}
    classes |= {f"area_ha_{b.name}": (b.lower, b.upper) for b in request.bins}
    west, south, east, north = gbox.extent.boundingbox
    sources = {
        name: NumPyRasterSource(np.where(both, values, np.nan), west, south, east, north, name=name)
        for name, values in [("before", before), ("after", after), ("delta", delta),
                             *((k, _inside(delta, low, high, k == "increase")) for k, (low, high) in classes.items())]
    }  # fmt: skip
    ops = [Operation("mean", f"{n}_mean", sources[n]) for n in ("before", "after", "delta")]
    ops.append(Operation("count", "_count", sources["delta"]))
    ops += [Operation("sum", f"_{k}", sources[k]) for k in classes]
    zones = project_zones(request.zones.geometries, CRS.from_user_input(gbox.crs.to_wkt()))
    features = [{"type": "Feature", "properties": {}, "geometry": mapping(g)} for g in zones]
    frame = exact_extract(sources["before"], features, ops, output="pandas")
    pixel = abs(gbox.resolution.x * gbox.resolution.y)
    frame["valid_fraction"] = (frame.pop("_count") * pixel / shapely.area(zones)).clip(upper=1.0)
    for key in classes:
        column = key if key.startswith("area_ha_") else f"{key}_ha"
        frame[column] = frame.pop(f"_{key}") * pixel / M2_PER_HA
    return pd.DataFrame(frame)


def _inside(delta, low, high, above: bool):
    """1 where the change is in [low, high) (an increase: above low, strictly), 0 elsewhere."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        keep = np.ones(delta.shape, dtype=bool)
        if low is not None:
            keep &= (delta > low) if above else (delta >= low)
        if high is not None:
            keep &= delta < high
    return keep.astype("float64")


def period_items(request: ChangeRequest, found: Plan, failed: list[FailedItem]) -> dict[str, list[str]]:
    """Per period, per zone: the ids of the period's items read whose footprint meets the zone."""
    import shapely
    from shapely.geometry import shape

    bad = {f.item_id for f in failed}
    named = {}
    for name, items in found.periods.items():
        kept = [i for i in items if i["id"] not in bad]
        tree = shapely.STRtree(
            [shape(i["geometry"]) if i.get("geometry") else shapely.box(-180, -90, 180, 90) for i in kept]
        )
        named[name] = [
            " ".join(kept[j]["id"] for j in sorted(tree.query(z, predicate="intersects")))
            for z in request.zones.geometries
        ]
    return named


def finish(request: ChangeRequest, found: Plan, frame, failed: list[FailedItem]) -> tuple:
    """The table's public columns, its notes (thin zones), the zones' geometry."""
    import geopandas

    stats = [
        "before_mean",
        "after_mean",
        "delta_mean",
        "increase_ha",
        "decrease_ha",
        *(f"area_ha_{b.name}" for b in request.bins),
    ]
    items = period_items(request, found, failed)
    frame = frame.assign(
        zone_id=list(request.zones.ids), before_items=items["before"], after_items=items["after"], note=None
    )
    thin = frame["valid_fraction"] < request.call.min_valid_fraction
    frame.loc[thin, stats] = None
    share = [f"{v * 100:.3g}" for v in frame.loc[thin, "valid_fraction"]]
    frame.loc[thin, "note"] = [
        f"only {v}% of the zone valid in both periods, under min_valid_fraction="
        f"{request.call.min_valid_fraction:g}: no statistics"
        for v in share
    ]
    columns = ["zone_id", *stats, "valid_fraction", "before_items", "after_items", "note"]
    return geopandas.GeoDataFrame(frame[columns], geometry=list(request.zones.geometries), crs="EPSG:4326")


def arrays(gbox, rasters: dict, provenance: Provenance) -> tuple:
    """(change, before, after) as georeferenced DataArrays on the grid (y, x), each saved as a COG
    whose record names the items read."""
    import xarray as xr

    ys, xs = gbox.coordinates["y"].values, gbox.coordinates["x"].values
    facts = provenance.facts
    grid = {"crs": facts["crs"], "transform": facts["transform"]}
    what = {
        "change": f"change of {facts['expression_name']}: {facts['after']} minus {facts['before']}",
        "before": f"{facts['reducer']} of {facts['expression_name']} in {facts['before']}",
        "after": f"{facts['reducer']} of {facts['expression_name']} in {facts['after']}",
    }
    values = {"change": rasters["after"] - rasters["before"], **rasters}
    arrays = []
    for name in ("change", "before", "after"):
        made = provenance.model_copy(
            update={"kind": "array", "title": what[name], "facts": {**grid, "stem": name}}
        )
        attrs = made.to_attrs(as_text=True)
        arrays.append(
            xr.DataArray(values[name], dims=("y", "x"), coords={"y": ys, "x": xs}, name=name, attrs=attrs)
        )
    return tuple(arrays)


def provenance(core, request: ChangeRequest, found: Plan, failed: list[FailedItem], table) -> Provenance:
    """How the change was made: the items read, the parameters, and the facts its answer tells."""
    from ...outputs import package_versions
    from ...processing.load import failed_note, sources_read
    from ..zonal.chart import expression_name

    notes = list(found.notes)
    thin = int(table["note"].notna().sum())
    if thin:
        notes.append(
            f"{thin} of {len(table)} zones were valid in both periods on less than min_valid_fraction={request.call.min_valid_fraction:g} of their area: no statistics, a note (0 keeps them)"
        )
    if failed:
        notes.append(failed_note(failed, "their days are left out of their period"))
    name = expression_name(request.expression)
    counts = {
        p: len([i for i in items if i["id"] not in {f.item_id for f in failed}])
        for p, items in found.periods.items()
    }
    gbox = found.prep.gbox
    return Provenance(
        kind="compare_periods",
        operation="compare_periods",
        parameters=request.parameters(),
        sources=sources_read(found.prep, failed),
        title=f"change of {name} per zone, {request.call.after} against {request.call.before}",
        lineage=f"{request.call.reducer} over each period's {'clear ' if request.call.mask_clouds else ''}pixels of {request.expression} "
        f"({counts['before']} and {counts['after']} items, odc-stac on {gbox.crs} at {abs(gbox.resolution.x):g}), "
        "then after - before, with exact (coverage-weighted) zone statistics by exactextract",
        software=package_versions(*SOFTWARE),
        properties={"zones_bbox": [round(v, 6) for v in request.zones.search_area().bounds]},
        facts={
            "expression": request.expression,
            "expression_name": name,
            "before": request.call.before,
            "after": request.call.after,
            "reducer": request.call.reducer,
            "threshold": request.call.threshold,
            "bins": [b.name for b in request.bins],
            "mask_clouds": request.call.mask_clouds,
            "zones": len(request.zones),
            "items": counts,
            "grid": GridInfo(
                crs=str(gbox.crs),
                resolution=abs(gbox.resolution.x),
                shape=list(gbox.shape),
                aoi_pixels=int(found.prep.inside.sum()),
            ).model_dump(),
            "crs": str(gbox.crs),
            "transform": [float(v) for v in list(gbox.affine)[:6]],
            "notes": notes,
            "failed_items": [f.model_dump() for f in failed],
        },
    )
