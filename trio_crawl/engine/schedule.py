"""Per-host politeness and retry back-off, as a pure schedule.

No trio, no clock: every method takes ``now`` (seconds, any monotonic origin).
The engine asks ``try_start`` right before it fetches; a job that may not go
yet is *parked here*, off the crawlers and out of the channel, so that it
neither holds a crawler nor blocks other hosts (no head-of-line blocking).
Parked jobs still count as unfinished work (``waiting``).

Rules
-----
1. Rate: request *starts* to one host are spaced at least ``1/rate`` times
   ``1 + RATE_SLACK`` apart. That is a minimum-interval limiter (a token
   bucket of depth one): with ``--rate 5`` there are never more than 5
   starts in any 1-second window, even allowing for a little network
   jitter between our clock and the server's. Requests to a fast host may
   overlap: a rate is about starts, not about answers.
2. Concurrency: at most ``max_per_host`` requests in flight to one host.
   A host with a Crawl-delay has one at a time (rule 9).
3. Order: a host's parked jobs start in FIFO order; a new job for a host that
   has parked jobs queues behind them. An *urgent* job (``urgent=True``: a
   request of a page being rendered, which holds a browser tab while it
   waits) queues behind the host's urgent jobs only, ahead of the rest.
4. Back-off: ``defer(job, host, not_before)`` parks a job until a time
   (retries); when due it joins the back of its host's queue.
5. Hand-over: ``pop_ready(now)`` returns jobs whose turn has come and
   *reserves* the host's slot for each; the engine puts them back in the
   crawlers' channel, and the crawler that takes one calls ``try_start``,
   which then succeeds for the reserved job even if others arrived since.
6. Random wait (``random_wait=True``, wget's ``--random-wait``, Scrapy's
   ``RANDOMIZE_DOWNLOAD_DELAY``): each start spaces the host's next one by
   the rate's interval times a factor drawn uniformly from 0.5 to 1.5 (the
   ``rng`` passed in), so the average rate is kept but the rhythm is not
   machine-regular; rule 1's "never more than R in a second" then holds
   on average only. Each end of a request to a host with a Crawl-delay
   draws a factor too, and waits the delay times it if it is above 1:
   a Crawl-delay is stretched, never shortened.
7. ``next_deadline()`` is the earliest time ``pop_ready`` can return
   something without any request finishing first; None if no such time
   (nothing parked, or everything waits for a request on its host to end,
   which the engine reports through ``release``).
8. Memory: a broad crawl meets hosts without end, so a host is *forgotten*
   once it is idle (nothing in flight, queued or reserved) and its next
   start is due (rules 1 and 9 no longer hold it back): at once
   when its last request left no gap, else by the first ``try_start``/``pop_ready``
   whose ``now`` has passed it (``forget_idle(now)`` does it on demand).
   What rules 6 and 9 still need of it is only a Crawl-delay, kept as one
   float (``_HostTable.delays``); a forgotten host seen
   again starts fresh, which is what it would have done: its next start
   was already due. Retries deferred for it (rule 4) do not keep it. The one
   visible difference: when ``pop_ready`` hands over jobs of several hosts
   at once, a forgotten host's come first (its due time counts as "long
   ago"); each host's own jobs keep their order, and a ``next_deadline`` in
   the past may be an earlier past time.
   ``forget_idle_hosts=False`` keeps every host for ever (the reference the
   tests compare with).
9. Crawl-delay (``set_crawl_delay``, from robots.txt): a host's next request
   starts at least the delay after its previous one *ended* (``release(host,
   now)``), and so one request at a time. Why from the end: the server sees
   arrivals, not our starts, and a request can reach it late (a new
   connection, a busy machine, a thread of the server that is slow to read
   it) while the next one is on time, so starts spaced by the delay can
   arrive closer than it. The answer to a request ends after the server had
   it, and the next request reaches the server after it starts: counted
   from the end, two arrivals are at least the delay apart as the server
   sees them, whatever the jitter, with no slack needed. That is what wget's
   ``--wait`` (between retrievals) and Nutch (the next fetch time is the end
   of the last fetch plus the delay) do. With ``rate`` too, both rules hold.

Parts
-----
``PoliteSchedule`` makes the transitions; ``_Host`` is one host's state and
parked queues; ``_HostTable`` knows which hosts are held and forgets idle ones
(rule 8); ``_ReadyTimes`` is the heap of times at which hosts may start
again, with per-host capacity (rules 2, 5 and 7).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .fifo import Fifo

J = TypeVar("J", bound=Hashable)

#: Extra spacing on top of 1/rate so that R+1 starts never fit in one second
#: as the server sees them either: a request on a new connection reaches the
#: server later after its start than one on a reused connection, so arrivals
#: can be closer together than starts. 5% of 1/R (another 10 ms a start at --rate 5)
#: absorbs that.
RATE_SLACK = 0.05


#: Rule 6: the range of the random factor on a host's interval.
RANDOM_WAIT_RANGE = (0.5, 1.5)


_NEVER = float("-inf")


@dataclass(slots=True)
class _Host(Generic[J]):
    #: The Crawl-delay: the gap after the end of a request (rule 9).
    delay: float = 0.0
    in_flight: int = 0
    next_start: float = _NEVER
    queue: Fifo[J] = field(default_factory=Fifo)
    #: Rule 3: parked urgent jobs, started before ``queue`` (None: none).
    urgent: Fifo[J] | None = None
    #: Jobs handed over by ``pop_ready`` and not started yet (None: none;
    #: most hosts never need the set, and an empty one is 216 bytes).
    reserved: set[J] | None = None
    #: The time under which this host sits in the timed heap (None: not there).
    armed: float | None = None

    def is_idle(self) -> bool:
        """Nothing in flight, parked or reserved (rule 8)."""
        return not (self.in_flight or self.queue or self.urgent or self.reserved)

    def unreserve(self, job: J) -> bool:
        """Take ``job`` out of the reserved set; whether it was there."""
        reserved = self.reserved
        if reserved is None or job not in reserved:
            return False
        reserved.discard(job)
        if not reserved:
            self.reserved = None
        return True

    def unpark(self, job: J) -> bool:
        """Take ``job`` out of the parked queues; whether it was there."""
        if self.urgent is not None and job in self.urgent:
            self.urgent = Fifo(other for other in self.urgent if other != job) or None
        elif job in self.queue:
            self.queue = Fifo(other for other in self.queue if other != job)
        else:
            return False
        return True

    def unpark_where(self, predicate: Callable[[J], bool]) -> list[J]:
        """Take the parked jobs ``predicate`` picks, urgent ones first."""
        urgent = self.urgent or Fifo[J]()
        gone = [job for job in (*urgent, *self.queue) if predicate(job)]
        if gone:
            self.urgent = Fifo(job for job in urgent if not predicate(job)) or None
            self.queue = Fifo(job for job in self.queue if not predicate(job))
        return gone


class _HostTable(Generic[J]):
    """Which hosts the schedule holds state for, and their forgetting once
    idle and due (rule 8): a forgotten host leaves only its Crawl-delay."""

    def __init__(self, forget: bool) -> None:
        self._forget = forget
        #: Hosts that are busy, or idle but not yet due (rule 8).
        self.hosts: dict[str, _Host[J]] = {}
        #: host -> the Crawl-delay of a host not in ``hosts`` that has one.
        self.delays: dict[str, float] = {}
        #: Idle hosts to forget once due: (next start, seq, host); stale
        #: entries (the host got busy again) are skipped.
        self.idle: list[tuple[float, int, str]] = []
        self._seq = itertools.count()

    def get(self, host: str) -> _Host[J]:
        """``host``'s state; a host not known starts fresh, with its delay."""
        state = self.hosts.get(host)
        if state is None:
            state = _Host(delay=self.delays.pop(host, 0.0))
            self.hosts[host] = state
        return state

    def crawl_delay(self, host: str) -> float:
        state = self.hosts.get(host)
        return self.delays.get(host, 0.0) if state is None else state.delay

    def set_delay(self, host: str, gap: float) -> _Host[J] | None:
        """Set ``host``'s Crawl-delay; its state if it is known."""
        state = self.hosts.get(host)
        if state is not None:
            state.delay = gap
        elif gap:
            self.delays[host] = gap
        else:
            self.delays.pop(host, None)  # the default: nothing to remember
        return state

    def may_forget(self, host: str, state: _Host[J]) -> None:
        """Forget an idle host now if its next start is not held back (no
        gap since its last start), else once it is due (rule 8)."""
        if not self._forget or not state.is_idle():
            return
        if state.next_start == _NEVER:
            self._drop(host, state)
        else:
            heapq.heappush(self.idle, (state.next_start, next(self._seq), host))

    def forget_due(self, now: float) -> None:
        """Forget the idle hosts whose next start is due by ``now``."""
        idle = self.idle
        while idle and idle[0][0] <= now:
            when, _, host = heapq.heappop(idle)
            state = self.hosts.get(host)
            if state is not None and state.next_start == when and state.is_idle():
                self._drop(host, state)

    def _drop(self, host: str, state: _Host[J]) -> None:
        del self.hosts[host]
        if state.delay:
            self.delays[host] = state.delay


