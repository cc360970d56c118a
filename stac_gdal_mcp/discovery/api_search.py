"""A STAC API as a `Source` (`ApiSource`): one search request planned from the caller's
arguments and the API's conformance classes, its pages followed by their `next` links, its count
and its collections paged.

Each condition goes to the API when it can take it, is translated when an equivalent exists
(e.g. `max_cloud_cover` as CQL2 or as a query), and is otherwise applied here with `cql2`; every
translation or client-side step is reported in `notes`. A cursor's state holds the page request
(its `next` link, or the same page with a number of features to skip).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..catalogs import PageTrail, ResultBudget, cursors
from ..catalogs.item_shape import left_out_notes, stated_count, well_formed
from ..catalogs.paging import stop_if_abandoned
from ..errors import InvalidCursor, NotFound, NotSupported
from ..models import CollectionList, Queryable, Queryables
from ..stac import find_link, link_href
from . import params as p
from .fields import Fields
from .query import Search, and_all, cloud_cover_condition
from .source import AT_LEAST, CATALOG_COUNT, EXACT, Source
from .summaries import collection_summary

if TYPE_CHECKING:
    from ..catalogs import RemoteCatalog


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


def _matched(response: dict, notes: list[str]) -> int | None:
    """The count the API states (numberMatched, else context.matched) when it is one."""
    if response.get("numberMatched") is not None:
        return stated_count(response["numberMatched"], "numberMatched", notes)
    context = response.get("context")
    return (
        stated_count(context.get("matched"), "context.matched", notes) if isinstance(context, dict) else None
    )


@dataclass
class Walk:
    """The bounds of one run over an API's pages, and what it met: at most `max_pages` pages,
    none started after `deadline` (time.monotonic) or once the call was abandoned; the trail
    of pages and items read (loops), the items of the wrong shape left out (`left_out`) and
    the notes on what the API said (`notes`). `stopped` says why the run ended early."""

    max_pages: int
    deadline: float
    limit_s: float
    trail: PageTrail = field(default_factory=PageTrail)
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stopped: str | None = None

    @classmethod
    def of(cls, settings, max_pages: int) -> Walk:
        """A run bounded by `max_pages` and limits.job_timeout_s from now."""
        limit_s = settings.limits.job_timeout_s
        return cls(max_pages, time.monotonic() + limit_s, limit_s)

    def go_on(self, pages: int) -> bool:
        """Whether page number `pages` (0: the first) may be read; else why not, in `stopped`."""
        stop_if_abandoned()
        if pages >= self.max_pages:
            self.stopped = f"{self.max_pages} pages"
        elif pages and time.monotonic() > self.deadline:
            self.stopped = f"{self.limit_s:g} s (limits.job_timeout_s)"
        return self.stopped is None

    def all_notes(self, catalog_id: str) -> list[str]:
        """The notes of the run: the API's count ignored, the items left out, a paging loop."""
        loop = [self.trail.note] if self.trail.looped else []
        return [*self.notes, *left_out_notes(self.left_out, catalog_id), *loop]


def api_pages(
    catalog: RemoteCatalog,
    page: Page,
    limit: int,
    client_filter: dict | None,
    walk: Walk,
    budget: ResultBudget | None = None,
) -> tuple[list[dict], int | None, Page | None]:
    """Read pages from `page` until `limit` features are collected (or `budget` is spent, or
    `walk` ends: its page bound, its deadline, a `next` link back to a page already read, a
    page of items already returned).

    Returns (features, matched on the first page read, where the next call starts). Items of
    the wrong shape are left out (item_shape.py), noted on the walk once (on the page read from
    its start)."""
    expr = None
    if client_filter is not None:
        import cql2

        expr = cql2.Expr(client_filter)
    collected: list[dict] = []
    matched = None
    scanned = 0
    while walk.go_on(scanned):
        walk.trail.visit(page.href, page.method, page.body)
        response = catalog.request(page.href, page.method, page.body)
        if scanned == 0:
            matched = _matched(response, walk.notes)
        scanned += 1
        left_out: list[str] = []
        features = well_formed(response.get("features", []), left_out)
        walk.left_out += left_out if page.skip == 0 else []
        following = next_page(page, response)
        if following is not None and walk.trail.leads_back(following.href, following.method, following.body):
            following = None
        fresh = 0
        for index in range(page.skip, len(features)):
            feature = features[index]
            if not walk.trail.new_item(feature):
                continue
            fresh += 1
            if expr is not None and not expr.matches(feature):
                continue
            if budget is not None and not budget.take(feature):
                return collected, matched, Page(page.href, page.method, page.body, index)
            collected.append(feature)
            if len(collected) == limit:
                if index + 1 < len(features):
                    return collected, matched, Page(page.href, page.method, page.body, index + 1)
                return collected, matched, following
        if features and not fresh:
            walk.trail.stale_page()
            following = None
        if following is None or not (features or left_out):
            return collected, matched, None
        page = following
    return collected, matched, page


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


