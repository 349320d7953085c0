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

What each backend guarantees (the README's "Backends" table says the same)::

                          memory        sqlite (state=)      redis
    fetched once          yes           yes, across runs     yes, across workers [1]
    depth                 shortest, corrected after the record, on all three;
                          max_depth fetches exactly the pages within D links
    nothing held back     yes           yes                  yes
    resumable             no            yes (kill -9 too)    yes, while Redis keeps it
    memory                grows with    bounded (a window    bounded (a window)
                          the URLs      + the file)
    politeness            this process  this process         all workers together
    page_requisites=      yes           no                   no
    handler=              yes           no                   yes (importable ones)
    random_wait=          yes           yes                  no
    host budgets          yes           yes, across runs     no

[1] a worker that dies or freezes past its lease loses its pages to the
others: a page in flight then may be fetched twice (marked ``refetched``).

Capabilities
------------
Some crawls ask more of a backend than the common face: a page's
requisites (``page_requisites=True``) or handlers and their ``Request`` s
(``handler=``). Each backend declares what it cannot serve in
``cannot`` (a ``Need`` -> why), and the argument that chose it in
``chosen_by``; ``refuse_unservable`` turns that into a ``ConfigError``
naming library arguments, raised when the crawl is opened, before any
fetch, never a ``RuntimeError`` mid-crawl.

Depth corrections
-----------------
A backend whose depths can drop after a record is out (a shorter path
found later) calls ``correct`` (given to ``attach``) synchronously, once
per correction, always after the record it corrects.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from ..core.config import CrawlConfig
from ..core.frontier import DepthCorrection, Entry, FrontierStatistics, RedirectOutcome
from ..core.models import FetchResult
from ..errors import ConfigError

#: Seconds a Redis worker's lease lasts without a renewal [1]. Here, not in
#: ``redis/``: the command line's ``--lease`` shows it without importing that.
DEFAULT_LEASE = 30.0

#: Hands an entry to the crawlers (``WorkPool.publish`` with its priority).
Publish = Callable[[Entry], None]
#: Takes a correction of a URL whose record is already out (the engine
#: writes it where the caller asked: ``on_depth_update``). Not a checkpoint.
Correct = Callable[[DepthCorrection], None]


class Need(enum.Enum):
    """What a crawl may ask of its backend beyond the common face; the value
    is the library argument that asks for it (named in refusals)."""

    #: ``admit_requisites``: images, scripts and stylesheets of each page.
    PAGE_REQUISITES = "page_requisites=True"
    #: ``admit_request`` and payloads: a handler, or ``Request`` start URLs.
    HANDLERS = "handler="
    #: Random gaps between a host's requests, drawn by this process's schedule.
    RANDOM_WAIT = "random_wait=True"
    #: Per-host page budgets and a host count (``core/host_budget.py``), kept
    #: by the frontier that admits URLs.
    HOST_BUDGETS = "max_pages_per_host= and max_hosts="


def needs(config: CrawlConfig) -> frozenset[Need]:
    """What ``config`` asks of its frontier backend."""
    wanted: set[Need] = set()
    if config.follow.page_requisites:
        wanted.add(Need.PAGE_REQUISITES)
    if config.handler is not None or any(not isinstance(s, str) for s in config.start_urls):
        wanted.add(Need.HANDLERS)
    if config.politeness.random_wait:
        wanted.add(Need.RANDOM_WAIT)
    if config.host_budget() is not None:
        wanted.add(Need.HOST_BUDGETS)
    return frozenset(wanted)


def refuse_unservable(config: CrawlConfig, cannot: Mapping[Need, str], chosen_by: str) -> None:
    """Raise ``ConfigError`` if ``config`` needs what a backend ``cannot``
    serve (its declaration; ``chosen_by``: the argument that chose it), e.g.
    ``page_requisites=True cannot be combined with state= yet: ...``."""
    for need in Need:  # a fixed order: the same crawl, the same message
        if need in cannot and need in needs(config):
            raise ConfigError(
                f"{need.value} cannot be combined with {chosen_by}{cannot[need]}",
                need.value,
                chosen_by,
            )


class FrontierBackend(Protocol):
    """Where a crawl's URLs live between discovery and record."""

    #: What this backend cannot serve, each with the rest of the refusal's
    #: sentence (" yet: the file does not record..."); see ``refuse_unservable``.
    cannot: ClassVar[Mapping[Need, str]]
    #: The library argument that chooses this backend, for refusals ("state=").
    chosen_by: ClassVar[str]

    def attach(
        self,
        publish: Publish,
        check_idle: Callable[[], None],
        queued: Callable[[], int],
        correct: Correct,
    ) -> None:
        """Give the backend the pool's ``publish``, ``check_idle``, the
        count of URLs queued in its channel, and where depth corrections
        go (``correct``: called synchronously for each correction of a URL
        whose record is already out, always after that record); called
        once, before anything else. Not a checkpoint."""
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
