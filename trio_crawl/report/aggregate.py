"""``trio-crawl report``, part 1: read a crawl's JSON Lines and aggregate it. Pure.

Streams the file one line at a time and keeps bounded state whatever its
length: counters (status, error kind, depth), a time line of at most
``MAX_TIME_BINS`` bins, a uniform reservoir sample of latencies (exact up to
its size), per-host counters pruned to the busiest ones, a top-N heap of the
slowest pages and at most ``failures_per_kind`` failing URLs per error kind.
A ``depth_update`` line is not a record: it moves its URL from its
recorded depth to the shortest one in the depth counter, and corrects the
depth and referrer of its failure, if one is listed. The crawl writes them
to their own file (``--depth-updates``, read by ``aggregate_file``'s
``depth_updates``); files written by earlier versions have them among the
records, and are read the same. Corrections are gathered per URL (the
lowest depth wins, whatever the order: ``--redis`` workers write theirs to
separate files) and applied when the result is made, so they cost memory
per corrected URL, unlike the records.
The HTML rendering (which needs the ``report`` extra) is ``report/html.py``.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import random
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from ..core.stats import percentile
from ..errors import ReportInputError
from .changes import RecrawlCounts, RecrawlData

#: Longest line accepted; a record is a few hundred bytes (KBs with --debug).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The time line starts with bins of 1/64 s and doubles their width (merging
#: pairs) whenever it would need more than this many.
FIRST_BIN_SECONDS = 1 / 64
MAX_TIME_BINS = 4096
#: ``t`` restarts at 0 when a crawl is resumed (``--state``). Records can
#: reach the file slightly out of ``t`` order, so a new run is recognised
#: only when ``t`` drops by more than this many seconds and below half of
#: the run's latest ``t``.
RESUME_DROP_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Failure:
    url: str
    kind: str
    message: str
    status: int | None
    referrer: str | None
    depth: int | None


@dataclass(frozen=True, slots=True)
class HostRow:
    host: str
    pages: int
    errors: int
    mean_ms: float | None


@dataclass(frozen=True, slots=True)
class SlowPage:
    elapsed_ms: float
    url: str
    status: int | None
    kind: str | None


@dataclass(frozen=True, slots=True)
class Timeline:
    """Records (and failed ones) per bin of ``bin_seconds``, from the first
    run's start; ``run_starts`` are the offsets where resumed runs begin."""

    bin_seconds: float
    pages: list[int]
    errors: list[int]
    run_starts: list[float]
    duration: float
    #: The worker count in force at the end of each bin (records of a
    #: self-sized crawl carry ``workers`` when it changes); empty if none did.
    workers: list[int] = field(default_factory=list)

    def pages_per_second(self) -> list[float]:
        return [n / self.bin_seconds for n in self.pages]


@dataclass(frozen=True, slots=True)
class Latency:
    count: int
    p50: float | None
    p95: float | None
    p99: float | None
    min: float | None
    max: float | None
    mean: float | None
    #: sorted; every value when ``count <= len(sample)``, else a uniform sample
    sample: list[float]

    @property
    def sampled(self) -> bool:
        return self.count > len(self.sample)


@dataclass(frozen=True, slots=True)
class ReportData:
    records: int
    ok: int
    failed: int
    redirects: int
    retried: int
    refetched: int
    #: ``None`` is "no HTTP response"; ordered by code, ``None`` last
    statuses: dict[int | None, int]
    #: most common first
    error_kinds: dict[str, int]
    depths: dict[int, int]
    latency: Latency
    #: ``None`` when no record has a ``t`` field (files from before it existed)
    timeline: Timeline | None
    records_without_t: int
    #: the busiest hosts; once more than ``2 * max_hosts`` hosts were seen the
    #: table is pruned to the busiest ``max_hosts`` (then counts are lower
    #: bounds) and ``hosts_seen`` is ``None``
    top_hosts: list[HostRow]
    hosts_seen: int | None
    slowest: list[SlowPage]
    failures: list[Failure]
    #: failing records not listed in ``failures``, by kind
    failures_omitted: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    #: what changed since the previous crawl; ``None`` unless the records
    #: are a recrawl's (they carry ``change``)
    recrawl: RecrawlData | None = None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _host(url: str) -> str:
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return "(invalid URL)"
    return netloc.rpartition("@")[2].lower() or "(no host)"


