"""trio_crawl: a Trio-native web crawler.

The public surface is this module (and ``trio_crawl.testing``). The
subpackages are the implementation, laid out by layer, and may change:

    core/       pure decisions and bookkeeping: URLs, frontier, schedule,
                retry, robots, outcome, parsing, models (no trio, no I/O)
    errors.py   the errors raised on purpose: CrawlError and its subclasses
    workpool.py the termination core: WorkPool (trio only)
    fetch/      the Fetcher protocol and its HTTP clients (the only HTTP importers)
    frontiers/  FrontierBackend: in memory, in a SQLite file, or in Redis
    outputs/    where results go: JSON Lines / CSV files, WARC archives
    engine/     the crawl on WorkPool: robots gate, politeness, pages, delivery
    report/     the crawl report: aggregation and the HTML page
    cli/        the command line (nothing imports it)
    sites/      local sites served on 127.0.0.1 (the demo, tests)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.config import CrawlConfig
from .core.http import FetchConfig
from .core.models import CrawlRecord, DepthUpdate, ErrorInfo, FetchResult
from .core.scrape import Handler, Page, Request
from .core.stats import CrawlSummary
from .core.version import VERSION

__version__ = VERSION
from .core.pool_sizing import PoolSizer, PoolSizerSettings
from .engine.api import CrawlOptions, RunningCrawl, open_crawler, open_fetcher, run_crawl
from .engine.crawler import Crawler
from .engine.statistics import EngineStatistics
from .errors import (
    ConfigError,
    CrawlError,
    FetchError,
    OutputError,
    StateLockedError,
    StateUsageError,
    StateWriteError,
)
from .fetch.base import Fetcher
from .frontiers.base import FrontierBackend
from .frontiers.memory import MemoryFrontier
from .workpool import Room, WorkPool, WorkPoolStatistics

if TYPE_CHECKING:
    from .frontiers.redis import RedisFrontier, open_redis_frontier
    from .frontiers.redis import check_crawl as check_redis_crawl
    from .frontiers.redis import delete_crawl as delete_redis_crawl
    from .frontiers.sqlite import SqliteFrontier

#: Public names imported on first use (PEP 562): a crawl in memory needs
#: neither the Redis nor the SQLite frontier, and importing them slows every
#: start of ``trio-crawl``.
#: name -> (module, its name there)
_LAZY = {
    "RedisFrontier": (".frontiers.redis", "RedisFrontier"),
    "open_redis_frontier": (".frontiers.redis", "open_redis_frontier"),
    "check_redis_crawl": (".frontiers.redis", "check_crawl"),
    "delete_redis_crawl": (".frontiers.redis", "delete_crawl"),
    "SqliteFrontier": (".frontiers.sqlite", "SqliteFrontier"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # the next lookup finds it directly
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ConfigError",
    "CrawlConfig",
    "CrawlError",
    "CrawlOptions",
    "CrawlRecord",
    "CrawlSummary",
    "Crawler",
    "DepthUpdate",
    "EngineStatistics",
    "ErrorInfo",
    "FetchConfig",
    "FetchError",
    "FetchResult",
    "Fetcher",
    "FrontierBackend",
    "Handler",
    "MemoryFrontier",
    "OutputError",
    "Page",
    "PoolSizer",
    "PoolSizerSettings",
    "RedisFrontier",
    "Request",
    "Room",
    "RunningCrawl",
    "SqliteFrontier",
    "StateLockedError",
    "StateUsageError",
    "StateWriteError",
    "WorkPool",
    "WorkPoolStatistics",
    "check_redis_crawl",
    "delete_redis_crawl",
    "open_crawler",
    "open_fetcher",
    "open_redis_frontier",
    "run_crawl",
]