class _ReadyTimes(Generic[J]):
    """The timed heap: hosts whose parked jobs only time (not a finishing
    request) can free, under the time they may start (rules 2, 5 and 7)."""

    def __init__(self, hosts: dict[str, _Host[J]], max_per_host: int | None, spaced: bool) -> None:
        self._hosts = hosts
        self.max_per_host = max_per_host
        #: Starts are spaced (a rate): a host hands over one job at a time.
        self._spaced = spaced
        #: (when, seq, host); an entry is stale unless it is its host's ``armed``.
        self.heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()

    def has_capacity(self, state: _Host[J]) -> bool:
        limit = 1 if state.delay else self.max_per_host  # rule 9: one at a time
        reserved = 0 if state.reserved is None else len(state.reserved)
        return limit is None or state.in_flight + reserved < limit

    def eligible(self, state: _Host[J]) -> bool:
        """Has queued jobs that only time (not a finishing request) can free."""
        return (
            bool(state.queue or state.urgent) and not state.reserved and self.has_capacity(state)
        )

    def arm(self, host: str, state: _Host[J]) -> None:
        """Make sure a host with startable queued jobs is in the timed heap."""
        if self.eligible(state) and state.armed != state.next_start:
            state.armed = state.next_start
            heapq.heappush(self.heap, (state.next_start, next(self._seq), host))

    def earliest(self) -> float | None:
        """The first time a host in the heap may start (rule 7), dropping
        stale entries on the way."""
        heap = self.heap
        while heap:
            when, _, host = heap[0]
            state = self._hosts.get(host)
            if state is not None and state.armed == when and self.eligible(state):
                return when
            heapq.heappop(heap)  # stale entry
            if state is not None and state.armed == when:
                state.armed = None
        return None

    def hand_over(self, now: float) -> list[J]:
        """Take the parked jobs whose turn has come by ``now``, reserving
        their hosts' slots (rule 5), and re-arm their hosts."""
        ready: list[J] = []
        heap = self.heap
        while heap and heap[0][0] <= now:
            when, _, host = heapq.heappop(heap)
            timed_state = self._hosts.get(host)
            if timed_state is None or timed_state.armed != when:
                continue  # stale entry
            state = timed_state
            state.armed = None
            while (
                (state.urgent or state.queue)
                and self.has_capacity(state)
                and now >= state.next_start
                and (not self._spaced or not state.reserved)
            ):
                if state.urgent:
                    job = state.urgent.popleft()
                    if not state.urgent:
                        state.urgent = None
                else:
                    job = state.queue.popleft()
                if state.reserved is None:
                    state.reserved = set()
                state.reserved.add(job)
                ready.append(job)
            self.arm(host, state)
        return ready


