"""Paging helpers every listing shares: the trail of pages one run has read (loops, repeated
items), and the end of a run whose caller is gone. The byte budget of one answer is in
bounds.py."""

from __future__ import annotations

import json
import threading
from contextvars import ContextVar


def prepared_url(url: str, params: dict | None) -> str:
    """`url` with `params` encoded the way requests sends them."""
    if not params:
        return url
    from requests.models import PreparedRequest

    prepared = PreparedRequest()
    prepared.prepare_url(url, params)
    return prepared.url


class PageTrail:
    """The pages one paging run has read and the items they gave. A `next` link back to a page
    already read, or a page with no item not seen before, is a loop (a broken or hostile API):
    paging stops there, with `note`, instead of returning the same items again."""

    note = (
        "the catalog's next link led back to pages already read (a paging loop); stopped there, "
        "without repeating items"
    )

    def __init__(self) -> None:
        self.pages: set[str] = set()
        self._items: set[tuple] = set()
        self.looped = False

    @staticmethod
    def _key(href: str, method: str, body: dict | None) -> str:
        if str(method).upper() == "GET":
            return "GET " + prepared_url(href, body)
        return f"{method} {href} " + json.dumps(body, sort_keys=True, default=str)

    def visit(self, href: str, method: str, body: dict | None) -> None:
        self.pages.add(self._key(href, method, body))

    def leads_back(self, href: str, method: str, body: dict | None) -> bool:
        """Whether a `next` page is one already read; marks the loop."""
        if self._key(href, method, body) in self.pages:
            self.looped = True
            return True
        return False

    def new_item(self, feature: dict) -> bool:
        """False for an item already returned in this run (same collection and id)."""
        key = (feature.get("collection"), feature.get("id"))
        if key[1] is None:
            return True
        if key in self._items:
            return False
        self._items.add(key)
        return True

    def stale_page(self) -> None:
        """A page that brought no new item: a loop by another name."""
        self.looped = True


class CallEnded(Exception):
    """The call a pool thread worked for has ended (its client left, or it answered): the
    thread's run stops at its next page."""


_ENDED: ContextVar[threading.Event | None] = ContextVar("call_ended", default=None)


def stop_if_abandoned() -> None:
    """Raise the cancellation of the request this thread works for once it was cancelled (its
    client gave up or left), so that a run over a remote thing stops at its next page. The
    server runs a call in an AnyIO worker thread, which can ask its host task; a pool thread
    working for it (`CallScope.runs`) raises CallEnded once the call ended; any other thread (a
    notebook's) goes on."""
    ended = _ENDED.get()
    if ended is not None and ended.is_set():
        raise CallEnded("the call this work was for has ended")
    from anyio.from_thread import check_cancelled

    try:
        check_cancelled()
    except RuntimeError:  # not an AnyIO worker thread (NoEventLoopError)
        pass


class CallScope:
    """One call's end carried to the pool threads working for it, whose own thread AnyIO does
    not know: `runs(fn)` is `fn` as such a thread runs it (its stop_if_abandoned sees the end),
    `check()` in the call's thread raises its cancellation and ends the pool threads' runs,
    `end()` ends them (the call answered or failed: nobody reads what they would bring)."""

    def __init__(self) -> None:
        self._ended = threading.Event()

    def runs(self, fn):
        def run(*args, **kwargs):
            token = _ENDED.set(self._ended)
            try:
                return fn(*args, **kwargs)
            finally:
                _ENDED.reset(token)

        return run

    def check(self) -> None:
        try:
            stop_if_abandoned()
        except BaseException:
            self._ended.set()
            raise

    def end(self) -> None:
        self._ended.set()
