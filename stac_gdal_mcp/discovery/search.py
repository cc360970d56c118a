"""Item search across remote STAC APIs and local catalogs, with opaque cursors.

One request is planned from the caller's arguments and the catalog's conformance classes:
each condition goes to the API when it can take it, is translated when an equivalent exists
(e.g. `max_cloud_cover` as CQL2 or as a query), and is otherwise applied here with `cql2`.
Every translation or client-side step is reported in `notes`; nothing is dropped silently.

A cursor (signed, see `catalogs/cursors.py`) holds where the next page starts: for an API, the page
request (its `next` link, or the same page with a number of features to skip); for a local
catalog, the checked search and an offset. Passing it back continues the same search with no
gaps and no duplicates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Unpack
from urllib.parse import urlsplit

from ..catalogs import LocalCatalog, PageTrail, RemoteCatalog, ResultBudget, cursors
from ..catalogs.bounds import ID_CHARS
from ..catalogs.geoparquet import GeoparquetCatalog
from ..catalogs.security import shown
from ..errors import CollectionNotFound, InvalidArgument, InvalidCursor, NotSupported
from ..models import SearchResult
from ..stac import find_link
from . import aliases
from . import params as p
from .absent import absent_note
from .fields import Fields, apply_fields, parse_fields
from .local import local_search
from .parquet_search import parquet_page
from .query import (
    SEARCH_KEYWORDS,
    Search,
    SearchKeywords,
    and_all,
    check_names,
    check_search,
    cloud_cover_condition,
)
from .summaries import item_summary
from .table import api_fields, summary_keys

if TYPE_CHECKING:
    from ..core import Core

# How many pages may be read to fill one answer when conditions are applied client-side.
MAX_SCAN_PAGES = 50


@dataclass
class Page:
    """Where a page of an API search is requested, and how many of its features were used."""

    href: str
    method: str = "GET"
    body: dict | None = None
    skip: int = 0


@dataclass
class Plan:
    body: dict
    client_filter: dict | None = None
    notes: list[str] = field(default_factory=list)


def plan_api_search(
    catalog: RemoteCatalog, search: Search, page_size: int, fields: Fields | None = None
) -> Plan:
    """Decide what the API is sent and what is applied here, from its conformance classes.
    `fields` (the parts of each item wanted) is sent when the API conforms to the fields
    extension and nothing is applied here (a client-side condition reads the whole item)."""
    feats = catalog.features
    if not feats.item_search:
        raise NotSupported(
            f"catalog '{catalog.id}' does not declare STAC API item search; browse its collections instead"
        )
    body: dict[str, Any] = {"limit": page_size}
    for key in ("collections", "bbox", "intersects", "datetime", "ids"):
        value = getattr(search, key)
        if value is not None:
            body[key] = value
    notes: list[str] = []
    server_side: list[dict] = []
    client_side: list[dict] = []
    has_filter = feats.filter_cql2_json or feats.filter_cql2_text

    if search.query:
        if feats.query:
            body["query"] = dict(search.query)
        elif has_filter:
            server_side.append(p.query_as_cql2(search.query))
            notes.append(f"catalog '{catalog.id}' lacks the query extension: query sent as a CQL2 filter")
        else:
            client_side.append(p.query_as_cql2(search.query))
            notes.append(
                f"catalog '{catalog.id}' supports neither query nor filter: query applied client-side"
            )
    if search.filter:
        if has_filter:
            server_side.append(search.filter)
        else:
            client_side.append(search.filter)
            notes.append(
                f"catalog '{catalog.id}' lacks the filter extension: filter applied client-side with cql2"
            )
    if search.max_cloud_cover is not None:
        if has_filter:
            server_side.append(cloud_cover_condition(search.max_cloud_cover))
        elif feats.query:
            ops = body.setdefault("query", {}).setdefault("eo:cloud_cover", {})
            ops["lte"] = min(ops.get("lte", 100.0), search.max_cloud_cover)
            notes.append(
                f"max_cloud_cover sent as a query (catalog '{catalog.id}' lacks the filter extension)"
            )
        else:
            client_side.append(cloud_cover_condition(search.max_cloud_cover))
            notes.append(
                f"max_cloud_cover applied client-side (catalog '{catalog.id}' has neither filter nor query)"
            )
    condition = and_all(server_side)
    if condition is not None:
        if feats.filter_cql2_json:
            body["filter"], body["filter-lang"] = condition, "cql2-json"
        else:
            import cql2

            body["filter"], body["filter-lang"] = cql2.Expr(condition).to_text(), "cql2-text"
    if search.sortby:
        if feats.sort:
            body["sortby"] = search.sortby
        else:
            notes.append(
                f"catalog '{catalog.id}' cannot sort (no sort extension): sortby was not applied, "
                "results are in the API's own order"
            )
    if fields is not None and feats.fields and not client_side:
        body["fields"] = fields.as_api()
    return Plan(body=body, client_filter=and_all(client_side), notes=notes)


def first_page(catalog: RemoteCatalog, body: dict) -> Page:
    href = catalog.link("search", "search")
    if find_link(catalog.root, "search", method="POST"):
        return Page(href=href, method="POST", body=body)
    return Page(href=href, method="GET", body=_as_get_params(body))


def _as_get_params(body: dict) -> dict:
    out = {}
    for key, value in body.items():
        if key == "fields":  # `id,collection,properties.datetime,-links`
            out[key] = ",".join([*value["include"], *(f"-{name}" for name in value["exclude"])])
        elif key in ("collections", "ids"):
            out[key] = ",".join(value)
        elif key == "bbox":
            out[key] = ",".join(str(v) for v in value)
        elif key == "sortby":
            out[key] = ",".join(("-" if s["direction"] == "desc" else "+") + s["field"] for s in value)
        elif (key == "filter" and isinstance(value, dict)) or isinstance(value, (dict, list)):
            out[key] = json.dumps(value)
        else:
            out[key] = value
    return out


def next_page(page: Page, response: dict) -> Page | None:
    link = find_link(response, "next")
    if link is None:
        return None
    method = str(link.get("method", "GET")).upper()
    body = link.get("body")
    if method == "POST" and link.get("merge") and page.body:
        body = {**page.body, **(body or {})}
    return Page(href=link["href"], method=method, body=body if method == "POST" else None)


def _matched(response: dict) -> int | None:
    if response.get("numberMatched") is not None:
        return int(response["numberMatched"])
    context = response.get("context") or {}
    return context.get("matched")


def api_pages(
    catalog: RemoteCatalog,
    page: Page,
    limit: int,
    client_filter: dict | None,
    trail: PageTrail | None = None,
    budget: ResultBudget | None = None,
) -> tuple[list[dict], int | None, Page | None, bool]:
    """Read pages from `page` until `limit` features are collected (or `budget` is spent).

    Returns (features, matched on the first page read, where the next call starts, whether the
    scan stopped early because of the client-side page budget). A `next` link back to a page
    already read, or a page of items already returned, ends the run (`trail.looped`).
    """
    trail = trail if trail is not None else PageTrail()
    expr = None
    if client_filter is not None:
        import cql2

        expr = cql2.Expr(client_filter)
    collected: list[dict] = []
    matched = None
    for scanned in range(MAX_SCAN_PAGES if expr is not None else 10**9):
        trail.visit(page.href, page.method, page.body)
        response = catalog.request(page.href, page.method, page.body)
        if scanned == 0:
            matched = _matched(response)
        features = response.get("features", [])
        following = next_page(page, response)
        if following is not None and trail.leads_back(following.href, following.method, following.body):
            following = None
        fresh = 0
        for index in range(page.skip, len(features)):
            feature = features[index]
            if not trail.new_item(feature):
                continue
            fresh += 1
            if expr is not None and not expr.matches(feature):
                continue
            if budget is not None and not budget.take(feature):
                return collected, matched, Page(page.href, page.method, page.body, index), False
            collected.append(feature)
            if len(collected) == limit:
                if index + 1 < len(features):
                    return collected, matched, Page(page.href, page.method, page.body, index + 1), False
                return collected, matched, following, False
        if features and not fresh:
            trail.stale_page()
            following = None
        if following is None or not features:
            return collected, matched, None, False
        page = following
    return collected, matched, page, True


def _page_from_cursor(state: dict, cat: RemoteCatalog) -> Page:
    """The page a (signed) cursor continues from, every field checked."""
    page = cursors.checked(state, "page", dict, optional=False)
    href = cursors.checked(page, "href", str, optional=False)
    method = cursors.checked(page, "method", str, optional=False)
    if method not in ("GET", "POST"):
        raise InvalidCursor(f"cursor is malformed: method {method!r}")
    if not _same_origin(href, cat.url):
        raise InvalidCursor(f"cursor does not point into catalog '{cat.id}'")
    body = cursors.checked(page, "body", dict)
    return Page(href=href, method=method, body=body, skip=cursors.page_skip(page.get("skip", 0)))


def _search_from_cursor(state: dict) -> Search:
    search = cursors.checked(state, "search", dict, optional=False)
    try:
        return Search(**search)
    except TypeError:
        raise InvalidCursor("cursor is malformed: search") from None


def _same_origin(href: str, base: str) -> bool:
    a, b = urlsplit(href), urlsplit(base)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


def search_items(
    core: Core,
    *,
    catalog: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    detail: Literal["summary", "full", "count"] = "summary",
    bounded: bool = True,
    fields: Any = None,
    **args: Unpack[SearchKeywords],
) -> SearchResult:
    """Search a catalog with the item search arguments `args` (`query.SearchKeywords`); see the
    module docstring for how conditions and cursors work. `bounded=False`: the page is not held
    to limits.max_result_bytes (items an operation reads, which are never sent as an answer;
    the budget would page them finer and cut an item larger than it). `fields` (fields.py): the
    parts of full items, or (summaries) the summary keys, the catalog is asked for and answered
    with. (detail="count", only how many items match, is count.py's.)"""
    cat = core.catalogs.get(catalog)
    notes: list[str] = []
    limit = p.page_limit(limit, detail, core.settings.limits, notes)
    chosen = parse_fields(fields)
    if detail == "count":
        raise InvalidArgument("detail='count' is count.count_items' (Session.search dispatches it)")
    wanted = chosen if detail == "full" else (chosen and api_fields(summary_keys(chosen)))
    budget = answer_budget(core.settings, detail) if bounded else ResultBudget(None)
    features, matched, next_cursor = search_page(core, cat, limit, cursor, budget, args, notes, wanted)
    if detail == "full":
        items = [budget.fit(cat.sign(apply_fields(f, chosen))) for f in features]
    else:
        items = [item_summary(f) for f in features]
    return SearchResult(
        items=items, returned=len(items), matched=matched, next_cursor=next_cursor, notes=notes + budget.notes
    )


def search_page(
    core: Core,
    cat,
    limit: int,
    cursor: str | None,
    budget: ResultBudget,
    args: dict,
    notes: list[str],
    fields: Fields | None = None,
) -> tuple[list[dict], int | None, str | None]:
    """One page of catalog `cat`'s items as the catalog gives them (up to `limit`, within
    `budget`; an API conforming to the fields extension sends only `fields`): (features,
    matched, next cursor). Notes on what was done go to `notes`."""
    state = core.cursors.decode(cursor, "items", cat.id) if cursor else None
    search = None
    if state is not None:
        notes.append(
            "continuing from cursor: search arguments other than catalog, limit and detail are taken from it"
        )
        notes += cursors.checked(state, "notes", list) or []
    else:
        search = checked_search(core.settings, cat.id, args, notes)

    if isinstance(cat, GeoparquetCatalog):  # SQL over stac-geoparquet files (parquet_search.py)
        search = _search_from_cursor(state) if state is not None else search
        features, matched, next_state = parquet_page(cat, search, state, limit, budget, fields)
    elif isinstance(cat, LocalCatalog):
        features, matched, next_state = _local_page(cat, search, state, limit, budget)
    else:
        features, matched, next_state = _api_page(cat, search, state, limit, budget, notes, fields)
    if not features:
        notes.append(
            "no items matched; widen bbox/datetime, raise max_cloud_cover, or check the collection ids"
            + p.latitude_first_hint(search.bbox if search is not None else None)
        )
        absent = absent_note(search, lambda cid: _sample(core, cat, cid)) if search is not None else None
        notes += [absent] if absent else []
    return features, matched, core.cursors.encode("items", cat.id, next_state) if next_state else None


def _sample(core: Core, cat, collection_id: str) -> dict | None:
    """One item of collection `collection_id` of catalog `cat` (None: it has none)."""
    search, budget = Search(collections=[collection_id]), answer_budget(core.settings, "full")
    if isinstance(cat, GeoparquetCatalog):
        features = parquet_page(cat, search, None, 1, budget)[0]
    elif isinstance(cat, LocalCatalog):
        features = _local_page(cat, search, None, 1, budget)[0]
    else:
        features = _api_page(cat, search, None, 1, budget, [])[0]
    return features[0] if features else None


def checked_search(settings, catalog_id: str, args: dict, notes: list[str]) -> Search:
    """The search arguments `args` checked, their collections as catalog `catalog_id` names them
    (aliases.py; what that did goes to `notes`)."""
    check_names(args, SEARCH_KEYWORDS)
    if args.get("collections") is not None:
        args = {
            **args,
            "collections": _resolved_collections(settings, catalog_id, args["collections"], notes),
        }
    return check_search(**args)


def answer_budget(settings, detail: str) -> ResultBudget:
    """The byte budget of one answer of items (limits.max_result_bytes), counting what is sent:
    the full items, or their summaries."""
    full = detail == "full"
    shape = None if full else (lambda feature: item_summary(feature).model_dump(mode="json"))
    return ResultBudget(settings.limits.max_result_bytes, shape=shape, full=full)


def _resolved_collections(settings, catalog_id: str, collections, notes: list[str]) -> list[str]:
    """Canonical collection names as catalog `catalog_id` names them (aliases.py)."""
    resolved = aliases.resolve(settings, catalog_id, p.as_list(collections, "collections"))
    if resolved.nothing_to_ask:
        where = list(aliases.alias_table(settings).get(resolved.left_out[0], {}))
        raise CollectionNotFound(
            f"collection {shown(resolved.left_out[0], ID_CHARS)} is not in catalog '{catalog_id}'; "
            f"collection_aliases has it in: {', '.join(where)}"
        )
    notes += resolved.notes
    return resolved.collections


def _local_page(
    cat: LocalCatalog, search: Search | None, state: dict | None, limit: int, budget: ResultBudget
):
    """One page of a local catalog, searched in memory: (features, matched, next cursor state)."""
    if state is not None:
        search = _search_from_cursor(state)
    _check_local_collections(cat, search)
    matches = local_search(cat.items, search)
    offset = cursors.offset(state, total=len(matches)) if state is not None else 0
    features = []
    for feature in matches[offset : offset + limit]:
        if not budget.take(feature):
            break
        features.append(feature)
    end = offset + len(features)
    next_state = {"search": search.__dict__, "offset": end} if end < len(matches) else None
    return features, len(matches), next_state


def _api_page(
    cat: RemoteCatalog,
    search: Search | None,
    state: dict | None,
    limit: int,
    budget: ResultBudget,
    notes: list[str],
    fields: Fields | None = None,
):
    """One page of a STAC API search, planned or continued from a cursor: (features, matched,
    next cursor state); the plan's and the paging's notes go to `notes`."""
    if state is None:
        plan = plan_api_search(cat, search, page_size=limit, fields=fields)
        page, client_filter, plan_notes = first_page(cat, plan.body), plan.client_filter, plan.notes
        notes += plan_notes
    else:
        page = _page_from_cursor(state, cat)
        client_filter = cursors.checked(state, "client_filter", dict)
        plan_notes = cursors.checked(state, "notes", list) or []
    trail = PageTrail()
    features, matched, following, stopped = api_pages(cat, page, limit, client_filter, trail, budget)
    if trail.looped:
        notes.append(trail.note)
    if client_filter is not None:
        matched = None  # the API's count does not include the client-side conditions
    if stopped:
        notes.append(
            f"stopped after reading {MAX_SCAN_PAGES} pages while filtering client-side; "
            "use next_cursor to keep scanning, or narrow the search"
        )
    if not features and search is not None and search.collections:
        _check_api_collections(cat, search.collections)
    if following is None:
        return features, matched, None
    return (
        features,
        matched,
        {"page": following.__dict__, "client_filter": client_filter, "notes": plan_notes},
    )


def _did_you_mean(name: str, choices: list[str]) -> str:
    import difflib

    if len(name) > ID_CHARS:
        return ""
    close = difflib.get_close_matches(name, choices, n=3)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _check_local_collections(cat: LocalCatalog, search: Search) -> None:
    for cid in search.collections or []:
        if cid not in cat.collections:
            raise CollectionNotFound(
                f"collection {shown(cid, ID_CHARS)} not found in catalog '{cat.id}'"
                + _did_you_mean(cid, list(cat.collections))
            )


def _check_api_collections(cat: RemoteCatalog, collection_ids: list[str]) -> None:
    """An empty answer for an unknown collection must say so, not look like 'no items'."""
    from .collections import all_collection_ids

    known = all_collection_ids(cat)
    for cid in collection_ids:
        if cid not in known:
            raise CollectionNotFound(
                f"collection {shown(cid, ID_CHARS)} not found in catalog '{cat.id}'{_did_you_mean(cid, known)}"
            )
