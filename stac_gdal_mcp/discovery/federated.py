"""One search over several catalogs: fan out, merge in sort order, one copy per acquisition.

    open_source(core, ["earth-search", "planetary-computer"], several=True).search(
        collections=["sentinel-2-l2a"], bbox=..., datetime=..., limit=20)  # "*": every catalog

(`sources.FederatedSource`, a `Source` as every catalog is.) Each catalog is searched exactly as
alone, by `discovery.search.search_page` through its own `Source` (its own
conformance decides what is sent, translated or applied client-side; its notes are kept),
concurrently on a bounded thread pool (`limits.max_concurrency`). Collection names go through
the alias table first (`aliases.py`), so `landsat-c2-l2` is `landsat-c2l2-sr` in USGS
LandsatLook.

Merge: the catalogs' result streams are merged in `sortby` order (default: `datetime`
descending; datetimes compared as instants, missing values last, ties in the order the
catalogs were asked). Every catalog is asked with the same sortby, so each stream is sorted
and the merge is a k-way merge of sorted streams.

Same acquisition: an item is dropped when an item of *another* catalog returned earlier is the
same acquisition (the rule is in `acquisitions.py`: platform, datetime within 5 s, tile or
footprint overlap); that earlier item lists it in `also_in` (catalog, collection, id, cloud
cover). Items of one catalog are never merged with each other. With a datetime sort, `also_in`
is complete: before an item is returned every other catalog is read past its datetime minus
the tolerance. With another sort, duplicates are still dropped (the cursor remembers what was
returned), but `also_in` lists only the copies already read at that point.

Cursor: one signed cursor (`catalogs.cursors`) holding, per catalog, where its stream stands
(its own cursor state of the page last started, or none for the first page, plus how many
items of that page were used), whether it is finished or failed, its `matched`; the checked
search; and the acquisitions already returned that may still have duplicates ahead (with a
datetime sort, only those within the tolerance of the merge front). A page re-reads at most
the used part of each catalog's current page; there are no gaps and no duplicates.

Failures: a catalog that fails (unavailable, HTTP errors after retries, unknown collection)
or has not answered within twice `network.timeout_s` is left out of this and later pages with
its error in `notes` and in `catalogs`; the others are returned. Only when every catalog fails
is the call an error.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..catalogs import ResultBudget
from ..catalogs import cursors as cur
from ..catalogs.bounds import ID_CHARS, cut
from ..catalogs.paging import CallScope
from ..catalogs.security import shown
from ..errors import CollectionNotFound, InvalidArgument, InvalidCursor, StacGdalMcpError
from ..models import Model, SearchResult
from ..stac import item_datetime
from . import aliases
from . import params as p
from .acquisitions import DEDUP_SECONDS, Facts, epoch, order, same_acquisition
from .fields import apply_fields, parse_fields
from .query import SEARCH_KEYWORDS, ItemSearch, Search, check_names, check_search
from .search import answer_budget, search_page
from .summaries import item_summary

if TYPE_CHECKING:
    from ..core import Core

MAX_SEEN = 300  # acquisitions remembered for de-duplication when the sort is not by datetime
DEFAULT_SORTBY = [{"field": "datetime", "direction": "desc"}]
_QUIET_NOTES = ("continuing from cursor", "no items matched", "limit ", "answers are capped")


class CatalogCount(Model):
    """One catalog's part in a federated search."""

    id: str
    matched: int | None = Field(None, description="items matching in this catalog, when it says")
    returned: int = Field(0, description="items of this page that came from this catalog")
    duplicates: int = Field(0, description="items of this catalog dropped as copies of returned ones")
    error: str | None = Field(None, description="why the catalog was left out")


class FederatedSearchResult(SearchResult):
    """A search result; `catalogs` is set when several catalogs were searched."""

    catalogs: list[CatalogCount] | None = Field(
        None, description="per catalog: matched, returned, duplicates dropped, error (federated search only)"
    )


# --------------------------------------------------------------------------- catalogs


def catalog_ids(core: Core, catalog: str | list[str] | None) -> list[str]:
    """The catalogs asked for: one id, a list, comma-separated ids, or "*" (all configured)."""
    configured = [c.id for c in core.settings.catalogs]
    if catalog is None:
        return [core.settings.catalog(None).id]
    value = p.as_list(catalog, "catalog")
    if not value:
        raise InvalidArgument('catalog must be a catalog id, a list of ids, or "*" for every catalog')
    out: list[str] = []
    for name in value:
        for cid in configured if name == "*" else [name]:
            if name != "*":
                core.catalogs.get(cid)  # unknown -> CatalogNotFound naming the configured ones
            if cid not in out:
                out.append(cid)
    return out


