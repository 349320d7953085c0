"""The worker count of a crawl over time: for the statistics, the summary,
and the records that ``trio-crawl report`` draws it from."""

from __future__ import annotations

import dataclasses

from ..core.frontier import Entry
from ..core.models import CrawlRecord
from ..core.stats import CrawlSummary
from ..workpool import WorkPool


class WorkerLog:
    """(seconds since the start, worker target) at the start and at each
    resize of ``pool``; a self-sized crawl (``sized``) also writes the count
    as ``"workers"`` on its first record and on the first after each resize."""

    def __init__(self, workers: int, *, sized: bool) -> None:
        self.sized = sized
        self.pool: WorkPool[Entry] | None = None  # set by the assembly
        self.history: list[tuple[float, int]] = [(0.0, workers)]
        self._changed = sized
        self._current = workers

    def resized(self, elapsed: float, workers: int) -> None:
        """The pool's ``on_resize``: seconds since it started, the new count."""
        self._current = workers
        self.history.append((round(elapsed, 3), workers))
        self._changed = self.sized

    def note(self, record: CrawlRecord) -> None:
        """The recorder's ``before_write``: the count, when it changed."""
        if self._changed:
            self._changed = False
            record.extra["workers"] = self._current

    def summarize(self, summary: CrawlSummary) -> CrawlSummary:
        """``summary`` with the worker count over time and its peak."""
        peak = self.pool.statistics().peak_tasks if self.pool is not None else 0
        history = tuple(self.history)
        return dataclasses.replace(
            summary, worker_history=history, peak_workers=peak, sized=self.sized
        )
