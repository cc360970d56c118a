"""The map's view data, computed from tool calls: each call's AOI, scene footprints (with the
clear fraction and rank when a cloud_cover_stats ranking is present, and their thumbnails), the
ranking, time series, zonal statistics' zones (coloured by the first statistic) and the outputs
(bbox, footprint and quicklook as a data URI). What a result draws is its `MapLayer` (in its
`_meta`), which the result made itself: its call's area and its notes too. The view reads no
call's arguments and no structured content: a result without a layer draws nothing.

This is the one place the view is built: the page (maps/map.html) only draws the view it is
given, in a standalone page (`map_page`) or beside a tool result (the server puts the view in
the result's `_meta`, server/map_app.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..models import MAP_LAYER_META, MAP_VIEW_META, as_bbox, geometry_bbox, is_number, polygonal

_IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


def _pick(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _is_error(result: Any) -> bool:
    return isinstance(result, dict) and (result.get("isError") is True or result.get("is_error") is True)


def _content(result: Any) -> list:
    content = result.get("content") if isinstance(result, dict) else None
    return [c for c in content if isinstance(c, dict)] if isinstance(content, list) else []


def _result_text(result: Any) -> str:
    return "\n".join(
        c["text"] for c in _content(result) if c.get("type") == "text" and isinstance(c.get("text"), str)
    )


def image_block(result: Any) -> int | None:
    """The index, in a result's `content`, of the image the view shows (the first PNG, JPEG or
    WebP image block), or None."""
    content = result.get("content") if isinstance(result, dict) else None
    for index, c in enumerate(content if isinstance(content, list) else []):
        data = c.get("data") if isinstance(c, dict) else None
        if (
            isinstance(c, dict)
            and c.get("type") == "image"
            and c.get("mimeType") in _IMAGE_TYPES
            and isinstance(data, str)
            and _BASE64.match(data)
        ):
            return index
    return None


def _result_image(result: Any) -> str | None:
    index = image_block(result)
    if index is None:
        return None
    block = result["content"][index]
    return f"data:{block['mimeType']};base64," + re.sub(r"\s+", "", block["data"])


def _area(area: Any) -> dict | None:
    """A layer's area (its call's: `models.map_area`) as the view's AOI, None when it has no bbox."""
    bbox = as_bbox(area.get("bbox")) if isinstance(area, dict) else None
    return {"bbox": bbox, "geometry": polygonal(area.get("geometry"))} if bbox else None


def _thumbnail(item: dict) -> str | None:
    if isinstance(item.get("thumbnail"), str):
        return item["thumbnail"]
    asset = item["assets"].get("thumbnail") if isinstance(item.get("assets"), dict) else None
    return asset["href"] if isinstance(asset, dict) and isinstance(asset.get("href"), str) else None


def _footprint(item: Any) -> dict | None:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        return None
    props = item.get("properties") if isinstance(item.get("properties"), dict) else {}
    geometry = polygonal(item.get("geometry"))
    bbox = as_bbox(item.get("bbox")) or geometry_bbox(geometry)
    if not bbox:
        return None
    return {
        "id": item["id"],
        "collection": _pick(item.get("collection"), item.get("collection_id")),
        "datetime": _pick(item.get("datetime"), props.get("datetime")),
        "bbox": bbox,
        "geometry": geometry,
        "cloud_cover": _pick(item.get("cloud_cover"), props.get("eo:cloud_cover")),
        "thumbnail": _thumbnail(item),
        "clear_fraction": None,
        "rank": None,
    }


def _same_item(a: dict, b: dict) -> bool:
    return a["id"] == b["id"] and (
        a["collection"] is None or b["collection"] is None or a["collection"] == b["collection"]
    )


def _add_footprint(footprints: list[dict], fp: dict) -> None:
    known = next((f for f in footprints if _same_item(f, fp)), None)
    if known is None:
        footprints.append(fp)
        return
    for key, value in fp.items():
        if known[key] is None and value is not None:
            known[key] = value