# --------------------------------------------------------------------------- streams


@dataclass
class Segment:
    """Items read from one catalog in one request: from `start` (state, None = search start)
    skipping `skip`, then `items`; `end` continues after them (None: nothing more)."""

    start: dict | None
    skip: int
    items: list[dict]
    end: dict | None
    used: int = 0


@dataclass
class Stream:
    index: int
    catalog: str
    collections: list[str] | None
    start: dict | None = None
    skip: int = 0
    done: bool = False
    error: str | None = None
    failure: Exception | None = None  # the error itself, on the page it happened
    matched: int | None = None
    sorts: bool = True
    skipped: bool = False  # the alias table says the catalog has none of the collections
    returned: int = 0
    duplicates: int = 0
    segments: list[Segment] = field(default_factory=list)

    def buffered(self) -> list[dict]:
        return [i for s in self.segments for i in s.items[s.used :]]

    def head(self) -> dict | None:
        for s in self.segments:
            if s.used < len(s.items):
                return s.items[s.used]
        return None

    def pop(self) -> dict:
        for s in self.segments:
            if s.used < len(s.items):
                s.used += 1
                return s.items[s.used - 1]
        raise IndexError("empty stream")

    def finished(self) -> bool:
        """Nothing more can be read (buffered items may remain)."""
        if self.error is not None:
            return True
        if self.segments:
            return self.segments[-1].end is None
        return self.done

    def read_position(self) -> tuple[dict | None, int]:
        """Where the next request starts (after everything buffered)."""
        if self.segments:
            return self.segments[-1].end, 0
        return self.start, self.skip

    def position(self) -> dict:
        """The stream's state for the cursor: the first item not yet used."""
        state: dict[str, Any] = {
            "collections": self.collections,
            "matched": self.matched,
            "error": self.error,
            "sorts": self.sorts,
            "skipped": self.skipped,
        }
        for s in self.segments:
            if s.used < len(s.items):
                return {**state, "start": s.start, "skip": s.skip + s.used, "done": False}
        if self.segments:
            end = self.segments[-1].end
            return {**state, "start": end, "skip": 0, "done": end is None}
        return {**state, "start": self.start, "skip": self.skip, "done": self.done}


def _short(name):
    return cut(name, ID_CHARS) if isinstance(name, str) else name


def _quiet(note: str) -> bool:
    return note.startswith(_QUIET_NOTES)


def _fetch(
    source, stream: Stream, search: Search, n: int, budget: ResultBudget
) -> tuple[Segment, list[str], int | None, bool]:
    """Read up to `n` more items of the catalog of `stream` (within `budget`) through the
    single-catalog search of its Source (`source.member`), signed where the catalog needs it."""
    core, catalog = source.core, source.member(stream.catalog)
    start, skip = stream.read_position()
    limit = max(1, min(skip + n, core.settings.limits.max_items))
    notes: list[str] = []
    if start is None:
        args, cursor = {**search.keywords(), "collections": stream.collections}, None
    else:
        args, cursor = {}, core.cursors.encode("items", stream.catalog, start)
    features, matched, next_cursor = search_page(core, catalog, limit, cursor, budget, args, notes)
    end = core.cursors.decode(next_cursor, "items", stream.catalog) if next_cursor else None
    items = [catalog.sign(f) for f in features[skip:]]
    sorts = bool(getattr(catalog.features, "sort", True))
    return Segment(start, skip, items, end), notes + budget.notes, matched, sorts


# --------------------------------------------------------------------------- the search


