"""How one entry is fetched and which handler reads its page: decided by
its payload (a ``Request``, a page requisite, or a plain link)."""

from __future__ import annotations

from ..core.config import CrawlConfig
from ..core.frontier import Entry
from ..core.models import FetchResult
from ..core.payloads import REQUISITE
from ..core.scrape import Handler, Request
from ..fetch.base import Fetcher
from .revisits import PLAIN, Ask


def priority(entry: Entry) -> int:
    """The channel priority of ``entry``: its Request's, else 0."""
    request = entry.payload
    return request.priority if isinstance(request, Request) else 0


async def fetch_entry(
    fetcher: Fetcher, entry: Entry, config: CrawlConfig, ask: Ask = PLAIN
) -> FetchResult:
    """Fetch ``entry`` with the headers its Request asks for, and those of
    ``ask`` (a recrawl's validators); any body type when something wants it
    whatever it is (a requisite, a handler)."""
    request = entry.payload
    extra = ask.headers
    if request is REQUISITE:  # wanted whatever its type: an image, a script
        return await fetcher.fetch(entry.url, extra, any_body=True)
    if isinstance(request, Request):
        headers = dict(request.headers) if request.headers else None
        if extra:
            headers = {**(headers or {}), **extra}
        return await fetcher.fetch(entry.url, headers, any_body=True)
    if config.handler is not None:  # a handler may want JSON, PDFs...
        return await fetcher.fetch(entry.url, extra, any_body=True)
    return await fetcher.fetch(entry.url, extra)


def handler_for(entry: Entry, config: CrawlConfig) -> Handler | None:
    """The handler that reads ``entry``'s page (None: follow its links)."""
    request = entry.payload
    if request is REQUISITE:
        return None
    if isinstance(request, Request) and request.handler is not None:
        return request.handler
    return config.handler
