"""The tasks of benchmarks/agent_tasks.py: what people ask an agent, the shortest sequence of tool
calls a competent agent makes for it on this server (`ours`) and, where it can, on stac-mcp
(`peer`), and the truth each answer is checked against, computed independently with
pystac-client from the same STAC API.

A task's `ours(call)` / `peer(call)` make their calls through `call(tool, arguments)` (which
counts calls and bytes) and return the final answer; `truth(api)` computes the expected answer;
`check(answer, truth)` says whether it is right. A `peer` of None: stac-mcp cannot do the task
(the reason is in `peer_gap`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LANDSAT, S2 = "landsat-c2-l2", "sentinel-2-l2a"
FIELD = [-122.30, 46.30, -122.25, 46.34]  # a field inside every Landsat scene's footprint
SEASON = "2024-06-01/2024-08-31"
MONTH = "2024-07"
S2_BBOX = [11.0, 45.0, 12.0, 46.0]
S2_MONTH = "2024-05"
EMPTY_AOI = [-140.0, -50.0, -139.9, -49.9]  # the South Pacific: no item covers it
LAT_FIRST = [45.0, 11.0, 46.0, 12.0]  # S2_BBOX written [south, west, north, east]


@dataclass
class Task:
    name: str
    question: str
    ours: Any
    truth: Any
    check: Any
    peer: Any = None
    peer_gap: str = ""


def _json(result) -> Any:
    return json.loads(result.text)


def rows(answer: dict) -> list[list]:
    """The rows of a search_items table: under their collections, or one list."""
    return answer.get("rows") or [
        r for c in answer.get("collections", {}).values() for r in c.get("rows", [])
    ]


def _search(api, **kw) -> list:
    from pystac_client import Client

    return list(Client.open(api.url).search(**kw).items())


# --- the clearest scene over a field in a month ---------------------------------------------------


async def clearest_ours(call):
    answer = _json(
        await call(
            "search_items",
            {
                "collections": [LANDSAT],
                "bbox": FIELD,
                "datetime": MONTH,
                "sortby": "eo:cloud_cover",
                "limit": 1,
                "fields": ["id", "cloud_cover"],
            },
        )
    )
    return rows(answer)[0][0]


async def clearest_peer(call):
    # sortby as stac-mcp documents it; refused (it reads the API's sort conformance class as
    # unsupported), the agent asks for the items as JSON (its text lists no cloud cover) and sorts
    args = {"collections": [LANDSAT], "bbox": FIELD, "datetime": MONTH}
    sorted_ = await call("search_items", {**args, "sortby": ["+properties.eo:cloud_cover"], "limit": 1})
    found = re.findall(r"\*\*([^*]+)\*\* \(Collection", sorted_.text)
    if found and not sorted_.is_error:
        return found[0]
    answer = _json(await call("search_items", {**args, "limit": 500, "output_format": "json"}))
    items = answer.get("data", answer)["items"]  # {"mode": "json", "data": {"items": [...]}}
    return min(items, key=lambda i: (i["properties"]["eo:cloud_cover"], i["id"]))["id"]


def clearest_truth(api):
    items = _search(api, collections=[LANDSAT], bbox=FIELD, datetime=MONTH)
    return min(items, key=lambda i: (i.properties["eo:cloud_cover"], i.id)).id


# --- every item id of a collection over a bbox and season (paging) ---------------------------------


async def ids_ours(call):
    ids, cursor = [], None
    while True:
        args = {"collections": [LANDSAT], "bbox": FIELD, "datetime": SEASON, "limit": 500, "fields": ["id"]}
        answer = _json(await call("search_items", {**args, **({"cursor": cursor} if cursor else {})}))
        ids += [row[0] for row in rows(answer)]
        cursor = answer.get("next_cursor")
        if not cursor:
            return sorted(ids)


async def ids_peer(call):
    text = (
        await call(
            "search_items",
            {"collections": [LANDSAT], "bbox": FIELD, "datetime": SEASON, "limit": 500},
        )
    ).text  # (with fields, stac-mcp 6.5 fails: pystac reads the id-only items as STAC objects)
    return sorted(re.findall(r"\*\*([^*]+)\*\* \(Collection", text))


def ids_truth(api):
    return sorted(i.id for i in _search(api, collections=[LANDSAT], bbox=FIELD, datetime=SEASON))


# --- how many items match --------------------------------------------------------------------------


def _exact_count(text: str) -> int | None:
    found = re.match(r"(\d+) items \((exact|the catalog's count)\)", text)
    return int(found.group(1)) if found else None


async def count_ours(call):
    args = {"collections": [S2], "bbox": S2_BBOX, "datetime": S2_MONTH, "detail": "count"}
    return _exact_count((await call("search_items", args)).text)


async def count_peer(call):
    text = (
        await call(
            "search_items",
            {"collections": [S2], "bbox": S2_BBOX, "datetime": S2_MONTH, "limit": 5000},
        )
    ).text
    found = re.match(r"Found (\d+) items", text)
    return int(found.group(1)) if found else None


def count_truth(api):
    return len(_search(api, collections=[S2], bbox=S2_BBOX, datetime=S2_MONTH))


# --- an item's assets and the href of its red band -------------------------------------------------


def landsat_id(index: int) -> str:
    """The id of the test bed's `index`th Landsat item (agent_tasks.landsat_items)."""
    return f"LC0{8 + index % 2}_L2SP_{46 + index % 3:03d}{27 + index % 4:03d}_{index:04d}_02_T1"


