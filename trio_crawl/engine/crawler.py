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
  (2) a frontier backend that holds URLs back (``HoldsBack``): the disk
      queue of the SQLite one (the memory frontier holds nothing: no room).

So at every checkpoint every unfinished URL is in exactly one of four places: the channel
(with its priority heap), a crawler holding a token, the schedule, or the frontier backend;
docs/termination.md has the race analysis. When the pool ends idle, the frontier's own count
of unfinished URLs must be zero: a mismatch is our bug, and the crawl ends loudly.

Pages are the site's business and failures become records; a broken invariant is our bug.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable

import trio

from ..core.config import CrawlConfig
from ..core.frontier import DepthCorrection, Entry
from ..core.models import CrawlRecord, FetchResult
from ..core.stats import CrawlStats, CrawlSummary
from ..core.url import host_port
from ..errors import FetchError
from ..fetch.base import Fetcher
from ..frontiers.base import FrontierBackend
from .assembly import assemble, pool_helpers
from .delivery import (
    Delivery,
    DepthUpdateCallback,
    ItemCallback,
    RecordCallback,
    ResponseCallback,
    Responses,
)
from .host_gate import ROBOTS_RETRY_PERIOD, Verdict
from .outcome import Step, decide, make_record
from .pages import PageReader
from .recording import Recorder
from .requests import fetch_entry, handler_for
from .slots import host_slots
from .statistics import EngineStatistics as EngineStatistics  # re-exported
from .statistics import RunClock, snapshot, summarize, with_render_statistics


