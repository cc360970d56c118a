"""The one edge where items enter from a catalog (an API's page, a local catalog's file): an item
of the wrong shape is left out with a one-line note naming it, so that the good items around it
are still answered, and a count a catalog states is used only when it is a count.

Checked is what the summaries, the searches and the counts read of an item: its id (text),
collection (text or absent), properties (an object, or absent) with their times, platform and
constellation (text or null), bbox (4 or 6 numbers), geometry (an object or null), assets (an
object of objects, each href text), links (a list), each asset's `eo:bands` / `bands` (a list
of objects), and a nesting at most MAX_DEPTH levels deep. Nothing else is judged: what the
server does not read may have any shape.
"""

from __future__ import annotations

import math
from typing import Any

from .bounds import ID_CHARS
from .security import shown

MAX_NOTES = 5  # notes naming items left out; the rest are counted in one more
MAX_MATCHED = 10**12  # a stated count above this is not a count of items
MAX_DEPTH = 64  # levels of nesting an item may have (a PROJJSON, a MultiPolygon: about 10)
TEXTS = ("datetime", "start_datetime", "end_datetime", "platform", "constellation")  # text or null
BANDS = ("eo:bands", "bands")  # an asset's bands, as summaries and get_item read them


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _bands_problem(where: str, holder: dict) -> str | None:
    for key in BANDS:
        bands = holder.get(key)
        if bands is not None and not (isinstance(bands, list) and all(isinstance(b, dict) for b in bands)):
            return f"{where}{key} is {_kind(bands)}, not a list of objects"
    return None


def _parts_problem(item: dict) -> str | None:
    props = item.get("properties") or {}  # absent from an answer the fields extension cut
    if not isinstance(props, dict):
        return f"properties is {_kind(props)}, not an object"
    for key in TEXTS:
        if props.get(key) is not None and not isinstance(props[key], str):
            return f"properties.{key} is {_kind(props[key])}, not text"
    bbox = item.get("bbox")
    if bbox is not None and not (
        isinstance(bbox, list) and len(bbox) in (4, 6) and all(map(_is_number, bbox))
    ):
        return f"bbox is {_kind(bbox)}, not a list of 4 or 6 numbers"
    if item.get("geometry") is not None and not isinstance(item["geometry"], dict):
        return f"geometry is {_kind(item['geometry'])}, not an object"
    assets = item.get("assets", {})
    if not isinstance(assets, dict):
        return f"assets is {_kind(assets)}, not an object"
    wrong = [key for key, asset in assets.items() if not isinstance(asset, dict)]
    if wrong:
        return f"asset {shown(str(wrong[0]), 40)} is {_kind(assets[wrong[0]])}, not an object"
    wrong = [key for key, asset in assets.items() if not isinstance(asset.get("href", ""), str)]
    if wrong:
        return f"the href of asset {shown(str(wrong[0]), 40)} is {_kind(assets[wrong[0]]['href'])}, not text"
    if not isinstance(item.get("links", []), list):
        return f"links is {_kind(item['links'])}, not a list"
    found = None
    for key, asset in assets.items():
        found = found or _bands_problem(f"asset {shown(str(key), 40)}: ", asset)
    return found


def too_deep(value: Any, levels: int = MAX_DEPTH) -> bool:
    """Whether `value` (JSON) nests objects and lists more than `levels` deep (walked without
    recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > levels:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def shape_problem(item: Any) -> str | None:
    """What is wrong with the shape of `item` (one clause naming the part), None when nothing is."""
    if not isinstance(item, dict):
        return f"the item is {_kind(item)}, not an object"
    if not isinstance(item.get("id"), str) or not item["id"]:
        return f"its id is {_kind(item.get('id'))} {shown(str(item.get('id')), 40)}, not text"
    collection = item.get("collection")
    if collection is not None and not isinstance(collection, str):
        return f"its collection is {_kind(collection)}, not text"
    if too_deep(item):
        return f"it is nested more than {MAX_DEPTH} levels deep"
    return _parts_problem(item)


def well_formed(features: Any, left_out: list[str], by_id: dict[str, str] | None = None) -> list[dict]:
    """The items of `features` (a page's list) whose shape is right; a clause naming each other
    one (its id when it has one) is appended to `left_out`, and what is wrong with it kept in
    `by_id` under its id."""
    if not isinstance(features, list):
        left_out.append(f"the page's features are {_kind(features)}, not a list")
        return []
    good = []
    for item in features:
        problem = shape_problem(item)
        if problem is None:
            good.append(item)
            continue
        named = isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]
        if named and by_id is not None:
            by_id[item["id"]] = problem
        left_out.append(f"item {shown(item['id'], ID_CHARS)}: {problem}" if named else problem)
    return good


def left_out_notes(left_out: list[str], catalog_id: str) -> list[str]:
    """The notes of the items left out: one line each, at most MAX_NOTES, then their number."""
    notes = [f"an item of catalog '{catalog_id}' of the wrong shape was left out ({why})" for why in left_out]
    if len(notes) > MAX_NOTES:
        notes[MAX_NOTES:] = [f"{len(left_out) - MAX_NOTES} more items of the wrong shape were left out"]
    return notes


def stated_count(value: Any, what: str, notes: list[str]) -> int | None:
    """`value` (a catalog's numberMatched or context.matched) when it is a count of items: an
    integer from 0 to MAX_MATCHED; otherwise None, with a note."""
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if whole and not isinstance(value, bool) and 0 <= value <= MAX_MATCHED:
        return int(value)
    notes.append(f"the catalog's {what} ({shown(repr(value), 40)}) is not a count of items; ignored")
    return None