RED_ITEM = landsat_id(50)


async def red_ours(call):
    item = _json(await call("get_item", {"collection_id": LANDSAT, "item_id": RED_ITEM}))
    return next(a["href"] for a in item["assets"].values() if a.get("bands") == ["red"])


async def red_peer(call):
    text = (await call("get_item", {"collection_id": LANDSAT, "item_id": RED_ITEM})).text
    # the text lists each asset's key, title, type and URL (no bands): the agent goes by the title
    block = re.search(r"\*\*red\*\*: [^\n]*\n(?:[^\n]*\n)*?\s+URL: (\S+)", text)
    return block.group(1) if block else None


def red_truth(api):
    from pystac_client import Client

    item = Client.open(api.url).get_collection(LANDSAT).get_item(RED_ITEM)
    return next(
        a.href
        for a in item.assets.values()
        if [b.get("common_name") for b in a.extra_fields.get("eo:bands", [])] == ["red"]
    )


# --- collections and their extents -----------------------------------------------------------------


async def extents_ours(call):
    answer = _json(await call("list_collections", {"limit": 100}))
    records = [dict(zip(answer["columns"], row)) for row in answer["rows"]]
    return {c["id"]: c["spatial_extent"] for c in records}


async def extents_peer(call):
    text = (await call("search_collections", {"limit": 100})).text
    out = {}
    for cid in re.findall(r"\(`([^`]+)`\)", text):  # no extents listed: one get_collection each
        doc = (await call("get_collection", {"collection_id": cid})).text
        box = re.search(r"\[(-?[\d.]+), (-?[\d.]+), (-?[\d.]+), (-?[\d.]+)\]", doc)
        out[cid] = [float(v) for v in box.groups()] if box else None
    return out


def extents_truth(api):
    from pystac_client import Client

    return {c.id: c.extent.spatial.bboxes[0] for c in Client.open(api.url).get_collections()}


def extents_check(answer, truth) -> bool:
    return set(answer) == set(truth) and all(
        answer[k] is not None and all(abs(a - b) < 0.01 for a, b in zip(answer[k], truth[k])) for k in truth
    )


# --- tasks that cannot be done ---------------------------------------------------------------------


async def unknown_ours(call):
    result = await call("search_items", {"collections": ["landsat-c3-l9"], "bbox": FIELD})
    return result.is_error and "landsat-c3-l9" in result.text and "not found" in result.text


async def unknown_peer(call):
    result = await call("search_items", {"collections": ["landsat-c3-l9"], "bbox": FIELD})
    return result.is_error or "not found" in result.text.lower()