class _Federation:
    def __init__(self, source, streams: list[Stream], search: Search, seen: list[Facts], detail: str):
        core = self.core = source.core
        self.source = source
        self.detail = detail
        self.streams = streams
        self.search = search
        self.sortby = search.sortby or DEFAULT_SORTBY
        self.by_datetime = self.sortby[0]["field"] == "datetime"
        self.seen = seen
        self.notes: list[str] = []
        self.deadline_s = 2 * core.settings.network.timeout_s
        self.limit_s = core.settings.limits.job_timeout_s  # the whole run's, checked between reads
        self.ends = time.monotonic() + self.limit_s
        workers = min(len(streams), core.settings.limits.max_concurrency)
        self.pool = cf.ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="federated")
        self.call = CallScope()  # the catalogs' walks in the pool stop when the call ends

    def close(self) -> None:
        self.call.end()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def in_time(self) -> bool:
        """Whether the run may read on: its call not abandoned and limits.job_timeout_s not over."""
        self.call.check()
        if time.monotonic() <= self.ends:
            return True
        self._note(f"stopped after {self.limit_s:g} s (limits.job_timeout_s); next_cursor continues")
        return False

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def fill(self, wanted: dict[int, int]) -> None:
        """Read more of the streams `wanted` (index -> how many items), concurrently."""
        jobs = {}
        for index, n in wanted.items():
            stream = self.streams[index]
            if not stream.finished():
                budget = answer_budget(self.core.settings, self.detail)
                fetch = self.call.runs(_fetch)
                jobs[self.pool.submit(fetch, self.source, stream, self.search, n, budget)] = stream
        if not jobs:
            return
        done, pending = self._wait(jobs)
        for future in pending:
            stream = jobs[future]
            stream.error = f"no answer within {self.deadline_s:g} s (twice network.timeout_s)"
        for future in done:
            stream = jobs[future]
            try:
                segment, notes, matched, sorts = future.result()
            except (InvalidArgument, InvalidCursor):
                raise
            except StacGdalMcpError as exc:
                stream.error, stream.failure = str(exc), exc
                continue
            except Exception as exc:  # a bug in one catalog's path must not fail the others
                stream.error = f"{type(exc).__name__}: {exc}"
                continue
            for note in notes:
                if not _quiet(note):
                    self._note(
                        note if f"'{stream.catalog}'" in note else f"catalog '{stream.catalog}': {note}"
                    )
            if matched is not None:  # every page of an API says; a local catalog too
                stream.matched = matched
            stream.sorts = sorts
            if not segment.items and segment.end is not None:
                stream.error = "returned an empty page with a link to a next one; stopped reading it"
            stream.segments.append(segment)

    def _wait(self, jobs: dict) -> tuple[set, set]:
        """cf.wait on `jobs` up to twice network.timeout_s, asking every quarter second whether
        the call was abandoned (its catalogs' walks then stop at their next page)."""
        ends = time.monotonic() + self.deadline_s
        while True:
            done, pending = cf.wait(jobs, timeout=max(0.0, min(0.25, ends - time.monotonic())))
            if not pending or time.monotonic() >= ends:
                return done, pending
            self.call.check()

    def _window_ok(self, stream: Stream, t: float) -> bool:
        """Whether `stream` has been read past every possible copy of an item at time `t`."""
        if stream.finished():
            return True
        items = stream.buffered()
        if not items:
            return False
        last = epoch(item_datetime(items[-1]))
        if last is None:
            return True  # missing datetimes sort last: nothing timed follows
        if self.sortby[0]["direction"] == "desc":
            return last < t - DEDUP_SECONDS
        return last > t + DEDUP_SECONDS

    def _seen_match(self, facts: Facts) -> bool:
        return any(s.stream != facts.stream and same_acquisition(s, facts) for s in self.seen)

    def _prune(self, t: float | None) -> None:
        ordered = self.by_datetime and all(s.sorts for s in self.streams)
        if ordered and t is not None:
            if self.sortby[0]["direction"] == "desc":
                self.seen = [s for s in self.seen if s.t is None or s.t <= t + DEDUP_SECONDS]
            else:
                self.seen = [s for s in self.seen if s.t is None or s.t >= t - DEDUP_SECONDS]
        if len(self.seen) > MAX_SEEN:
            self.seen = self.seen[-MAX_SEEN:]
            self._note(
                f"de-duplication across pages remembers the last {MAX_SEEN} acquisitions only "
                "(sort by datetime for exact de-duplication)"
            )

    def run(self, limit: int, budget: ResultBudget | None = None) -> list[tuple[dict, Stream, list[dict]]]:
        """Up to `limit` items in merged order, each with its copies; stops early when the next
        item would not fit `budget` (detail="full")."""
        out: list[tuple[dict, Stream, list[dict]]] = []
        compare = functools.cmp_to_key(functools.partial(order, self.sortby))
        self.fill({s.index: limit for s in self.streams if s.head() is None})
        while len(out) < limit and self.in_time():
            empty = {s.index: max(limit - len(out), 1) + 1 for s in self.streams if s.head() is None}
            if empty:
                self.fill(empty)
            heads = [(s.head(), s.index) for s in self.streams if s.head() is not None]
            if not heads:
                break
            stream = self.streams[min(heads, key=compare)[1]]
            item = stream.head()
            facts = Facts.of(item, stream.index)
            if self._seen_match(facts):
                stream.pop()
                stream.duplicates += 1
                self._prune(facts.t)
                continue
            if budget is not None and not budget.take(item):
                break
            stream.pop()
            if self.by_datetime and facts.t is not None:
                for _ in range(1000):  # read the others past this item's time window
                    short = [s for s in self.streams if s is not stream and not self._window_ok(s, facts.t)]
                    if not short or not self.in_time():
                        break
                    self.fill({s.index: max(limit - len(out), 1) + 1 for s in short})
            also = []
            for other in self.streams:
                if other is stream:
                    continue
                for candidate in other.buffered():
                    if same_acquisition(facts, Facts.of(candidate, other.index)):
                        cloud = (candidate.get("properties") or {}).get("eo:cloud_cover")
                        also.append(
                            {
                                "catalog": other.catalog,
                                "collection": _short(candidate.get("collection")),
                                "id": _short(candidate.get("id")),
                                "cloud_cover": cloud,
                            }
                        )
            self.seen.append(facts)
            self._prune(facts.t)
            stream.returned += 1
            out.append((item, stream, also))
        return out


