"""A search that matched nothing, told apart from "no scene is clear enough": the properties its
conditions name that the searched collections' items do not carry.

`max_cloud_cover=10` on NAIP, whose items have no `eo:cloud_cover`, matches no item at all; the
answer "0 items" alone reads as if every scene were too cloudy. One item of each searched
collection (a search of that collection alone, one item) shows which properties its items carry;
a property named by `max_cloud_cover`, `query` or `filter` that the sample lacks gets a note,
with the cloud properties the items do carry.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import StacGdalMcpError

#: Collections sampled for one note (one request each).
MAX_COLLECTIONS = 5
#: Names a condition may use that are not item properties.
NOT_PROPERTIES = {"id", "collection", "geometry", "datetime", "start_datetime", "end_datetime"}


def condition_properties(search) -> list[str]:
    """The item properties `search`'s conditions (query, filter, max_cloud_cover) name, in order."""
    names: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("property"), str):
                names.append(node["property"].removeprefix("properties."))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(search.cql2_conditions())
    return [n for n in dict.fromkeys(names) if n not in NOT_PROPERTIES]


def absent_note(search, sample: Callable[[str], dict | None]) -> str | None:
    """The note for an empty search whose conditions name properties the items of its
    collections lack (`sample(collection_id)`: one item of it, None when it has none); None when
    every sampled collection has them (or nothing could be sampled)."""
    names = condition_properties(search)
    if not names or not search.collections:
        return None
    lines = []
    for collection_id in search.collections[:MAX_COLLECTIONS]:
        try:
            item = sample(collection_id)
        except StacGdalMcpError:
            continue  # the note is a hint: a collection that cannot be sampled gets none
        properties = (item or {}).get("properties")
        if not isinstance(properties, dict):
            continue
        missing = [n for n in names if n not in properties]
        if not missing:
            continue
        clouds = sorted(k for k in properties if "cloud" in k.lower())
        have = (
            f"the cloud properties they have: {', '.join(clouds)}"
            if clouds
            else "they have no cloud property"
        )
        by = " (max_cloud_cover filters on it)" if search.max_cloud_cover is not None else ""
        lines.append(
            f"{collection_id} items have no {', '.join(missing)}{by}, so no item of it can match; {have}"
        )
    return "; ".join(lines) or None
