"""trio_crawl: a Trio-native web crawler.

The public surface is this module; everything in ``_*`` modules may change.
"""

__version__ = "0.1.0"

from .core.config import ConfigError, CrawlConfig
from .core.http import FetchConfig
from .core.models import CrawlRecord, ErrorInfo, FetchError, FetchResult
from .core.scrape import Handler, Page, Request
from .core.stats import CrawlSummary
from .engine.api import CrawlOptions, RunningCrawl, open_crawler, open_fetcher, run_crawl
from .engine.crawler import Crawler, EngineStatistics
from .fetch.base import Fetcher

__all__ = [
    "ConfigError",
    "CrawlConfig",
    "CrawlOptions",
    "CrawlRecord",
    "CrawlSummary",
    "Crawler",
    "EngineStatistics",
    "ErrorInfo",
    "FetchConfig",
    "FetchError",
    "FetchResult",
    "Fetcher",
    "Handler",
    "Page",
    "Request",
    "RunningCrawl",
    "open_crawler",
    "open_fetcher",
    "run_crawl",
]