class _TimeBins:
    def __init__(self) -> None:
        self.width = FIRST_BIN_SECONDS
        self.pages: list[int] = []
        self.errors: list[int] = []
        self.workers: list[int] = []  # 0: no change in that bin
        self.offset = 0.0  # where the current run starts on the time line
        self.run_max = 0.0  # the current run's latest t
        self.run_starts: list[float] = []
        self.count = 0

    def add(self, t: float, failed: bool, workers: int | None = None) -> None:
        t = max(t, 0.0)
        if self.count and t < self.run_max - RESUME_DROP_SECONDS and t < self.run_max / 2:
            self.offset += self.run_max
            self.run_starts.append(self.offset)
            self.run_max = 0.0
        self.count += 1
        self.run_max = max(self.run_max, t)
        index = int((self.offset + t) / self.width)
        while index >= MAX_TIME_BINS:
            self._coarsen()
            index //= 2
        if index >= len(self.pages):
            grow = index + 1 - len(self.pages)
            self.pages.extend([0] * grow)
            self.errors.extend([0] * grow)
            self.workers.extend([0] * grow)
        self.pages[index] += 1
        if failed:
            self.errors[index] += 1
        if workers is not None and workers > 0:
            self.workers[index] = workers

    def _coarsen(self) -> None:
        self.width *= 2
        for series in (self.pages, self.errors):
            series[:] = [sum(series[i : i + 2]) for i in range(0, len(series), 2)]
        w = self.workers
        w[:] = [w[i + 1] if i + 1 < len(w) and w[i + 1] else w[i] for i in range(0, len(w), 2)]

    def _workers_over_time(self) -> list[int]:
        """Each bin's count, carried forward from the last bin that set one."""
        if not any(self.workers):
            return []
        out, current = [], 0
        for value in self.workers:
            current = value or current
            out.append(current)
        return out

    def result(self) -> Timeline | None:
        if not self.count:
            return None
        return Timeline(
            bin_seconds=self.width,
            pages=list(self.pages),
            errors=list(self.errors),
            run_starts=list(self.run_starts),
            duration=self.offset + self.run_max,
            workers=self._workers_over_time(),
        )


