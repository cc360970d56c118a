"""A page of search summaries as the table an agent reads: one header of column names, one row
per item under its collection, and what every item of a collection shares (its asset keys and
bands, platform, gsd, projection, thumbnail) said once per collection.

    {"columns": ["id", "datetime", "cloud_cover", "bbox"],
     "collections": {"landsat-c2-l2": {"gsd": 30.0, "assets": {...}, "rows": [
         ["LC09_...", "2024-08-10T18:57:33Z", 12.3, [-123.1, 45.1, -120.2, 47.2]], ...]}},
     "item_uri": "stac://pc/collections/{collection}/items/{id}",
     "returned": 20, "matched": 179, "matched_is": "the catalog's count", "next_cursor": "...",
     "notes": [...]}

Rows keep the page's order within each collection (without a collection key - `fields` left it
out - they are one list, `rows`). A key goes to the collections when, in every collection of the
page, all its items share one value; otherwise it is a column (with a value in every row), or
for platform, proj_code and gsd a column only when `fields` asks for it. `fields` chooses the
keys (`summary_keys`).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument
from ..words import counted
from .fields import Fields

#: The keys of a summary, in column order, and the item paths (fields extension) each is read from.
SUMMARY_PATHS: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "catalog": (),
    "collection": ("collection",),
    "datetime": ("properties.datetime", "properties.start_datetime"),
    "cloud_cover": ("properties.eo:cloud_cover",),
    "bbox": ("bbox",),
    "platform": ("properties.platform",),
    "gsd": ("properties.gsd", "assets"),
    "proj_code": ("properties.proj:code", "properties.proj:epsg"),
    "also_in": (),
    "assets": ("assets",),
    "thumbnail": ("assets",),
}
_ALIASES = {"eo:cloud_cover": "cloud_cover", "proj:code": "proj_code", "proj:epsg": "proj_code"}
SHAREABLE = ("platform", "gsd", "proj_code", "thumbnail")
PER_ITEM_ON_REQUEST = ("platform", "proj_code", "gsd")  # rarely what a scene is chosen by


def summary_keys(fields: Fields | None) -> list[str]:
    """The summary keys `fields` keeps (all without it): names as a summary or STAC says them
    (`cloud_cover` or `eo:cloud_cover`; `datetime` or `properties.datetime`)."""
    if fields is None:
        return list(SUMMARY_PATHS)
    chosen = [_key(path) for path in fields.include] or list(SUMMARY_PATHS)
    dropped = {_key(path) for path in fields.exclude}
    return [k for k in SUMMARY_PATHS if k == "id" or (k in chosen and k not in dropped)]


def _key(path: str) -> str:
    name = path.removeprefix("properties.")
    name = _ALIASES.get(name, name)
    if name not in SUMMARY_PATHS:
        raise InvalidArgument(
            f"with detail='summary', fields chooses among {', '.join(SUMMARY_PATHS)} "
            f"(got {path!r:.60}); detail='full' takes any item field"
        )
    return name


def api_fields(keys: list[str]) -> Fields:
    """The item paths a catalog need send for summaries of `keys` (fields extension)."""
    paths = [path for key in keys for path in SUMMARY_PATHS[key]]
    return Fields(include=tuple(dict.fromkeys(paths)), exclude=("links",))  # an API adds them


def summary_table(
    items: list[dict],
    keys: list[str],
    item_uri: str | None,
    chosen: bool = False,
) -> dict[str, Any]:
    """`items` (summaries as JSON) as columns, rows and per-collection shared values, holding
    only `keys` (a collection whose items have thumbnails says `"thumbnail": true`). The assets
    most items of a collection have are the collection's; items with others are listed with
    theirs under OTHER_ASSETS. Unless the keys were `chosen` (fields), PER_ITEM_ON_REQUEST keys are
    columns only when asked for, and the collections' when they share them."""
    rows = [_row(item, keys) for item in items]
    groups: dict[Any, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get("collection"), []).append(row)
    shared = [k for k in SHAREABLE if k in keys and all(_one_value(g, k) for g in groups.values())]
    collections: dict[str, dict] = {}
    for collection, group in groups.items():
        block: dict[str, Any] = {}
        for key in shared:
            value = group[0].get(key)
            if key == "thumbnail":  # where it is read: said once, in the table's `thumbnail`
                value = True if value else None
            if value is not None:
                block[key] = value
        if "assets" in keys:
            block.update(_collection_assets(group))
        collections[str(collection)] = block
    grouped = "collection" in keys and None not in groups  # rows under their collection
    left_out = [k for k in PER_ITEM_ON_REQUEST if k in keys and k not in shared and not chosen]
    moved = {*shared, *left_out, "assets"} | ({"collection"} if grouped else set())
    columns = [k for k in keys if k not in moved and any(k in row for row in rows)]
    table: dict[str, Any] = {"columns": columns}
    if grouped:  # in the page's order within each collection
        for collection, group in groups.items():
            collections[str(collection)]["rows"] = [[row.get(k) for k in columns] for row in group]
    else:
        table["rows"] = [[row.get(k) for k in columns] for row in rows]
    if left_out and rows:
        table["per_item_on_request"] = f"{', '.join(left_out)}: ask with fields"
    if collections and (grouped or any(collections.values())):
        table["collections"] = collections
    if item_uri:
        table["item_uri"] = item_uri
    return table


OTHER_ASSETS = "items_with_other_assets"  # item id -> its assets unlike the collection's (null: none)


