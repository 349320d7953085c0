"""Reading a host's sitemaps (``--sitemaps``) to seed the crawl."""

from __future__ import annotations

from ..core.scope import Scope
from ..core.url import canonicalize, host_port
from ..errors import FetchError, SitemapError
from ..fetch.base import Fetcher
from ..frontiers.base import AdmitsSeeds
from ..robots.policy import robots_url
from .sitemap_parse import parse_sitemap

MAX_SITEMAPS_PER_HOST = 50


async def sitemap_page_urls(
    fetcher: Fetcher, page_url: str, listed: list[str], scope: Scope
) -> list[tuple[str, str]]:
    """``(canonical page URL, sitemap URL)`` pairs from the host's sitemaps:
    those robots.txt lists, else ``/sitemap.xml``; nested indexes followed,
    at most ``MAX_SITEMAPS_PER_HOST`` files. A missing or broken sitemap only
    means fewer seeds.

    A sitemap is fetched only when its URL passes the check pages pass:
    in ``scope``, or on the host:port of ``page_url`` (which the crawl
    admitted). A ``Sitemap:`` line or an index entry naming another host,
    port or scheme is skipped, so a robots.txt cannot point the crawler at
    an address the user did not ask for (SSRF)."""
    home = host_port(page_url)

    def allowed(url: str) -> str | None:
        canonical = canonicalize(url)
        if canonical is None:
            return None
        in_scope = host_port(canonical) == home or scope.allows_unfiltered(canonical)
        return canonical if in_scope else None

    if listed:
        todo = [u for u in map(allowed, listed) if u is not None]
    else:
        todo = [robots_url(page_url).removesuffix("robots.txt") + "sitemap.xml"]
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
        todo.extend(u for u in map(allowed, nested) if u is not None)
    return found


class SitemapSeeder:
    """Admits a host's sitemap URLs as start URLs (``--sitemaps``), called by
    the host gate inside a crawler holding its token, so the crawl cannot
    end while sitemaps are read."""

    def __init__(self, fetcher: Fetcher, scope: Scope, frontier: AdmitsSeeds) -> None:
        self._fetcher = fetcher
        self._scope = scope
        self._frontier = frontier

    async def __call__(self, page_url: str, listed: list[str]) -> None:
        found = await sitemap_page_urls(self._fetcher, page_url, listed, self._scope)
        for sitemap in dict.fromkeys(s for _, s in found):
            await self._frontier.admit_seeds([u for u, s in found if s == sitemap], sitemap)