class ReportStats:
    """Feed it records (dicts, as parsed from the JSON Lines) with ``add``;
    ``result()`` gives the numbers and lists the report shows."""

    def __init__(
        self,
        *,
        top: int = 20,
        latency_sample: int = 200_000,
        failures_per_kind: int = 500,
        max_hosts: int = 10_000,
        seed: int = 0,
    ) -> None:
        self.top = top
        self.failures_per_kind = failures_per_kind
        self.max_hosts = max_hosts
        self.records = 0
        self.ok = 0
        self.redirects = 0
        self.retried = 0
        self.refetched = 0
        self.statuses: Counter[int | None] = Counter()
        self.error_kinds: Counter[str] = Counter()
        self.depths: Counter[int] = Counter()
        self.records_without_t = 0
        self._time = _TimeBins()
        self._rng = random.Random(seed)
        self._sample_size = latency_sample
        self._sample = array("d")
        self._lat_count = 0
        self._lat_sum = 0.0
        self._lat_min: float | None = None
        self._lat_max: float | None = None
        # host -> [pages, errors, latency sum, latency count]
        self._hosts: dict[str, list[float]] = {}
        self._hosts_pruned = False
        self._slow: list[tuple[float, int, str, int | None, str | None]] = []
        self._failures: list[Failure] = []
        self._failure_at: dict[str, int] = {}  # URL -> index in _failures
        self._listed: Counter[str] = Counter()
        self._omitted: Counter[str] = Counter()
        # URL -> [recorded depth (the largest previous_depth), lowest depth, its referrer]
        self._corrections: dict[str, list[Any]] = {}
        self._recrawl = RecrawlCounts()

    def add(self, record: Mapping[str, Any]) -> None:
        """One line: a record, or a ``depth_update`` line (kept for ``result()``)."""
        if record.get("depth_update") is True:
            return self.add_depth_update(record)
        url = record["url"]
        self.records += 1
        status = _int(record.get("status"))
        self.statuses[status] += 1
        depth = _int(record.get("depth"))
        if depth is not None:
            self.depths[depth] += 1
        error = record.get("error")
        kind: str | None = None
        if isinstance(error, Mapping):
            kind = str(error.get("kind") or "unknown")
            self.error_kinds[kind] += 1
            if self._listed[kind] < self.failures_per_kind:
                self._listed[kind] += 1
                referrer = record.get("referrer")
                self._failure_at[url] = len(self._failures)
                self._failures.append(
                    Failure(
                        url=url,
                        kind=kind,
                        message=str(error.get("message") or ""),
                        status=status,
                        referrer=referrer if isinstance(referrer, str) else None,
                        depth=depth,
                    )
                )
            else:
                self._omitted[kind] += 1
        else:
            self.ok += 1
        if record.get("redirect"):
            self.redirects += 1
        attempts = _int(record.get("attempts"))
        if attempts is not None and attempts > 1:
            self.retried += 1
        if record.get("refetched") is True:
            self.refetched += 1
        self._recrawl.add(record)
        t = _number(record.get("t"))
        if t is None:
            self.records_without_t += 1
        else:
            self._time.add(t, kind is not None, _int(record.get("workers")))
        elapsed = _number(record.get("elapsed_ms"))
        if elapsed is not None:
            self._add_latency(elapsed, url, status, kind)
        self._add_host(_host(url), kind is not None, elapsed)

    def add_depth_update(self, update: Mapping[str, Any]) -> None:
        """A correction of a record's depth; any order, before or after its record."""
        url = update.get("url")
        depth = _int(update.get("depth"))
        if not isinstance(url, str) or depth is None:
            return
        previous = _int(update.get("previous_depth"))
        referrer = update.get("referrer")
        known = self._corrections.get(url)
        if known is None:
            known = self._corrections[url] = [previous, depth, referrer]
        if previous is not None and (known[0] is None or previous > known[0]):
            known[0] = previous  # the first correction's previous_depth is the record's
        if depth <= known[1]:
            known[1:] = [depth, referrer]

    def _apply_depth_updates(self) -> None:
        corrections, self._corrections = self._corrections, {}
        for url, (recorded, depth, referrer) in corrections.items():
            if recorded is not None and self.depths[recorded] > 0 and depth < recorded:
                self.depths[recorded] -= 1
                if not self.depths[recorded]:
                    del self.depths[recorded]
                self.depths[depth] += 1
            at = self._failure_at.get(url)
            if at is not None:
                self._failures[at] = replace(
                    self._failures[at],
                    depth=depth,
                    referrer=referrer if isinstance(referrer, str) else None,
                )

    def _add_latency(self, ms: float, url: str, status: int | None, kind: str | None) -> None:
        self._lat_count += 1
        self._lat_sum += ms
        self._lat_min = ms if self._lat_min is None else min(self._lat_min, ms)
        self._lat_max = ms if self._lat_max is None else max(self._lat_max, ms)
        if len(self._sample) < self._sample_size:
            self._sample.append(ms)
        else:  # reservoir sampling (Algorithm R): every value kept with equal odds
            j = self._rng.randrange(self._lat_count)
            if j < self._sample_size:
                self._sample[j] = ms
        item = (ms, -self.records, url, status, kind)  # ties: the earlier record wins
        if len(self._slow) < self.top:
            heapq.heappush(self._slow, item)
        elif item > self._slow[0]:
            heapq.heapreplace(self._slow, item)

    def _add_host(self, host: str, failed: bool, ms: float | None) -> None:
        row = self._hosts.get(host)
        if row is None:
            if len(self._hosts) >= 2 * self.max_hosts:
                self._prune_hosts()
            row = self._hosts[host] = [0, 0, 0.0, 0]
        row[0] += 1
        if failed:
            row[1] += 1
        if ms is not None:
            row[2] += ms
            row[3] += 1

    def _prune_hosts(self) -> None:
        """Keep the ``max_hosts`` busiest hosts (amortised O(1) per record)."""
        keep = heapq.nlargest(self.max_hosts, self._hosts.items(), key=lambda kv: kv[1][0])
        self._hosts = dict(keep)
        self._hosts_pruned = True

    def result(self) -> ReportData:
        self._apply_depth_updates()
        sample = sorted(self._sample)
        latency = Latency(
            count=self._lat_count,
            p50=percentile(sample, 0.50),
            p95=percentile(sample, 0.95),
            p99=percentile(sample, 0.99),
            min=self._lat_min,
            max=self._lat_max,
            mean=self._lat_sum / self._lat_count if self._lat_count else None,
            sample=sample,
        )
        hosts = heapq.nlargest(
            self.top, self._hosts.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0])
        )
        statuses = sorted(self.statuses.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        return ReportData(
            records=self.records,
            ok=self.ok,
            failed=self.records - self.ok,
            redirects=self.redirects,
            retried=self.retried,
            refetched=self.refetched,
            statuses=dict(statuses),
            error_kinds=dict(self.error_kinds.most_common()),
            depths=dict(sorted(self.depths.items())),
            latency=latency,
            timeline=self._time.result(),
            records_without_t=self.records_without_t,
            top_hosts=[
                HostRow(
                    host=host,
                    pages=int(row[0]),
                    errors=int(row[1]),
                    mean_ms=row[2] / row[3] if row[3] else None,
                )
                for host, row in hosts
            ],
            hosts_seen=None if self._hosts_pruned else len(self._hosts),
            slowest=[
                SlowPage(elapsed_ms=ms, url=url, status=status, kind=kind)
                for ms, _, url, status, kind in sorted(self._slow, reverse=True)
            ],
            failures=list(self._failures),
            failures_omitted=dict(self._omitted.most_common()),
            recrawl=self._recrawl.result(),
        )


def read_records(path: str, warn: Callable[[str], None]) -> Iterator[dict[str, Any]]:
    """The records of a JSON Lines file, one at a time.

    Raises ``ReportInputError`` for a file that cannot be read or is not a
    crawl's JSON Lines. A last line without its newline that does not parse
    (left by a crawl killed mid-write) is skipped with a call to ``warn``.
    """
    for _, record in _numbered_lines(path, warn):
        yield record


def read_depth_updates(path: str, warn: Callable[[str], None]) -> Iterator[dict[str, Any]]:
    """The ``depth_update`` lines of a ``--depth-updates`` file, as ``read_records``
    reads records; a line that is not one (a records file given by mistake)
    raises ``ReportInputError``."""
    for number, line in _numbered_lines(path, warn):
        if line.get("depth_update") is not True:
            raise ReportInputError(
                f"{path}:{number}: not a depth_update line; is this the file "
                "trio-crawl --depth-updates wrote?"
            )
        yield line


def _numbered_lines(
    path: str, warn: Callable[[str], None]
) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        if path == "-":  # stdin: `trio-crawl URL -o - | trio-crawl report -`
            stream: BinaryIO = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
        else:
            stream = open(path, "rb")  # noqa: SIM115 - closed below, also on error
    except OSError as exc:
        raise ReportInputError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    with stream:
        number = 0
        while True:
            try:
                line = stream.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise ReportInputError(f"cannot read {path!r}: {exc.strerror or exc}") from None
            if not line:
                return
            number += 1
            if len(line) > MAX_LINE_BYTES:
                raise ReportInputError(
                    f"{path}:{number}: line longer than {MAX_LINE_BYTES:,} bytes; "
                    "not a trio-crawl JSON Lines file"
                )
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                if not line.endswith(b"\n"):
                    warn(f"{path}:{number}: skipped a torn last line (no newline, not JSON)")
                    return
                raise ReportInputError(
                    f"{path}:{number}: not JSON; is this a trio-crawl JSON Lines file?"
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get("url"), str):
                raise ReportInputError(
                    f'{path}:{number}: not a trio-crawl record (a JSON object with a "url" field)'
                )
            yield number, record


def aggregate(records: Iterable[Mapping[str, Any]], **options: Any) -> ReportData:
    """Run ``records`` through a ``ReportStats`` (``options`` go to it)."""
    stats = ReportStats(**options)
    for record in records:
        stats.add(record)
    return stats.result()


def aggregate_file(path: str, depth_updates: str | None = None, **options: Any) -> ReportData:
    """Aggregate a JSON Lines file, with the corrections of its
    ``depth_updates`` file if given; warnings (a torn last line) land in the
    result.

    Raises ``ReportInputError`` when a file cannot be read, is not JSON Lines
    (or not depth_update lines), or the records file has no records.
    """
    warnings: list[str] = []
    lines: Iterable[Mapping[str, Any]] = read_records(path, warnings.append)
    if depth_updates is not None:
        lines = itertools.chain(lines, read_depth_updates(depth_updates, warnings.append))
    data = aggregate(lines, **options)
    if data.records == 0:
        raise ReportInputError(f"{path!r} has no records")
    data.warnings.extend(warnings)
    return data