def _checked_streams(state: dict, ids: list[str]) -> tuple[list[Stream], Search, list[Facts], list[str]]:
    streams_state = cur.checked(state, "streams", list, optional=False)
    if len(streams_state) != len(ids):
        raise InvalidCursor("cursor is malformed: streams")
    streams = []
    for index, (cid, s) in enumerate(zip(ids, streams_state, strict=True)):
        if not isinstance(s, dict):
            raise InvalidCursor("cursor is malformed: streams")
        streams.append(
            Stream(
                index=index,
                catalog=cid,
                collections=cur.checked(s, "collections", list),
                start=cur.checked(s, "start", dict),
                skip=cur.page_skip(s.get("skip", 0)),
                done=bool(s.get("done")),
                error=cur.checked(s, "error", str),
                matched=cur.checked(s, "matched", int),
                sorts=bool(s.get("sorts", True)),
                skipped=bool(s.get("skipped")),
            )
        )
    raw = cur.checked(state, "search", dict, optional=False)
    try:
        search = Search(**raw)
    except TypeError:
        raise InvalidCursor("cursor is malformed: search") from None
    seen = [Facts.from_list(v) for v in cur.checked(state, "seen", list) or []]
    notes = [n for n in cur.checked(state, "notes", list) or [] if isinstance(n, str)]
    return streams, search, seen, notes


def federated_search(source, request: ItemSearch) -> FederatedSearchResult:
    """Search the catalogs of `source` (a `sources.FederatedSource`: their `ids`, each one's
    Source by `member(id)`) as one, as `request` says (`query.ItemSearch`); see the module
    docstring. Its `fields` (fields.py) are applied here to full items; detail="count": each
    catalog's count, added up."""
    core, catalogs, cursor, detail = source.core, source.ids, request.cursor, request.detail
    settings = core.settings
    label = "+".join(catalogs)
    notes: list[str] = []
    limit = p.page_limit(request.limit, detail, settings.limits, notes)
    chosen = parse_fields(request.fields)
    if detail == "count":
        return _count_each(source, request)
    if cursor:
        state = core.cursors.decode(cursor, "items", label)
        streams, search, seen, kept = _checked_streams(state, catalogs)
        notes.append(
            "continuing from cursor: search arguments other than catalog, limit and detail are taken from it"
        )
    else:
        streams, search, seen, kept = _new_streams(core, catalogs, request.keywords())
    notes += kept

    failed_before = {s.index for s in streams if s.error is not None}
    federation = _Federation(source, streams, search, seen, detail)
    budget = answer_budget(settings, detail)
    try:
        picked = federation.run(limit, budget)
    finally:
        federation.close()
    notes += federation.notes + _outcome_notes(streams, failed_before, picked)

    items: list[dict] = []
    for item, stream, also in picked:
        entry = apply_fields(item, chosen) if detail == "full" else item_summary(item).model_dump()
        items.append(budget.fit({**entry, "catalog": stream.catalog, "also_in": also}))
    if not items:
        notes.append(
            "no items matched; widen bbox/datetime, raise max_cloud_cover, or check the collection ids"
        )
    next_cursor = _next_cursor(core, label, streams, search, federation.seen, kept, notes)
    return FederatedSearchResult(
        items=items,
        returned=len(items),
        matched=None,
        next_cursor=next_cursor,
        notes=notes + budget.notes,
        catalogs=[
            CatalogCount(
                id=s.catalog, matched=s.matched, returned=s.returned, duplicates=s.duplicates, error=s.error
            )
            for s in streams
        ],
    )


