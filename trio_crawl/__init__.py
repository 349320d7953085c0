"""trio_crawl: a Trio-native web crawler.

The public surface is this module (and ``trio_crawl.testing``). The
subpackages are the implementation, laid out by layer, and may change:

    core/       the vocabulary every layer shares, pure: URLs and scope,
                frontier, retry, parsing, settings, models (no trio, no I/O)
    robots/     robots.txt: the file's rules and an origin's policy (pure)
    errors.py   the errors raised on purpose: CrawlError and its subclasses
    workpool.py the termination core: WorkPool (trio only)
    machine.py  what this machine can serve: descriptor and memory limits (I/O)
    fetch/      the Fetcher protocol and its HTTP clients (the only HTTP importers)
    frontiers/  FrontierBackend: in memory, in a SQLite file, or in Redis
    outputs/    where results go: JSON Lines / CSV files, WARC archives
    mirror/     --mirror: the offline copy (pure layout and links, disk I/O)
    recrawl/    --recrawl: each URL's last visit (pure), kept in SQLite tables
    engine/     the crawl on WorkPool: robots gate, politeness, pages, delivery
    report/     the crawl report: aggregation and the HTML page
    cli/        the command line (nothing imports it)
    sites/      local sites served on 127.0.0.1 (the demo, tests)

Pure rules that only one package uses live beside it (``engine/schedule.py``,
``fetch/dns/name_cache.py``, ``frontiers/bloom.py``), as free of trio and I/O
as core: ``tests/test_layering.py`` checks that module by module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.version import VERSION

__version__ = VERSION

if TYPE_CHECKING:
    from .core.config import CrawlConfig
    from .core.http import FetchConfig
    from .core.models import CrawlRecord, DepthUpdate, ErrorInfo, FetchResult
    from .core.pool_sizing import PoolSizer, PoolSizerSettings
    from .core.scrape import Handler, Page, Request
    from .core.settings import Budgets, Fetching, Follow, Output, Politeness, Pool, Rendering
    from .core.stats import CrawlSummary
    from .engine.api import CrawlOptions, RunningCrawl, open_crawler, open_fetcher, run_crawl
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
    from .frontiers.base import FrontierBackend, FrontierSpec
    from .frontiers.memory import MemoryFrontier
    from .frontiers.redis import RedisFrontier, open_redis_frontier
    from .frontiers.redis import check_crawl as check_redis_crawl
    from .frontiers.redis import delete_crawl as delete_redis_crawl
    from .frontiers.specs import redis_frontier
    from .frontiers.sqlite import SqliteFrontier
    from .workpool import Room, WorkPool, WorkPoolStatistics

#: Where each public name lives (``module`` or ``module:its name there``),
#: imported on first use (PEP 562), so that ``import trio_crawl`` loads
#: nothing heavy: the command line's entry (``__main__.run``) catches Ctrl-C
#: while the crawler's modules load, and a crawl in memory never loads the
#: SQLite or Redis frontier. The imports above say the same to type checkers.
_HOMES = {
    "CrawlConfig": "core.config",
    "FetchConfig": "core.http",
    "CrawlRecord": "core.models",
    "DepthUpdate": "core.models",
    "ErrorInfo": "core.models",
    "FetchResult": "core.models",
    "PoolSizer": "core.pool_sizing",
    "PoolSizerSettings": "core.pool_sizing",
    "Handler": "core.scrape",
    "Page": "core.scrape",
    "Request": "core.scrape",
    "Budgets": "core.settings",
    "Fetching": "core.settings",
    "Follow": "core.settings",
    "Output": "core.settings",
    "Politeness": "core.settings",
    "Pool": "core.settings",
    "Rendering": "core.settings",
    "CrawlSummary": "core.stats",
    "CrawlOptions": "engine.api",
    "RunningCrawl": "engine.api",
    "open_crawler": "engine.api",
    "open_fetcher": "engine.api",
    "run_crawl": "engine.api",
    "EngineStatistics": "engine.statistics",
    "ConfigError": "errors",
    "CrawlError": "errors",
    "FetchError": "errors",
    "OutputError": "errors",
    "StateLockedError": "errors",
    "StateUsageError": "errors",
    "StateWriteError": "errors",
    "Fetcher": "fetch.base",
    "FrontierBackend": "frontiers.base",
    "FrontierSpec": "frontiers.base",
    "MemoryFrontier": "frontiers.memory",
    "RedisFrontier": "frontiers.redis",
    "open_redis_frontier": "frontiers.redis",
    "check_redis_crawl": "frontiers.redis:check_crawl",
    "delete_redis_crawl": "frontiers.redis:delete_crawl",
    "redis_frontier": "frontiers.specs",
    "SqliteFrontier": "frontiers.sqlite",
    "Room": "workpool",
    "WorkPool": "workpool",
    "WorkPoolStatistics": "workpool",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = home.partition(":")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute or name)
    globals()[name] = value  # the next lookup finds it directly
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "Budgets",
    "ConfigError",
    "CrawlConfig",
    "CrawlError",
    "CrawlOptions",
    "CrawlRecord",
    "CrawlSummary",
    "DepthUpdate",
    "EngineStatistics",
    "ErrorInfo",
    "FetchConfig",
    "FetchError",
    "FetchResult",
    "Fetcher",
    "Fetching",
    "Follow",
    "FrontierBackend",
    "FrontierSpec",
    "Handler",
    "MemoryFrontier",
    "Output",
    "OutputError",
    "Page",
    "Politeness",
    "Pool",
    "PoolSizer",
    "PoolSizerSettings",
    "RedisFrontier",
    "Rendering",
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
    "redis_frontier",
    "run_crawl",
]
