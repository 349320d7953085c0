"""The parts of one ``Crawler`` and how they are joined: the frontier, the
``WorkPool`` it is a room of (when it holds URLs back), the politeness
schedule (this process's, or the one a shared backend keeps), and the host
gate (robots.txt, sitemaps).

A backend's optional parts (``frontiers/base.py``, "Capabilities") are
wired here, and only where the backend has them: whether it serves the
crawl was settled before (``build.py`` refuses a crawl it cannot serve), so
nothing on a page's path asks again. The crawl's hooks (records, items,
responses, depth updates, archive, state) are wired in ``build.py``; this
is the inside of the engine.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ..core.config import CrawlConfig
from ..core.frontier import Entry
from ..core.scope import Scope
from ..core.stats import CrawlStats
from ..fetch.base import Fetcher
from ..frontiers.base import (
    AdmitsSeeds,
    Correct,
    FrontierBackend,
    HoldsBack,
    SharedPoliteness,
)
from ..frontiers.memory import MemoryFrontier
from ..workpool import WorkPool
from .host_gate import ROBOTS_RETRY_PERIOD, HostGate
from .politeness import Job, ScheduleRoom
from .pool_size import sized_pool
from .requests import priority
from .robots_gate import RobotsCache
from .schedule import PoliteSchedule
from .shared_politeness import SharedScheduleRoom, robots_fetcher
from .time_limit import stop_at_time_limit
from .worker_log import WorkerLog


@dataclass(frozen=True, slots=True)
class Machinery:
    """The joined parts; ``Crawler`` drives them one URL at a time."""

    scope: Scope
    frontier: FrontierBackend
    #: The frontier again if it holds URLs back (a room of the pool), else None.
    held: HoldsBack | None
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
    ``workers`` (made here if None) logs the pool's size over time. The
    frontier serves ``config`` (checked by the builder: ``refuse_unservable``)."""
    scope = config.scope()
    frontier = frontier or MemoryFrontier.of(config, scope)
    held = frontier if isinstance(frontier, HoldsBack) else None
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
    want_more = held.want_more if held is not None else _nothing_held
    pool: WorkPool[Entry] = sized_pool(config, want_more, work_ceiling, workers.resized)
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
    if held is not None:
        pool.add_room(held)
    frontier.attach(publish, pool.check_idle, lambda: pool.queued, correct)
    robots = None
    if not config.politeness.ignore_robots:
        robots = RobotsCache(
            robots_fetcher(fetcher, frontier),  # once per crawl with --redis
            config.fetch.user_agent,
            retry_period=ROBOTS_RETRY_PERIOD,
        )
    seeds = frontier if config.follow.sitemaps and isinstance(frontier, AdmitsSeeds) else None
    sitemaps = None
    if seeds is not None:
        from .sitemaps import SitemapSeeder  # --sitemaps only: not loaded before

        sitemaps = SitemapSeeder(fetcher, scope, seeds)
    gate = HostGate(
        robots,
        schedule,
        sitemaps,
        max_crawl_delay=config.politeness.max_crawl_delay,
        capped_delays=stats.capped_crawl_delays,
    )
    return Machinery(scope, frontier, held, pool, schedule, gate, workers)


def _nothing_held(queued: int) -> None:
    """A frontier that holds nothing back has nothing to feed the pool."""
    return None


class Runnable(Protocol):
    """What ``pool_helpers`` needs of a ``Crawler``."""

    config: CrawlConfig
    held: HoldsBack | None
    schedule: ScheduleRoom

    @property
    def stopping(self) -> bool: ...

    def stop(self) -> None: ...


def pool_helpers(
    crawler: Runnable, *more: Callable[[], Awaitable[None]]
) -> list[Callable[[], Awaitable[None]]]:
    """The tasks that run beside a crawl's workers (and end with them): the
    schedule's timer, the feeder of a frontier that holds URLs back, ``more``
    (the parse co-process's link) and, with ``max_time``, a graceful stop at
    the time limit (``time_limit.py``)."""
    helpers: list[Callable[[], Awaitable[None]]] = [crawler.schedule.serve]
    if crawler.held is not None:
        helpers.append(crawler.held.serve)
    helpers.extend(more)
    if crawler.config.budgets.max_time is not None:
        helpers.append(
            stop_at_time_limit(
                crawler.config.budgets.max_time, crawler.stop, lambda: crawler.stopping
            )
        )
    return helpers
