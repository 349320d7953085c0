"""Reading a fetched page: a user's handler, or the default link extractor.

A handler runs while its page's entry is held (the crawler's token is
borrowed), so every request it yields is admitted and every item delivered
before the crawl can consider the page done.

A big page (``thread_parse_bytes``, 1 MiB by default) is parsed in a worker
thread; when the frontier takes links in chunks (``AdmitsLinkChunks``), the
thread hands them over as it finds them (``parse.iter_link_chunks``), so a
page with a million links never holds them all at once.

The other pages read for links alone go to the crawl's parse co-process
when it has one (``process``, ``engine/parse_process.py``); a page it does
not take is parsed here, so the links are the same either way.
"""

from __future__ import annotations

import contextlib
import inspect
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ..core.config import CrawlConfig
from ..core.frontier import Entry
from ..core.http import is_html_content_type
from ..core.models import FetchResult
from ..core.parse import extract_links, extract_links_and_requisites, iter_link_chunks
from ..core.payloads import REQUISITE
from ..core.scope import Scope
from ..core.scrape import Handler, Page, Request
from ..core.url import resolve
from ..frontiers.base import AdmitsLinkChunks, AdmitsRequests, AdmitsRequisites, FrontierBackend
from .delivery import Delivery
from .distinct import DistinctCounter
from .parse_process import ParseProcess, parse_process_for
from .revisits import Revisits

if TYPE_CHECKING:
    from ..workpool import WorkPool

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PageOutcome:
    """What reading a page gave: its links (None: nothing to follow, or
    nothing more: they were admitted in chunks already), how many distinct
    links or requests were followed, and an error ``(kind, message)``
    with its traceback (``--debug``) if reading it failed."""

    links: list[str] | None = None
    followed: int = 0
    error: tuple[str, str] | None = None
    traceback: str | None = None


