"""The parts of one ``Crawler`` and how they are joined: the frontier, the
``WorkPool`` it is a room of, the politeness schedule (this process's, or
the one a shared backend keeps), and the host gate (robots.txt, sitemaps).

The crawl's hooks (records, items, responses, depth updates, archive,
state) are wired in ``build.py``; this is the inside of the engine.
"""

from __future__ import annotations

import math
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
from .politeness import Job, ScheduleRoom
from .pool_size import sized_pool
from .requests import priority
from .robots_gate import RobotsCache
from .shared_politeness import SharedScheduleRoom, robots_fetcher
from .sitemaps import SitemapSeeder
from .time_limit import stop_at_time_limit
from .worker_log import WorkerLog


@dataclass(frozen=True, slots=True)
class Machinery:
    """The joined parts; ``Crawler`` drives them one URL at a time."""

    scope: Scope
    frontier: FrontierBackend
    pool: WorkPool[Entry]
    schedule: ScheduleRoom
    gate: HostGate
    workers: WorkerLog


def assemble(
    config: CrawlConfig,
    fetcher: Fetcher,
    frontier: FrontierBackend | None,
    *,
    stats: CrawlStats,
    correct: Correct,
    workers: WorkerLog | None = None,
) -> Machinery:
    """Join the parts of a crawl on ``frontier`` (None: a ``MemoryFrontier``
    of ``config``'s start URLs); ``correct`` takes its depth corrections;
    ``workers`` (made here if None) logs the pool's size over time.
    Raises ``ConfigError`` if the frontier cannot serve ``config``."""
    if frontier is not None:
        refuse_unservable(config, frontier.cannot, frontier.chosen_by)
    scope = config.scope()
    frontier = frontier or MemoryFrontier.of(config, scope)
    schedule: ScheduleRoom

    def work_ceiling() -> float:
        """The most workers the work can use now (a sized pool grows no
        further): per-host concurrency x hosts in flight, plus the queued
        URLs (each may open a new host); unbounded without a per-host limit."""
        per_host = config.host_concurrency
        if per_host is None or isinstance(schedule, SharedScheduleRoom):
            return math.inf
        return per_host * (schedule.schedule.hosts_in_flight + 1) + pool.queued

    workers = workers or WorkerLog(config.initial_workers, sized=config.pool.workers is None)
    pool: WorkPool[Entry] = sized_pool(config, frontier.want_more, work_ceiling, workers.resized)
    workers.pool = pool

    def publish(entry: Entry) -> None:
        pool.publish(entry, priority(entry))

    if isinstance(frontier, SharedPoliteness):  # Redis: the server spaces requests
        schedule = SharedScheduleRoom(frontier, publish)
    else:
        polite = PoliteSchedule[Job](
            rate=config.politeness.rate,
            max_per_host=config.host_concurrency,
            random_wait=config.politeness.random_wait,
        )
        schedule = ScheduleRoom(polite, publish)
    pool.add_room(schedule)
    pool.add_room(frontier)
    frontier.attach(publish, pool.check_idle, lambda: pool.queued, correct)
    robots = None
    if not config.politeness.ignore_robots:
        robots = RobotsCache(
            robots_fetcher(fetcher, frontier),  # once per crawl with --redis
            config.fetch.user_agent,
            retry_period=ROBOTS_RETRY_PERIOD,
        )
    gate = HostGate(
        robots,
        schedule,
        SitemapSeeder(fetcher, scope, frontier) if config.follow.sitemaps else None,
        max_crawl_delay=config.politeness.max_crawl_delay,
        capped_delays=stats.capped_crawl_delays,
    )
    return Machinery(scope, frontier, pool, schedule, gate, workers)


class Runnable(Protocol):
    """What ``pool_helpers`` needs of a ``Crawler``."""

    config: CrawlConfig
    frontier: FrontierBackend
    schedule: ScheduleRoom

    @property
    def stopping(self) -> bool: ...

    def stop(self) -> None: ...


def pool_helpers(
    crawler: Runnable, *more: Callable[[], Awaitable[None]]
) -> list[Callable[[], Awaitable[None]]]:
    """The tasks that run beside a crawl's workers (and end with them): the
    schedule's timer, the frontier's feeder, ``more`` (the parse co-process's
    link) and, with ``max_time``, a graceful stop at the time limit
    (``time_limit.py``)."""
    helpers: list[Callable[[], Awaitable[None]]] = [crawler.schedule.serve, crawler.frontier.serve]
    helpers.extend(more)
    if crawler.config.budgets.max_time is not None:
        helpers.append(
            stop_at_time_limit(
                crawler.config.budgets.max_time, crawler.stop, lambda: crawler.stopping
            )
        )
    return helpers