def _row(item: dict, keys: list[str]) -> dict:
    row = {k: v for k, v in item.items() if k in keys}
    if "assets" in row:  # each asset's own roles, whatever the summary said once
        common = item.get("asset_roles") or ["data"]
        row["assets"] = {
            key: {
                "roles": asset.get("roles") or common,
                **({"bands": asset["bands"]} if asset.get("bands") else {}),
            }
            for key, asset in row["assets"].items()
        }
    if isinstance(row.get("datetime"), str) and "." in row["datetime"]:  # to the second: an
        row["datetime"] = row["datetime"].split(".")[0] + "Z"  # acquisition is told by its id
    return row


def _collection_assets(group: list[dict]) -> dict:
    """The asset map (and asset_roles) most items of `group` have, for the collection's block;
    under OTHER_ASSETS, by item id, what an item has otherwise: its own entry of an asset (roles
    in full), or null for one it lacks."""
    import json
    from collections import Counter

    counts = Counter(json.dumps(row["assets"], sort_keys=True) for row in group if "assets" in row)
    if not counts:
        return {}
    common = json.loads(counts.most_common(1)[0][0])
    others = {}
    for row in group:
        own = row.pop("assets", None)
        if own is not None and own != common:  # what differs: an entry, or null for one it lacks
            changed = {k: v for k, v in own.items() if common.get(k) != v}
            others[row.get("id")] = {**changed, **{k: None for k in common if k not in own}}
    return {**_said_once(common), **({OTHER_ASSETS: others} if others else {})}


def _said_once(assets: dict) -> dict:
    """{"asset_roles": the roles most assets have, "assets": each naming its roles only when
    they differ} (as an ItemSummary says them)."""
    from ..models import common_roles

    common = common_roles(a["roles"] for a in assets.values()) or ["data"]
    out = {key: {k: v for k, v in a.items() if k != "roles" or v != common} for key, a in assets.items()}
    return {"asset_roles": common, "assets": out} if common != ["data"] else {"assets": out}


def _one_value(group: list[dict], key: str) -> bool:
    first = group[0].get(key)
    if key == "thumbnail":  # each item has its own: shared is whether they have one
        return all(bool(row.get(key)) == bool(first) for row in group)
    return all(row.get(key) == first for row in group)


def search_answer(source, page, keys: list[str], chosen: bool = False) -> dict[str, Any]:
    """The text answer of search_items at detail="summary": `page` (a search result whose items
    are summaries, as objects or JSON) as a table of `keys` (`summary_table`), with its count
    (`matched_is`: how it was counted, by default as the `source.Source` searched counts),
    cursor, notes and, federated, its catalogs."""
    from ..models import ItemSummary

    ids = source.ids

    items = [i.model_dump(mode="json") if isinstance(i, ItemSummary) else i for i in page.items]
    where = ids[0] if len(ids) == 1 else "{catalog}"
    item_uri = f"stac://{where}/collections/{{collection}}/items/{{id}}"
    hrefs = [item["thumbnail"] for item in items if item.get("thumbnail")]
    answer = summary_table(items, keys, item_uri if items else None, chosen)
    if hrefs and "thumbnail" in keys:  # a local catalog's is a resource; else the item's asset
        local = all(h.startswith("stac://") for h in hrefs)
        answer["thumbnail"] = f"{item_uri}/thumbnail" if local else "the thumbnail asset of item_uri"
    matched_is = getattr(page, "matched_is", None)
    if matched_is is None and page.matched is not None:
        matched_is = source.matched_is
    answer.update(returned=page.returned, matched=page.matched, matched_is=matched_is)
    answer.update(next_cursor=page.next_cursor, notes=page.notes)
    catalogs = getattr(page, "catalogs", None)
    if catalogs:
        answer["catalogs"] = [c.model_dump(mode="json", exclude_none=True) for c in catalogs]
    return {k: v for k, v in answer.items() if v is not None and v != []}


def count_text(page) -> str:
    """The text answer of detail="count": `1000 items (exact)`, how it was counted in brackets
    (exact, the catalog's count, at least), each catalog's count when several were asked, then
    the notes, a line each."""
    line = f"{counted(page.matched, 'item')} ({page.matched_is})"
    if page.matched_is == "at least":
        line = f"at least {counted(page.matched, 'item')} (counting stopped)"
    if page.catalogs:
        line += "; " + ", ".join(f"{c.id}: {c.matched}" for c in page.catalogs)
    return "\n".join([line, *page.notes])


def records_table(listing, name: str) -> dict[str, Any]:
    """A listing (a model whose `name` is a list of records, e.g. CollectionList.collections) as
    `columns` (the keys any record has) and `rows`, beside its other keys with a value."""
    out = listing.model_dump(mode="json", exclude_none=True)
    records = out.pop(name)
    columns = list(dict.fromkeys(k for r in records for k in r))
    table = {"columns": columns, "rows": [[r.get(k) for k in columns] for r in records]} if records else {}
    return {**table, **{k: v for k, v in out.items() if v != []}}


def answer_text(source, page, detail: str, fields) -> tuple[dict | str, Any]:
    """(the text an agent reads, the page as structured content) of a search_items answer of
    the `source.Source` searched (one catalog, or several):
    a count's line; full items without the empty keys; summaries as the table of the keys
    `fields` chooses, the structured items holding only those keys too."""
    if detail == "count":
        return count_text(page), page
    if detail == "full":
        return {k: v for k, v in page.model_dump(mode="json").items() if v is not None and v != []}, page
    from ..models import ItemSummary
    from .fields import parse_fields

    keys = summary_keys(parse_fields(fields))
    if len(keys) < len(SUMMARY_PATHS):
        items = [i.model_dump(mode="json") if isinstance(i, ItemSummary) else i for i in page.items]
        wanted = [
            {k: v for k, v in i.items() if k in keys or (k == "asset_roles" and "assets" in keys)}
            for i in items
        ]
        page = page.model_copy(update={"items": wanted})
    return search_answer(source, page, keys, fields is not None), page