def _zone_layer(layer: Any) -> dict | None:
    """A zone layer's zones: id, value of its statistic, bbox, geometry, note (why its latest
    observation has no value); with the statistic's name, its words (`label`: a class's share)
    and the range of its values (None when no zone has one)."""
    if not isinstance(layer, dict) or not isinstance(layer.get("features"), list):
        return None
    zones = []
    for feature in layer["features"]:
        geometry = polygonal(feature.get("geometry")) if isinstance(feature, dict) else None
        bbox = geometry_bbox(geometry)
        if not bbox:
            continue
        props = feature.get("properties") if isinstance(feature.get("properties"), dict) else {}
        value = props.get("value")
        note = props.get("note")
        zones.append(
            {
                "id": feature.get("id"),
                "value": value if is_number(value) else None,
                "bbox": bbox,
                "geometry": geometry,
                "note": note[:300] if isinstance(note, str) and note else None,
            }
        )
    values = [z["value"] for z in zones if z["value"] is not None]
    label = layer.get("label")
    return {
        "stat": str(_pick(layer.get("stat"), "")),
        "label": label if isinstance(label, str) else None,
        "expression": str(_pick(layer.get("expression"), "")),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "zones": zones,
    }


def _layer(result: Any, key: str = MAP_LAYER_META) -> dict:
    """The `MapLayer` a result carries in its `_meta` (as JSON; `key`=MAP_VIEW_META: the view the
    server sent with it), {} when none."""
    meta = result.get("_meta") if isinstance(result, dict) else None
    layer = meta.get(key) if isinstance(meta, dict) else None
    return layer if isinstance(layer, dict) else {}


def _add_view(view: dict, sent: dict, result: Any) -> None:
    """A view the server sent with a result (to a host that declares MCP Apps), its parts added to
    `view`: what a client that got views draws of several calls (its images, `{"content": i}`,
    read from the result's content)."""
    for aoi in sent.get("aois") or []:
        if isinstance(aoi, dict) and aoi not in view["aois"]:
            view["aois"].append(aoi)
    for fp in sent.get("footprints") or []:
        if isinstance(fp, dict) and isinstance(fp.get("id"), str):
            _add_footprint(view["footprints"], {**fp, "clear_fraction": None, "rank": None})
    for key in ("ranking", "zones", "outputs", "series"):
        for entry in sent.get(key) or []:
            if isinstance(entry, dict):
                image = entry.get("image")
                view[key].append(
                    {**entry, "image": _result_image(result)} if isinstance(image, dict) else entry
                )
    for key in ("notes", "errors"):
        view[key] += [n for n in sent.get(key) or [] if isinstance(n, str) and n not in view[key]]


def _image_at(images: list[dict], at: Any) -> str | None:
    """The `at`-th of a result's images as a `data:` URI, None when there is none."""
    image = images[at] if isinstance(at, int) and 0 <= at < len(images) else None
    return _result_image({"content": [image]}) if image else None


def _raster(raster: Any, images: list[dict], aoi: dict | None) -> dict | None:
    """A raster of a layer as the view's output: at its bbox (its geometry's; none: the call's
    AOI), its picture the result's image it names; None when it has no place."""
    if not isinstance(raster, dict):
        return None
    geometry = polygonal(raster.get("geometry"))
    bbox = as_bbox(raster.get("bbox")) or geometry_bbox(geometry) or (aoi["bbox"] if aoi else None)
    if not bbox:
        return None
    return {
        "id": str(_pick(raster.get("id"), "")),
        "title": raster.get("title"),
        "bbox": bbox,
        "geometry": geometry,
        "image": _image_at(images, raster.get("image")),
    }


def _add_layer(view: dict, layer: dict, result: Any, aoi: dict | None) -> None:
    """A result's map layer: its footprints, its zones, its rasters (each drawn as an output at
    its bbox, its picture the result's image it names), its ranking (in the place of an earlier
    one) and its time series (at the call's AOI, with its chart)."""
    images = [c for c in _content(result) if c.get("type") == "image"]
    for raster in layer.get("rasters") if isinstance(layer.get("rasters"), list) else []:
        output = _raster(raster, images, aoi)
        if output:
            view["outputs"].append(output)
    for item in layer.get("footprints") if isinstance(layer.get("footprints"), list) else []:
        fp = _footprint(item)
        if fp:
            _add_footprint(view["footprints"], fp)
    zones = _zone_layer(layer.get("zones"))
    if zones and zones["zones"]:
        view["zones"].append(zones)
    if isinstance(layer.get("ranking"), list):
        view["ranking"] = [
            r for r in layer["ranking"] if isinstance(r, dict) and isinstance(r.get("id"), str)
        ]
    for series in layer.get("series") if isinstance(layer.get("series"), list) else []:
        if isinstance(series, dict):
            entry = {k: series.get(k) for k in ("expression", "reducer", "days")}
            view["series"].append(
                {
                    **entry,
                    "aoi": aoi["bbox"] if aoi else None,
                    "image": _image_at(images, series.get("image")),
                }
            )


