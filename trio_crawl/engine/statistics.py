"""What a running crawl shows a progress display (``Crawler.statistics``)."""

from __future__ import annotations

from dataclasses import dataclass

import trio


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


class RunClock:
    """When this run of a crawl started and ended (trio's clock): a
    record's ``t`` and the statistics' ``elapsed``."""

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.finished_at: float | None = None

    def start(self) -> None:
        if self.started_at is not None:
            raise RuntimeError("a Crawler runs once")
        self.started_at = trio.current_time()

    def finish(self) -> None:
        self.finished_at = trio.current_time()

    def t(self) -> float:
        """Seconds since this run started, to the millisecond (a record's ``t``)."""
        return round(trio.current_time() - (self.started_at or 0.0), 3)

    @property
    def elapsed(self) -> float:
        now = trio.current_time()
        start = self.started_at if self.started_at is not None else now
        end = self.finished_at if self.finished_at is not None else now
        return end - start
