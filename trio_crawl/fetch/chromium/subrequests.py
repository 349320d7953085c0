"""The browser's own requests, sent by the crawl.

Chromium never sends a request itself: the page's document is answered with
the crawler's response (``life``), and every other request the crawl's rules
allow (``policy``, robots.txt) comes here.

Rules:

1. A GET is fetched by the crawl's fetcher (``inner``: its identity, proxy,
   size limits and deadlines), once its host's turn has come under the
   crawl's politeness (``Politeness.turn``: ``--rate``, Crawl-delay,
   ``--random-wait`` and ``--per-host-concurrency``, counted together with
   the crawler's own requests; the Crawl-delay of a host that only the
   browser reaches applies once its robots.txt is read, ``robots_read``),
   and the browser gets the response (``Fetch.fulfillRequest``;
   ``session`` does that). A failed fetch fails the browser's request. A
   redirect is passed on as it came: the browser asks for its target,
   which is judged again.
2. One fetch per URL per crawl: answers are kept (``store``); a URL already
   being fetched is waited for, not asked again. The crawler's own fetches
   go through the same store (``for_crawler``): a requisite the browser
   loaded is not fetched again when the crawler wants it, and a stylesheet
   the crawler fetched answers the browser on the next page.
3. Other methods (a script's POST, a CORS preflight) carry what the crawl's
   fetcher cannot send: they wait for their host's turn like a GET, then
   Chromium sends them (``Fetch.continueRequest``). Their slot is free when
   their response's head comes (the Fetch domain's response stage), or when
   the render ends.
4. The browser's request headers are passed on, except those the fetcher
   owns (``Host``, connection headers, content codings, ``User-Agent``,
   ``Cookie``: the crawl's jar decides, and gets the browser's cookies
   first, ``session``). A
   request for a byte range is fetched but its answer is not kept.
5. The crawler never waits for a browser fetch that still waits for its
   turn (that turn may wait for the very slot the crawler holds): it waits
   only for one already on the network, else fetches for itself.
6. A browser GET that fails as the crawl would retry (a network error of a
   retried kind, 429, 502, 503, 504) is tried again as the crawl retries
   (``retry``: ``1 + --retries`` attempts, with its backoff and
   ``Retry-After``), each attempt in its own turn.
7. Every answer the crawl fetched for the browser goes to ``archive``
   (``--warc``: its response and request records, and a ``metadata`` record
   naming the page that asked for it, ``via``), each attempt once; an
   answer from the store was archived when it was fetched.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

import trio

from ...core.http import is_html_content_type
from ...core.models import FetchResult
from ...core.retry import RetryPolicy
from ...errors import FetchError
from ..base import Fetcher
from .store import ResponseStore, store_key

__all__ = ["Archive", "BrowserRequests", "NoTurn", "Politeness", "forwarded_headers"]

#: Where the browser's answers are archived (rule 7): ``(url, result, via)``,
#: ``via`` the page that asked (None: not known).
Archive = Callable[[str, FetchResult, "str | None"], object]

#: Request headers the crawl's fetcher sets itself (rule 4).
_OWN_HEADERS = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "upgrade",
        "content-length",
        "accept-encoding",
        "user-agent",
        "cookie",  # the crawl's jar sends its own (``jar``)
    }
)


class NoTurn(Exception):
    """The crawl is stopping: the request will get no turn."""


class Politeness(Protocol):
    """The crawl's per-host politeness, as the browser's requests meet it
    (``engine/render.py`` gives the crawl's schedule this face)."""

    def turn(self, url: str) -> AbstractAsyncContextManager[None]:
        """A block entered when a request to ``url``'s host may start (a
        checkpoint; waits behind the host's rate and concurrency) and whose
        end frees the host's slot. Raises ``NoTurn`` when the crawl stops."""
        ...

    def request_over(self, url: str) -> None:
        """The crawler's own request for ``url`` is over while its page is
        still being read (rendered): its host's slot is free from now."""
        ...

    def robots_read(self, url: str, crawl_delay: float | None) -> None:
        """robots.txt allowed a request for ``url``: its host's Crawl-delay
        applies (if the crawl has not applied it yet)."""
        ...


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The browser's request headers the fetcher sends on (rule 4)."""
    kept = {name: value for name, value in headers.items() if name.lower() not in _OWN_HEADERS}
    return kept or None


@dataclass(eq=False)
class _Flight:
    """A fetch of one URL in progress; ``sending`` once it is on the network."""

    done: trio.Event = field(default_factory=trio.Event)
    sending: bool = False


class BrowserRequests:
    """Fetches for the browser and the crawler of one rendering fetcher
    (rules 1-5). ``politeness`` is attached by the crawl (None: no limits,
    as for a fetcher used on its own); ``keep_crawler`` says whether the
    crawler's own ``any_body`` fetches (requisites) are kept for the browser.
    """

    def __init__(
        self,
        inner: Fetcher,
        store: ResponseStore,
        *,
        keep_crawler: bool,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.inner = inner
        self.store = store
        self.keep_crawler = keep_crawler
        self.politeness: Politeness | None = None
        #: The crawl's retries (rule 6); None: one attempt.
        self.retry = retry or RetryPolicy(retries=0)
        self._rng = random.Random()
        #: The crawl's archive (rule 7), attached by a crawl with ``--warc``.
        self.archive: Archive | None = None
        self._flights: dict[str, _Flight] = {}
        #: Browser requests the crawl fetched, answered from the store (for
        #: the browser or the crawler), held and sent by the browser, failed.
        self.fetched = 0
        self.reused = 0
        self.sent = 0
        self.failed = 0
        #: Attempts made again (rule 6).
        self.retried = 0

    def __repr__(self) -> str:
        return (
            f"<BrowserRequests fetched={self.fetched} reused={self.reused} sent={self.sent}"
            f" failed={self.failed} in_flight={len(self._flights)} {self.store!r}>"
        )

    @asynccontextmanager
    async def turn(self, url: str) -> AsyncIterator[None]:
        """The host's turn for a request to ``url`` (no wait without politeness)."""
        if self.politeness is None:
            yield
            return
        async with self.politeness.turn(url):
            yield

    def robots_read(self, url: str, crawl_delay: float | None) -> None:
        """robots.txt allowed a browser request for ``url`` (rule 1)."""
        if self.politeness is not None:
            self.politeness.robots_read(url, crawl_delay)

    async def for_browser(
        self, url: str, headers: Mapping[str, str], page: str | None = None
    ) -> FetchResult:
        """The answer to a GET of the browser (rules 1, 2, 4, 6, 7), for
        ``page``. Checkpoint. Raises ``FetchError``, ``NoTurn``."""
        sent = forwarded_headers(headers)
        if sent is not None and any(name.lower() == "range" for name in sent):
            return await self._fetch(url, sent, page)
        key = store_key(url)
        while True:
            stored = self.store.get(url)
            if stored is not None:
                self.reused += 1
                return stored
            flight = self._flights.get(key)
            if flight is None:
                break
            await flight.done.wait()  # then look again: kept, or ours to fetch
        flight = self._flights[key] = _Flight()
        try:
            result = await self._fetch(url, sent, page, flight)
            self.store.put(url, result)
            return result
        finally:
            del self._flights[key]
            flight.done.set()

    async def _fetch(
        self,
        url: str,
        headers: dict[str, str] | None,
        page: str | None,
        flight: _Flight | None = None,
    ) -> FetchResult:
        """Fetch ``url`` for the browser, each attempt in its host's turn,
        retried as the crawl retries (rule 6) and archived (rule 7)."""
        attempt = 0
        while True:
            attempt += 1
            async with self.turn(url):
                stored = None if flight is None else self.store.get(url)
                if stored is not None:  # the crawler's, while we waited
                    self.reused += 1
                    return stored
                if flight is not None:
                    flight.sending = True
                self.fetched += 1
                try:
                    result = await self.inner.fetch(url, headers, any_body=True)
                except FetchError as exc:
                    if attempt > self.retry.retries or not self.retry.should_retry_error(exc.kind):
                        raise
                    retry_after = None
                else:
                    if self.archive is not None:
                        self.archive(url, result, page)
                    if attempt > self.retry.retries or not self.retry.should_retry_status(
                        result.status
                    ):
                        return result
                    retry_after = result.headers.get("retry-after")
            self.retried += 1
            await trio.sleep(self.retry.delay(attempt, self._rng, retry_after, time.time()))

    def has_answer(self, url: str) -> bool:
        """Whether ``for_crawler(url, None, any_body=True)`` would answer
        from the store. Not a checkpoint."""
        return urlsplit(url).path != "/robots.txt" and self.store.get(url) is not None

    async def for_crawler(
        self, url: str, headers: dict[str, str] | None, *, any_body: bool
    ) -> FetchResult:
        """The crawler's fetch of ``url``: the stored answer if there is one
        it would have got itself, else ``inner`` (rules 2, 5). The crawler
        has its host's slot already. Checkpoint; raises ``FetchError``."""
        if headers is not None or urlsplit(url).path == "/robots.txt":
            return await self.inner.fetch(url, headers, any_body=any_body)
        key = store_key(url)
        flight = self._flights.get(key)
        if flight is not None and flight.sending:
            await flight.done.wait()
        stored = self.store.get(url)
        if stored is not None and (any_body or is_html_content_type(stored.content_type)):
            self.reused += 1
            await trio.lowlevel.checkpoint()
            return stored
        keep = self.keep_crawler and any_body
        if not keep:
            return await self.inner.fetch(url, headers, any_body=any_body)
        if key in self._flights:  # a browser request waits for its turn: not for us
            result = await self.inner.fetch(url, headers, any_body=any_body)
            self.store.put(url, result)
            return result
        flight = self._flights[key] = _Flight(sending=True)
        try:
            result = await self.inner.fetch(url, headers, any_body=any_body)
            self.store.put(url, result)
            return result
        finally:
            del self._flights[key]
            flight.done.set()
