"""Frontier backends named before the crawl opens them (``FrontierSpec``).

A library user names the backend (``state="crawl.db"``, or
``frontier=redis_frontier(url, crawl_id)``) and the crawl builder opens it
with the crawl's own config: the frontier and the crawl are given the
settings once, so they cannot disagree, and the crawl keeps everything the
builder adds (``mirror=``, ``warc=``) whichever backend it runs on.

Each spec is small and frozen, and imports its backend only when asked
(``backend``, ``open``): a crawl in memory never loads SQLite or Redis.
Each carries its refusals' words (``limits``, written in ``base.py``);
what a backend serves is what its class has (``base.py``, "Capabilities").
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from ..core.config import CrawlConfig
from .base import DEFAULT_LEASE, REDIS_LIMITS, STATE_LIMITS, Need

if TYPE_CHECKING:
    from .redis import RedisFrontier
    from .sqlite import SqliteFrontier


@dataclass(frozen=True, slots=True)
class StateFile:
    """``state=path``: the frontier in a SQLite file, created or resumed."""

    path: str
    chosen_by: str = "state="
    limits: Mapping[Need, str] = field(default_factory=lambda: STATE_LIMITS)

    def backend(self) -> type[SqliteFrontier]:
        from .sqlite import SqliteFrontier  # for state= only: sqlite3 is not free

        return SqliteFrontier

    @contextlib.asynccontextmanager
    async def open(self, config: CrawlConfig) -> AsyncIterator[SqliteFrontier]:
        # Opening reads and may repair the file: blocking, so in a thread.
        opening = functools.partial(self.backend().open, config, self.path)
        frontier = await trio.to_thread.run_sync(opening)
        try:
            yield frontier
        finally:
            frontier.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisSpec:
    """``redis_frontier(...)``: a crawl shared through Redis, joined by this
    process as one of its workers (``open_redis_frontier`` has the details)."""

    url: str
    crawl_id: str
    name: str | None = None
    window: int | None = None
    lease: float = DEFAULT_LEASE
    notice: Callable[[str], None] | None = None
    chosen_by: str = "frontier=redis_frontier()"
    limits: Mapping[Need, str] = field(default_factory=lambda: REDIS_LIMITS)

    def backend(self) -> type[RedisFrontier]:
        from .redis import RedisFrontier  # for Redis crawls only: coredis is not free

        return RedisFrontier

    def open(self, config: CrawlConfig) -> contextlib.AbstractAsyncContextManager[RedisFrontier]:
        from .redis import open_redis_frontier

        return open_redis_frontier(
            self.url,
            self.crawl_id,
            config,
            name=self.name,
            window=self.window,
            lease=self.lease,
            notice=self.notice,
            chosen_by=self.chosen_by,
        )


def redis_frontier(
    url: str,
    crawl_id: str,
    *,
    name: str | None = None,
    window: int | None = None,
    lease: float = DEFAULT_LEASE,
    notice: Callable[[str], None] | None = None,
) -> RedisSpec:
    """The frontier of crawl ``crawl_id`` in Redis at ``url``, for
    ``run_crawl(..., frontier=)`` and ``open_crawler(..., frontier=)``: the
    crawl creates it (admitting its start URLs) or joins it when it starts,
    as a worker named ``name`` (default: host and pid), and leaves it when
    it ends. ``window``: URLs this worker holds at most; ``lease``: seconds
    after which a silent worker's pages go to the others; ``notice``: one-line
    warnings (the default logs them). Nothing is connected here.

    Example::

        spec = trio_crawl.redis_frontier("redis://127.0.0.1:6379/0", "docs")
        summary = await trio_crawl.run_crawl(url, frontier=spec, warc="docs.warc.gz")
    """
    return RedisSpec(
        url=url, crawl_id=crawl_id, name=name, window=window, lease=lease, notice=notice
    )