def _add_call(view: dict, call: Mapping[str, Any]) -> None:
    result = call.get("result")
    if _is_error(result):
        view["errors"].append(_result_text(result) or "the tool reported an error")
        return
    sent = _layer(result, MAP_VIEW_META)
    if sent:  # the server built its view: drawn as it is
        _add_view(view, sent, result)
        return
    layer = _layer(result)  # what the result draws, made by the result itself
    aoi = _area(layer.get("area"))
    if aoi and not any(a["bbox"] == aoi["bbox"] and a["geometry"] == aoi["geometry"] for a in view["aois"]):
        view["aois"].append({**aoi, "tool": call.get("tool") if isinstance(call.get("tool"), str) else None})
    for note in layer.get("notes") if isinstance(layer.get("notes"), list) else []:
        if isinstance(note, str) and note not in view["notes"]:
            view["notes"].append(note)
    _add_layer(view, layer, result, aoi)


def _bounds(view: dict) -> list[float] | None:
    """The bbox of every AOI, footprint, output, series AOI and zone of `view`, or None."""
    boxes = [x["bbox"] for key in ("aois", "footprints", "outputs") for x in view[key]]
    boxes += [t["aoi"] for t in view["series"] if t["aoi"]]
    boxes += [z["bbox"] for layer in view["zones"] for z in layer["zones"]]
    if not boxes:
        return None
    return [
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    ]


def build_map_view(calls: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The map's view data from tool calls, each `{"result": CallToolResult, "tool": name}` (the
    result as JSON: `content`, `isError` and its `MapLayer` in `_meta`; `tool` optional; the
    call's `arguments` are not read).

    Returns `{"aois", "footprints", "ranking", "outputs", "series", "zones", "notes", "errors",
    "bounds"}`:
    - `aois`: one per distinct AOI of the calls, in order — `{"bbox", "geometry", "tool"}` (WGS84;
      geometry only when a polygon was given; tool when the call names it): a later call adds its
      AOI beside an earlier one's, never in its place;
    - `footprints`: one per scene with a bbox — id, collection, datetime, bbox, geometry,
      cloud_cover (scene-wide), thumbnail (the item's, as given), clear_fraction and rank (from a
      cloud_cover_stats ranking);
    - `ranking`: the cloud_cover_stats rows, in the tool's order;
    - `outputs`: processing outputs with a WGS84 bbox — id, title, bbox, geometry, image
      (a `data:` URI of the quicklook the tool returned as image content, else None);
    - `series`: time_series results — expression, reducer, days, aoi (its bbox), image (the chart);
    - `zones`: zonal_stats results — stat (the first statistic), expression, min and max of its
      values, and the zones (id, value: the latest of the statistic, bbox, geometry), drawn filled
      by value on a viridis ramp from min to max;
    - `notes`: the tools' notes; `errors`: texts of results that are tool errors;
    - `bounds`: `[west, south, east, north]` of all the above that has a place (the extent the
      page fits), None when nothing has one.
    """
    view: dict[str, Any] = {
        "aois": [],
        "footprints": [],
        "ranking": [],
        "outputs": [],
        "series": [],
        "zones": [],
        "notes": [],
        "errors": [],
    }
    for call in calls:
        if isinstance(call, Mapping):
            _add_call(view, call)
    for rank, row in enumerate(view["ranking"]):
        for fp in view["footprints"]:
            if _same_item(fp, row):
                fp["clear_fraction"] = row["clear_fraction"]
                fp["rank"] = rank
    view["bounds"] = _bounds(view)
    return view


def footprint_search(view: Mapping[str, Any], result: Any) -> dict[str, Any] | None:
    """The search_items arguments that find the footprints of a view's ranked scenes that have none
    (a cloud_cover_stats ranking names items, it carries no footprint): their ids (up to 100), in
    the catalog the ranking's call named (its map layer's `catalog`; `result`: the ranking's
    result, as `build_map_view` takes it) and, when every row names one, their collections. None
    when every ranked scene has a footprint."""
    missing = [r for r in view["ranking"] if not any(_same_item(fp, r) for fp in view["footprints"])]
    if not missing:
        return None
    ids = [row["id"] for row in missing[:100]]
    catalog = _layer(result).get("catalog")
    collections = list(dict.fromkeys(row["collection"] for row in missing))
    return {
        "ids": ids,
        "limit": len(ids),
        **({"catalog": catalog} if isinstance(catalog, str) else {}),
        **({"collections": collections} if all(isinstance(c, str) for c in collections) else {}),
    }
