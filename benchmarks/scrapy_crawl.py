"""The Scrapy side of the benchmark: a CrawlSpider over the generated site.

Run as its own process by run.py (so its wall time and peak RSS are its own):

    python scrapy_crawl.py http://127.0.0.1:PORT/ --workers 16 --output OUT.jsonl

Configured as a Scrapy user would for a fair, polite-but-fast crawl of one host:
``CONCURRENT_REQUESTS`` and ``CONCURRENT_REQUESTS_PER_DOMAIN`` equal to trio-crawl's
worker count, robots.txt obeyed, no delay, no AutoThrottle, warnings-only logging, every
other setting at Scrapy's default (retries, cookies, redirects, dupe filter, LIFO
scheduler). Links are followed by a ``LinkExtractor`` restricted to the start URL's
host:port (and the spider's ``allowed_domains`` to its host), so external links are
never requested.

Output (the ``FEEDS`` JSON Lines exporter): one item per page the spider received,
``{"url", "status"}``, plus one ``{"url", "status", "error"}`` item per failed request
(HTTP error status or network failure). robots.txt is fetched by Scrapy's middleware and
is never an item. ``--stats FILE`` also writes Scrapy's own crawl statistics as JSON.

For recrawl.py (several hosts, visited twice): ``--allow-host HOST:PORT`` (repeatable)
adds hosts to follow; ``--httpcache DIR`` turns on Scrapy's HTTP cache in DIR with
``RFC2616Policy`` (what a Scrapy user sets to revisit politely); each item then also
carries ``sha1`` (of the body the spider got, from the cache or not) and ``cached``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy.crawler import CrawlerProcess
from scrapy.http import Request, Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.spiders import CrawlSpider, Rule
from twisted.python.failure import Failure


class BenchSpider(CrawlSpider):
    """Follow every in-host link once; one item per response."""

    name = "bench"
    digests = False  # a class default: scrapy_broad's spider does not run this __init__

    def __init__(
        self,
        start_url: str,
        more_hosts: tuple[str, ...] = (),
        digests: bool = False,
        **kwargs: Any,
    ) -> None:
        parts = urlsplit(start_url)
        self.start_urls = [start_url]
        self.digests = digests
        netlocs = [parts.netloc, *more_hosts]
        # The offsite middleware matches the host name alone; the link extractor matches
        # the netloc (host:port), so it keeps the crawl on the benchmark server's port.
        self.allowed_domains = sorted({n.rsplit(":", 1)[0] for n in netlocs})
        self.rules = (
            Rule(
                LinkExtractor(allow_domains=netlocs),
                callback="parse_item",
                errback="on_error",
                follow=True,
            ),
        )
        super().__init__(**kwargs)  # CrawlSpider compiles self.rules here

    async def start(self) -> Any:  # Scrapy >= 2.13
        for request in self.start_requests():
            yield request

    def start_requests(self) -> Iterator[Request]:  # Scrapy < 2.13
        # Scrapy's default start requests bypass the dupe filter (dont_filter=True), so
        # the start URL is fetched again when a page links back to it. A user who wants
        # each page once makes them filterable; the callback stays CrawlSpider's parse.
        for url in self.start_urls:
            yield Request(url)

    def parse_start_url(self, response: Response, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield self.item(response)

    def parse_item(self, response: Response) -> Iterator[dict[str, Any]]:
        yield self.item(response)

    def item(self, response: Response) -> dict[str, Any]:
        item: dict[str, Any] = {"url": response.url, "status": response.status}
        if self.digests:
            item["sha1"] = hashlib.sha1(response.body).hexdigest()
            item["cached"] = "cached" in response.flags
        return item

    def on_error(self, failure: Failure) -> Iterator[dict[str, Any]]:
        request = failure.request  # type: ignore[attr-defined]
        status = None
        if failure.check(HttpError):
            status = failure.value.response.status
        yield {"url": request.url, "status": status, "error": repr(failure.value)}


def settings_for(workers: int, output: str, httpcache: str | None = None) -> dict[str, Any]:
    """The Scrapy settings of the benchmark (see the module docstring)."""
    cache = (
        {
            "HTTPCACHE_ENABLED": True,
            "HTTPCACHE_DIR": httpcache,
            "HTTPCACHE_POLICY": "scrapy.extensions.httpcache.RFC2616Policy",
        }
        if httpcache
        else {}
    )
    return {
        **cache,
        "CONCURRENT_REQUESTS": workers,
        "CONCURRENT_REQUESTS_PER_DOMAIN": workers,
        "ROBOTSTXT_OBEY": True,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "FEEDS": {output: {"format": "jsonlines", "overwrite": True}},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scrapy side of the trio-crawl benchmark")
    parser.add_argument("url")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--output", required=True)
    parser.add_argument("--stats", help="write Scrapy's crawl stats here as JSON")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST:PORT")
    parser.add_argument("--httpcache", metavar="DIR", help="RFC2616Policy HTTP cache in DIR")
    args = parser.parse_args(argv)
    process = CrawlerProcess(settings=settings_for(args.workers, args.output, args.httpcache))
    crawler = process.create_crawler(BenchSpider)
    process.crawl(
        crawler,
        start_url=args.url,
        more_hosts=tuple(args.allow_host),
        digests=bool(args.httpcache),
    )
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    if args.stats:
        with open(args.stats, "w") as fh:
            json.dump(stats, fh, indent=2, sort_keys=True, default=str)
    finished = stats.get("finish_reason")
    return 0 if finished == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