def _same_origin(href: str, base: str) -> bool:
    a, b = urlsplit(href), urlsplit(base)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


COUNT_PAGE = 1000  # items asked per page while counting (an API may send fewer)
COUNT_MAX = 100_000  # matches counted one by one at most
COUNT_PAGES = 200  # pages read at most while counting (an API that never ends its pages)
ID_ONLY = Fields(include=("id",), exclude=("links",))  # an API adds each item's links unless told


class ApiSource(Source):
    """A STAC API (catalogs.RemoteCatalog) read through its search, collections and queryables
    endpoints."""

    matched_is = CATALOG_COUNT
    catalog: RemoteCatalog

    def page(self, search, state, limit, budget, notes, fields=None):
        """One page of the API's search, planned or continued from a cursor; the plan's and the
        paging's notes go to `notes`."""
        cat = self.catalog
        if state is None:
            plan = plan_api_search(cat, search, page_size=limit, fields=fields)
            page, client_filter, plan_notes = first_page(cat, plan.body), plan.client_filter, plan.notes
            notes += plan_notes
        else:
            page = _page_from_cursor(state, cat)
            client_filter = cursors.checked(state, "client_filter", dict)
            plan_notes = cursors.checked(state, "notes", list) or []
        walk = Walk.of(cat.settings, MAX_SCAN_PAGES if client_filter is not None else limit + 1)
        features, matched, following = api_pages(cat, page, limit, client_filter, walk, budget)
        notes += walk.all_notes(cat.id)
        if client_filter is not None:
            matched = None  # the API's count does not include the client-side conditions
        if walk.stopped == f"{MAX_SCAN_PAGES} pages" and client_filter is not None:
            notes.append(
                f"stopped after reading {MAX_SCAN_PAGES} pages while filtering client-side; "
                "use next_cursor to keep scanning, or narrow the search"
            )
        elif walk.stopped:
            notes.append(f"stopped paging after {walk.stopped}; use next_cursor to continue")
        if not features and search is not None and search.collections:
            self.check_collections(search.collections)
        if following is None:
            return features, matched, None
        return (
            features,
            matched,
            {"page": following.__dict__, "client_filter": client_filter, "notes": plan_notes},
        )

    def count(self, search: Search, notes: list[str]) -> tuple[int, str]:
        """The API's count when it gives one and every condition was sent to it (one item asked
        first: stac-fastapi-pgstac's default gives none); else the matches paged here, in pages
        of COUNT_PAGE asking only their ids where the API conforms to the fields extension, and
        counted: exact up to COUNT_MAX, "at least" beyond."""
        cat = self.catalog
        plan = plan_api_search(cat, search, page_size=COUNT_PAGE, fields=ID_ONLY)
        notes += plan.notes
        if plan.client_filter is None:
            probe = Walk.of(cat.settings, 1)
            matched = api_pages(cat, first_page(cat, {**plan.body, "limit": 1}), 1, None, probe)[1]
            notes += probe.notes
            if matched is not None:
                return matched, CATALOG_COUNT
        walk = Walk.of(cat.settings, MAX_SCAN_PAGES if plan.client_filter is not None else COUNT_PAGES)
        found, _, following = api_pages(cat, first_page(cat, plan.body), COUNT_MAX, plan.client_filter, walk)
        walk.notes.clear()  # what it says of the API's count: the probe's, or unused (client filter)
        total, how = len(found), EXACT
        if following is not None:
            how = AT_LEAST
            limit = walk.stopped or f"{COUNT_MAX:,} matches"
            notes.append(f"counting stopped after {limit}: at least {total:,} items match")
        notes += walk.all_notes(cat.id)
        if not total and search.collections:
            self.check_collections(search.collections)
        return total, how

    def all_collections(self, notes: list[str] | None = None, max_pages: int = 50) -> list[dict]:
        """Every collection, its pages followed up to `max_pages` and limits.job_timeout_s; a list
        stopped there says so in `notes` ("at least N" read, and why), as a count does."""
        cat = self.catalog
        href, params, out, walk = (
            cat.link("data", "collections"),
            {"limit": 100},
            [],
            Walk.of(cat.settings, max_pages),
        )
        while walk.go_on(len(walk.trail.pages)):
            if walk.trail.leads_back(href, "GET", params):  # a next link back to a page already read
                break
            walk.trail.visit(href, "GET", params)
            response = cat.request(href, "GET", params)
            found = response.get("collections", [])
            out += (
                [c for c in found if isinstance(c, dict) and isinstance(c.get("id"), str)]
                if isinstance(found, list)
                else []
            )
            href = link_href(response, "next")
            if not href:
                break
            params = None
        if notes is not None and walk.stopped:
            notes.append(
                f"listing collections stopped after {walk.stopped}: at least {len(out)} collections read"
            )
        return out

    def collection_ids(self) -> list[str]:
        return [c["id"] for c in self.all_collections()]

    def collections_page(self, q, limit, state, notes) -> CollectionList:
        """One page of the API's collections; the whole list filtered here when the API lacks
        free-text collection search and `q` is given."""
        cat = self.catalog
        if not cat.features.free_text and q:
            notes.append(f"catalog '{cat.id}' lacks free-text collection search: q applied client-side")
            return super().collections_page(q, limit, state, notes)
        href = (
            cursors.checked(state, "href", str, optional=False) if state else cat.link("data", "collections")
        )
        if urlsplit(href).netloc != urlsplit(cat.url).netloc:
            raise InvalidCursor(f"cursor does not point into catalog '{cat.id}'")
        params = None if state else {"limit": limit, **({"q": q} if q else {})}
        response = cat.request(href, "GET", params)
        collections = response.get("collections", [])
        following = link_href(response, "next")
        return CollectionList(
            collections=[collection_summary(c) for c in collections],
            returned=len(collections),
            matched=stated_count(response.get("numberMatched"), "numberMatched", notes),
            next_cursor=self.core.cursors.encode("collections", cat.id, {"href": following})
            if following
            else None,
            notes=notes,
        )

    def queryables(self, collection_id: str | None) -> Queryables:
        """The API's queryables document (of a collection, or of the whole catalog)."""
        cat = self.catalog
        if collection_id is not None:
            cat.collection(collection_id)
            href = f"{cat.collection_url(collection_id)}/queryables"
        else:
            href = cat.link("http://www.opengis.net/def/rel/ogc/1.0/queryables", "queryables")
        try:
            schema = cat.request(href)
        except NotFound:
            return Queryables(
                collection_id=collection_id,
                queryables=[],
                notes=[
                    f"catalog '{cat.id}' publishes no queryables; it may not support the filter extension"
                ],
            )
        return Queryables(collection_id=collection_id, queryables=_queryables_from_schema(schema))


def _queryables_from_schema(schema: dict) -> list[Queryable]:
    out = []
    for name, spec in sorted((schema.get("properties") or {}).items()):
        kind = spec.get("type")
        if kind is None and "$ref" in spec:
            kind = spec["$ref"].rsplit("/", 1)[-1]
        if kind is None and spec.get("format"):
            kind = spec["format"]
        out.append(
            Queryable(
                name=name,
                type=kind if isinstance(kind, str) else None,
                title=spec.get("title"),
                description=(spec.get("description") or None) and spec["description"][:200],
                enum=spec.get("enum"),
            )
        )
    return out
