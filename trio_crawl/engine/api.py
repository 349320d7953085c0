"""The library's front door: ``open_crawler``, ``run_crawl``, ``open_fetcher``.

Every background task here has a visible owner: ``open_crawler`` owns the
nursery the crawl runs in, and leaving its ``async with`` block before the
crawl ends cancels the crawl (records already delivered stay delivered).
A single error is raised bare, never wrapped in an ExceptionGroup.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar, Unpack

import trio

from ..core.config import CrawlConfig
from ..core.config import CrawlOptions as CrawlOptions  # re-exported: the library's face
from ..core.models import CrawlRecord
from ..core.scrape import Request
from ..core.stats import CrawlSummary
from ..fetch.base import Fetcher
from ..frontiers.base import FrontierSpec
from .build import CrawlPlan, open_crawl
from .crawler import Crawler
from .delivery import DepthUpdateCallback, ItemCallback, RecordCallback
from .fetchers import open_fetcher as open_fetcher  # re-exported: the library's face
from .statistics import EngineStatistics

T = TypeVar("T")
C = TypeVar("C")

#: Seconds a crawl waits for an items() reader before it warns that nobody reads.
UNREAD_ITEMS_WARNING = 10.0

#: One start URL or Request, or several.
StartURLs = str | Request | Iterable[str | Request]


def crawl_config(start_urls: StartURLs, options: CrawlOptions) -> CrawlConfig:
    """``CrawlConfig`` from a URL (or Request), or several, and the options."""
    if isinstance(start_urls, str | Request):
        start_urls = [start_urls]
    return CrawlConfig.from_options(start_urls, **options)


def _single(exc: BaseException) -> BaseException:
    """Unwrap ExceptionGroups that hold exactly one exception."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextlib.asynccontextmanager
async def _unwrapped() -> AsyncIterator[None]:
    try:
        yield
    except BaseExceptionGroup as group:
        single = _single(group)
        if single is group:
            raise
        raise single from None


def _one(callback: C | None) -> tuple[C, ...]:
    return () if callback is None else (callback,)


def _plan(
    config: CrawlConfig,
    fetcher: Fetcher | None,
    frontier: FrontierSpec | None,
    state: str | None,
    warc: str | None,
    on_record: RecordCallback | None,
    on_item: ItemCallback | None,
    on_depth_update: DepthUpdateCallback | None,
) -> CrawlPlan:
    """The plan both library entry points hand to the crawl builder."""
    return CrawlPlan(
        config=config,
        fetcher=fetcher,
        frontier=frontier,
        state=state,
        warc=warc,
        on_record=_one(on_record),
        on_item=_one(on_item),
        on_depth_update=_one(on_depth_update),
    )


async def run_crawl(
    start_urls: StartURLs,
    *,
    on_record: RecordCallback | None = None,
    on_item: ItemCallback | None = None,
    fetcher: Fetcher | None = None,
    frontier: FrontierSpec | None = None,
    state: str | None = None,
    warc: str | None = None,
    on_depth_update: DepthUpdateCallback | None = None,
    **options: Unpack[CrawlOptions],
) -> CrawlSummary:
    """Crawl to the end and return the summary.

    ``start_urls`` is a URL, a ``Request``, or an iterable of them;
    ``options`` are ``CrawlConfig`` fields (``workers``, ``max_depth``, ...:
    ``CrawlOptions``). ``on_record`` is called synchronously for each record
    as it is final, ``on_item`` for each item a handler yields,
    ``on_depth_update`` for each ``DepthUpdate`` (a shorter path to a URL
    whose record was already out, with or without ``state``). ``state``
    names a SQLite file that keeps the crawl's frontier: the same call again
    resumes it; ``frontier=redis_frontier(url, crawl_id)`` shares the crawl
    through Redis (see ``open_crawler``). ``warc`` names a WARC file that
    archives every exchange (see ``open_crawler``).
    """
    plan = _plan(
        crawl_config(start_urls, options),
        fetcher,
        frontier,
        state,
        warc,
        on_record,
        on_item,
        on_depth_update,
    )
    async with _unwrapped(), open_crawl(plan) as built:
        summary = await built.crawler.run()
    built.raise_if_failed()  # after the writer has finished what it was sent
    return summary


def _may_yield_items(config: CrawlConfig) -> bool:
    """Only handlers make items: the crawl's own, or one a start Request names
    (a handler's Requests can name others, but only once a handler runs)."""
    return config.handler is not None or any(
        isinstance(start, Request) and start.handler is not None for start in config.start_urls
    )


