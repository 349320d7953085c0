"""The crawl engine: trio tasks around the pure frontier and schedule.

The design card
---------------
A nursery runs N crawler tasks that share cloned ends of one unbounded
memory channel. Each crawler holds a ``trio.CapacityLimiter`` token while it
is active and publishes the URLs it discovers with ``send_nowait``. A
supervisor cancels the nursery once no tokens are borrowed and the buffer is
empty: exactly then, never earlier, woken by events, not by polling.

The termination invariant
-------------------------
At every checkpoint, every unfinished URL is in exactly one of three places:

  (a) the channel's buffer (queued; requests with a non-zero priority wait
      in a small heap beside it, which counts as part of the buffer),
  (b) a crawler that holds a limiter token (held, in flight, or being parsed),
  (c) the schedule (``PoliteSchedule.waiting``: behind its host's rate or
      concurrency limit, or in a retry back-off).

so "unfinished == 0" is exactly::

    limiter.borrowed_tokens == 0
    and channel.statistics().current_buffer_used == 0  # (+ priority heap)
    and schedule.waiting == 0

Three rules make the invariant hold (docs/termination.md has the race
analysis):

1. A crawler *takes* a URL and *borrows* its token in one synchronous step
   (``receive_nowait`` then ``acquire_on_behalf_of_nowait``, no checkpoint in
   between). ``await receive()`` would not do: it checkpoints after taking the
   item, and a memory channel hands an item straight to a parked receiver
   without it ever showing in the buffer, so a supervisor could see an empty
   buffer and no tokens while a URL is in a crawler's hands.
   Idle crawlers wait in a ``ParkingLot`` that every publish unparks.
2. Every move between (a), (b) and (c) is synchronous: publishing children
   happens before the token is released, and the schedule hands due URLs to
   the channel with ``send_nowait`` in the same step that removes them.
3. Only a token release can make the condition true (the other moves go from
   one place to another), so the crawler that releases the last token checks
   the condition and sets an Event the supervisor waits on. The supervisor
   re-checks it (and cross-checks the frontier's own count) and cancels.

Pages are the site's business and failures become records; a broken
invariant is our bug and ends the crawl with an exception.
"""

from __future__ import annotations

import contextlib
import heapq
import inspect
import itertools
import math
import random
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import trio

from ._config import CrawlConfig
from ._fetch import Fetcher, is_html_content_type
from ._frontier import Entry, Frontier, RedirectOutcome
from ._models import CrawlRecord, ErrorInfo, FetchError, FetchResult
from ._parse import extract_links
from ._persist import FLUSH_INTERVAL, DiskBacklog
from ._retry import RetryPolicy
from ._robots import robots_url
from ._robots_cache import RobotsCache
from ._schedule import PoliteSchedule
from ._scrape import Handler, Page, Request
from ._sitemap import SitemapError, parse_sitemap
from ._state import Finish, Start
from ._stats import CrawlStats, CrawlSummary
from ._url import Scope, canonicalize, host_port, resolve

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: How long an unreachable robots.txt keeps its host disallowed before the
#: one re-fetch its URLs wait for.
ROBOTS_RETRY_PERIOD = 10.0
#: With ``--state``: queued URLs held in memory; the rest wait on disk.
DEFAULT_WINDOW = 10_000
MAX_SITEMAPS_PER_HOST = 50

RecordCallback = Callable[[CrawlRecord], None]


@dataclass(frozen=True, slots=True)
class EngineStatistics:
    """A snapshot for progress displays (all counts are exact at the instant)."""

    records: int
    failures: int
    queued: int
    active: int
    waiting: int
    seen: int
    elapsed: float


