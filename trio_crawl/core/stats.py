"""Counters for the progress display and the end-of-crawl summary. Pure."""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

from .models import CrawlRecord


def percentile(sorted_values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile of already sorted values; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), round(fraction * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


@dataclass(frozen=True, slots=True)
class CrawlSummary:
    """What a finished (or stopped) crawl did. ``failures`` counts records by
    error kind, ``statuses`` by HTTP status code; ``bytes`` adds up the
    records' ``size`` (bodies as downloaded and decoded).
    ``capped_crawl_delays`` maps each host:port whose robots.txt asked for a
    Crawl-delay above ``max_crawl_delay`` to what it asked for."""

    records: int
    pages_ok: int
    failures: dict[str, int]
    statuses: dict[int, int]
    elapsed: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    stopped: bool
    unfinished: int
    items: int = 0
    bytes: int = 0
    capped_crawl_delays: dict[str, float] = field(default_factory=dict)

    @property
    def pages_per_second(self) -> float:
        return self.records / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def failed(self) -> int:
        return sum(self.failures.values())


class CrawlStats:
    """Accumulates records as they are written. ``add`` is O(1)."""

    def __init__(self) -> None:
        self.records = 0
        self.pages_ok = 0
        self.failures: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.items = 0
        self.bytes = 0
        #: host:port -> the Crawl-delay asked for, where it was capped.
        self.capped_crawl_delays: dict[str, float] = {}
        # 4 bytes a page: a million pages cost 4 MB.
        self._latencies_ms = array("f")

    def add(self, record: CrawlRecord) -> None:
        self.records += 1
        if record.status is not None:
            self.statuses[record.status] += 1
        if record.error is not None:
            self.failures[record.error.kind] += 1
        else:
            self.pages_ok += 1
        if record.size is not None:
            self.bytes += record.size
        if record.elapsed_ms is not None:
            self._latencies_ms.append(record.elapsed_ms)

    def summary(self, *, elapsed: float, stopped: bool, unfinished: int) -> CrawlSummary:
        lat = sorted(self._latencies_ms)
        return CrawlSummary(
            records=self.records,
            pages_ok=self.pages_ok,
            failures=dict(self.failures.most_common()),
            statuses=dict(sorted(self.statuses.items())),
            elapsed=elapsed,
            latency_p50_ms=percentile(lat, 0.50),
            latency_p95_ms=percentile(lat, 0.95),
            latency_p99_ms=percentile(lat, 0.99),
            stopped=stopped,
            unfinished=unfinished,
            items=self.items,
            bytes=self.bytes,
            capped_crawl_delays=dict(self.capped_crawl_delays),
        )
