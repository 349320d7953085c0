"""The parts of one ``Crawler`` and how they are joined: the frontier, the
``WorkPool`` it is a room of, the politeness schedule (this process's, or
the one a shared backend keeps), and the host gate (robots.txt, sitemaps).

The crawl's hooks (records, items, responses, depth updates, archive,
state) are wired in ``build.py``; this is the inside of the engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ..core.config import CrawlConfig
from ..core.frontier import Entry
from ..core.schedule import PoliteSchedule
from ..core.stats import CrawlStats
from ..core.url import Scope
from ..fetch.base import Fetcher
from ..frontiers.base import Correct, FrontierBackend, SharedPoliteness, refuse_unservable
from ..frontiers.memory import MemoryFrontier
from ..workpool import WorkPool
from .host_gate import ROBOTS_RETRY_PERIOD, HostGate
from .politeness import ScheduleRoom
from .requests import priority
from .robots_gate import RobotsCache
from .shared_politeness import SharedScheduleRoom, robots_fetcher
from .sitemaps import SitemapSeeder
from .time_limit import stop_at_time_limit


@dataclass(frozen=True, slots=True)
class Machinery:
    """The joined parts; ``Crawler`` drives them one URL at a time."""

    scope: Scope
    frontier: FrontierBackend
    pool: WorkPool[Entry]
    schedule: ScheduleRoom
    gate: HostGate


def assemble(
    config: CrawlConfig,
    fetcher: Fetcher,
    frontier: FrontierBackend | None,
    *,
    stats: CrawlStats,
    correct: Correct,
) -> Machinery:
    """Join the parts of a crawl on ``frontier`` (None: a ``MemoryFrontier``
    of ``config``'s start URLs); ``correct`` takes its depth corrections.
    Raises ``ConfigError`` if the frontier cannot serve ``config``."""
    if frontier is not None:
        refuse_unservable(config, frontier.cannot, frontier.chosen_by)
    scope = config.scope()
    frontier = frontier or MemoryFrontier(
        config.start_urls,
        scope=scope,
        max_depth=config.max_depth,
        max_pages=config.max_pages,
        late_starts=config.sitemaps,
    )
    pool = WorkPool[Entry](config.workers, grace=config.grace, on_take=frontier.want_more)

    def publish(entry: Entry) -> None:
        pool.publish(entry, priority(entry))

    schedule: ScheduleRoom
    if isinstance(frontier, SharedPoliteness):  # Redis: the server spaces requests
        schedule = SharedScheduleRoom(frontier, publish)
    else:
        polite = PoliteSchedule[Entry](
            rate=config.rate,
            max_per_host=config.per_host_concurrency,
            random_wait=config.random_wait,
        )
        schedule = ScheduleRoom(polite, publish)
    pool.add_room(schedule)
    pool.add_room(frontier)
    frontier.attach(publish, pool.check_idle, lambda: pool.queued, correct)
    robots = None
    if not config.ignore_robots:
        robots = RobotsCache(
            robots_fetcher(fetcher, frontier),  # once per crawl with --redis
            config.user_agent,
            retry_period=ROBOTS_RETRY_PERIOD,
        )
    gate = HostGate(
        robots,
        schedule,
        SitemapSeeder(fetcher, scope, frontier) if config.sitemaps else None,
        max_crawl_delay=config.max_crawl_delay,
        capped_delays=stats.capped_crawl_delays,
    )
    return Machinery(scope, frontier, pool, schedule, gate)


class Runnable(Protocol):
    """What ``pool_helpers`` needs of a ``Crawler``."""

    config: CrawlConfig
    frontier: FrontierBackend
    schedule: ScheduleRoom

    @property
    def stopping(self) -> bool: ...

    def stop(self) -> None: ...


def pool_helpers(crawler: Runnable) -> list[Callable[[], Awaitable[None]]]:
    """The tasks that run beside a crawl's workers (and end with them): the
    schedule's timer, the frontier's feeder and, with ``max_time``, a
    graceful stop at the time limit (``time_limit.py``)."""
    helpers: list[Callable[[], Awaitable[None]]] = [crawler.schedule.serve, crawler.frontier.serve]
    if crawler.config.max_time is not None:
        helpers.append(
            stop_at_time_limit(crawler.config.max_time, crawler.stop, lambda: crawler.stopping)
        )
    return helpers
