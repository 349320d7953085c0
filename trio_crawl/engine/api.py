"""The library's front door: ``open_crawler``, ``run_crawl``, ``open_fetcher``.

Every background task here has a visible owner: ``open_crawler`` owns the
nursery the crawl runs in, and leaving its ``async with`` block before the
crawl ends cancels the crawl (records already delivered stay delivered).
A single error is raised bare, never wrapped in an ExceptionGroup.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import trio

from ..core.config import FETCHERS, ConfigError, CrawlConfig
from ..core.http import FetchConfig
from ..core.models import CrawlRecord
from ..core.scrape import Request
from ..core.stats import CrawlSummary
from ..fetch.base import Fetcher
from .crawler import Crawler, EngineStatistics
from .delivery import RecordCallback

T = TypeVar("T")


@contextlib.asynccontextmanager
async def open_fetcher(
    config: CrawlConfig | FetchConfig, backend: str | None = None
) -> AsyncIterator[Fetcher]:
    """A fetcher owned by the block: ``backend`` ("curl", "httpx" or "asks";
    default: ``config.backend`` for a CrawlConfig, else "curl"), configured by
    ``config``. asks runs only on trio < 0.24 (README: ``nox -s asks``).

    Example (no crawl, just fetching)::

        async with trio_crawl.open_fetcher(trio_crawl.FetchConfig(max_connections=64)) as f:
            result = await f.fetch("http://127.0.0.1:8000/")
    """
    if isinstance(config, CrawlConfig):
        fetch_config = config.fetch_config()
        backend = backend or config.backend
    else:
        fetch_config = config
        backend = backend or "curl"
    if backend not in FETCHERS:
        raise ConfigError(f"unknown fetcher backend {backend!r}: one of {', '.join(FETCHERS)}")
    if backend == "curl":
        from ..fetch.curl import open_curl_fetcher

        async with open_curl_fetcher(fetch_config) as curl:
            yield curl
    elif backend == "asks":
        from ..fetch.asks import open_asks_fetcher

        async with open_asks_fetcher(fetch_config) as asks:
            yield asks
    else:
        from ..fetch.httpx import open_httpx_fetcher

        async with open_httpx_fetcher(fetch_config) as httpx_fetcher:
            yield httpx_fetcher


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


async def _crawler(
    config: CrawlConfig,
    stack: contextlib.AsyncExitStack,
    fetcher: Fetcher | None,
    on_record: RecordCallback | None,
    on_item: Callable[[object], None] | None,
) -> Crawler:
    """A Crawler with the caller's fetcher, or one the ``stack`` owns."""
    if fetcher is None:
        fetcher = await stack.enter_async_context(open_fetcher(config))
    return Crawler(
        config,
        fetcher,
        on_record=[on_record] if on_record is not None else [],
        on_item=[on_item] if on_item is not None else [],
    )


async def run_crawl(
    start_urls: Sequence[str | Request],
    *,
    on_record: RecordCallback | None = None,
    on_item: Callable[[object], None] | None = None,
    fetcher: Fetcher | None = None,
    **options: Any,
) -> CrawlSummary:
    """Crawl to the end and return the summary.

    ``options`` are ``CrawlConfig`` fields (``workers``, ``max_depth``, ...).
    ``on_record`` is called synchronously for each record as it is final,
    ``on_item`` for each item a handler yields.
    """
    config = CrawlConfig(start_urls=start_urls, **options)
    async with _unwrapped(), contextlib.AsyncExitStack() as stack:
        crawler = await _crawler(config, stack, fetcher, on_record, on_item)
        return await crawler.run()


