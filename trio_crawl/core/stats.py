"""Counters for the progress display and the end-of-crawl summary. Pure.

Also the latency-bound hint (``latency_bound_hint``): a crawl of many hosts whose workers
all sat waiting on servers while the process had CPU to spare would have gone faster
with more workers; the summary says so, with a worker count to try.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

from .models import CrawlRecord

#: Distinct hosts counted for the hint, at most (a set of host names costs memory, and
#: past this many the hint's cap on workers no longer depends on the count).
HOSTS_COUNTED = 4096


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
    Crawl-delay above ``max_crawl_delay`` to what it asked for;
    ``depth_updates`` counts corrections of earlier records' depth
    (``DepthUpdate``), which are not records."""

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
    #: The records' fetch times added up: divided by ``elapsed``, the mean number of
    #: requests in flight (Little's law).
    busy_seconds: float = 0.0
    #: Distinct hosts among the records, counted up to ``HOSTS_COUNTED``.
    hosts: int = 0
    depth_updates: int = 0
    #: ``--render``: pages rendered, renders that failed, browsers started
    #: (more than one: restarts) and the browser's requests refused, by
    #: reason (scope, robots, requisite, kind, scheme, popup, dialog).
    rendered: int = 0
    render_failures: int = 0
    browsers: int = 0
    render_blocked: dict[str, int] = field(default_factory=dict)
    #: The browser's allowed requests by how they were answered: ``fetched``
    #: by the crawl for it, ``reused`` (a response the crawl already had,
    #: for the browser or the crawler), ``sent`` by the browser in its
    #: host's turn (not GET), ``failed``.
    render_requests: dict[str, int] = field(default_factory=dict)
    #: ``--render auto``: per page pattern (host and directories), what was
    #: decided and why ("scripts add links (2 of 3 renders)").
    render_auto: dict[str, str] = field(default_factory=dict)
    #: Pages whose links the parse co-process extracted (``parse_process``).
    parsed_in_process: int = 0
    #: New URLs ``max_pages_per_host``/``max_hosts`` turned away, one per
    #: offer (``FrontierStatistics.refused``).
    over_host_budget: int = 0
    #: Redis with ``--rate``: pages this worker gave back unstarted, their
    #: turn passed (``FrontierStatistics.missed_turns``).
    missed_turns: int = 0
    #: (seconds since the start, worker target): the start and each resize.
    worker_history: tuple[tuple[float, int], ...] = ()
    #: The most worker tasks alive at once.
    peak_workers: int = 0
    #: Whether the pool sized itself (no ``workers`` given).
    sized: bool = False
    #: Records that took more than one attempt (a retried 503, a reset...),
    #: and the extra attempts they took in all.
    retried: int = 0
    retries: int = 0
    #: A recrawl: records per ``change`` kind (``recrawl/visit.py``), and the
    #: bytes 304s stood for and were not downloaded (``reused_bytes``).
    changes: dict[str, int] = field(default_factory=dict)
    reused_bytes: int = 0

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
        self.depth_updates = 0
        self.retried = 0
        self.retries = 0
        self.changes: Counter[str] = Counter()
        self.reused_bytes = 0
        # 4 bytes a page: a million pages cost 4 MB.
        self._latencies_ms = array("f")
        self._busy_ms = 0.0
        self._hosts: set[str] = set()

    def add(self, record: CrawlRecord) -> None:
        self.records += 1
        change = record.extra.get("change") if record.extra else None
        if change is not None:
            self.changes[change] += 1
            if change == "unlinked":  # no page: a URL the crawl no longer reaches
                return
        reused = record.extra.get("reused_bytes", 0) if record.extra else 0
        self.reused_bytes += reused
        if record.status is not None:
            self.statuses[record.status] += 1
        if record.error is not None:
            self.failures[record.error.kind] += 1
        else:
            self.pages_ok += 1
        if record.size is not None:
            self.bytes += record.size - reused  # a 304's size is what it stood for
        if record.attempts > 1:
            self.retried += 1
            self.retries += record.attempts - 1
        if record.elapsed_ms is not None:
            self._latencies_ms.append(record.elapsed_ms)
            self._busy_ms += record.elapsed_ms
        if len(self._hosts) < HOSTS_COUNTED:
            # Records carry absolute canonical URLs: "scheme://host[:port]/...".
            self._hosts.add(record.url.split("/", 3)[2] if "//" in record.url else record.url)

    def summary(
        self,
        *,
        elapsed: float,
        stopped: bool,
        unfinished: int,
        over_host_budget: int = 0,
        missed_turns: int = 0,
    ) -> CrawlSummary:
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
            over_host_budget=over_host_budget,
            missed_turns=missed_turns,
            items=self.items,
            bytes=self.bytes,
            capped_crawl_delays=dict(self.capped_crawl_delays),
            busy_seconds=self._busy_ms / 1000,
            hosts=len(self._hosts),
            depth_updates=self.depth_updates,
            retried=self.retried,
            retries=self.retries,
            changes=dict(self.changes.most_common()),
            reused_bytes=self.reused_bytes,
        )


def latency_bound_hint(
    summary: CrawlSummary,
    *,
    workers: int,
    per_host: int | None,
    cpu_seconds: float,
    max_workers: int = 512,
) -> str | None:
    """A one-line hint when the crawl was latency-bound over several hosts, else None.

    Latency-bound: on average at least 3/4 of the workers had a request in flight
    (``busy_seconds / elapsed``) while the process used at most half a CPU. Then the
    rate grows with the workers until the CPU is the limit, so the suggestion scales
    the workers by 0.8 / (CPU fraction), rounded up to a multiple of 16. It never asks
    for more than ``max_workers`` (descriptors: one socket per worker), nor for more
    in flight to one host than before: ``hosts`` x (``per_host``, or ``workers``
    without a per-host cap). One host, a short crawl, or less than twice the
    workers: no hint.
    """
    elapsed = summary.elapsed
    if summary.records < 100 or elapsed < 1.0 or summary.hosts < 2:
        return None
    in_flight = summary.busy_seconds / elapsed
    cpu = max(cpu_seconds / elapsed, 0.01)
    if in_flight < 0.75 * workers or cpu > 0.5:
        return None
    wanted = min(workers * 0.8 / cpu, summary.hosts * (per_host or workers), max_workers)
    suggested = -(-int(wanted) // 16) * 16
    if suggested < 2 * workers:
        return None
    return (
        f"hint: latency-bound: {in_flight:.0f} of {workers} workers were waiting on "
        f"servers on average while trio-crawl used {cpu:.0%} of a CPU; over "
        f"{summary.hosts:,}{'+' if summary.hosts >= HOSTS_COUNTED else ''} hosts, "
        f"-w {suggested} should be faster"
    )