async def empty_ours(call):
    return _exact_count(
        (await call("search_items", {"collections": [LANDSAT], "bbox": EMPTY_AOI, "detail": "count"})).text
    )


async def empty_peer(call):
    text = (await call("search_items", {"collections": [LANDSAT], "bbox": EMPTY_AOI})).text
    found = re.match(r"Found (\d+) items", text)
    return int(found.group(1)) if found else None


def empty_truth(api):
    return len(_search(api, collections=[LANDSAT], bbox=EMPTY_AOI))


async def lat_first_ours(call):
    answer = _json(await call("search_items", {"collections": [S2], "bbox": LAT_FIRST, "datetime": S2_MONTH}))
    assert not rows(answer)
    return answer["returned"] == 0 and any("latitude first" in n for n in answer.get("notes", []))


def always(expected):
    return lambda api: expected


def equal(answer, truth) -> bool:
    return answer == truth


# --- save a search for later -----------------------------------------------------------------------


async def save_ours(call):
    result = await call(
        "save_search",
        {
            "search": {"collections": [LANDSAT], "datetime": SEASON},
            "bbox": FIELD,
            "fields": ["id", "datetime", "eo:cloud_cover"],
        },
    )
    record = result.structured or {}
    return record.get("properties", {}).get("search:items"), record.get("assets", {}).get("data", {}).get(
        "href"
    )


def save_check(answer, truth) -> bool:
    import pyarrow.parquet as pq

    written, href = answer
    if written != len(truth) or not href:
        return False
    from pathlib import Path

    path = Path(href.removeprefix("file://"))
    return path.is_file() and sorted(pq.read_table(path, columns=["id"]).column("id").to_pylist()) == truth


# --- cloud fraction inside an AOI, per scene of a season (pixels) ---------------------------------

SAMPLE_S2 = "sample-sentinel-2-l2a"
SCENES = [13.57, 45.90, 13.66, 45.96]  # holds every sample Sentinel-2 scene whole


async def cloud_ours(call):
    args = {"aoi": SCENES, "search": {"collections": [SAMPLE_S2], "datetime": "2024-06-01/2024-09-30"}}
    answer = _json(await call("cloud_cover_stats", args))
    return {row["item_id"]: row.get("cloud_fraction") for row in answer["items"]}


def cloud_truth(api):
    """The generator's truth of each scene's mask (stac_gdal_mcp/data/sample/truth.json: the
    classes it drew, not read back by our code)."""
    from stac_gdal_mcp.settings import SAMPLE_CATALOG

    truth = json.loads((SAMPLE_CATALOG.parent / "truth.json").read_text())
    return {i.id: truth[i.id]["cloud_fraction"] for i in _search(api, collections=[SAMPLE_S2])}


def cloud_check(answer, truth) -> bool:
    return set(answer) == set(truth) and all(
        answer[k] is not None and abs(answer[k] - truth[k]) <= 0.005 for k in truth
    )


# --- an NDVI series of an AOI (pixels) ------------------------------------------------------------

NDVI_AOI = [13.595, 45.915, 13.63, 45.94]
SUMMER = "2024-06-01/2024-09-30"


async def ndvi_ours(call):
    args = {"aoi": NDVI_AOI, "search": {"collections": [SAMPLE_S2], "datetime": "2024-06-01/2024-09-30"}}
    answer = _json(await call("time_series", {**args, "mask_clouds": False}))
    return {row["date"]: row["value"] for row in answer["rows"]}


