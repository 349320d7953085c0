"""Reading a fetched page: a user's handler, or the default link extractor.

A handler runs while its page's entry is held (the crawler's token is
borrowed), so every request it yields is admitted and every item delivered
before the crawl can consider the page done.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from ..core.frontier import Entry
from ..core.models import FetchResult
from ..core.parse import extract_links
from ..core.scrape import Handler, Page, Request
from ..core.url import Scope, resolve
from ..frontiers.base import FrontierBackend
from .delivery import Delivery

T = TypeVar("T")


class PageReader:
    """Turns a fetched page into links (to admit) or a handler's outputs."""

    def __init__(
        self,
        frontier: FrontierBackend,
        delivery: Delivery,
        scope: Scope,
        *,
        thread_parse_bytes: int,
        parse_threads: int = 2,
    ) -> None:
        self._frontier = frontier
        self._delivery = delivery
        self._scope = scope
        self._thread_parse_bytes = thread_parse_bytes
        self._parse_limiter = trio.CapacityLimiter(parse_threads)

    async def run_in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of the crawl's parse threads (``Page.run_sync``)."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self._parse_limiter)

    async def links(self, result: FetchResult, url: str) -> list[str]:
        """The page's links; big bodies are parsed in a thread, so one huge
        page does not stall every other crawler."""
        if len(result.body) >= self._thread_parse_bytes:
            return await self.run_in_thread(extract_links, result.body, url, result.content_type)
        return extract_links(result.body, url, result.content_type)

    async def run_handler(self, handler: Handler, entry: Entry, result: FetchResult) -> int:
        """Run ``handler`` on the page; admit its requests, deliver its items.
        Returns the number of requests it made that could be followed."""
        request = entry.payload
        page = Page(
            result,
            url=entry.url,
            depth=entry.depth,
            meta=request.meta if isinstance(request, Request) else {},
            in_scope=self._scope.allows,
            offload=self.run_in_thread,
        )
        produced = handler(page)
        requests = 0
        if inspect.isasyncgen(produced):
            async with contextlib.aclosing(produced):
                async for output in produced:
                    requests += await self._take(output, entry)
        else:
            outputs = await produced  # type: ignore[misc]
            for output in outputs or ():
                requests += await self._take(output, entry)
        return requests

    async def _take(self, output: object, entry: Entry) -> int:
        if output is None:
            return 0
        if isinstance(output, Request):
            # Relative URLs resolve against the page, like links; a request that
            # is not followable (bad URL, other scheme, out of scope) is dropped
            # and not counted in the record's ``links``.
            url = resolve(output.url, entry.url)
            if url is None:
                return 0
            return int(self._frontier.admit_request(entry, url, output))
        await self._delivery.item(output)
        return 0