class PageReader:
    """Turns a fetched page into links (to admit) or a handler's outputs."""

    def __init__(
        self,
        frontier: FrontierBackend,
        delivery: Delivery,
        scope: Scope,
        config: CrawlConfig,
        revisits: Revisits | None = None,
        *,
        parse_threads: int = 2,
        process: ParseProcess | None = None,
    ) -> None:
        self._delivery = delivery
        self._scope = scope
        self._config = config
        self._parse_limiter = trio.CapacityLimiter(parse_threads)
        self._chunked = frontier if isinstance(frontier, AdmitsLinkChunks) else None
        # Optional parts, wired once: a crawl that needs one whose frontier
        # lacks it was refused when it was built (``refuse_unservable``).
        self._requisites = frontier if isinstance(frontier, AdmitsRequisites) else None
        self._requests = frontier if isinstance(frontier, AdmitsRequests) else None
        #: The parse co-process, if the crawl has one.
        self.process = process
        #: A recrawl's kept links, for a page that answered 304.
        self._revisits = revisits

    def use_process(self, *, auto: bool, pool: WorkPool[Entry] | None = None) -> None:
        """Give the crawl a parse co-process if its config (or, unset and
        ``auto``, the machine and the crawl) wants one (``parse_process.py``);
        ``pool``: the crawl's workers, whose tasks and size the child's
        queue follows (``ParseProcess.crawl_tasks``, ``crawl_workers``): a
        page waiting for the child is parsed here only when every worker
        task with a page waits on the child (``parse_places.py``)."""
        self.process = parse_process_for(self._config, auto=auto)
        if self.process is not None and pool is not None:
            self.process.crawl_tasks = lambda: pool.tasks
            self.process.crawl_workers = lambda: pool.workers

    def helpers(self) -> list[Callable[[], Awaitable[None]]]:
        """Tasks to run beside the crawl's workers: the co-process's link,
        which starts the child at the first pages it may take."""
        return [] if self.process is None else [self.process.serve]

    async def read(
        self, entry: Entry, result: FetchResult, handler: Handler | None
    ) -> PageOutcome:
        """Run ``handler`` on the page, or extract its links when there is
        none and it is HTML. An exception becomes the outcome's error (kind
        ``handler``, or ``internal`` for the link extractor), except a
        handler's under ``fail_fast``, which propagates."""
        if self._revisits is not None and result.status == 304:
            kept = self._revisits.kept_links(entry, result)
            if kept is not None:  # unchanged: it leads where it led, unparsed
                return PageOutcome(links=kept, followed=len(kept))
        if handler is None and self._streams_links(entry, result):
            return await self._stream_links(entry, result)
        try:
            if handler is not None:
                return PageOutcome(followed=await self.run_handler(handler, entry, result))
            if entry.payload is REQUISITE:
                # Never read for links; a stylesheet's url()s are requisites too.
                from ..core.stylesheet import stylesheet_urls  # -p only: not loaded before

                refs = stylesheet_urls(result.body, entry.url, result.content_type)
                assert self._requisites is not None  # only such a frontier admits them
                self._requisites.admit_requisites(entry, refs)
                return PageOutcome()
            if result.body_skipped or not is_html_content_type(result.content_type):
                return PageOutcome()
            if self._config.follow.page_requisites:
                links, refs = await self._in_thread_if_big(
                    extract_links_and_requisites, result, entry.url
                )
                assert self._requisites is not None  # refused when built otherwise
                self._requisites.admit_requisites(entry, refs)
            else:
                links = await self.links(result, entry.url)
            return PageOutcome(links=links, followed=len(links))
        except Exception as exc:
            if handler is not None and self._config.fail_fast:
                raise
            if handler is not None:
                error = ("handler", f"{type(exc).__name__}: {exc}")
            else:  # a page that breaks the parser is a record
                error = ("internal", f"link extraction failed: {exc!r}")
            tb = traceback.format_exc() if self._config.debug else None
            return PageOutcome(error=error, traceback=tb)

    def _streams_links(self, entry: Entry, result: FetchResult) -> bool:
        """Whether the page's links go to the frontier in chunks: a big HTML
        page read for links alone, and a frontier that takes them."""
        return (
            len(result.body) >= self._config.pool.thread_parse_bytes
            and self._chunked is not None
            and entry.payload is not REQUISITE
            and not self._config.follow.page_requisites
            and not result.body_skipped
            and is_html_content_type(result.content_type)
        )

    async def _stream_links(self, entry: Entry, result: FetchResult) -> PageOutcome:
        """Admit the page's links a chunk at a time, as a parse thread finds
        them. The parse stays in its one thread (an lxml parser is not moved
        between threads) and waits while each chunk is admitted, so the
        frontier sets the pace. A frontier error propagates, as one from
        ``finish`` does; a parser error becomes the page's error (kind
        ``internal``), after the chunks admitted before it."""
        assert self._chunked is not None
        admit = self._chunked.admit_links
        counter = DistinctCounter()

        def parse() -> Exception | None:
            chunks = iter_link_chunks(result.body, entry.url, result.content_type)
            try:
                while True:
                    try:
                        chunk = next(chunks, None)
                    except Exception as exc:
                        return exc
                    if chunk is None:
                        return None
                    counter.add(chunk)
                    trio.from_thread.run(admit, entry, chunk)
            finally:
                chunks.close()

        failure = await self.run_in_thread(parse)
        if failure is None:
            return PageOutcome(followed=counter.count())
        error = ("internal", f"link extraction failed: {failure!r}")
        tb = "".join(traceback.format_exception(failure)) if self._config.debug else None
        return PageOutcome(followed=counter.count(), error=error, traceback=tb)

    async def run_in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of the crawl's parse threads (``Page.run_sync``)."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self._parse_limiter)

    async def links(self, result: FetchResult, url: str) -> list[str]:
        """The page's links; big bodies are parsed in a thread, so one huge
        page does not stall every other crawler, and others in the parse
        co-process when it takes them."""
        if self.process is not None and len(result.body) < self._config.pool.thread_parse_bytes:
            links = await self.process.links(result.body, url, result.content_type)
            if links is not None:
                return links
        return await self._in_thread_if_big(extract_links, result, url)

    async def _in_thread_if_big(
        self, parse: Callable[[bytes, str, str | None], T], result: FetchResult, url: str
    ) -> T:
        if len(result.body) >= self._config.pool.thread_parse_bytes:
            return await self.run_in_thread(parse, result.body, url, result.content_type)
        return parse(result.body, url, result.content_type)

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
            assert self._requests is not None  # a handler's crawl was refused otherwise
            return int(self._requests.admit_request(entry, url, output))
        await self._delivery.item(output)
        return 0