def ndvi_truth(api):
    """Per scene, the mean NDVI of the pixels whose centres fall in the AOI (taken to the
    scene's CRS with pyproj, rasterio's geometry_mask), red and nir scaled as their raster:bands
    say, no-data left out: rasterio and numpy on the COGs the test bed serves."""
    import numpy as np
    import rasterio
    from pyproj import Transformer
    from rasterio.features import geometry_mask

    from stac_gdal_mcp.settings import SAMPLE_CATALOG

    out = {}
    for item in _search(api, collections=[SAMPLE_S2]):
        folder, layers = SAMPLE_CATALOG.parent / "sentinel-2-l2a" / item.id, []
        for key in ("red", "nir"):
            band = item.assets[key].extra_fields["raster:bands"][0]
            with rasterio.open(folder / f"{key}.tif") as src:
                to_crs = Transformer.from_crs("EPSG:4326", src.crs, always_xy=True)
                w, s, e, n = NDVI_AOI
                ring = [to_crs.transform(x, y) for x, y in ((w, s), (e, s), (e, n), (w, n), (w, s))]
                data = src.read(1)
                inside = ~geometry_mask(
                    [{"type": "Polygon", "coordinates": [ring]}], data.shape, src.transform
                )
                layers.append((data * band["scale"] + band["offset"], inside & (data != band["nodata"])))
        (red, red_ok), (nir, nir_ok) = layers
        ndvi = (nir - red) / (nir + red)
        out[item.datetime.strftime("%Y-%m-%d")] = float(np.mean(ndvi[red_ok & nir_ok]))
    return out


def ndvi_check(answer, truth) -> bool:
    return set(answer) == set(truth) and all(abs(answer[k] - truth[k]) <= 0.001 for k in truth)


# --- a composite (pixels) ------------------------------------------------------------------------


async def composite_ours(call):
    args = {"aoi": NDVI_AOI, "bands": ["red"], "search": {"collections": [SAMPLE_S2], "datetime": SUMMER}}
    answer = _json(await call("composite", {**args, "mask_clouds": False}))
    return Path(os.environ["AGENT_TASKS_WORKSPACE"]) / "outputs" / answer["output"]["file"]


def composite_truth(api):
    """The scenes' red bands (scaled by their raster:bands, no-data left out), as rasterio reads
    them from the COGs the test bed serves."""
    from stac_gdal_mcp.settings import SAMPLE_CATALOG

    return [
        (
            SAMPLE_CATALOG.parent / "sentinel-2-l2a" / i.id / "red.tif",
            i.assets["red"].extra_fields["raster:bands"][0],
        )
        for i in _search(api, collections=[SAMPLE_S2], datetime=SUMMER)
    ]


def composite_check(path, scenes) -> bool:
    """The composite equals numpy's median of the scenes on its grid, where it has a value, and
    has one on every pixel of the AOI."""
    import numpy as np
    import rasterio
    from rasterio.windows import from_bounds

    with rasterio.open(path) as out:
        got, bounds, shape = out.read(1, masked=True).filled(np.nan), out.bounds, out.shape
    stack = []
    for file, band in scenes:
        with rasterio.open(file) as src:
            data = src.read(
                1, window=from_bounds(*bounds, src.transform), boundless=True, fill_value=band["nodata"]
            )
        stack.append(np.where(data == band["nodata"], np.nan, data * band["scale"] + band["offset"]))
    expected = np.nanmedian(np.stack(stack), axis=0)
    here = np.isfinite(got)
    return (
        expected.shape == shape
        and here.sum() > 0.9 * got.size
        and np.allclose(got[here], expected[here], atol=1e-4)
    )


# --- per-field statistics (pixels) ---------------------------------------------------------------

FIELDS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "properties": {"name": name},
            "geometry": {"type": "Polygon", "coordinates": [ring]},
        }
        for name, ring in (
            (
                "vineyard",
                [[13.600, 45.920], [13.610, 45.920], [13.610, 45.930], [13.600, 45.930], [13.600, 45.920]],
            ),
            ("orchard", [[13.620, 45.925], [13.630, 45.925], [13.625, 45.935], [13.620, 45.925]]),
        )
    ],
}
FIELD_SCENE = "S2A_33TUL_20240619_0_L2A"


async def zonal_ours(call):
    args = {
        "geometries": FIELDS, "search": {"collections": [SAMPLE_S2], "ids": [FIELD_SCENE]}, "expression": "red",
        "stats": ["mean"], "mask_clouds": False, "id_property": "name",
    }  # fmt: skip
    answer = _json(await call("zonal_stats", args))
    return {row["zone_id"]: row["mean"] for row in answer["rows"]}


