"""How many workers a pool should have: a pure controller, and the machine's ceilings.

No trio, no clock: ``PoolSizer.observe`` takes what the pool saw at ``now`` and
returns the worker target. ``WorkPool`` (``trio_crawl/workpool.py``) feeds it
every ``SAMPLE_SECONDS`` and sets its ``CapacityLimiter.total_tokens`` to the answer.

Rules
-----
1. Window: observations accumulate for ``window`` seconds; only then is the
   target changed (at most once per window), from the window's means:
   CPU ``c`` (process CPU seconds per wall second, 1.0 = one core busy),
   loop lag ``L`` (how late a timer fires, seconds) and busy workers ``b``.
2. Shrink when the process is saturated: ``c > cpu_high`` gives
   ``target * cpu_goal / c`` (at most ``target * 3/4`` if the loop lags
   too: a core cannot show more than 100%, so a saturated process's CPU
   understates how far over it is); ``L > lag_high`` with ``c >= cpu_low``
   gives ``target * 3/4`` (a loop that lags while this process is busy is late
   because of its own work: fewer workers mean shorter turns). A loop that
   lags while this process uses little CPU is late because other processes
   have the CPU; fewer workers would not make it less late, only the crawl
   slower, so the target holds (no growth either: ``L >= lag_low``).
3. Grow when most workers wait on servers and the CPU has room: ``c <
   cpu_low``, ``L < lag_low`` and ``b >= busy_high * target``. The new target
   is Little's law with CPU as the budget: if ``b`` busy workers cost ``c``,
   ``b * cpu_goal / c`` cost ``cpu_goal``; at most twice as many as now, and
   none more when that is no more than now (the pool holds).
   After a shrink, that size is a threshold (as TCP's slow-start
   threshold): growth beyond it goes at most one eighth a window, so a
   loaded machine does not make the target swing between halving and
   doubling.
   Slow start: until a shrink, or ``start_holds`` windows in a row that do not
   grow, windows are ``start_window`` long and a growth may reach
   ``start_growth`` times the target. A broad crawl is short (1,000 hosts x 20
   pages take ~10 s at 100 ms each), and doubling once a second from 16 spent
   a third of it below the CPU's rate. The short window's estimate errs low,
   never high: the workers just added are busy from their first request but
   cost CPU only once their answers come, so the CPU it reads is that of fewer
   workers than ``b``. One window that holds does not end it: a crawl's first
   second also pays once for each new host (robots.txt, a connection), a CPU
   peak that passes.
4. Otherwise hold. The hold band ``cpu_low <= c <= cpu_high`` is wider than
   a shrink step lands in (a shrink from ``c > cpu_high`` aims at
   ``cpu_goal``, inside the band), and a growth aims at ``cpu_goal`` too, so
   on a steady workload whose CPU grows with the busy workers the target
   moves monotonically into the band and stays: it converges, with no
   oscillation (tests/test_pool_sizing.py simulates it).
5. Bounds: always within ``[min(floor, max_workers), max_workers]``
   (``max_workers``: the machine's or the user's cap). The observation's
   ``ceiling`` (what the work can use now: hosts in flight x per-host
   concurrency, plus queued items) stops growth but never forces a shrink:
   a target beyond the work costs nothing (the pool starts a worker task only
   for queued work), and a crawl that finds new hosts must not climb back
   from a moment with few.

The machine's ceilings are rules too: one descriptor per worker within the
soft ``RLIMIT_NOFILE`` (minus ``RESERVED_FDS``), ``descriptor_ceiling``; and
``WORKER_MEMORY_BYTES`` per worker within half the available memory,
``memory_ceiling``. Reading those limits from the operating system is I/O,
so it lives outside core: ``trio_crawl/machine.py`` (``machine_ceiling``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: How often the pool samples CPU, lag and busy workers.
SAMPLE_SECONDS = 0.1
#: Descriptors kept for everything but workers' sockets (output files, the
#: state database, robots.txt fetches, the event loop's own).
RESERVED_FDS = 64
#: What one busy worker may hold in memory: a page body being parsed and its
#: tree (pages are ~100 kB; ``--max-bytes`` bounds the rare large one).
WORKER_MEMORY_BYTES = 2 * 1024 * 1024
#: The default target a sized pool starts with, and its floor. A worker holds
#: its page through the parse and the record, after its host's slot is free,
#: so a pool of 16 held a one-host crawl to fewer pages at once than its 16
#: requests in flight allow (run.py's 20,000 pages: 4.06 s against 3.70 s
#: from 64, medians of 3; `-w 64` 3.80 s). A task exists only for queued
#: work, so a small site costs no more.
INITIAL_WORKERS = 64
#: Requests in flight to one host when neither ``per_host_concurrency`` nor
#: ``workers`` is given: what the old fixed default of 16 workers allowed in
#: all, so that a pool growing for many hosts never means more at once to one.
DEFAULT_PER_HOST = 16


@dataclass(frozen=True, slots=True)
class PoolSizerSettings:
    """The controller's thresholds (see the module rules).

    Example::

        PoolSizerSettings(max_workers=512, cpu_goal=0.8)
    """

    max_workers: int = 1024
    floor: int = INITIAL_WORKERS
    initial: int = INITIAL_WORKERS
    window: float = 1.0
    start_window: float = 0.3
    start_growth: int = 4
    start_holds: int = 3
    cpu_goal: float = 0.93
    cpu_low: float = 0.85
    cpu_high: float = 0.98
    lag_low: float = 0.02
    lag_high: float = 0.10
    busy_high: float = 0.70

    def __post_init__(self) -> None:
        if self.max_workers < 1 or self.floor < 1 or self.initial < 1:
            raise ValueError("max_workers, floor and initial must be at least 1")
        if not 0 < self.cpu_low < self.cpu_goal < self.cpu_high:
            raise ValueError("need 0 < cpu_low < cpu_goal < cpu_high")
        if not 0 <= self.lag_low < self.lag_high or self.window <= 0 or self.start_window <= 0:
            raise ValueError("need 0 <= lag_low < lag_high and windows > 0")
        if self.start_growth < 2:
            raise ValueError("start_growth must be at least 2")


@dataclass(frozen=True, slots=True)
class PoolSizerStatistics:
    """``target``: the worker target now; ``cpu``, ``lag``, ``busy``: the last
    window's means; ``changes``: how often the target moved."""

    target: int
    cpu: float
    lag: float
    busy: float
    changes: int


