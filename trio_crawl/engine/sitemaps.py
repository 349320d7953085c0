"""Reading a host's sitemaps (``--sitemaps``) to seed the crawl."""

from __future__ import annotations

from ..core.robots import robots_url
from ..core.sitemap import parse_sitemap
from ..core.url import canonicalize
from ..errors import FetchError, SitemapError
from ..fetch.base import Fetcher

MAX_SITEMAPS_PER_HOST = 50


async def sitemap_page_urls(
    fetcher: Fetcher, page_url: str, listed: list[str]
) -> list[tuple[str, str]]:
    """``(canonical page URL, sitemap URL)`` pairs from the host's sitemaps:
    those robots.txt lists, else ``/sitemap.xml``; nested indexes followed,
    at most ``MAX_SITEMAPS_PER_HOST`` files. A missing or broken sitemap only
    means fewer seeds."""
    todo = list(listed) or [robots_url(page_url).removesuffix("robots.txt") + "sitemap.xml"]
    done: set[str] = set()
    found: list[tuple[str, str]] = []
    while todo and len(done) < MAX_SITEMAPS_PER_HOST:
        sitemap = todo.pop(0)
        if sitemap in done:
            continue
        done.add(sitemap)
        try:
            result = await fetcher.fetch(sitemap, any_body=True)
            if result.status != 200:
                continue
            pages, nested = parse_sitemap(result.body)
        except (FetchError, SitemapError):
            continue
        for page in pages:
            canonical = canonicalize(page)
            if canonical is not None:
                found.append((canonical, sitemap))
        todo.extend(nested)
    return found