class PoliteSchedule(Generic[J]):
    """See the module docstring for the rules."""

    def __init__(
        self,
        *,
        rate: float | None = None,
        max_per_host: int | None = None,
        random_wait: bool = False,
        rng: random.Random | None = None,
        forget_idle_hosts: bool = True,
    ) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("rate must be > 0")
        if max_per_host is not None and max_per_host < 1:
            raise ValueError("max_per_host must be >= 1")
        self._base_interval = 0.0 if rate is None else (1.0 / rate) * (1 + RATE_SLACK)
        self._max_per_host = max_per_host
        self._rng = (rng or random.Random()) if random_wait else None
        self._table = _HostTable[J](forget_idle_hosts)
        #: The table's dict and idle heap, shared (never rebound): read
        #: on every call, without a hop.
        self._hosts, self._idle = self._table.hosts, self._table.idle
        self._ready = _ReadyTimes(self._hosts, max_per_host, spaced=bool(self._base_interval))
        self._deferred: list[tuple[float, int, J, str]] = []
        self._seq = itertools.count()
        self._queued = 0
        #: Hosts with at least one request in flight.
        self.hosts_in_flight = 0

    # -- configuration -----------------------------------------------------

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        """Apply a robots.txt Crawl-delay (rule 9), on top of the rate."""
        gap = delay if delay is not None and delay > 0 else 0.0
        state = self._table.set_delay(host, gap)
        if state is not None:
            self._ready.arm(host, state)  # no delay any more: may start now

    @property
    def interval(self) -> float:
        """The least gap between two starts to one host (rule 1; 0: none)."""
        return self._base_interval

    def crawl_delay(self, host: str) -> float:
        """``host``'s least gap after the end of a request (rule 9; 0: none)."""
        return self._table.crawl_delay(host)

    @property
    def known_hosts(self) -> int:
        """Hosts the schedule holds state for: busy, or idle but not yet due
        (rule 8; with ``forget_idle_hosts=False``, every host ever seen)."""
        return len(self._hosts)

    # -- questions ---------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Jobs parked here (queued behind a host, or deferred)."""
        return self._queued + len(self._deferred)

    def in_flight(self, host: str) -> int:
        state = self._hosts.get(host)
        return 0 if state is None else state.in_flight

    def next_deadline(self) -> float | None:
        best: float | None = self._deferred[0][0] if self._deferred else None
        when = self._ready.earliest()
        if when is not None and (best is None or when < best):
            best = when
        return best

    # -- transitions -------------------------------------------------------

    def try_start(self, job: J, host: str, now: float, *, urgent: bool = False) -> bool:
        """May ``job`` start now? If yes, record the start; if not, park it
        (``urgent``: ahead of the host's other parked jobs, rule 3)."""
        if self._idle and self._idle[0][0] <= now:
            self._table.forget_due(now)
        state = self._table.get(host)
        if not self._base_interval and not state.delay and self._max_per_host is None:
            # Unlimited host (the default): nothing to wait for, nothing to order.
            state.unreserve(job)
            if not state.in_flight:
                self.hosts_in_flight += 1
            state.in_flight += 1
            return True
        if state.unreserve(job):
            self._record_start(state, now)
            self._ready.arm(host, state)
            return True
        if (
            not state.urgent
            and (urgent or not state.queue)
            and not state.reserved
            and self._ready.has_capacity(state)
            and now >= state.next_start
        ):
            self._record_start(state, now)
            return True
        if not urgent:
            state.queue.append(job)
        elif state.urgent is None:
            state.urgent = Fifo([job])
        else:
            state.urgent.append(job)
        self._queued += 1
        self._ready.arm(host, state)
        return False

    def release(self, host: str, now: float) -> None:
        """A request to ``host`` ended at ``now`` (success or failure)."""
        state = self._hosts.get(host)
        if state is None or state.in_flight <= 0:
            raise RuntimeError(f"schedule invariant broken: release of idle host {host}")
        state.in_flight -= 1
        if not state.in_flight:
            self.hosts_in_flight -= 1
        if state.delay:  # rule 9, stretched by rule 6
            gap = state.delay
            if self._rng is not None:
                gap *= max(1.0, self._rng.uniform(*RANDOM_WAIT_RANGE))
            state.next_start = max(state.next_start, now + gap)
        self._ready.arm(host, state)
        self._table.may_forget(host, state)

    def withdraw(self, job: J, host: str) -> None:
        """``job``, parked or reserved, will not start after all (its
        waiter was cancelled): it leaves the schedule."""
        state = self._hosts.get(host)
        if state is None:
            return
        if state.unpark(job):
            self._queued -= 1
        state.unreserve(job)
        self._ready.arm(host, state)
        self._table.may_forget(host, state)

    def unreserve(self, job: J, host: str) -> None:
        """A reserved job will not start after all (stopping, budget spent)."""
        state = self._hosts.get(host)
        if state is not None:
            state.unreserve(job)
            self._ready.arm(host, state)
            self._table.may_forget(host, state)

    def defer(self, job: J, host: str, not_before: float) -> None:
        """Park ``job`` until ``not_before`` (a retry back-off)."""
        heapq.heappush(self._deferred, (not_before, next(self._seq), job, host))

    def pop_ready(self, now: float) -> list[J]:
        """Jobs that may start now, each with its host slot reserved."""
        if self._idle and self._idle[0][0] <= now:
            self._table.forget_due(now)
        deferred = self._deferred
        while deferred and deferred[0][0] <= now:
            _, _, job, host = heapq.heappop(deferred)
            state = self._table.get(host)
            state.queue.append(job)
            self._queued += 1
            self._ready.arm(host, state)
        ready = self._ready.hand_over(now)
        self._queued -= len(ready)
        return ready

    def remove_where(self, predicate: Callable[[J], bool]) -> list[J]:
        """Remove and return the parked jobs ``predicate`` picks (a spent page
        budget: jobs that never started will not start). Reserved jobs are
        not parked: ``unreserve`` those as they come up."""
        removed = [item[2] for item in self._deferred if predicate(item[2])]
        if removed:
            self._deferred = [item for item in self._deferred if not predicate(item[2])]
            heapq.heapify(self._deferred)
        for host, state in list(self._hosts.items()):
            gone = state.unpark_where(predicate)
            if gone:
                self._queued -= len(gone)
                removed.extend(gone)
                self._ready.arm(host, state)
                self._table.may_forget(host, state)
        return removed

    def drain(self) -> list[J]:
        """Remove and return every parked job (a graceful stop)."""
        jobs: list[J] = [job for _, _, job, _ in self._deferred]
        self._deferred.clear()
        for state in self._hosts.values():
            jobs.extend(state.urgent or ())
            jobs.extend(state.queue)
            state.urgent = None
            state.queue.clear()
        self._queued = 0
        self._ready.heap.clear()
        for host, state in list(self._hosts.items()):
            state.armed = None
            self._table.may_forget(host, state)
        return jobs

    def forget_idle(self, now: float) -> None:
        """Forget the idle hosts whose next start is due by ``now`` (rule 8).
        ``try_start`` and ``pop_ready`` do it as time passes."""
        self._table.forget_due(now)

    # -- internals ---------------------------------------------------------

    def _record_start(self, state: _Host[J], now: float) -> None:
        if not state.in_flight:
            self.hosts_in_flight += 1
        state.in_flight += 1
        gap = self._base_interval
        if self._rng is not None and gap > 0:  # rule 6
            gap *= self._rng.uniform(*RANDOM_WAIT_RANGE)
        # No gap: the next start may come at any time from now on, which is
        # also what "never" says, and it lets the host be forgotten (rule 8).
        # A Crawl-delay is counted when the request ends (``release``).
        state.next_start = now + gap if gap > 0 else _NEVER