class PoolSizer:
    """The worker target of a pool, from CPU, loop lag and busy workers. Pure.

    Example::

        sizer = PoolSizer(PoolSizerSettings(max_workers=256))
        target = sizer.observe(now=1.0, cpu_seconds=0.05, busy=16, lag=0.001)
    """

    def __init__(self, settings: PoolSizerSettings | None = None) -> None:
        self.settings = s = settings or PoolSizerSettings()
        self.target = self._bounded(s.initial)
        self._start: tuple[float, float] | None = None  # (now, cpu) at the window's start
        self._busy_sum = 0.0
        self._lag_sum = 0.0
        self._samples = 0
        self._last = (0.0, 0.0, 0.0)
        self.changes = 0
        #: The target after the last shrink (rule 3): growth past it is gentle.
        self._threshold = math.inf
        #: Slow start (rule 3): short windows and steep growth until a shrink
        #: or ``start_holds`` windows in a row without growth.
        self._starting = True
        self._holds = 0

    def statistics(self) -> PoolSizerStatistics:
        cpu, lag, busy = self._last
        return PoolSizerStatistics(self.target, cpu, lag, busy, self.changes)

    def observe(
        self,
        *,
        now: float,
        cpu_seconds: float,
        busy: float,
        lag: float,
        ceiling: float = math.inf,
    ) -> int:
        """Take one sample; return the target (changed at most once a window).

        ``cpu_seconds``: the process's CPU time so far; ``busy``: workers
        handling an item now; ``lag``: how late this sample's timer fired;
        ``ceiling``: the most workers the work can use now (inf: unknown);
        growth stops there (rule 5).
        """
        wanted = self.target
        decided = False
        if self._start is None:
            self._start = (now, cpu_seconds)
        else:
            self._busy_sum += busy
            self._lag_sum += max(0.0, lag)
            self._samples += 1
            start_now, start_cpu = self._start
            elapsed = now - start_now
            window = self.settings.start_window if self._starting else self.settings.window
            if elapsed >= window - 1e-9:  # sums of SAMPLE_SECONDS fall a hair short
                cpu = max(0.0, cpu_seconds - start_cpu) / elapsed
                mean_busy = self._busy_sum / self._samples
                mean_lag = self._lag_sum / self._samples
                self._last = (cpu, mean_lag, mean_busy)
                self._start = (now, cpu_seconds)
                self._busy_sum = self._lag_sum = 0.0
                self._samples = 0
                wanted = self._decide(cpu, mean_lag, mean_busy)
                decided = True
        if wanted > self.target:
            if wanted > self._threshold:
                gentle = self.target + max(1, self.target // 8)
                wanted = min(wanted, max(gentle, math.floor(self._threshold)))
            wanted = max(self.target, int(min(wanted, ceiling)))
        elif wanted < self.target:
            self._threshold = wanted
        wanted = self._bounded(wanted)
        if decided and self._starting:
            self._holds = 0 if wanted > self.target else self._holds + 1
            if wanted < self.target or self._holds >= self.settings.start_holds:
                self._starting = False
        if wanted != self.target:
            self.changes += 1
            self.target = wanted
        return wanted

    def _decide(self, cpu: float, lag: float, busy: float) -> int:
        s, n = self.settings, self.target
        # A shrink scales the workers that made the CPU (or the lag), not the
        # idle ones: from a large pool with little work, one step, not many.
        working = min(float(n), max(busy, 1.0))
        if cpu > s.cpu_high:
            shrunk = working * s.cpu_goal / cpu
            if lag > s.lag_high:  # saturated and late: further over than its CPU shows
                shrunk = min(shrunk, working * 0.75)
            return min(n - 1, math.floor(shrunk))
        if lag > s.lag_high and cpu >= s.cpu_low:
            return min(n - 1, math.floor(working * 0.75))
        if cpu < s.cpu_low and lag < s.lag_low and busy >= s.busy_high * n:
            estimate = math.floor(busy * s.cpu_goal / max(cpu, 1e-3))
            # Not one more than Little's law asks for: a pool the busy workers
            # nearly fill would otherwise creep up a worker a window, for ever.
            steepest = s.start_growth if self._starting else 2
            return n if estimate <= n else min(steepest * n, estimate)
        return n

    def _bounded(self, target: int) -> int:
        s = self.settings
        return max(min(s.floor, s.max_workers), min(target, s.max_workers))


def descriptor_ceiling(soft_limit: float, reserved: int = RESERVED_FDS) -> int:
    """Workers whose sockets fit in ``soft_limit`` descriptors (at least 1)."""
    if math.isinf(soft_limit):
        return 1 << 20
    return max(1, int(soft_limit) - reserved)


def memory_ceiling(available_bytes: float, per_worker: int = WORKER_MEMORY_BYTES) -> int:
    """Workers whose pages fit in half of ``available_bytes`` (at least 1)."""
    if math.isinf(available_bytes):
        return 1 << 20
    return max(1, int(available_bytes // 2 // per_worker))
