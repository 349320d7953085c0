"""Opening the Redis frontier: connect, create or join the crawl, register,
and leave it again, however the block ends.

``open_redis_frontier`` is the library's way in (the CLI's ``--redis`` uses it
too); ``RedisFrontier`` itself does the crawling once this has made it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from ...core.config import CrawlConfig
from ..base import DEFAULT_LEASE
from .client import default_worker_name, open_client, refuse_eviction
from .frontier import RedisFrontier
from .support import CHOSEN_BY, refuse_unsupported


@contextlib.asynccontextmanager
async def open_redis_frontier(
    url: str,
    crawl_id: str,
    config: CrawlConfig,
    *,
    name: str | None = None,
    window: int | None = None,
    lease: float = DEFAULT_LEASE,
    notice: Callable[[str], None] | None = None,
    chosen_by: str = CHOSEN_BY,
) -> AsyncIterator[RedisFrontier]:
    """Connect to Redis at ``url``, create or join crawl ``crawl_id``, and
    register this process as one of its workers.

    Raises ``ConfigError`` (before connecting) for a setting Redis cannot
    serve (``support.unsupported``; ``chosen_by``: the argument it names),
    ``RedisUnavailable`` (cannot connect,
    or a server that may evict keys: its ``maxmemory-policy`` must be
    ``noeviction``), ``RedisRefused`` (an error reply such as OOM),
    ``CrawlMismatch`` (the crawl exists with other settings) and, from
    inside the block, ``RedisLost`` (``RedisRefused`` for an error reply,
    ``CrawlGone`` when the crawl's keys vanish): single exceptions, never
    groups. ``notice`` receives one-line warnings (this worker was taken for
    dead and joined again); the default logs them. The password may be in
    ``url`` or in the environment variable ``TRIO_CRAWL_REDIS_PASSWORD``.

    A crawl on Redis is run with ``run_crawl(..., frontier=redis_frontier(url,
    crawl_id))`` (or ``open_crawler``), which opens it with this function.
    """
    refuse_unsupported(config, RedisFrontier, chosen_by)
    async with open_client(url) as client:
        frontier = RedisFrontier(
            client,
            crawl_id,
            config,
            name=name or default_worker_name(None),
            window=window,
            lease=lease,
            url=url,
            notice=notice,
        )
        await refuse_eviction(client, url)
        await frontier.hello()
        try:
            yield frontier
        finally:
            await frontier.aclose()
