"""The library's front door: ``open_crawler``, ``run_crawl``, ``open_fetcher``.

Every background task here has a visible owner: ``open_crawler`` owns the
nursery the crawl runs in, and leaving its ``async with`` block before the
crawl ends cancels the crawl (records already delivered stay delivered).
A single error is raised bare, never wrapped in an ExceptionGroup.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import trio

from ._config import CrawlConfig
from ._engine import Crawler, EngineStatistics, RecordCallback
from ._fetch import Fetcher
from ._models import CrawlRecord
from ._stats import CrawlSummary


@contextlib.asynccontextmanager
async def open_fetcher(config: CrawlConfig) -> AsyncIterator[Fetcher]:
    """The fetcher ``config.backend`` names ("curl" or "httpx"), owned by the block."""
    fetch_config = config.fetch_config()
    if config.backend == "curl":
        from ._fetch_curl import open_curl_fetcher

        async with open_curl_fetcher(fetch_config) as curl:
            yield curl
    else:
        from ._fetch_httpx import open_httpx_fetcher

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


async def run_crawl(
    start_urls: Sequence[str],
    *,
    on_record: RecordCallback | None = None,
    fetcher: Fetcher | None = None,
    **options: Any,
) -> CrawlSummary:
    """Crawl to the end and return the summary.

    ``options`` are ``CrawlConfig`` fields (``workers``, ``max_depth``, ...).
    ``on_record`` is called synchronously for each record as it is final.
    """
    config = CrawlConfig(start_urls=start_urls, **options)
    callbacks = [on_record] if on_record is not None else []
    async with _unwrapped(), contextlib.AsyncExitStack() as stack:
        if fetcher is None:
            fetcher = await stack.enter_async_context(open_fetcher(config))
        return await Crawler(config, fetcher, on_record=callbacks).run()


class RunningCrawl:
    """A crawl running in the background of ``open_crawler``.

    Iterate it for records (``async for record in crawl``), or ``await
    crawl.wait()`` for the summary (it discards records nobody reads).
    """

    def __init__(self, crawler: Crawler, records: trio.MemoryReceiveChannel[CrawlRecord]):
        self.crawler = crawler
        self._records = records
        self._done = trio.Event()
        self._summary: CrawlSummary | None = None

    def __aiter__(self) -> AsyncIterator[CrawlRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[CrawlRecord]:
        async for record in self._records:
            yield record

    async def wait(self) -> CrawlSummary:
        """Wait for the end of the crawl; return its summary."""
        async for _ in self._records:
            pass
        await self._done.wait()
        assert self._summary is not None
        return self._summary

    def stop(self) -> None:
        """Graceful stop (see ``Crawler.stop``)."""
        self.crawler.stop()

    def statistics(self) -> EngineStatistics:
        return self.crawler.statistics()

    @property
    def summary(self) -> CrawlSummary | None:
        """The summary once the crawl has ended, else None."""
        return self._summary

    async def _run(self, send: trio.MemorySendChannel[CrawlRecord]) -> None:
        async with send:
            self._summary = await self.crawler.run()
        self._done.set()


@contextlib.asynccontextmanager
async def open_crawler(
    start_urls: Sequence[str],
    *,
    fetcher: Fetcher | None = None,
    record_buffer: int = 256,
    on_record: RecordCallback | None = None,
    **options: Any,
) -> AsyncIterator[RunningCrawl]:
    """Start a crawl in the background; yield a ``RunningCrawl``.

    Example::

        async with trio_crawl.open_crawler(["http://127.0.0.1:8000/"], workers=8) as crawl:
            async for record in crawl:
                print(record.url, record.status)

    Records pass through a channel of ``record_buffer`` slots: a reader that
    falls behind slows the crawlers down (backpressure) instead of piling
    records up in memory. Leaving the block before the crawl has ended
    cancels it.
    """
    config = CrawlConfig(start_urls=start_urls, **options)
    callbacks = [on_record] if on_record is not None else []
    async with _unwrapped(), contextlib.AsyncExitStack() as stack:
        if fetcher is None:
            fetcher = await stack.enter_async_context(open_fetcher(config))
        send, receive = trio.open_memory_channel[CrawlRecord](record_buffer)
        crawler = Crawler(config, fetcher, on_record=callbacks, record_channel=send)
        running = RunningCrawl(crawler, receive)
        async with trio.open_nursery() as nursery, receive:
            nursery.start_soon(running._run, send)
            try:
                yield running
            finally:
                if running.summary is None:
                    crawler.abort()