def zonal_truth(api):
    """exactextract on the scene's red COG (the file the test bed serves), the fields taken to
    its CRS with pyproj, the mean scaled as its raster:bands say."""
    import rasterio
    from exactextract import exact_extract
    from pyproj import Transformer

    from stac_gdal_mcp.settings import SAMPLE_CATALOG

    folder = SAMPLE_CATALOG.parent / "sentinel-2-l2a" / FIELD_SCENE
    band = json.loads((folder / f"{FIELD_SCENE}.json").read_text())["assets"]["red"]["raster:bands"][0]
    with rasterio.open(folder / "red.tif") as src:
        to_crs = Transformer.from_crs("EPSG:4326", src.crs, always_xy=True)
    features = [
        {**f, "geometry": {"type": "Polygon", "coordinates": [[list(to_crs.transform(*p)) for p in f["geometry"]["coordinates"][0]]]}}
        for f in FIELDS["features"]
    ]  # fmt: skip
    rows = exact_extract(str(folder / "red.tif"), features, "mean", include_cols=["name"])
    return {r["properties"]["name"]: r["properties"]["mean"] * band["scale"] + band["offset"] for r in rows}


def zonal_check(answer, truth) -> bool:
    return set(answer) == set(truth) and all(abs(answer[k] - truth[k]) <= 0.002 for k in truth)


TASKS = [
    Task(
        "clearest_scene",
        "Which Landsat scene over my field was clearest in July 2024?",
        clearest_ours,
        clearest_truth,
        equal,
        clearest_peer,
    ),
    Task(
        "all_ids",
        "List every Landsat item over my field in summer 2024.",
        ids_ours,
        ids_truth,
        equal,
        ids_peer,
    ),
    Task(
        "count",
        "How many Sentinel-2 scenes cover this area in May 2024?",
        count_ours,
        count_truth,
        equal,
        count_peer,
    ),
    Task(
        "red_href",
        f"What assets has {RED_ITEM} and where is its red band?",
        red_ours,
        red_truth,
        equal,
        red_peer,
    ),
    Task(
        "extents",
        "Which collections are there and where do they cover?",
        extents_ours,
        extents_truth,
        extents_check,
        extents_peer,
    ),
    Task(
        "unknown_collection",
        "Search landsat-c3-l9 over my field (no such collection).",
        unknown_ours,
        always(True),
        equal,
        unknown_peer,
    ),
    Task(
        "empty_aoi",
        "How many Landsat scenes cover a point in the South Pacific?",
        empty_ours,
        empty_truth,
        equal,
        empty_peer,
    ),
    Task(
        "latitude_first",
        "Sentinel-2 over my area in May, bbox written latitude first.",
        lat_first_ours,
        always(True),
        equal,
        None,
        "answers 'Found 0 items' without saying why",
    ),
    Task(
        "cloud_fraction",
        "How cloudy was my area in each Sentinel-2 scene of summer 2024?",
        cloud_ours,
        cloud_truth,
        cloud_check,
        None,
        "has no tool that reads pixels",
    ),
    Task(
        "ndvi_series",
        "How did NDVI change over my area through summer 2024?",
        ndvi_ours,
        ndvi_truth,
        ndvi_check,
        None,
        "has no tool that reads pixels",
    ),
    Task(
        "composite",
        "Make me a cloud-free-looking red composite of my area for summer 2024.",
        composite_ours,
        composite_truth,
        composite_check,
        None,
        "has no tool that reads pixels",
    ),
    Task(
        "field_statistics",
        "What is the mean red reflectance of each of my fields on 19 June 2024?",
        zonal_ours,
        zonal_truth,
        zonal_check,
        None,
        "has no tool that reads pixels",
    ),
    Task(
        "save_search",
        "Save my summer Landsat search (id, date, cloud cover) for later.",
        save_ours,
        ids_truth,
        save_check,
        None,
        "has no tool that saves",
    ),
]