class Crawler:
    """One crawl. Run it with ``await crawler.run()`` (or via ``open_crawler``).

    ``on_record`` callbacks are called synchronously, in the crawler task, as
    each record is final: a sink that writes and flushes there loses nothing
    if the process is killed a moment later.
    """

    def __init__(
        self,
        config: CrawlConfig,
        fetcher: Fetcher,
        *,
        on_record: Iterable[RecordCallback] = (),
        record_channel: trio.MemorySendChannel[CrawlRecord] | None = None,
        item_channel: trio.MemorySendChannel[object] | None = None,
        on_item: Iterable[Callable[[object], None]] = (),
        rng: random.Random | None = None,
        backlog: DiskBacklog | None = None,
        window: int = DEFAULT_WINDOW,
        scope: Scope | None = None,
        already_started: int = 0,
        refetched: Iterable[str] = (),
    ) -> None:
        """``backlog`` (``--state``): queued URLs live on disk and at most
        ``window`` of them in memory; the caller has put the start URLs (and
        seeds) in it, and ``scope`` then says which hosts they cover.
        ``already_started`` counts pages a previous run fetched (``max_pages``);
        records of ``refetched`` URLs are marked ``"refetched": true``."""
        self.config = config
        self._fetcher = fetcher
        self._on_record = list(on_record)
        self._record_channel = record_channel
        self._item_channel = item_channel
        self._on_item = list(on_item)
        self._rng = rng or random.Random()
        self._scope = scope or Scope(config.start_url_strings, config.allow_domains)
        self._backlog = backlog
        self._window = window
        self._feed_wanted = trio.Event()
        self._refetched = set(refetched)
        self.frontier = Frontier(
            in_scope=self._scope.allows,
            max_depth=config.max_depth,
            max_pages=config.max_pages,
            remember_seen=backlog is None,
        )
        self.frontier.started = already_started
        self.schedule: PoliteSchedule[Entry] = PoliteSchedule(
            rate=config.rate, max_per_host=config.per_host_concurrency
        )
        self._retry = RetryPolicy(retries=config.retries, max_retry_after=config.max_retry_after)
        self._robots: RobotsCache | None = None
        if not config.ignore_robots:
            self._robots = RobotsCache(
                fetcher, config.user_agent, retry_period=ROBOTS_RETRY_PERIOD
            )
        self._hosts_set_up: set[str] = set()
        self._waited_for_robots: set[Entry] = set()
        self.stats = CrawlStats()
        self._limiter = trio.CapacityLimiter(config.workers)
        self._send, self._receive = trio.open_memory_channel[Entry](math.inf)
        self._work_posted = trio.lowlevel.ParkingLot()
        self._prioritized: list[tuple[int, int, Entry]] = []
        self._seq = itertools.count()
        self._idle = trio.Event()
        self._wake_supervisor = trio.Event()
        self._schedule_changed = trio.Event()
        self._stopping = False
        self._aborted = False
        self._started_at: float | None = None
        self._finished_at: float | None = None
        self._nursery_scope: trio.CancelScope | None = None
        self._parse_limiter = trio.CapacityLimiter(2)

    # -- public ------------------------------------------------------------

    async def run(self) -> CrawlSummary:
        """Crawl until no work is left (or ``stop()``); return the summary."""
        if self._started_at is not None:
            raise RuntimeError("a Crawler runs once")
        self._started_at = trio.current_time()
        if self._aborted:
            self._finished_at = self._started_at
            return self.summary()
        try:
            # strict: the same error shape on every trio we support (0.23.2+)
            async with trio.open_nursery(strict_exception_groups=True) as nursery:
                self._nursery_scope = nursery.cancel_scope
                async with self._send, self._receive:
                    if self._backlog is None:
                        for start in self.config.start_urls:
                            if isinstance(start, Request):
                                admitted = self.frontier.add_start(start.url, payload=start)
                            else:
                                admitted = self.frontier.add_start(start)
                            for entry in admitted:
                                self._publish(self._send, entry)
                    else:
                        nursery.start_soon(self._feed_from_disk, self._backlog, self._send.clone())
                        nursery.start_soon(self._flush_periodically, self._backlog)
                    nursery.start_soon(self._supervise, nursery.cancel_scope)
                    nursery.start_soon(self._release_parked_on_time, self._send.clone())
                    for _ in range(self.config.workers):
                        nursery.start_soon(
                            self._crawler, self._receive.clone(), self._send.clone()
                        )
                    self._check_idle()
        finally:
            self._finished_at = trio.current_time()
            if self._backlog is not None:
                with trio.move_on_after(30) as cleanup:
                    cleanup.shield = True
                    await self._backlog.flush()
        return self.summary()

    def stop(self) -> None:
        """Graceful stop: no new fetches; in-flight ones get ``config.grace``
        seconds to finish, then the crawl is cancelled. Calling it again
        cancels at once. Not a checkpoint."""
        if self._stopping:
            self.abort()
            return
        self._stopping = True
        for entry in self.schedule.drain():
            self.frontier.abandon(entry)
        self._work_posted.unpark_all()  # idle crawlers drain the channel
        self._poke_schedule()
        self._wake_supervisor.set()
        self._check_idle()

    def abort(self) -> None:
        """Cancel the crawl now; records already written stay written."""
        self._stopping = True
        self._aborted = True
        if self._nursery_scope is not None:
            self._nursery_scope.cancel()

    def attach_records(self, send: trio.MemorySendChannel[CrawlRecord]) -> None:
        """Deliver every record to ``send`` too (awaiting room: backpressure)."""
        self._record_channel = send

    def attach_items(self, send: trio.MemorySendChannel[object]) -> None:
        """Deliver handlers' items to ``send`` (awaiting room: backpressure)."""
        self._item_channel = send

    @property
    def stopping(self) -> bool:
        return self._stopping

    def statistics(self) -> EngineStatistics:
        now = trio.current_time()
        start = self._started_at if self._started_at is not None else now
        end = self._finished_at if self._finished_at is not None else now
        return EngineStatistics(
            records=self.stats.records,
            failures=sum(self.stats.failures.values()),
            queued=self._receive.statistics().current_buffer_used + len(self._prioritized),
            active=int(self._limiter.borrowed_tokens),
            waiting=self.schedule.waiting,
            seen=len(self.frontier.seen),
            elapsed=end - start,
        )

    def summary(self) -> CrawlSummary:
        s = self.statistics()
        f = self.frontier.statistics()
        return self.stats.summary(
            elapsed=s.elapsed, stopped=self._stopping, unfinished=f.unfinished + f.dropped
        )

    # -- the three kinds of task ------------------------------------------

    async def _supervise(self, cancel_scope: trio.CancelScope) -> None:
        """Cancel the nursery exactly when the invariant says no work is left.

        Woken by the last token release (rule 3) or by ``stop()``; never polls.
        """
        await self._wake_supervisor.wait()
        if not self._is_idle():
            # stop() was called with work in flight: give it the grace period.
            with trio.move_on_after(self.config.grace):
                await self._idle.wait()
        elif self.frontier.unfinished != 0:
            raise RuntimeError(
                "termination invariant broken: channel, limiter and schedule are "
                f"empty but the frontier has {self.frontier.unfinished} unfinished"
            )
        cancel_scope.cancel()

    async def _crawler(
        self,
        receive: trio.MemoryReceiveChannel[Entry],
        send: trio.MemorySendChannel[Entry],
    ) -> None:
        async with receive, send:
            while True:
                try:
                    entry = self._take_prioritized(receive)
                except trio.WouldBlock:
                    await self._work_posted.park()
                    continue
                # Rule 1: no checkpoint between taking the URL and the token.
                self._limiter.acquire_on_behalf_of_nowait(entry)
                try:
                    await self._handle(entry, send)
                except BaseException:
                    # Cancelled, or a bug: the crawl is ending anyway; don't
                    # let an "idle" verdict mask the real exception.
                    self._limiter.release_on_behalf_of(entry)
                    raise
                self._limiter.release_on_behalf_of(entry)
                self._check_idle()

    async def _release_parked_on_time(self, send: trio.MemorySendChannel[Entry]) -> None:
        """Hands parked URLs back to the crawlers when their time comes."""
        async with send:
            while True:
                deadline = self.schedule.next_deadline()
                with trio.move_on_at(math.inf if deadline is None else deadline):
                    await self._schedule_changed.wait()
                if self._schedule_changed.is_set():
                    self._schedule_changed = trio.Event()
                self._hand_over_ready(send)

    async def _feed_from_disk(
        self, backlog: DiskBacklog, send: trio.MemorySendChannel[Entry]
    ) -> None:
        """Refills the memory window from the disk queue as crawlers drain it.

        Disk-queued URLs are the invariant's fourth place: ``queued_on_disk``
        drops in the same synchronous step that publishes what was taken."""
        async with send:
            self._want_feed()
            while True:
                await self._feed_wanted.wait()
                self._feed_wanted = trio.Event()
                while self._disk_pending() and self._buffered() < self._window:
                    rows = await backlog.take(self._window - self._buffered())
                    if self._stopping:
                        break  # taken rows stay QUEUED_MEM: recovered next run
                    for row in rows:
                        if row.attempts:
                            self._refetched.add(row.url)
                        self._publish(send, self.frontier.adopt(row.url, row.depth, row.referrer))
                self._check_idle()

    async def _flush_periodically(self, backlog: DiskBacklog) -> None:
        while True:
            await trio.sleep(FLUSH_INTERVAL)
            await backlog.flush()

    # -- bookkeeping helpers (all synchronous) ----------------------------

    def _publish(self, send: trio.MemorySendChannel[Entry], entry: Entry) -> None:
        request = entry.payload
        if isinstance(request, Request) and request.priority:
            # Rare: requests with a priority wait in a heap beside the channel
            # (place 1 of the invariant too), taken before/after the channel.
            heapq.heappush(self._prioritized, (-request.priority, next(self._seq), entry))
        else:
            send.send_nowait(entry)
        self._work_posted.unpark()

    def _take_prioritized(self, receive: trio.MemoryReceiveChannel[Entry]) -> Entry:
        """The next queued entry: higher priority first, FIFO within a level.
        Synchronous (rule 1); raises WouldBlock when nothing is queued."""
        heap = self._prioritized
        if heap and heap[0][0] < 0:
            return heapq.heappop(heap)[2]
        try:
            entry = receive.receive_nowait()
        except trio.WouldBlock:
            self._want_feed()
            if heap:
                return heapq.heappop(heap)[2]
            raise
        if self._backlog is not None and self._buffered() < self._window // 2:
            self._want_feed()
        return entry

    def _buffered(self) -> int:
        return self._receive.statistics().current_buffer_used + len(self._prioritized)

    def _want_feed(self) -> None:
        if self._backlog is not None and self._backlog.queued_on_disk:
            self._feed_wanted.set()

    def _disk_pending(self) -> int:
        """Disk-queued URLs that still count as unfinished work: none once the
        crawl is stopping or its page budget is spent (they stay queued in the
        state file for the next run)."""
        backlog = self._backlog
        if backlog is None or self._stopping or self.frontier.budget_spent:
            return 0
        return backlog.queued_on_disk

    def _hand_over_ready(self, send: trio.MemorySendChannel[Entry]) -> None:
        for entry in self.schedule.pop_ready(trio.current_time()):
            self._publish(send, entry)

    def _poke_schedule(self) -> None:
        self._schedule_changed.set()

    def _is_idle(self) -> bool:
        return (
            self._limiter.borrowed_tokens == 0
            and self._receive.statistics().current_buffer_used == 0
            and not self._prioritized
            and self.schedule.waiting == 0
            and self._disk_pending() == 0
        )

    def _check_idle(self) -> None:
        if self._is_idle():
            self._idle.set()
            self._wake_supervisor.set()

    # -- one URL -----------------------------------------------------------

    async def _handle(self, entry: Entry, send: trio.MemorySendChannel[Entry]) -> None:
        """Take one entry from the channel to a record, a retry or a parking."""
        host = host_port(entry.url)
        if self._stopping:
            self.schedule.unreserve(entry, host)
            self.frontier.abandon(entry)
            return
        if self._robots is not None and entry.attempts == 0:
            if not await self._robots_allow(self._robots, entry, host, send):
                return
            if self._stopping:
                self.schedule.unreserve(entry, host)
                self.frontier.abandon(entry)
                return
        if entry.attempts == 0 and self.frontier.budget_spent:
            self.schedule.unreserve(entry, host)
            self.frontier.abandon(entry)
            return
        if not self.schedule.try_start(entry, host, trio.current_time()):
            self._poke_schedule()
            return  # parked in the schedule; our token goes back to the pool
        started = self.frontier.start(entry)
        if started and self._backlog is not None:
            self._backlog.note(Start(entry.url))
        if not started:  # pragma: no cover - budget checked above without a checkpoint
            self.schedule.release(host)
            return
        t0 = trio.current_time()
        result: FetchResult | None = None
        failure: FetchError | None = None
        try:
            request = entry.payload
            if isinstance(request, Request):
                headers = dict(request.headers) if request.headers else None
                result = await self._fetcher.fetch(entry.url, headers, any_body=True)
            elif self.config.handler is not None:  # a handler may want JSON, PDFs...
                result = await self._fetcher.fetch(entry.url, any_body=True)
            else:
                result = await self._fetcher.fetch(entry.url)
        except FetchError as exc:
            failure = exc
        finally:
            self.schedule.release(host)
            if self.schedule.waiting:
                self._hand_over_ready(send)
                self._poke_schedule()
        elapsed_ms = round((trio.current_time() - t0) * 1000, 3)
        if self._should_retry(entry, result, failure):
            retry_after = result.headers.get("retry-after") if result is not None else None
            delay = self._retry.delay(entry.attempts, self._rng, retry_after, time.time())
            self.schedule.defer(entry, host, trio.current_time() + delay)
            self._poke_schedule()
            return
        if failure is not None:
            await self._finish(
                entry,
                send,
                self._record(entry, error=(failure.kind, failure.message), elapsed_ms=elapsed_ms),
            )
            return
        assert result is not None
        await self._handle_response(entry, result, elapsed_ms, send)

    async def _robots_allow(
        self,
        robots: RobotsCache,
        entry: Entry,
        host: str,
        send: trio.MemorySendChannel[Entry],
    ) -> bool:
        """Apply robots.txt to ``entry``; False when it was dealt with here.

        The first URL of a host fetches robots.txt (others wait on that one
        fetch), applies its Crawl-delay, and with ``sitemaps`` seeds the crawl
        from its Sitemap: lines. An unreachable robots.txt disallows the host
        for a while: its URLs wait (parked, still unfinished) for one re-fetch
        before they are recorded as disallowed.
        """
        policy = robots.policy_nowait(entry.url)
        if policy is None:
            policy = await robots.policy_for(entry.url)
        if host not in self._hosts_set_up:
            self._hosts_set_up.add(host)
            self.schedule.set_crawl_delay(host, policy.crawl_delay)
            if self.config.sitemaps:
                await self._seed_from_sitemaps(entry.url, policy.sitemaps, send)
        if policy.allows(entry.url):
            return True
        self.schedule.unreserve(entry, host)
        if policy.temporary and entry not in self._waited_for_robots:
            self._waited_for_robots.add(entry)
            self.schedule.defer(entry, host, trio.current_time() + ROBOTS_RETRY_PERIOD)
            self._poke_schedule()
            return False
        self._waited_for_robots.discard(entry)
        record = self._record(entry, error=("robots", f"disallowed ({policy.reason})"))
        await self._finish(entry, send, record)
        return False

    async def _seed_from_sitemaps(
        self, page_url: str, listed: list[str], send: trio.MemorySendChannel[Entry]
    ) -> None:
        """Fetch the host's sitemaps (nested ones too, bounded) and admit their
        in-scope URLs as start URLs. Runs inside a crawler holding its token,
        so the crawl cannot end while sitemaps are being read."""
        todo = list(listed) or [robots_url(page_url).removesuffix("robots.txt") + "sitemap.xml"]
        done: set[str] = set()
        while todo and len(done) < MAX_SITEMAPS_PER_HOST:
            sitemap = todo.pop(0)
            if sitemap in done:
                continue
            done.add(sitemap)
            try:
                result = await self._fetcher.fetch(sitemap, any_body=True)
                if result.status != 200:
                    continue
                pages, nested = parse_sitemap(result.body)
            except (FetchError, SitemapError):
                continue  # a missing or broken sitemap only means fewer seeds
            for page in pages:
                canonical = canonicalize(page)
                if canonical is None:
                    continue
                for entry in self.frontier.add_start(canonical, referrer=sitemap, scoped=True):
                    self._publish(send, entry)
            todo.extend(nested)

    def _should_retry(
        self, entry: Entry, result: FetchResult | None, failure: FetchError | None
    ) -> bool:
        if self._stopping or entry.attempts > self._retry.retries:
            return False
        if failure is not None:
            return self._retry.should_retry_error(failure.kind)
        assert result is not None
        return self._retry.should_retry_status(result.status)

    async def _handle_response(
        self,
        entry: Entry,
        result: FetchResult,
        elapsed_ms: float,
        send: trio.MemorySendChannel[Entry],
    ) -> None:
        status = result.status
        if status in REDIRECT_STATUSES:
            await self._handle_redirect(entry, result, elapsed_ms, send)
            return
        error: tuple[str, str] | None = None
        if status == 429:
            error = ("http_429", "HTTP 429")
        elif status >= 500:
            error = ("http_5xx", f"HTTP {status}")
        elif status >= 400:
            error = ("http_4xx", f"HTTP {status}")
        handler = self._handler_for(entry)
        links: list[str] = []
        followed = 0
        tb: str | None = None
        if error is None and handler is not None:
            try:
                followed = await self._run_handler(handler, entry, result, send)
            except Exception as exc:
                if self.config.fail_fast:
                    raise
                error = ("handler", f"{type(exc).__name__}: {exc}")
                tb = traceback.format_exc() if self.config.debug else None
        elif (
            error is None and not result.body_skipped and is_html_content_type(result.content_type)
        ):
            try:
                links = await self._extract(result.body, entry.url, result.content_type)
            except Exception as exc:  # a page that breaks the parser is a record
                error = ("internal", f"link extraction failed: {exc!r}")
                tb = traceback.format_exc() if self.config.debug else None
            followed = len(links)
        record = self._record(
            entry,
            status=status,
            error=error,
            content_type=result.content_type,
            elapsed_ms=elapsed_ms,
            links=followed,
            tb=tb,
        )
        await self._finish(entry, send, record, links)

    def _handler_for(self, entry: Entry) -> Handler | None:
        request = entry.payload
        if isinstance(request, Request) and request.handler is not None:
            return request.handler
        return self.config.handler

    async def _run_handler(
        self,
        handler: Handler,
        entry: Entry,
        result: FetchResult,
        send: trio.MemorySendChannel[Entry],
    ) -> int:
        """Run a user handler on the page; publish its requests, deliver its
        items. Returns the number of requests it made. Runs while the entry is
        held, so whatever it yields is accounted for before the token goes."""
        request = entry.payload
        page = Page(
            result,
            url=entry.url,
            depth=entry.depth,
            meta=request.meta if isinstance(request, Request) else {},
            in_scope=self._scope.allows,
            thread_limiter=self._parse_limiter,
        )
        produced = handler(page)
        requests = 0
        if inspect.isasyncgen(produced):
            async with contextlib.aclosing(produced):
                async for output in produced:
                    requests += await self._take_output(output, entry, send)
        else:
            outputs = await produced  # type: ignore[misc]
            for output in outputs or ():
                requests += await self._take_output(output, entry, send)
        return requests

    async def _take_output(
        self, output: object, entry: Entry, send: trio.MemorySendChannel[Entry]
    ) -> int:
        if output is None:
            return 0
        if isinstance(output, Request):
            # Relative URLs resolve against the page, like links; a request that
            # is not followable (bad URL, other scheme, out of scope) is dropped
            # and not counted in the record's ``links``.
            url = resolve(output.url, entry.url)
            if url is None or not self._scope.allows(url):
                return 0
            for child in self.frontier.offer(url, entry.depth, entry.url, output):
                self._publish(send, child)
            return 1
        self.stats.items += 1
        for callback in self._on_item:
            callback(output)
        if self._item_channel is not None:
            try:
                await self._item_channel.send(output)
            except trio.BrokenResourceError:
                self._item_channel = None
        return 0

    async def _handle_redirect(
        self,
        entry: Entry,
        result: FetchResult,
        elapsed_ms: float,
        send: trio.MemorySendChannel[Entry],
    ) -> None:
        location = result.headers.get("location")
        target = resolve(location, entry.url) if location else None
        error: tuple[str, str] | None = None
        admitted: list[Entry] = []
        if target is None:
            error = ("bad_redirect", f"unusable Location: {location!r}")
        else:
            outcome, admitted = self.frontier.redirect(entry, target)
            if (
                outcome is RedirectOutcome.FOLLOW
                and self._backlog is not None
                and not await self._backlog.admit([target], entry.depth, entry.url, room=1)
            ):
                # The state file is the seen set, and it knows the target. (A new
                # target stays in memory, with its redirect chain.)
                for child in admitted:
                    self.frontier.abandon(child)
                admitted = []
            if outcome in (
                RedirectOutcome.LOOP,
                RedirectOutcome.TOO_MANY,
                RedirectOutcome.OUT_OF_SCOPE,
            ):
                error = (outcome.value, f"redirect to {target}")
        record = self._record(
            entry,
            status=result.status,
            error=error,
            redirect=target,
            content_type=result.content_type,
            elapsed_ms=elapsed_ms,
        )
        for child in admitted:
            self._publish(send, child)
        await self._finish(entry, send, record)

    async def _extract(self, body: bytes, url: str, content_type: str | None) -> list[str]:
        if len(body) >= self.config.thread_parse_bytes:
            return await trio.to_thread.run_sync(
                extract_links, body, url, content_type, limiter=self._parse_limiter
            )
        return extract_links(body, url, content_type)

    def _record(
        self,
        entry: Entry,
        *,
        status: int | None = None,
        error: tuple[str, str] | None = None,
        redirect: str | None = None,
        content_type: str | None = None,
        elapsed_ms: float | None = None,
        links: int = 0,
        tb: str | None = None,
    ) -> CrawlRecord:
        return CrawlRecord(
            url=entry.url,
            status=status,
            depth=entry.depth,
            error=None if error is None else ErrorInfo(error[0], error[1], tb),
            redirect=redirect,
            referrer=entry.referrer,
            content_type=content_type,
            elapsed_ms=elapsed_ms,
            links=links,
            attempts=entry.attempts,
            t=round(trio.current_time() - (self._started_at or 0.0), 3),
        )

    async def _admit_from_disk(
        self,
        backlog: DiskBacklog,
        entry: Entry,
        send: trio.MemorySendChannel[Entry],
        links: list[str] | None,
    ) -> None:
        """``--state``: the state file decides what is new; as many new links
        as the memory window has room for are published, the rest wait on
        disk. Committed before the page's record is written (``_persist``)."""
        child_depth = entry.depth + 1
        if not links:
            return
        if self.config.max_depth is not None and child_depth > self.config.max_depth:
            return
        in_scope = [url for url in links if self._scope.allows(url)]
        if not in_scope:
            return
        # With the page budget spent, links still go to disk: a resumed run
        # with a larger budget (--force) must find them.
        room = 0 if self.frontier.budget_spent else self._window - self._buffered()
        for url in await backlog.admit(in_scope, child_depth, entry.url, room):
            self._publish(send, self.frontier.adopt(url, child_depth, entry.url))

    async def _finish(
        self,
        entry: Entry,
        send: trio.MemorySendChannel[Entry],
        record: CrawlRecord,
        links: list[str] | None = None,
    ) -> None:
        """Publish the children, then deliver the record, all before the
        token is released (rule 2). Awaiting a slow record consumer is safe:
        the entry is still held, so the crawl cannot end under it."""
        if self._backlog is None:
            for child in self.frontier.finish(entry, links):
                self._publish(send, child)
        else:
            await self._admit_from_disk(self._backlog, entry, send, links)
            self.frontier.finish(entry)
            if entry.url in self._refetched:
                self._refetched.discard(entry.url)
                record.extra["refetched"] = True
        self.stats.add(record)
        for callback in self._on_record:
            callback(record)
        if self._backlog is not None:
            self._backlog.note(Finish(entry.url))
        if self._record_channel is not None:
            try:
                await self._record_channel.send(record)
            except trio.BrokenResourceError:
                # The reader left (open_crawler's block ended): it is cancelling
                # us; records keep going to the callbacks until it does.
                self._record_channel = None