class RunningCrawl:
    """A crawl running in the background of ``open_crawler``.

    Two output streams: ``records()`` (one ``CrawlRecord`` per URL tried; also
    what iterating the crawl itself gives) and ``items()`` (what handlers
    yield).

    * Items are kept for you from the start, whenever you subscribe: a
      crawl with a handler waits for its items to be read (backpressure), so
      read ``items()``, or ``await wait()``, which drops them. A crawl whose
      items nobody reads pauses once ``buffer`` of them wait, with a
      ``RuntimeWarning``. With ``on_item=``, the callback gets every item and
      ``items()`` only those after you subscribe.
    * Records are delivered from when you subscribe: call ``records()`` (or
      iterate the crawl) before your first checkpoint in the block (the
      crawl starts there), or pass ``on_record=``. Subscribing later misses
      the records made before, with a ``RuntimeWarning`` that says so.

    A subscribed stream has ``buffer`` slots: a reader that falls behind
    slows the crawl down, and a reader that stops reading pauses it until it
    reads again or leaves the block, which cancels the crawl. ``await
    wait()`` drains both streams and returns the summary; after the block,
    ``summary`` has it too.
    """

    def __init__(self, crawler: Crawler, buffer: int, *, keep_items: bool = False) -> None:
        #: The engine: not part of the handle (its outputs, ``stop``,
        #: ``statistics`` and ``summary`` are).
        self._crawler = crawler
        self._buffer = buffer
        self._record_send, self._record_receive = trio.open_memory_channel[CrawlRecord](buffer)
        self._item_send, self._item_receive = trio.open_memory_channel[object](buffer)
        self._records_wanted = False
        self._items_wanted = False
        self._done = trio.Event()
        self._summary: CrawlSummary | None = None
        # Items kept from the start pass through a relay, which notices
        # when the crawl is waiting for a reader that never came.
        self._relay: tuple[trio.MemorySendChannel[object], trio.MemoryReceiveChannel[object]]
        self._relay = trio.open_memory_channel[object](0)
        self._keep_items = keep_items
        if keep_items:
            crawler.attach_items(self._relay[0])

    def __aiter__(self) -> AsyncIterator[CrawlRecord]:
        return self.records()

    def records(self) -> AsyncIterator[CrawlRecord]:
        """Subscribe to the records; the iterator ends with the crawl."""
        if not self._records_wanted:
            self._records_wanted = True
            self._warn_if_missed("records", self._crawler.stats.records, "on_record=")
            self._crawler.attach_records(self._record_send)
        return self._drain(self._record_receive)

    def items(self) -> AsyncIterator[object]:
        """Subscribe to the handlers' items; the iterator ends with the crawl."""
        if not self._items_wanted:
            self._items_wanted = True
            if not self._keep_items:
                self._warn_if_missed("items", self._crawler.stats.items, "on_item=")
                self._crawler.attach_items(self._item_send)
        return self._drain(self._item_receive)

    def _warn_if_missed(self, what: str, made: int, callback: str) -> None:
        if made and self._summary is None:
            warnings.warn(
                f"{made:,} {what} were made before {what}() was called and are not in "
                f"its stream: call {what}() before the crawl's first checkpoint, or pass "
                f"{callback}",
                RuntimeWarning,
                stacklevel=3,
            )

    @staticmethod
    async def _drain(receive: trio.MemoryReceiveChannel[T]) -> AsyncIterator[T]:
        with contextlib.suppress(trio.ClosedResourceError):  # read after the block: ended
            async for value in receive:
                yield value

    async def wait(self) -> CrawlSummary:
        """Wait for the end of the crawl (reading and dropping the outputs
        nobody else reads); return its summary."""
        async with trio.open_nursery() as nursery:
            if self._records_wanted:
                nursery.start_soon(self._discard, self._record_receive)
            if self._items_wanted or self._keep_items:
                nursery.start_soon(self._discard, self._item_receive)
            await self._done.wait()
        return self.summary

    @staticmethod
    async def _discard(receive: trio.MemoryReceiveChannel[T]) -> None:
        with contextlib.suppress(trio.ClosedResourceError):
            async for _ in receive:
                pass

    def stop(self) -> None:
        """Graceful stop (see ``Crawler.stop``)."""
        self._crawler.stop()

    def statistics(self) -> EngineStatistics:
        return self._crawler.statistics()

    @property
    def ended(self) -> bool:
        return self._summary is not None

    @property
    def summary(self) -> CrawlSummary:
        """The crawl's summary, once it has ended (after the ``async with``
        block, or after ``await wait()``). Raises RuntimeError before that."""
        if self._summary is None:
            raise RuntimeError(
                "the crawl has not ended yet: read crawl.summary after the async with "
                "block, or get it from await crawl.wait()"
            )
        return self._summary

    async def _run(self) -> None:
        async with self._record_send, self._relay[0] if self._keep_items else self._item_send:
            self._summary = await self._crawler.run()
        self._done.set()

    async def _relay_items(self) -> None:
        """Pass kept items on to the reader's channel, and say so (once) when
        the crawl has to wait for a reader that has not subscribed."""
        warned = False
        async with self._relay[1], self._item_send:
            async for item in self._relay[1]:
                try:
                    self._item_send.send_nowait(item)
                    continue
                except trio.WouldBlock:
                    pass
                except trio.BrokenResourceError:
                    return
                try:
                    if not self._items_wanted and not warned:
                        with trio.move_on_after(UNREAD_ITEMS_WARNING):
                            await self._item_send.send(item)
                            continue
                        warned = True
                        if not self._items_wanted:
                            warnings.warn(
                                f"the crawl is paused: {self._buffer + 1:,} items wait for a "
                                "reader; read crawl.items(), pass on_item=, or await "
                                "crawl.wait()",
                                RuntimeWarning,
                                stacklevel=1,
                            )
                    await self._item_send.send(item)
                except trio.BrokenResourceError:
                    return