class RunningCrawl:
    """A crawl running in the background of ``open_crawler``.

    Two output streams: ``records()`` (one ``CrawlRecord`` per URL tried; also
    what iterating the crawl itself gives) and ``items()`` (what handlers
    yield). A stream is delivered only once you start reading it: call
    ``records()`` / ``items()`` right after entering the block (the crawl
    starts at your first checkpoint); outputs produced before you subscribe
    are not kept for you. A subscribed stream has ``buffer`` slots: a reader
    that falls behind slows the handlers down (backpressure), and a reader
    that stops reading pauses the crawl until it reads again or leaves the
    block, which cancels the crawl. ``await wait()`` drains whatever you
    subscribed to and returns the summary.
    """

    def __init__(self, crawler: Crawler, buffer: int) -> None:
        self.crawler = crawler
        self._record_send, self._record_receive = trio.open_memory_channel[CrawlRecord](buffer)
        self._item_send, self._item_receive = trio.open_memory_channel[object](buffer)
        self._records_wanted = False
        self._items_wanted = False
        self._done = trio.Event()
        self._summary: CrawlSummary | None = None

    def __aiter__(self) -> AsyncIterator[CrawlRecord]:
        return self.records()

    def records(self) -> AsyncIterator[CrawlRecord]:
        """Subscribe to the records; the iterator ends with the crawl."""
        if not self._records_wanted:
            self._records_wanted = True
            self.crawler.attach_records(self._record_send)
        return self._drain(self._record_receive)

    def items(self) -> AsyncIterator[object]:
        """Subscribe to the handlers' items; the iterator ends with the crawl."""
        if not self._items_wanted:
            self._items_wanted = True
            self.crawler.attach_items(self._item_send)
        return self._drain(self._item_receive)

    @staticmethod
    async def _drain(receive: trio.MemoryReceiveChannel[T]) -> AsyncIterator[T]:
        with contextlib.suppress(trio.ClosedResourceError):  # read after the block: ended
            async for value in receive:
                yield value

    async def wait(self) -> CrawlSummary:
        """Wait for the end of the crawl (reading and dropping subscribed
        outputs nobody else reads); return its summary."""
        async with trio.open_nursery() as nursery:
            if self._records_wanted:
                nursery.start_soon(self._discard, self._record_receive)
            if self._items_wanted:
                nursery.start_soon(self._discard, self._item_receive)
            await self._done.wait()
        assert self._summary is not None
        return self._summary

    @staticmethod
    async def _discard(receive: trio.MemoryReceiveChannel[T]) -> None:
        async for _ in receive:
            pass

    def stop(self) -> None:
        """Graceful stop (see ``Crawler.stop``)."""
        self.crawler.stop()

    def statistics(self) -> EngineStatistics:
        return self.crawler.statistics()

    @property
    def summary(self) -> CrawlSummary | None:
        """The summary once the crawl has ended, else None."""
        return self._summary

    async def _run(self) -> None:
        async with self._record_send, self._item_send:
            self._summary = await self.crawler.run()
        self._done.set()


@contextlib.asynccontextmanager
async def open_crawler(
    start_urls: Sequence[str | Request],
    *,
    fetcher: Fetcher | None = None,
    buffer: int = 256,
    on_record: RecordCallback | None = None,
    on_item: Callable[[object], None] | None = None,
    **options: Any,
) -> AsyncIterator[RunningCrawl]:
    """Start a crawl in the background; yield a ``RunningCrawl``.

    Example::

        async with trio_crawl.open_crawler(["http://127.0.0.1:8000/"], workers=8) as crawl:
            async for record in crawl:
                print(record.url, record.status)

    ``options`` are ``CrawlConfig`` fields. Leaving the block before the crawl
    has ended cancels it. See ``RunningCrawl`` for the output streams.
    """
    config = CrawlConfig(start_urls=start_urls, **options)
    async with _unwrapped(), contextlib.AsyncExitStack() as stack:
        crawler = await _crawler(config, stack, fetcher, on_record, on_item)
        running = RunningCrawl(crawler, buffer)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(running._run)
            try:
                yield running
            finally:
                if running.summary is None:
                    crawler.abort()
                # Readers that left must not block the crawl's last sends.
                running._record_receive.close()
                running._item_receive.close()
