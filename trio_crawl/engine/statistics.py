"""What a running crawl shows a progress display (``Crawler.statistics``),
and what its summary adds from a rendering fetcher (``--render``)."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

import trio

from ..core.stats import CrawlStats, CrawlSummary
from ..fetch.base import Fetcher
from ..frontiers.base import FrontierBackend
from ..workpool import WorkPoolStatistics

if TYPE_CHECKING:
    from ..fetch.chromium.fetcher import ChromiumFetcher
    from .parse_process import ParseProcess


@dataclass(frozen=True, slots=True)
class EngineStatistics:
    """A snapshot for progress displays (all counts are exact at the instant).

    ``queued``: URLs ready for a crawler, in memory or waiting in the
    frontier backend (its disk queue); ``active``: URLs a
    crawler holds; ``waiting``: URLs parked in the politeness schedule.
    """

    records: int
    failures: int
    queued: int
    active: int
    waiting: int
    seen: int
    elapsed: float
    #: The worker target (tokens) and the worker tasks alive now.
    workers: int = 0
    tasks: int = 0
    #: Pages whose links the parse co-process extracted, and its process id
    #: while it takes pages (None: the crawl has none, it is not ready yet,
    #: or it has ended).
    parsed_in_process: int = 0
    parse_process_pid: int | None = None


def snapshot(
    stats: CrawlStats,
    pool: WorkPoolStatistics,
    frontier: FrontierBackend,
    waiting: int,
    elapsed: float,
    process: ParseProcess | None = None,
) -> EngineStatistics:
    """The crawl's statistics now, from its parts (``waiting``: the schedule's;
    ``process``: the parse co-process, if any)."""
    return EngineStatistics(
        records=stats.records,
        failures=sum(stats.failures.values()),
        # The rooms are the schedule (``waiting``) and a frontier that holds back.
        queued=pool.queued + pool.waiting - waiting,
        active=pool.active,
        waiting=waiting,
        seen=frontier.statistics().seen,
        elapsed=elapsed,
        workers=pool.workers,
        tasks=pool.tasks,
        parsed_in_process=process.pages if process is not None else 0,
        parse_process_pid=process.pid if process is not None and process.ready else None,
    )


def summarize(
    stats: CrawlStats,
    frontier: FrontierBackend,
    process: ParseProcess | None,
    *,
    elapsed: float,
    stopped: bool,
) -> CrawlSummary:
    """The summary of the records in ``stats``, with what the frontier left
    unfinished (queued, or dropped by a stop), what its host budgets turned
    away, the rate turns it gave back and the pages the parse co-process took."""
    front = frontier.statistics()
    summary = stats.summary(
        elapsed=elapsed,
        stopped=stopped,
        unfinished=frontier.unfinished + front.dropped,
        over_host_budget=front.refused,
        missed_turns=front.missed_turns,
    )
    return with_parse_statistics(summary, process)


def with_parse_statistics(summary: CrawlSummary, process: ParseProcess | None) -> CrawlSummary:
    """``summary`` with the pages the parse co-process took, if there is one."""
    if process is None:
        return summary
    return dataclasses.replace(summary, parsed_in_process=process.pages)


#: The wall clock minus trio's clock, read once per ``trio.run``.
_EPOCH_ANCHOR: trio.lowlevel.RunVar[float] = trio.lowlevel.RunVar("trio_crawl_epoch_anchor")


class RunClock:
    """When this run of a crawl started and ended (trio's clock): a
    record's ``t`` and the statistics' ``elapsed``."""

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.finished_at: float | None = None
        #: trio's clock; ``start`` binds the run's own (one call, where
        #: ``trio.current_time`` takes three frames: several reads a page)
        self.now: Callable[[], float] = trio.current_time

    def start(self) -> None:
        if self.started_at is not None:
            raise RuntimeError("a Crawler runs once")
        self.now = trio.lowlevel.current_clock().current_time
        self.started_at = self.now()

    def finish(self) -> None:
        self.finished_at = trio.current_time()

    def epoch(self) -> float:
        """Now as epoch seconds, read from trio's clock: a visit's time and
        the revisit schedule's ``now`` (``engine/revisits.py``). The wall
        clock is read once per ``trio.run`` and trio's clock moves it on,
        so a test's ``trio.testing.MockClock`` is the crawl's calendar
        (``jump`` a day between two crawls of one run: they are a day apart)."""
        try:
            anchor = _EPOCH_ANCHOR.get()
        except LookupError:
            anchor = time.time() - trio.current_time()
            _EPOCH_ANCHOR.set(anchor)
        return anchor + trio.current_time()

    def t(self) -> float:
        """Seconds since this run started, to the millisecond (a record's ``t``)."""
        return round(self.now() - (self.started_at or 0.0), 3)

    @property
    def elapsed(self) -> float:
        now = trio.current_time()
        start = self.started_at if self.started_at is not None else now
        end = self.finished_at if self.finished_at is not None else now
        return end - start


def with_render_statistics(summary: CrawlSummary, fetcher: Fetcher) -> CrawlSummary:
    """``summary`` with what the rendering fetcher did, if it is one."""
    if not is_rendering(fetcher):
        return summary
    stats = fetcher.statistics()
    return dataclasses.replace(
        summary,
        rendered=stats.rendered,
        render_failures=stats.failed,
        browsers=stats.browsers,
        render_blocked=stats.blocked,
        render_requests=stats.requests,
        render_auto={
            r.pattern: f"{r.rendered:,} rendered, {r.static:,} as served: {r.reason}"
            for r in stats.auto
        },
    )


def is_rendering(fetcher: Fetcher) -> TypeGuard[ChromiumFetcher]:
    """Whether ``fetcher`` is a ``ChromiumFetcher``, without importing the
    Chromium fetcher into every crawl: an instance of it exists only once its
    module has been imported."""
    chromium = sys.modules.get("trio_crawl.fetch.chromium.fetcher")
    return chromium is not None and isinstance(fetcher, chromium.ChromiumFetcher)
