"""A local catalog as a `Source` (`LocalSource`): the search arguments applied in-process to its
items (cql2 + shapely), its queryables inferred from them."""

from __future__ import annotations

from datetime import datetime

from ..catalogs import cursors
from ..catalogs.bounds import ID_CHARS, cut
from ..catalogs.item_shape import left_out_notes
from ..errors import InvalidFilter
from ..models import Queryable, Queryables
from . import params as p
from .query import Search, and_all
from .source import Source, search_from_cursor


def _item_interval(item: dict) -> tuple[datetime | None, datetime | None]:
    props = item.get("properties", {})
    if props.get("datetime"):
        dt = p.datetime_interval(props["datetime"])[0]
        return dt, dt
    start = props.get("start_datetime")
    end = props.get("end_datetime")
    return (
        p.datetime_interval(start)[0] if start else None,
        p.datetime_interval(end)[0] if end else None,
    )


def _sort_value(item: dict, field: str):
    if field in ("id", "collection"):
        return item.get(field)
    if field.startswith("properties."):
        field = field[len("properties.") :]
    return item.get("properties", {}).get(field)


def sort_items(items: list[dict], sortby: list[dict] | None) -> list[dict]:
    """Stable multi-key sort; missing values sort last in both directions.

    The default order is newest first, then by id, as STAC APIs commonly do.
    """
    keys = sortby or [{"field": "datetime", "direction": "desc"}, {"field": "id", "direction": "asc"}]
    out = list(items)
    for key in reversed(keys):
        present = [i for i in out if _sort_value(i, key["field"]) is not None]
        missing = [i for i in out if _sort_value(i, key["field"]) is None]
        present.sort(key=lambda i: _sort_value(i, key["field"]), reverse=key["direction"] == "desc")
        out = present + missing
    return out


def _footprint(item: dict):
    """The item's geometry, else its bbox (2D or 3D) as a box; None when it has neither."""
    from shapely.geometry import box, shape

    if item.get("geometry"):
        return shape(item["geometry"])
    b = item.get("bbox") or []
    if len(b) == 6:
        return box(b[0], b[1], b[3], b[4])
    return box(*b[:4]) if len(b) == 4 else None


def local_search(items: list[dict], search: Search) -> list[dict]:
    """All items matching `search`, in its sort order."""
    from shapely.geometry import box, shape

    area = None
    if search.bbox is not None:
        b = search.bbox
        area = box(b[0], b[1], b[3], b[4]) if len(b) == 6 else box(*b)
    elif search.intersects is not None:
        area = shape(search.intersects)
    interval = p.datetime_interval(search.datetime) if search.datetime else None
    condition = None
    conditions = search.cql2_conditions()
    if conditions:
        import cql2

        condition = cql2.Expr(and_all(conditions))

    out = []
    for item in items:
        if search.collections and item.get("collection") not in search.collections:
            continue
        if search.ids and item["id"] not in search.ids:
            continue
        if area is not None:
            geom = _footprint(item)
            if geom is None or not geom.intersects(area):  # no geometry nor bbox: nowhere
                continue
        if interval is not None:
            start, end = _item_interval(item)
            if (interval[1] and start and start > interval[1]) or (interval[0] and end and end < interval[0]):
                continue
        if condition is not None and not _matches(condition, item, search):
            continue
        out.append(item)
    return sort_items(out, search.sortby)


def _matches(condition, item: dict, search: Search) -> bool:
    """cql2's verdict on `item`; an expression it cannot reduce to true or false (an unknown
    function, a comparison of text with a number, a property the item lacks) is an error
    naming the argument, as a STAC API would refuse it."""
    try:
        return condition.matches(item)
    except Exception as exc:  # cql2 raises a bare Exception
        names = [n for n in ("filter", "query") if getattr(search, n)] or ["max_cloud_cover"]
        raise InvalidFilter(
            f"{' / '.join(names)} cannot be evaluated on item '{str(item.get('id'))[:100]}' ({exc}): "
            "check the operators, that each property exists (get_queryables) and has the type compared with"
        ) from None


class LocalSource(Source):
    """A local catalog (catalogs.LocalCatalog: a static catalog, an ItemCollection, newline-
    delimited items, the workspace), searched in memory."""

    def page(self, search, state, limit, budget, notes, fields=None):
        if state is not None:
            search = search_from_cursor(state)
        self.check_collections(search.collections)
        matches = local_search(self.catalog.items, search)
        notes += left_out_notes(self.catalog.left_out, self.id)
        offset = cursors.offset(state, total=len(matches)) if state is not None else 0
        features = []
        for feature in matches[offset : offset + limit]:
            if not budget.take(feature):
                break
            features.append(feature)
        end = offset + len(features)
        next_state = {"search": search.__dict__, "offset": end} if end < len(matches) else None
        return features, len(matches), next_state

    def queryables(self, collection_id: str | None) -> Queryables:
        """The items' properties with the type of their values (in-process filters take them)."""
        items = self.catalog.items
        if collection_id is not None:
            self.catalog.collection(collection_id)
            items = [i for i in items if i.get("collection") == collection_id]
        return Queryables(
            collection_id=collection_id,
            queryables=_infer_queryables(items),
            notes=["local catalog: queryables inferred from the items' properties; filters run in-process"],
        )


def _infer_queryables(items: list[dict]) -> list[Queryable]:
    kinds: dict[str, str] = {
        "id": "string",
        "collection": "string",
        "geometry": "geometry",
        "datetime": "datetime",
    }
    for item in items:
        for key, value in item.get("properties", {}).items():
            if key in kinds or value is None:
                continue
            kinds[key] = (
                "boolean"
                if isinstance(value, bool)
                else "integer"
                if isinstance(value, int)
                else "number"
                if isinstance(value, float)
                else "string"
                if isinstance(value, str)
                else "array"
                if isinstance(value, list)
                else "object"
            )
    return [Queryable(name=cut(k, ID_CHARS), type=v) for k, v in sorted(kinds.items())]
