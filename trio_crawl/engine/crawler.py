"""The crawl engine: a ``WorkPool`` of crawlers around a frontier backend.

The design card
---------------
A nursery runs N crawler tasks that share cloned ends of one unbounded
memory channel. Each crawler holds a ``trio.CapacityLimiter`` token while it
is active and publishes the URLs it discovers with ``send_nowait``. A
supervisor cancels the nursery once no tokens are borrowed and the buffer is
empty: exactly then, never earlier, woken by events, not by polling.

That is ``WorkPool`` (``trio_crawl/workpool.py``), which has no crawling in
it. This module gives it crawling: one URL's life, from the channel to a
record, a retry or a parking place. Its rooms, the places where an
unfinished URL can wait outside the channel, are:

  (1) the politeness schedule (``ScheduleRoom``): behind its host's rate or
      concurrency limit, or in a retry back-off;
  (2) the frontier backend: the disk queue of the SQLite one (the memory
      frontier holds nothing back: its room is always empty).

So at every checkpoint every unfinished URL is in exactly one of four
places: the channel (with its priority heap), a crawler holding a token,
the schedule, or the frontier backend; docs/termination.md has the race
analysis. When the pool ends idle, the frontier's own count of unfinished
URLs must be zero: a mismatch is our bug, and the crawl ends loudly.

Pages are the site's business and failures become records; a broken
invariant is our bug and ends the crawl with an exception.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass

import trio

from ..core.config import CrawlConfig
from ..core.frontier import DepthCorrection, Entry, RedirectOutcome
from ..core.models import CrawlRecord, DepthUpdate, FetchResult
from ..core.outcome import Step, decide, make_record
from ..core.requisites import REQUISITE
from ..core.retry import RetryPolicy
from ..core.schedule import PoliteSchedule
from ..core.scrape import Handler, Request
from ..core.stats import CrawlStats, CrawlSummary
from ..core.url import host_port, resolve
from ..errors import FetchError
from ..fetch.base import Fetcher
from ..frontiers.base import FrontierBackend, SharedPoliteness
from ..frontiers.memory import MemoryFrontier
from ..workpool import WorkPool
from .delivery import (
    Delivery,
    DepthUpdateCallback,
    ItemCallback,
    RecordCallback,
    ResponseCallback,
)
from .host_gate import ROBOTS_RETRY_PERIOD, HostGate, Verdict
from .pages import PageReader
from .politeness import ScheduleRoom
from .robots_gate import RobotsCache
from .shared_politeness import SharedScheduleRoom, robots_fetcher
from .sitemaps import sitemap_page_urls

_FAILED_REDIRECTS = (RedirectOutcome.LOOP, RedirectOutcome.TOO_MANY, RedirectOutcome.OUT_OF_SCOPE)


@dataclass(frozen=True, slots=True)
class EngineStatistics:
    """A snapshot for progress displays (all counts are exact at the instant).

    ``queued``: URLs ready for a crawler, in memory or waiting in the
    frontier backend (its disk queue); ``active``: URLs a
    crawler holds; ``waiting``: URLs parked in the politeness schedule.
    """

    records: int
    failures: int
    queued: int
    active: int
    waiting: int
    seen: int
    elapsed: float


class Crawler:
    """One crawl. Run it with ``await crawler.run()`` (or via ``open_crawler``).

    ``frontier`` is where URLs live (in memory by default; a
    ``SqliteFrontier`` for a resumable crawl). ``on_record`` callbacks are
    called synchronously, in the crawler task, as each record is final.
    ``on_depth_update`` callbacks are called the same way when a shorter
    path lowers the depth of a URL whose record is already out (the memory
    frontier only; the record said the depth known when it was written).
    """

    def __init__(
        self,
        config: CrawlConfig,
        fetcher: Fetcher,
        *,
        frontier: FrontierBackend | None = None,
        on_record: Iterable[RecordCallback] = (),
        on_item: Iterable[ItemCallback] = (),
        on_response: Iterable[ResponseCallback] = (),
        on_depth_update: Iterable[DepthUpdateCallback] = (),
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._fetcher = fetcher
        self._on_response = list(on_response)
        #: What ``on_response`` callbacks returned for a page, awaited just
        #: before its record (or retry): the page's parse overlaps the wait.
        self._unsettled: dict[Entry, list[Awaitable[None]]] = {}
        self._rng = rng or random.Random()
        scope = self._scope = config.scope()
        self.frontier: FrontierBackend = frontier or MemoryFrontier(
            config.start_urls,
            scope=scope,
            max_depth=config.max_depth,
            max_pages=config.max_pages,
            late_starts=config.sitemaps,
        )
        self._pool = WorkPool[Entry](
            config.workers, grace=config.grace, on_take=self.frontier.want_more
        )
        if isinstance(self.frontier, SharedPoliteness):  # Redis: the server spaces requests
            self.schedule: ScheduleRoom = SharedScheduleRoom(self.frontier, self._publish)
        else:
            self.schedule = ScheduleRoom(
                PoliteSchedule(rate=config.rate, max_per_host=config.per_host_concurrency),
                self._publish,
            )
        self._pool.add_room(self.schedule)
        self._pool.add_room(self.frontier)
        self.frontier.attach(
            self._publish, self._pool.check_idle, lambda: self._pool.queued, self._correct
        )
        robots = None
        if not config.ignore_robots:
            robots = RobotsCache(
                robots_fetcher(fetcher, self.frontier),  # once per crawl with --redis
                config.user_agent,
                retry_period=ROBOTS_RETRY_PERIOD,
            )
        seed = self._seed_from_sitemaps if config.sitemaps else None
        self._retry = RetryPolicy(retries=config.retries, max_retry_after=config.max_retry_after)
        self.stats = CrawlStats()
        self._gate = HostGate(
            robots,
            self.schedule,
            seed,
            max_crawl_delay=config.max_crawl_delay,
            capped_delays=self.stats.capped_crawl_delays,
        )
        self._delivery = Delivery(
            self.stats, on_record=on_record, on_item=on_item, on_depth_update=on_depth_update
        )
        if isinstance(self.frontier, MemoryFrontier):
            self.frontier.on_correction = self._correct
        self._pages = PageReader(self.frontier, self._delivery, scope, config)
        self._started_at: float | None = None
        self._finished_at: float | None = None

    # -- public ------------------------------------------------------------

    async def run(self) -> CrawlSummary:
        """Crawl until no work is left (or ``stop()``); return the summary."""
        if self._started_at is not None:
            raise RuntimeError("a Crawler runs once")
        self._started_at = trio.current_time()
        try:
            await self.frontier.admit_start_urls()
            await self._pool.run(self._handle, helpers=[self.schedule.serve, self.frontier.serve])
        finally:
            self._finished_at = trio.current_time()
            await self.frontier.aclose()
        if not self._pool.stopping and self.frontier.unfinished != 0:
            raise RuntimeError(
                "termination invariant broken: channel, crawlers and rooms are empty "
                f"but the frontier has {self.frontier.unfinished} unfinished"
            )
        return self.summary()

    def stop(self) -> None:
        """Graceful stop: no new fetches; in-flight ones get ``config.grace``
        seconds to finish, then the crawl is cancelled. Calling it again
        cancels at once. Not a checkpoint."""
        if not self._pool.stopping:
            for entry in self.schedule.drain():
                self.frontier.abandon(entry)
            self.frontier.stop()
        self._pool.stop()

    def abort(self) -> None:
        """Cancel the crawl now; records already written stay written."""
        self._pool.abort()

    def attach_records(self, send: trio.MemorySendChannel[CrawlRecord]) -> None:
        """Deliver every record to ``send`` too (awaiting room: backpressure)."""
        self._delivery.record_channel = send

    def attach_items(self, send: trio.MemorySendChannel[object]) -> None:
        """Deliver handlers' items to ``send`` (awaiting room: backpressure)."""
        self._delivery.item_channel = send

    @property
    def stopping(self) -> bool:
        return self._pool.stopping

    def statistics(self) -> EngineStatistics:
        now = trio.current_time()
        start = self._started_at if self._started_at is not None else now
        end = self._finished_at if self._finished_at is not None else now
        pool = self._pool.statistics()
        return EngineStatistics(
            records=self.stats.records,
            failures=sum(self.stats.failures.values()),
            queued=pool.queued + self.frontier.waiting,
            active=pool.active,
            waiting=self.schedule.waiting,
            seen=self.frontier.statistics().seen,
            elapsed=end - start,
        )

    def summary(self) -> CrawlSummary:
        f = self.frontier.statistics()
        return self.stats.summary(
            elapsed=self.statistics().elapsed,
            stopped=self._pool.stopping,
            unfinished=self.frontier.unfinished + f.dropped,
        )

    # -- one URL -----------------------------------------------------------

    def _publish(self, entry: Entry) -> None:
        request = entry.payload
        self._pool.publish(entry, request.priority if isinstance(request, Request) else 0)

    def _correct(self, correction: DepthCorrection) -> None:
        update = DepthUpdate(
            correction.url,
            correction.depth,
            correction.referrer,
            correction.previous_depth,
            t=self._elapsed(),
        )
        self._delivery.write_depth_update(update)

    def _elapsed(self) -> float:
        """Seconds since this run of the crawl started (a record's ``t``)."""
        return round(trio.current_time() - (self._started_at or 0.0), 3)

    def _drop(self, entry: Entry, host: str) -> None:
        self.schedule.unreserve(entry, host)
        self.frontier.abandon(entry)

    async def _handle(self, entry: Entry) -> None:
        """Take one entry from the channel to a record, a retry or a parking."""
        host = host_port(entry.url)
        if self._pool.stopping:
            return self._drop(entry, host)
        if entry.attempts == 0:
            verdict, reason = await self._gate.check(entry, host)
            if verdict is Verdict.WAIT:
                self.schedule.unreserve(entry, host)
                return self.schedule.defer(entry, host, ROBOTS_RETRY_PERIOD)
            if verdict is not Verdict.ALLOW:
                self.schedule.unreserve(entry, host)
                record = make_record(entry, (verdict.value, reason), t=self._elapsed())
                return await self._finish(entry, record)
            if self._pool.stopping or self.frontier.budget_spent:
                return self._drop(entry, host)
        if not self.schedule.try_start(entry, host):
            return  # parked in the schedule; our token goes back to the pool
        if not self.frontier.start(entry):
            return self.schedule.release(host)
        if entry.attempts == 1 and self.frontier.budget_spent:
            # That was the last page of the budget: what waits for a first
            # start will never get one, so it stops counting as work now.
            for parked in self.schedule.remove_unstarted():
                self.frontier.abandon(parked)
        t0 = trio.current_time()
        result: FetchResult | None = None
        failure: FetchError | None = None
        try:
            result = await self._fetch(entry)
        except FetchError as exc:
            failure = exc
        finally:
            self.schedule.release(host)
        elapsed_ms = round((trio.current_time() - t0) * 1000, 3)
        if result is not None:
            for callback in self._on_response:
                pending = callback(entry.url, result)
                if pending is not None:  # awaited before the record: _finish
                    self._unsettled.setdefault(entry, []).append(pending)
        outcome = decide(
            attempts=entry.attempts,
            result=result,
            failure=failure,
            policy=self._retry,
            stopping=self._pool.stopping,
            rng=self._rng,
            now_epoch=time.time(),
        )
        if outcome.step is Step.RETRY:
            await self._settle(entry)
            return self.schedule.defer(entry, host, outcome.delay)
        if outcome.step is Step.RECORD:
            record = make_record(entry, outcome.error, result, elapsed_ms, t=self._elapsed())
            return await self._finish(entry, record)
        assert result is not None
        if outcome.step is Step.REDIRECT:
            return await self._redirect(entry, result, elapsed_ms)
        await self._read_page(entry, result, elapsed_ms)

    async def _settle(self, entry: Entry) -> None:
        """Await what the response callbacks returned for ``entry`` (e.g. the
        archive's "on disk"), so no record goes out before it."""
        unsettled = self._unsettled.pop(entry, None) if self._unsettled else None
        if unsettled:
            for pending in unsettled:
                await pending

    async def _fetch(self, entry: Entry) -> FetchResult:
        request = entry.payload
        if request is REQUISITE:  # wanted whatever its type: an image, a script
            return await self._fetcher.fetch(entry.url, any_body=True)
        if isinstance(request, Request):
            headers = dict(request.headers) if request.headers else None
            return await self._fetcher.fetch(entry.url, headers, any_body=True)
        if self.config.handler is not None:  # a handler may want JSON, PDFs...
            return await self._fetcher.fetch(entry.url, any_body=True)
        return await self._fetcher.fetch(entry.url)

    async def _read_page(self, entry: Entry, result: FetchResult, elapsed_ms: float) -> None:
        page = await self._pages.read(entry, result, self._handler_for(entry))
        record = make_record(
            entry,
            page.error,
            result,
            elapsed_ms,
            links=page.followed,
            tb=page.traceback,
            t=self._elapsed(),
        )
        await self._finish(entry, record, page.links)

    def _handler_for(self, entry: Entry) -> Handler | None:
        request = entry.payload
        if request is REQUISITE:
            return None
        if isinstance(request, Request) and request.handler is not None:
            return request.handler
        return self.config.handler

    async def _redirect(self, entry: Entry, result: FetchResult, elapsed_ms: float) -> None:
        location = result.headers.get("location")
        target = resolve(location, entry.url) if location else None
        error: tuple[str, str] | None = None
        if target is None:
            error = ("bad_redirect", f"unusable Location: {location!r}")
        else:
            outcome = await self.frontier.admit_redirect(entry, target)
            if outcome in _FAILED_REDIRECTS:
                error = (outcome.value, f"redirect to {target}")
        record = make_record(entry, error, result, elapsed_ms, redirect=target, t=self._elapsed())
        await self._finish(entry, record)

    async def _seed_from_sitemaps(self, page_url: str, listed: list[str]) -> None:
        """Admit the host's sitemap URLs as start URLs. Runs inside a crawler
        holding its token, so the crawl cannot end while sitemaps are read."""
        found = await sitemap_page_urls(self._fetcher, page_url, listed, self._scope)
        for sitemap in dict.fromkeys(s for _, s in found):
            await self.frontier.admit_seeds([u for u, s in found if s == sitemap], sitemap)

    async def _finish(
        self, entry: Entry, record: CrawlRecord, links: Sequence[str] | None = None
    ) -> None:
        """Admit the children, deliver the record, then let the frontier store
        the URL as done: all before the token is released (rule 2). Awaiting
        a slow record reader is safe: the entry is still held."""
        await self.frontier.finish(entry, links)
        if self.frontier.was_refetched(entry):
            record.extra["refetched"] = True
        await self._settle(entry)
        if record.depth != entry.depth or record.referrer != entry.referrer:
            # A shorter path turned up while the record was being made.
            record = dataclasses.replace(record, depth=entry.depth, referrer=entry.referrer)
        self._delivery.write_record(record)
        entry.written = True  # from now on, a shorter path writes an update
        await self._delivery.send_record(record)
        # Only now is the record out of our hands (a file sink has written it,
        # a stream reader has taken it): a durable frontier may store it done.
        self.frontier.recorded(entry)
