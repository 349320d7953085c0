"""Requests, pages and handlers: the scraping surface of trio_crawl.

A *handler* is an ordinary async function that takes a ``Page``:

* an async generator that yields items (any object) and ``Request`` s, or
* a coroutine that returns ``None`` or an iterable of items and requests.

Each ``Request`` says which handler gets its page (``None``: the crawl's
default handler, the one that follows every link). Requests from handlers go
through the same canonicalization, scope, dedup and depth rules as links,
and count as unfinished work exactly like links until their page is done.

Pure data plus lazy views of a response; the engine drives the handlers.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .http import is_html_content_type
from .models import FetchResult
from .page_encoding import decode_text
from .parse import extract_links, parse_html
from .url import resolve

if TYPE_CHECKING:
    import lxml.html

T = TypeVar("T")


class Offload(Protocol):
    """Runs ``fn(*args)`` away from the event loop (the engine passes one that
    uses trio's worker threads), so this module needs no trio import."""

    async def __call__(self, fn: Callable[..., T], /, *args: Any) -> T: ...


def is_async_handler(handler: object) -> bool:
    """Whether ``handler`` is an async function (``async def``, a generator
    or a coroutine), seen through ``functools.partial``, ``functools.wraps``
    (``__wrapped__``) and an object's ``__call__``. A plain function cannot
    be told from the outside to return an awaitable, and one that does not
    fails every page of a crawl, so a crawl refuses it when it is made."""
    seen = handler
    for _ in range(16):  # partials of wrappers of partials: a bounded unwrapping
        if inspect.iscoroutinefunction(seen) or inspect.isasyncgenfunction(seen):
            return True
        if isinstance(seen, functools.partial):
            seen = seen.func
        elif hasattr(seen, "__wrapped__"):
            seen = seen.__wrapped__
        elif not inspect.isroutine(seen) and not inspect.isclass(seen) and callable(seen):
            seen = type(seen).__call__
        else:
            return False
    return False


class Handler(Protocol):
    """``async def handler(page: Page)`` yielding or returning items and requests."""

    def __call__(
        self, page: Page, /
    ) -> AsyncIterator[object] | Awaitable[Iterable[object] | None]: ...


@dataclass(frozen=True, slots=True)
class Request:
    """A URL to fetch and the handler its page goes to.

    ``meta`` travels to the handler as ``page.meta`` (and on through
    redirects); ``headers`` are added to this request only. Queued requests
    with a higher ``priority`` are taken first (0 is the default, negative
    goes after everything else); politeness waits still apply. A URL is
    fetched once per crawl: a second Request for the same canonical URL is
    dropped, whatever its handler.
    """

    url: str
    handler: Handler | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] | None = None
    priority: int = 0


class Page:
    """What a handler gets: the response plus lazy parsed views of it.

    Nothing is parsed until asked for: ``text``, ``tree`` (lxml.html),
    ``soup`` (BeautifulSoup on lxml) and ``links()`` are each built on first
    use and kept.
    """

    def __init__(
        self,
        result: FetchResult,
        *,
        url: str,
        depth: int,
        meta: Mapping[str, Any],
        in_scope: Callable[[str], bool],
        offload: Offload | None = None,
    ) -> None:
        self.url = url
        self.status = result.status
        self.headers = result.headers
        self.body = result.body
        #: True when the fetcher did not download the body (a non-HTML type
        #: and a link-following crawl): ``body`` is then empty.
        self.body_skipped = result.body_skipped
        self.depth = depth
        self.meta = meta
        self._in_scope = in_scope
        self._offload = offload

    @property
    def content_type(self) -> str | None:
        value = self.headers.get("content-type")
        return value.strip() if value else None

    @property
    def is_html(self) -> bool:
        return is_html_content_type(self.content_type)

    @functools.cached_property
    def text(self) -> str:
        """The body decoded as a browser would (BOM, header, ``<meta>``, UTF-8)."""
        return decode_text(self.body, self.content_type)

    @functools.cached_property
    def tree(self) -> lxml.html.HtmlElement | None:
        """The lxml.html tree (None for non-HTML)."""
        return parse_html(self.body, self.content_type)

    @functools.cached_property
    def soup(self) -> Any:
        """A BeautifulSoup of the page, on the lxml parser. Built only if used:
        it costs several times the lxml tree."""
        from bs4 import BeautifulSoup

        return BeautifulSoup(self.text, "lxml")

    async def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run CPU-heavy parsing ``fn(*args)`` in a worker thread, leaving the
        event loop free; lxml and most C parsers release the GIL while they
        work. Threads are shared with the crawl's own big-page parsing
        (two by default). A checkpoint; cancellation abandons the thread's
        result, not the thread."""
        if self._offload is None:
            return fn(*args)  # a Page built outside a crawl (tests, tools)
        return await self._offload(fn, *args)

    def json(self) -> Any:
        import json

        return json.loads(self.text)

    def links(self) -> list[str]:
        """Canonical absolute links of the page (all of them, in scope or not)."""
        return self._links

    @functools.cached_property
    def _links(self) -> list[str]:
        return extract_links(self.body, self.url, self.content_type)

    def follow(
        self,
        href: str,
        handler: Handler | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        priority: int = 0,
        **meta: Any,
    ) -> Request | None:
        """A Request for ``href`` resolved against this page, or None when it
        is not followable (not http(s), malformed, or out of scope)."""
        url = resolve(href, self.url)
        if url is None or not self._in_scope(url):
            return None
        return Request(url, handler, meta, headers, priority)

    def __repr__(self) -> str:
        return f"<Page {self.status} {self.url} depth={self.depth}>"