@contextlib.asynccontextmanager
async def open_crawler(
    start_urls: StartURLs,
    *,
    fetcher: Fetcher | None = None,
    buffer: int = 256,
    on_record: RecordCallback | None = None,
    on_item: ItemCallback | None = None,
    frontier: FrontierSpec | None = None,
    state: str | None = None,
    warc: str | None = None,
    on_depth_update: DepthUpdateCallback | None = None,
    **options: Unpack[CrawlOptions],
) -> AsyncIterator[RunningCrawl]:
    """Start a crawl in the background; yield a ``RunningCrawl``.

    Example::

        async with trio_crawl.open_crawler("http://127.0.0.1:8000/", workers=8) as crawl:
            async for record in crawl:
                print(record.url, record.status)
        print(crawl.summary.records)

    ``start_urls`` is a URL, a ``Request``, or an iterable of them;
    ``options`` are ``CrawlConfig`` fields (``CrawlOptions``). Leaving the
    block before the crawl has ended cancels it. See ``RunningCrawl`` for
    the output streams. A record says the depth known when it is made;
    ``on_depth_update`` is called for each later correction (``DepthUpdate``).

    ``state="crawl.db"`` keeps the frontier in that SQLite file (bounded
    memory; depths are corrected as in memory), and the same call again
    resumes it: what was done is not fetched again, what was queued or in
    flight is (records of in-flight URLs say ``"refetched": true``). A
    different crawl in the file raises ``StateUsageError``; a file another
    crawl is using, ``StateLockedError``. A handler or ``page_requisites=True``
    cannot be combined with a state file: ``ConfigError``, before the file
    is opened.

    ``frontier=redis_frontier("redis://host:6379/0", "docs")`` keeps the
    frontier in Redis, shared by every process that runs the same crawl id:
    this one creates the crawl (admitting its start URLs) or joins it when
    it starts, and leaves it when it ends. Everything else (``warc``,
    ``mirror``, the streams) works as in memory; what Redis cannot serve
    (``page_requisites=True``, ``random_wait=True``, host budgets) is a
    ``ConfigError`` before it is contacted. ``frontier=`` and ``state=``
    cannot be combined.

    ``warc="crawl.warc.gz"`` archives every request and response (WARC 1.1,
    written by a child process, as ``--warc`` does): a page's record is
    delivered only once its exchange is in the file, and with ``state`` a
    resumed crawl appends to it. A file that cannot be written, or that
    another crawl holds, raises ``OutputError`` at the start; a writer that
    fails mid-crawl (disk full, killed) cancels the crawl, and
    ``OutputError`` is raised when the block ends.
    """
    plan = _plan(
        crawl_config(start_urls, options),
        fetcher,
        frontier,
        state,
        warc,
        on_record,
        on_item,
        on_depth_update,
    )
    config = plan.config
    async with _unwrapped(), open_crawl(plan) as built:
        crawler = built.crawler
        keep_items = on_item is None and _may_yield_items(config)
        # With a state file (or a Redis crawl), a record counts as delivered
        # when the reader has taken it (no buffer), so a reader that stops
        # early loses nothing on resume: what it did not take is fetched again.
        durable = state is not None or frontier is not None
        running = RunningCrawl(crawler, 0 if durable else buffer, keep_items=keep_items)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(running._run)
            if keep_items:
                nursery.start_soon(running._relay_items)
            try:
                yield running
            finally:
                if not running.ended:
                    crawler.abort()
                # Readers that left must not block the crawl's last sends.
                running._record_receive.close()
                running._item_receive.close()
    built.raise_if_failed()  # after the writer has finished what it was sent