class Crawler:
    """One crawl: the engine, private (users have ``run_crawl`` and
    ``open_crawler``). Only ``engine.build.open_crawl`` makes one: it checks
    the frontier serves the crawl and wires hooks, frontier, mirror, archive.

    ``frontier`` is where URLs live (in memory by default; a ``SqliteFrontier`` for a
    resumable crawl). ``on_record`` callbacks are called synchronously, in the crawler
    task, as each record is final. ``on_depth_update`` callbacks are called the same way
    when the frontier corrects the depth of a URL whose record is already out (its
    ``correct`` hook); the record said the depth known when it was written.
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
        auto_parse_process: bool = False,  # may parse_process=None start one?
    ) -> None:
        self.config = config
        self._fetcher = fetcher
        self._rng = rng or random.Random()
        self._retry = config.retry_policy()
        self.stats = CrawlStats()
        self._delivery = Delivery(
            self.stats, on_record=on_record, on_item=on_item, on_depth_update=on_depth_update
        )
        self._responses = Responses(on_response)
        parts = assemble(config, fetcher, frontier, stats=self.stats, correct=self._correct)
        self.frontier: FrontierBackend = parts.frontier
        self.held = parts.held  # the frontier, if it holds URLs back
        self.schedule = parts.schedule
        self._pool = parts.pool
        self._gate = parts.gate
        self._clock = RunClock()
        self._recorder = Recorder(self.frontier, self._delivery, self._responses, self._clock)
        self._recorder.before_write = (workers := parts.workers).note
        self.revisits = self._recorder.revisits.due_only(config.output.recrawl == "due")
        self._pages = PageReader(self.frontier, self._delivery, parts.scope, config, self.revisits)
        self._pages.use_process(auto=auto_parse_process, pool=self._pool)
        self._workers = workers
        self._slots = host_slots(self.schedule, fetcher, parts.gate.crawl_delay_seen)

    # -- public ------------------------------------------------------------

    async def run(self) -> CrawlSummary:
        """Crawl until no work is left (or ``stop()``); return the summary."""
        self._clock.start()
        try:
            await self.frontier.admit_start_urls()
            await self._pool.run(self._handle, helpers=pool_helpers(self, *self._pages.helpers()))
        finally:
            self._clock.finish()
            await self.frontier.aclose()
        if not self._pool.stopping and self.frontier.unfinished != 0:
            raise RuntimeError(
                "termination invariant broken: channel, crawlers and rooms are empty "
                f"but the frontier has {self.frontier.unfinished} unfinished"
            )
        await self.revisits.end(stopped=self._pool.stopping)  # a recrawl's unlinked records
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
        pool, waiting, parse = self._pool.statistics(), self.schedule.waiting, self._pages.process
        return snapshot(self.stats, pool, self.frontier, waiting, self._clock.elapsed, parse)

    def summary(self) -> CrawlSummary:
        parts = (self.stats, self.frontier, self._pages.process)
        summary = summarize(*parts, elapsed=self._clock.elapsed, stopped=self._pool.stopping)
        return self._workers.summarize(with_render_statistics(summary, self._fetcher))

    # -- one URL -----------------------------------------------------------

    def _correct(self, correction: DepthCorrection) -> None:
        self._delivery.write_correction(correction, self._clock.t())

    def _drop(self, entry: Entry, host: str) -> None:
        self.schedule.unreserve(entry, host)
        self.frontier.abandon(entry)

    async def _handle(self, entry: Entry) -> None:
        """Take one entry from the channel to a record, a retry or a parking."""
        host = host_port(entry.url)
        if self._pool.stopping:
            return self._drop(entry, host)
        if entry.attempts == 0 and (kept := self.revisits.not_due(entry, self._clock.t())):
            self.schedule.unreserve(entry, host)  # not due yet: no request (--recrawl due)
            return await self._recorder.finish(entry, kept)
        if entry.attempts == 0:
            verdict, error = await self._gate.check(entry, host)
            if verdict is Verdict.WAIT:
                self.schedule.unreserve(entry, host)
                return self.schedule.defer(entry, host, ROBOTS_RETRY_PERIOD)
            if verdict is not Verdict.ALLOW:
                self.schedule.unreserve(entry, host)
                record = make_record(entry, error, t=self._clock.t())
                return await self._recorder.finish(entry, record)
            if self._pool.stopping or self.frontier.budget_spent:
                return self._drop(entry, host)
        at_once = self._slots.answered_at_once(entry, host)  # no request: no slot
        if not at_once and not self.schedule.try_start(entry, host):
            return  # parked in the schedule; our token goes back to the pool
        self._slots.hold(entry.url, held=not at_once)
        if not self.frontier.start(entry):
            return self._slots.release(entry.url)
        if entry.attempts == 1 and self.frontier.budget_spent:
            # That was the last page of the budget: what waits for a first
            # start will never get one, so it stops counting as work now.
            for parked in self.schedule.remove_unstarted():
                self.frontier.abandon(parked)
        t0 = self._clock.now()
        result: FetchResult | None = None
        failure: FetchError | None = None
        try:
            result = await fetch_entry(self._fetcher, entry, self.config, self.revisits.ask(entry))
        except FetchError as exc:
            failure = exc
        finally:
            self._slots.release(entry.url)  # unless the fetcher did (a page to render)
        elapsed_ms = round((self._clock.now() - t0) * 1000, 3)
        if result is not None:
            self._responses.heard(entry, result)  # settled before the record
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
            await self._responses.settle(entry)
            return self.schedule.defer(entry, host, outcome.delay)
        if outcome.step is Step.RECORD:
            record = make_record(entry, outcome.error, result, elapsed_ms, t=self._clock.t())
            return await self._recorder.finish(entry, record)
        assert result is not None
        if outcome.step is Step.REDIRECT:
            return await self._recorder.redirect(entry, result, elapsed_ms)
        await self._read_page(entry, result, elapsed_ms)

    async def _read_page(self, entry: Entry, result: FetchResult, elapsed_ms: float) -> None:
        page = await self._pages.read(entry, result, handler_for(entry, self.config))
        record = make_record(
            entry,
            page.error,
            result,
            elapsed_ms,
            links=page.followed,
            tb=page.traceback,
            t=self._clock.t(),
        )
        await self._recorder.finish(entry, record, page.links)
