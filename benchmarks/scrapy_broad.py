"""The Scrapy side of the broad-crawl benchmark (broad.py): many hosts from a seeds file.

Run as its own process by broad.py:

    python scrapy_broad.py SEEDS_FILE --output OUT.jsonl [--concurrency 100] [--per-host 8]

The spider is scrapy_crawl.py's (one item per response, one per failed request), started
from every URL of the seeds file and following every link except those to
``external.invalid`` (the generated site's out-of-scope host). No ``allowed_domains``: a
broad crawl does not list its hosts, and Scrapy's offsite check over 1,000 names would be
a cost no broad crawler pays.

Settings are what Scrapy's "Broad Crawls" page recommends, each with its reason there:

- ``CONCURRENT_REQUESTS`` 100 ("a good starting point"; ``--concurrency``), the
  per-domain limit at its default 8 (``--per-host``), ``REACTOR_THREADPOOL_MAXSIZE`` 20;
- ``LOG_LEVEL`` INFO, ``COOKIES_ENABLED`` False, ``RETRY_ENABLED`` False,
  ``DOWNLOAD_TIMEOUT`` 15, ``REDIRECT_ENABLED`` False;
- breadth-first order: ``DEPTH_PRIORITY`` 1 with the FIFO memory and disk queues;
- ``SCHEDULER_PRIORITY_QUEUE`` ``DownloaderAwarePriorityQueue`` (Scrapy 2.19's default
  anyway). ``AJAXCRAWL_ENABLED`` is left out: Scrapy 2.19 no longer has that middleware,
  and the generated pages declare no AJAX crawling.

robots.txt is obeyed (as by trio-crawl) and the feed is JSON Lines, as in scrapy_crawl.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scrapy_crawl import BenchSpider

#: The generated site's out-of-scope host (generate_site.py rule 6).
EXTERNAL_HOST = "external.invalid"


class BroadSpider(BenchSpider):
    """BenchSpider over many start URLs, without a host list."""

    name = "broad"

    def __init__(self, seeds: list[str], **kwargs: Any) -> None:
        self.start_urls = seeds
        self.rules = (
            Rule(
                LinkExtractor(deny_domains=[EXTERNAL_HOST]),
                callback="parse_item",
                errback="on_error",
                follow=True,
            ),
        )
        CrawlSpider.__init__(self, **kwargs)  # not BenchSpider's: it takes one start URL


def settings_for(
    concurrency: int,
    per_host: int,
    output: str,
    *,
    follow_redirects: bool = False,
    timeout: float = 15,
) -> dict[str, Any]:
    """The Broad Crawls page's settings (see the module docstring); the
    discovery world (discovery.py) follows redirects, as the page allows
    ("unless you are interested in following them"): its hosts are found
    through them too."""
    return {
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": per_host,
        "REACTOR_THREADPOOL_MAXSIZE": 20,
        "LOG_LEVEL": "INFO",
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": False,
        "DOWNLOAD_TIMEOUT": timeout,
        "REDIRECT_ENABLED": follow_redirects,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "ROBOTSTXT_OBEY": True,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "FEEDS": {output: {"format": "jsonlines", "overwrite": True}},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scrapy side of the broad-crawl benchmark")
    parser.add_argument("seeds", help="file of start URLs, one per line")
    parser.add_argument("--output", required=True)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--stats", help="write Scrapy's crawl stats here as JSON")
    parser.add_argument("--follow-redirects", action="store_true")
    parser.add_argument("--timeout", type=float, default=15, help="DOWNLOAD_TIMEOUT")
    args = parser.parse_args(argv)
    seeds = [line.strip() for line in Path(args.seeds).read_text().splitlines() if line.strip()]
    settings = settings_for(
        args.concurrency,
        args.per_host,
        args.output,
        follow_redirects=args.follow_redirects,
        timeout=args.timeout,
    )
    process = CrawlerProcess(settings=settings)
    crawler = process.create_crawler(BroadSpider)
    process.crawl(crawler, seeds=seeds)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    if args.stats:
        with open(args.stats, "w") as fh:
            json.dump(stats, fh, indent=2, sort_keys=True, default=str)
    return 0 if stats.get("finish_reason") == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