def _new_streams(core: Core, catalogs: list[str], args: dict) -> tuple[list[Stream], Search, list, list[str]]:
    """The streams of a new search: one per catalog, its collections as that catalog names them
    (a catalog that has none of them is not asked)."""
    check_names(args, SEARCH_KEYWORDS)
    search = check_search(**args)
    search.sortby = search.sortby or DEFAULT_SORTBY
    streams, kept = [], []
    for index, cid in enumerate(catalogs):
        resolved = aliases.resolve(core.settings, cid, search.collections)
        kept += resolved.notes
        stream = Stream(index=index, catalog=cid, collections=resolved.collections)
        if resolved.nothing_to_ask:
            stream.done = stream.skipped = True
            stream.matched = 0
        streams.append(stream)
    if all(s.skipped for s in streams):
        raise CollectionNotFound(
            f"none of the catalogs {', '.join(catalogs)} has the collection(s) "
            f"{', '.join(shown(c, ID_CHARS) for c in (search.collections or [])[:5])} (collection_aliases)"
        )
    return streams, search, [], kept


def _outcome_notes(streams: list[Stream], failed_before: set[int], picked: list) -> list[str]:
    """Notes on the catalogs left out, the copies dropped and the catalogs that cannot sort;
    an error when every catalog asked failed."""
    notes = []
    for s in streams:
        if s.error is None:
            continue
        if s.index in failed_before:
            notes.append(f"catalog '{s.catalog}' was left out (it failed on an earlier page): {s.error}")
        else:
            notes.append(f"catalog '{s.catalog}' left out of this result: {s.error}")
    asked = [s for s in streams if not s.skipped]
    if not picked and all(s.error is not None for s in asked):
        errors = "; ".join(f"{s.catalog}: {s.error}" for s in asked)
        if all(isinstance(s.failure, CollectionNotFound) for s in asked):
            raise CollectionNotFound(f"no catalog has the collection(s) asked for: {errors}")
        raise StacGdalMcpError(f"every catalog failed: {errors}")
    dropped = sum(s.duplicates for s in streams)
    if dropped:
        notes.append(
            f"{dropped} item(s) were the same acquisition as an item already returned from another "
            "catalog and were left out; each returned item lists its copies in also_in"
        )
    unsorted = [s.catalog for s in streams if not s.sorts]
    if unsorted:
        notes.append(
            f"catalog(s) {', '.join(unsorted)} cannot sort: their items are merged in the order they "
            "come, so the merged order is not strictly sorted"
        )
    return notes


def _next_cursor(core: Core, label: str, streams, search: Search, seen, kept, notes: list[str]) -> str | None:
    """The cursor to the next page (None when every stream is done or failed), kept within the
    size a cursor may have by remembering fewer acquisitions."""
    positions = [s.position() for s in streams]
    if not any(not pos["done"] and s.error is None for pos, s in zip(positions, streams, strict=True)):
        return None
    state = {
        "streams": positions,
        "search": search.__dict__,
        "seen": [f.as_list() for f in seen],
        "notes": kept,
    }
    next_cursor = core.cursors.encode("items", label, state)
    if len(next_cursor) > cur.MAX_CURSOR_CHARS:  # keep it a cursor decode accepts
        notes.append("de-duplication across pages remembers fewer acquisitions (the cursor is full)")
    while len(next_cursor) > cur.MAX_CURSOR_CHARS and state["seen"]:
        state["seen"] = state["seen"][len(state["seen"]) // 2 + 1 :]
        next_cursor = core.cursors.encode("items", label, state)
    return next_cursor


def _count_each(source, request: ItemSearch) -> FederatedSearchResult:
    """detail="count" over several catalogs: each counted alone, the counts added up (an
    acquisition held by two catalogs counts twice)."""
    catalogs = source.ids
    counts = [source.member(cid).search(request) for cid in catalogs]
    kinds = {c.matched_is for c in counts}  # type: ignore[attr-defined]
    how = "at least" if "at least" in kinds else "exact" if kinds == {"exact"} else "the catalogs' counts"
    return FederatedSearchResult(
        items=[],
        returned=0,
        matched=sum(c.matched or 0 for c in counts),
        matched_is=how,
        notes=[n for c in counts for n in c.notes]
        + ["the sum of each catalog's count: an acquisition two catalogs hold counts twice"],
        catalogs=[CatalogCount(id=cid, matched=c.matched) for cid, c in zip(catalogs, counts)],
    )


__all__ = [
    "DEDUP_SECONDS",
    "CatalogCount",
    "FederatedSearchResult",
    "catalog_ids",
    "federated_search",
]
