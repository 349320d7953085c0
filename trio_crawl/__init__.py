"""trio_crawl: a Trio-native web crawler.

The public surface is this module; everything in ``_*`` modules may change.
"""

__version__ = "0.1.0"

from ._api import RunningCrawl, open_crawler, open_fetcher, run_crawl
from ._config import ConfigError, CrawlConfig
from ._engine import Crawler, EngineStatistics
from ._fetch import FetchConfig, Fetcher
from ._models import CrawlRecord, ErrorInfo, FetchError, FetchResult
from ._scrape import Handler, Page, Request
from ._stats import CrawlSummary

__all__ = [
    "ConfigError",
    "CrawlConfig",
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
