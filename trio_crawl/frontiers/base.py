"""The one face every frontier backend shows the engine.

A frontier decides which URLs the crawl will fetch, at what depth, and keeps
count of the unfinished ones. The engine calls it at each step of a URL's
life and never asks where the URLs are kept:

    admit (start URLs, sitemap seeds, a page's links, a handler's request,
    a redirect's target) -> hand out (``publish``) -> start -> finish | abandon

Rules a backend keeps (the engine's termination invariant rests on them):

1. Every admitted URL is either handed to ``publish`` (in the same
   synchronous step that stops counting it in ``waiting``) or counted in
   ``waiting`` until it is. The backend is a room of the ``WorkPool``.
2. ``unfinished`` counts admitted URLs not yet finished or abandoned: those
   handed out and those waiting. The engine cross-checks it when the pool
   says the crawl is idle: a mismatch is a bug and ends the crawl loudly.
3. A page's children are admitted (and, for a durable backend, stored)
   inside ``finish`` (a huge page's in ``admit_links`` chunks before it:
   ``AdmitsLinkChunks``), before the page's record is written, so a crash can
   lose a record's children only together with the record.
4. ``budget_spent`` is final: once true, nothing new is handed out, and
   waiting URLs stop counting as work (they stay stored for a resume with a
   larger budget).

Backends: ``MemoryFrontier`` (``memory``), ``SqliteFrontier`` (``sqlite``,
the ``--state`` file, resumable) and ``RedisFrontier`` (``redis``, one crawl
shared by many processes; ``serve`` is where it waits for their work, and
it also speaks ``SharedPoliteness`` and ``SharedRobots`` below).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from ..core.frontier import DepthCorrection, Entry, FrontierStatistics, RedirectOutcome
from ..core.models import FetchResult

#: Hands an entry to the crawlers (``WorkPool.publish`` with its priority).
Publish = Callable[[Entry], None]
#: Hears that a written record's depth was lowered by a shorter path; the
#: backend calls it synchronously, after the record it corrects.
Correct = Callable[[DepthCorrection], None]


class FrontierBackend(Protocol):
    """Where a crawl's URLs live between discovery and record."""

    def attach(
        self,
        publish: Publish,
        check_idle: Callable[[], None],
        queued: Callable[[], int],
        correct: Correct,
    ) -> None:
        """Give the backend the pool's ``publish``, ``check_idle``, the
        count of URLs queued in its channel, and where depth corrections go;
        called once, before anything else. Not a checkpoint."""
        ...

    async def admit_start_urls(self) -> None:
        """Admit the crawl's start URLs (and seeds); hand out what fits."""
        ...

    async def serve(self) -> None:
        """Runs beside the crawlers for the whole crawl (refill from disk,
        flush writes); cancelled when the crawl ends. May return at once."""
        ...

    def want_more(self, queued: int) -> None:
        """The pool took an item and ``queued`` are left. Not a checkpoint."""
        ...

    async def admit_seeds(self, urls: Sequence[str], referrer: str) -> None:
        """Admit in-scope URLs found in a sitemap, at depth 0."""
        ...

    def admit_requisites(self, parent: Entry, urls: Sequence[str]) -> None:
        """Admit in-scope resources ``parent`` needs (``--page-requisites``):
        whatever ``max_depth`` says, with the ``REQUISITE`` payload. Not a
        checkpoint."""
        ...

    def admit_request(self, parent: Entry, url: str, payload: object) -> bool:
        """Admit a URL a handler asked for (with its Request as payload);
        False if it is not followable. Not a checkpoint."""
        ...

    async def admit_redirect(self, entry: Entry, target: str) -> RedirectOutcome:
        """Decide about a redirect's canonical target and admit it if new."""
        ...

    def start(self, entry: Entry) -> bool:
        """About to fetch ``entry``: False (and it is dropped) when the page
        budget is spent. Retries of a started entry return True."""
        ...

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        """``entry`` was tried: admit its links and count it done. Called
        before its record is written (rule 3)."""
        ...

    def recorded(self, entry: Entry) -> None:
        """``entry``'s record has been written: a durable backend may now
        store it as done. Not a checkpoint."""
        ...

    def abandon(self, entry: Entry) -> None:
        """Drop ``entry`` without a record (stop, budget). Not a checkpoint."""
        ...

    def stop(self) -> None:
        """The crawl is stopping: drop waiting URLs from the count (a durable
        backend keeps them stored for the next run). Not a checkpoint."""
        ...

    def was_refetched(self, entry: Entry) -> bool:
        """Whether an earlier run had ``entry`` in flight (the server may
        have seen it twice). Not a checkpoint."""
        ...

    @property
    def waiting(self) -> int:
        """Admitted URLs not handed out yet (the pool's room count)."""
        ...

    @property
    def unfinished(self) -> int: ...

    @property
    def budget_spent(self) -> bool: ...

    def statistics(self) -> FrontierStatistics: ...

    async def aclose(self) -> None:
        """Write what is pending; bounded, safe to call when cancelled."""
        ...


@runtime_checkable
class AdmitsLinkChunks(Protocol):
    """A backend that takes a page's links in chunks, while the page is still
    being parsed: the engine hands a huge page's links over as they are
    found (``parse.iter_link_chunks``), so they are never all in memory at
    once, then calls ``finish(entry, None)``. A backend without it gets the
    whole list in ``finish``."""

    async def admit_links(self, parent: Entry, links: Sequence[str]) -> None:
        """Admit some of ``parent``'s links now, as ``finish`` would (rule 3
        holds: ``finish`` comes after the last chunk). ``links`` has no
        duplicates itself but may repeat links of earlier chunks."""
        ...


@runtime_checkable
class SharedPoliteness(Protocol):
    """A backend shared by several processes (Redis) that spaces requests to
    each host itself, as every worker sees them: ``--rate``, Crawl-delay and
    ``--per-host-concurrency`` hold for the whole crawl. The engine then
    keeps no per-host limits of its own, and hands it retries and Crawl-delays."""

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        """``host``'s robots.txt has been read (``delay``: its Crawl-delay)."""
        ...

    def defer(self, entry: Entry, delay: float) -> None:
        """Retry ``entry`` in ``delay`` seconds. Not a checkpoint."""
        ...


@runtime_checkable
class SharedRobots(Protocol):
    """A backend shared by several processes that fetches each robots.txt
    once for the whole crawl and shares the response."""

    async def fetch_robots_once(
        self, url: str, fetch: Callable[[], Awaitable[FetchResult]]
    ) -> FetchResult:
        """The response for robots.txt ``url``: stored by another worker, or
        ``fetch()`` ed here (once, while the others wait) and stored. A
        ``FetchError`` is shared (and re-raised) the same way."""
        ...
