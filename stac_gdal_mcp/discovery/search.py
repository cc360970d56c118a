"""Item search of one catalog, with opaque cursors: `search_items` (what `Source.search` does
for one catalog) checks the arguments, reads one page through the catalog's `Source` (source.py:
how an API, a local catalog or stac-geoparquet files are searched) and answers summaries or full
items within the answer's byte budget.

A cursor (signed, see `catalogs/cursors.py`) holds where the next page starts, as the source
says (for an API, the page request; for a local catalog or files, the checked search and an
offset). Passing it back continues the same search with no gaps and no duplicates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..catalogs import ResultBudget, cursors
from ..catalogs.bounds import ID_CHARS
from ..catalogs.security import shown
from ..errors import CollectionNotFound
from ..models import SearchResult
from . import aliases
from . import params as p
from .fields import Fields, apply_fields, parse_fields
from .query import SEARCH_KEYWORDS, ItemSearch, Search, check_names, check_search
from .summaries import item_summary
from .table import api_fields, summary_keys

if TYPE_CHECKING:
    from ..core import Core


def search_items(cat, request: ItemSearch, bounded: bool = True) -> SearchResult:
    """Search the catalog `cat` (its `source.Source`) as `request` says (`query.ItemSearch`);
    see the module docstring for how conditions and cursors work. `bounded=False`: the page is
    not held to limits.max_result_bytes (items an operation reads, which are never sent as an
    answer; the budget would page them finer and cut an item larger than it). Its `fields`
    (fields.py): the parts of full items, or (summaries) the summary keys, the catalog is asked
    for and answered with. (detail="count", only how many items match, is count.py's.)"""
    core, detail = cat.core, request.detail
    notes: list[str] = []
    limit = p.page_limit(request.limit, detail, core.settings.limits, notes)
    chosen = parse_fields(request.fields)
    wanted = chosen if detail == "full" else (chosen and api_fields(summary_keys(chosen)))
    budget = answer_budget(core.settings, detail) if bounded else ResultBudget(None)
    page = search_page(core, cat, limit, request.cursor, budget, request.keywords(), notes, wanted)
    features, matched, next_cursor = page
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
    """One page of catalog `cat`'s items (its `source.Source`) as the catalog gives them (up to `limit`, within
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

    features, matched, next_state = cat.page(search, state, limit, budget, notes, fields)
    if not features:
        notes += cat.empty_notes(search)
    return features, matched, core.cursors.encode("items", cat.id, next_state) if next_state else None


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
