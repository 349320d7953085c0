"""The one face every frontier backend shows the engine.

A frontier decides which URLs the crawl will fetch, at what depth, and keeps
count of the unfinished ones. The engine calls it at each step of a URL's
life and never asks where the URLs are kept:

    admit (start URLs, sitemap seeds, a page's links, a handler's request,
    a redirect's target) -> hand out (``publish``) -> start -> finish | abandon

Rules a backend keeps (the engine's termination invariant rests on them):

1. Every admitted URL is either handed to ``publish`` (in the same
   synchronous step that stops counting it in ``waiting``) or counted in
   ``waiting`` until it is (``HoldsBack``: a room of the ``WorkPool``); a
   backend without ``waiting`` hands every URL out as it admits it.
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

What each backend guarantees (the "Backends" table of docs/manual/ending.md says the same)::

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
    host budgets          yes           yes, across runs     yes, counted in Redis
    recrawl=              mirror= [2]   yes (KeepsVisits)    no

[1] a worker that dies or freezes past its lease loses its pages to the
others: a page in flight then may be fetched twice (marked ``refetched``).

[2] in memory, a ``mirror=`` directory keeps its own visits, so a second
run over it is a recrawl (``mirror/visits.py``).

Capabilities
------------
``FrontierBackend`` is the small core every backend has. The rest are
optional protocols, each a thing some crawls ask and some backends do:
``AdmitsSeeds`` (``sitemaps=True``), ``AdmitsRequisites``
(``page_requisites=True``), ``AdmitsRequests`` (``handler=``, ``Request``
start URLs), ``ReportsRefetch`` (records marked ``refetched``),
``HoldsBack`` (URLs kept outside the pool: a room of the ``WorkPool``),
``AdmitsLinkChunks``, ``SharedPoliteness``, ``SharedRobots`` and
``SharedHostBudgets``. A backend
serves a need by having the methods, never by refusing at run time: the
crawl builder checks a crawl's needs against its backend once, before
anything is opened or fetched (``refuse_unservable``, the one place a
crawl is refused), and the engine wires an optional part only where the
backend has it. A backend shared by several processes (``SharedPoliteness``)
serves neither ``random_wait=`` (the server spaces each host's requests)
nor host budgets (one process's count) unless it counts them where every
process sees them (``SharedHostBudgets``); the others keep host budgets as
the core ``Frontier`` does. The words of a refusal (the argument that chose the
backend, and why) come from its ``FrontierSpec``.

Depth corrections
-----------------
A backend whose depths can drop after a record is out (a shorter path
found later) calls ``correct`` (given to ``attach``) synchronously, once
per correction, always after the record it corrects.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..core.config import CrawlConfig
from ..core.frontier import DepthCorrection, Entry, FrontierStatistics, RedirectOutcome
from ..core.models import FetchResult
from ..errors import ConfigError

if TYPE_CHECKING:  # a crawl that keeps no visits never loads the recrawl's rules
    from ..recrawl.visit import Visit

#: Seconds a Redis worker's lease lasts without a renewal [1]. Here, not in
#: ``redis/``: the command line's ``--lease`` shows it without importing that.
DEFAULT_LEASE = 30.0

#: Hands an entry to the crawlers (``WorkPool.publish`` with its priority).
Publish = Callable[[Entry], None]
#: Takes a correction of a URL whose record is already out (the engine
#: writes it where the caller asked: ``on_depth_update``). Not a checkpoint.
Correct = Callable[[DepthCorrection], None]


class Need(enum.Enum):
    """What a crawl may ask of its backend beyond the core face; the value
    is the library argument that asks for it (named in refusals)."""

    #: ``AdmitsRequisites``: images, scripts and stylesheets of each page.
    PAGE_REQUISITES = "page_requisites=True"
    #: ``AdmitsRequests`` and payloads: a handler, or ``Request`` start URLs.
    HANDLERS = "handler="
    #: Random gaps between a host's requests, drawn by this process's schedule
    #: (not ``SharedPoliteness``).
    RANDOM_WAIT = "random_wait=True"
    #: Per-host page budgets and a host count (``core/host_budget.py``), kept
    #: by the frontier that admits URLs: in one process, or where all see them
    #: (``SharedPoliteness`` only with ``SharedHostBudgets``).
    HOST_BUDGETS = "max_pages_per_host= and max_hosts="
    #: ``AdmitsSeeds``: the URLs of each host's sitemaps, at depth 0.
    SITEMAPS = "sitemaps=True"


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
    if config.follow.sitemaps:
        wanted.add(Need.SITEMAPS)
    return frozenset(wanted)


class FrontierBackend(Protocol):
    """Where a crawl's URLs live between discovery and record: the core
    every backend has (the optional parts are protocols below)."""

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

    @property
    def unfinished(self) -> int: ...

    @property
    def budget_spent(self) -> bool: ...

    def statistics(self) -> FrontierStatistics: ...

    async def aclose(self) -> None:
        """Write what is pending; bounded, safe to call when cancelled."""
        ...


@runtime_checkable
class HoldsBack(Protocol):
    """A backend that keeps admitted URLs outside the pool's channel (on
    disk, in Redis) and feeds them in as the crawlers drain it: a room of
    the ``WorkPool`` (rule 1). A backend without it hands out every URL it
    admits at once, and holds nothing the pool must wait for."""

    @property
    def waiting(self) -> int:
        """Admitted URLs not handed out yet (the pool's room count)."""
        ...

    async def serve(self) -> None:
        """Runs beside the crawlers for the whole crawl (refill from disk,
        flush writes); cancelled when the crawl ends."""
        ...

    def want_more(self, queued: int) -> None:
        """The pool took an item and ``queued`` are left. Not a checkpoint."""
        ...


@runtime_checkable
class AdmitsSeeds(Protocol):
    """A backend that takes start URLs mid-crawl (``sitemaps=True``)."""

    async def admit_seeds(self, urls: Sequence[str], referrer: str) -> None:
        """Admit in-scope URLs found in a sitemap, at depth 0."""
        ...


@runtime_checkable
class AdmitsRequisites(Protocol):
    """A backend that knows a page's requisites (``page_requisites=True``)."""

    def admit_requisites(self, parent: Entry, urls: Sequence[str]) -> None:
        """Admit in-scope resources ``parent`` needs: whatever ``max_depth``
        says, with the ``REQUISITE`` payload. Not a checkpoint."""
        ...


@runtime_checkable
class AdmitsRequests(Protocol):
    """A backend that keeps a URL's payload (a handler's ``Request``)."""

    def admit_request(self, parent: Entry, url: str, payload: object) -> bool:
        """Admit a URL a handler asked for (with its Request as payload);
        False if it is not followable. Not a checkpoint."""
        ...


@runtime_checkable
class ReportsRefetch(Protocol):
    """A backend that outlives a run or a worker: a URL it hands out again
    may have reached the server before (its record says ``refetched``)."""

    def was_refetched(self, entry: Entry) -> bool:
        """Whether an earlier run (or worker) had ``entry`` in flight. Not a
        checkpoint."""
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


class VisitKeeper(Protocol):
    """A backend's visits (``frontiers/sqlite/visits.py``): each recorded
    URL's last capture, kept before its record is written, and the previous
    crawl's, read by a recrawl (``engine/revisits.py``)."""

    #: The crawl's generation: 1 for a first crawl, more for a recrawl.
    generation: int

    @property
    def recrawl(self) -> bool:
        """Whether a previous crawl's visits are there to compare with."""
        ...

    def previous(self, url: str) -> Visit | None:
        """``url``'s visit in the previous crawl. Not a checkpoint."""
        ...

    def keep(self, visit: Visit) -> int:
        """Note this crawl's visit of a URL; a ticket for ``kept``."""
        ...

    async def kept(self, ticket: int) -> None:
        """Return once the visit of ``ticket`` is stored."""
        ...

    async def unreached(self, limit: int = 1000) -> list[Visit]:
        """Previous visits this crawl never reached, not recorded unlinked yet."""
        ...

    async def mark_unlinked(self, urls: Iterable[str]) -> None:
        """Their ``unlinked`` records are written."""
        ...

    async def finish(self) -> None:
        """The crawl ended whole (a recrawl may begin the next one)."""
        ...


@runtime_checkable
class KeepsVisits(Protocol):
    """A backend that keeps a visit per recorded URL (a ``--state`` file),
    so the crawl can be done again: ``recrawl=True``."""

    def kept_visits(self) -> VisitKeeper | None:
        """The visits (None: this backend's file keeps none, a temporary one)."""
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

    def not_before(self, entry: Entry) -> float | None:
        """When ``entry`` (handed out ahead of its host's turn) may start, in
        trio's running time; None if it may start now. Not a checkpoint."""
        ...

    async def wait_turn(self, host: str) -> bool:
        """Wait for a turn of ``host`` for a request that is not a URL of
        the crawl (a rendered page's script or stylesheet), spaced with the
        crawl's own by the whole crawl's ``--rate`` and Crawl-delay; False
        if the crawl stopped first."""
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


@runtime_checkable
class FrontierSpec(Protocol):
    """A frontier backend named but not opened yet (``state="crawl.db"``,
    ``redis_frontier(url, crawl_id)``): the crawl builder checks it against
    the crawl (``refuse_unservable``), then opens it with the crawl's own
    config, so the frontier and the crawl can never disagree, and closes it
    when the crawl ends."""

    @property
    def chosen_by(self) -> str:
        """The library argument that chose the backend, for refusals."""
        ...

    @property
    def limits(self) -> Mapping[Need, str]:
        """For each need its backend does not serve, the rest of the refusal's
        sentence (" yet: the file does not record..."). Words only: what
        the backend serves is what its class has (``backend``)."""
        ...

    def backend(self) -> type:
        """The backend's class (imported on call: a crawl in memory never
        loads another backend), checked before anything is opened."""
        ...

    def open(self, config: CrawlConfig) -> AbstractAsyncContextManager[FrontierBackend]:
        """Open (create, resume or join) the backend for the crawl ``config``."""
        ...


@runtime_checkable
class SharedHostBudgets(Protocol):
    """A backend shared by several processes that counts per-host budgets
    (``max_pages_per_host=``, ``max_hosts=``) where all of them see the
    counts (Redis: ``frontiers/redis/budgets.py``), so they hold for the
    whole crawl; its ``statistics().refused`` counts this process's refusals."""

    def over_host_budget(self) -> int:
        """New URLs the budgets refused in this process's calls."""
        ...


#: Why the state file cannot serve a need (the rest of the refusal's sentence).
STATE_LIMITS: Mapping[Need, str] = {
    Need.PAGE_REQUISITES: " yet: the file does not record which URLs are requisites",
    Need.HANDLERS: ": handlers and their requests carry Python functions",
}
#: Why a Redis crawl cannot serve a need.
REDIS_LIMITS: Mapping[Need, str] = {
    Need.PAGE_REQUISITES: " yet",
    Need.RANDOM_WAIT: " yet: the Redis server spaces each host's requests",
}

#: The optional protocol that serves each need (the other needs are about
#: whether the backend is shared by several processes: ``SharedPoliteness``).
_SERVED_BY: dict[Need, type] = {
    Need.PAGE_REQUISITES: AdmitsRequisites,
    Need.HANDLERS: AdmitsRequests,
    Need.SITEMAPS: AdmitsSeeds,
}
#: What a shared backend needs besides, for a need one process serves alone.
_SHARED_SERVED_BY: dict[Need, type] = {Need.HOST_BUDGETS: SharedHostBudgets}


def _has(backend: object, protocol: type) -> bool:
    """``backend`` (a class, or an open backend) has ``protocol``'s methods."""
    if isinstance(backend, type):
        return issubclass(backend, protocol)
    return isinstance(backend, protocol)


def unserved(config: CrawlConfig, backend: object) -> list[Need]:
    """What ``config`` needs that ``backend`` (its class, or an open one)
    does not serve, in a fixed order (the same crawl, the same message)."""
    wanted = needs(config)
    shared = _has(backend, SharedPoliteness)
    missing = []
    for need in Need:
        if need not in wanted:
            continue
        protocol = _SERVED_BY.get(need)
        if protocol is not None:
            lacking = not _has(backend, protocol)
        else:
            by_all = _SHARED_SERVED_BY.get(need)
            lacking = shared and (by_all is None or not _has(backend, by_all))
        if lacking:
            missing.append(need)
    return missing


def refuse_unservable(
    config: CrawlConfig,
    backend: object,
    chosen_by: str,
    limits: Mapping[Need, str] | None = None,
) -> None:
    """Raise ``ConfigError`` (one line, naming library arguments) if
    ``config`` needs what ``backend`` (its class, or an open one) does not
    serve; ``chosen_by``: the argument that chose it, ``limits``: why (a
    spec's words), e.g. ``page_requisites=True cannot be combined with
    state= yet: ...``. The one place a crawl is refused for its backend:
    the crawl builder calls it before it opens anything (as
    ``open_redis_frontier`` does before it connects)."""
    words = limits or {}
    for need in unserved(config, backend):
        raise ConfigError(
            f"{need.value} cannot be combined with {chosen_by}{words.get(need, '')}",
            # Each argument of a need by itself ("max_pages_per_host= and
            # max_hosts="): a front end words each as its own flag.
            *need.value.split(" and "),
            chosen_by,
        )
    if config.output.recrawl and not _has(backend, KeepsVisits):
        raise ConfigError(
            f"recrawl=True cannot be combined with {chosen_by}: a recrawl compares with "
            "the visits a state file keeps, and this backend keeps none",
            "recrawl=True",
            chosen_by,
        )
