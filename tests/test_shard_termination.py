"""The termination protocol across shards (``core/shard_termination.py``),
checked over interleavings that hypothesis chooses.

The machine below holds shards, workers and a detector. Workers take
leases, send links to any shard (a send is in flight until it is delivered),
release only once their sends are delivered, and die (a dead worker's sends
may still arrive or be lost; its leases expire once nothing it sent can
still arrive). The detector reads one shard per step, interleaved with every
worker step. After every step:

* safety: the detector never says done while a shard holds a queued URL or
  a lease, or a send is in flight;
* liveness: once everything is idle, done comes within two full passes
  begun after that moment, and idle is stable.

The same machine run with a naive detector (one pass, idle everywhere)
fails safety: hypothesis finds the shuttle (a worker moves work to a shard
the detector has already read). A detector of two idle passes that ignores
the counters is fooled by the shuttle run twice (by hand, below).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from trio_crawl.core.shard_termination import (
    Detector,
    FailoverGuard,
    Shard,
    ShardReading,
    all_idle,
    quiet_twice,
)

MAX_URLS = 24


def pick(options: list[Any], index: int) -> Any:
    return options[index % len(options)]


@dataclass
class Worker:
    name: str
    alive: bool = True
    lease: tuple[int, str] | None = None
    outbox: list[tuple[int, str]] = field(default_factory=list)


class NaiveDetector(Detector):
    """The foil: done after one pass that found every shard idle."""

    def observe(self, reading: ShardReading) -> bool:
        if self.done:
            return True
        self._current.append(reading)
        if len(self._current) == self.shards:
            self.done = all(r.idle for r in self._current)
            self._current = []
            self.passes += 1
        return self.done


class CounterlessDetector(Detector):
    """The other foil: two idle passes in a row, counters ignored."""

    def observe(self, reading: ShardReading) -> bool:
        if self.done:
            return True
        self._current.append(reading)
        if len(self._current) == self.shards:
            idle = all(r.idle for r in self._current)
            self.done = idle and self._previous is not None
            self._previous = self._current if idle else None
            self._current = []
            self.passes += 1
        return self.done


class ShardedCrawl(RuleBasedStateMachine):
    detector_class: type[Detector] = Detector

    def __init__(self) -> None:
        super().__init__()
        self.shards: list[Shard] = []
        self.workers: list[Worker] = []
        self.home: dict[str, int] = {}  # URL -> its host's shard
        self.detector = Detector(1)
        self.born = 0
        self.was_quiet = False
        self.first_quiet_pass = 0

    @initialize(shards=st.integers(1, 4), workers=st.integers(1, 3), seed_shard=st.integers(0, 3))
    def start(self, shards: int, workers: int, seed_shard: int) -> None:
        self.shards = [Shard(i) for i in range(shards)]
        self.detector = self.detector_class(shards)
        for _ in range(workers):
            self.hire()
        self.home["u0"] = seed_shard % shards
        self.shards[self.home["u0"]].admit(["u0"])

    def hire(self) -> None:
        self.workers.append(Worker(f"w{self.born}"))
        self.born += 1

    def quiet(self) -> bool:
        return all_idle(self.shards) and not any(w.outbox for w in self.workers)

    # -- workers (each rule picks among the workers it applies to) -------------------

    def idle_workers(self) -> list[Worker]:
        return [w for w in self.workers if w.alive and w.lease is None]

    def senders(self) -> list[Worker]:
        return [w for w in self.workers if w.alive and w.lease is not None]

    def releasers(self) -> list[Worker]:
        return [w for w in self.senders() if not w.outbox]

    def dead(self) -> list[Worker]:
        return [w for w in self.workers if not w.alive and (w.outbox or w.lease)]

    @precondition(lambda self: self.idle_workers() and any(s.queued for s in self.shards))
    @rule(
        index=st.integers(0, 3),
        shard=st.integers(0, 3),
        links=st.lists(st.tuples(st.booleans(), st.integers(0, 7)), min_size=1, max_size=3),
    )
    def take(self, index: int, shard: int, links: list[tuple[bool, int]]) -> None:
        """A worker leases from some shard that has queued work, fetches the
        page and sends its links: each a new URL of any shard's host, or one
        already known (its shard's seen set turns it away)."""
        worker = pick(self.idle_workers(), index)
        source = pick([s for s in self.shards if s.queued], shard)
        url = source.lease(worker.name)
        assert url is not None
        worker.lease = (source.index, url)
        for new, host in links:
            if new and len(self.home) < MAX_URLS:
                link = f"u{len(self.home)}"
                self.home[link] = host % len(self.shards)
            else:
                link = sorted(self.home)[host % len(self.home)]
            worker.outbox.append((self.home[link], link))

    @precondition(lambda self: any(w.outbox for w in self.workers))
    @rule(index=st.integers(0, 3), which=st.integers(0, 3))
    def deliver(self, index: int, which: int) -> None:
        """An admission call reaches its shard (in any order: each call goes
        to its own shard on its own connection)."""
        worker = pick([w for w in self.workers if w.outbox], index)
        shard, url = worker.outbox.pop(which % len(worker.outbox))
        self.shards[shard].admit([url])

    @precondition(lambda self: self.releasers())
    @rule(index=st.integers(0, 3))
    def release(self, index: int) -> None:
        """Only once every admission the page sent has been answered."""
        worker = pick(self.releasers(), index)
        assert worker.lease is not None
        shard, url = worker.lease
        worker.lease = None
        assert self.shards[shard].release(worker.name, url)

    @precondition(lambda self: self.senders())
    @rule(index=st.integers(0, 3))
    def die(self, index: int) -> None:
        """SIGKILL of a worker holding a lease (a new one takes its place);
        what it sent may still arrive."""
        pick(self.senders(), index).alive = False
        self.hire()

    @precondition(lambda self: self.dead())
    @rule(index=st.integers(0, 3), lost=st.booleans())
    def after_death(self, index: int, lost: bool) -> None:
        """A dead worker's call in flight is lost (it never reached its
        shard), or, once nothing it sent is in flight, its lease expires (a
        lease's time-to-live is far longer than one call)."""
        worker = pick(self.dead(), index)
        if worker.outbox:
            if lost:
                worker.outbox.pop()
            return
        for shard in self.shards:
            shard.reclaim(worker.name)
        worker.lease = None

    # -- the detector --------------------------------------------------------------

    @rule()
    def read(self) -> None:
        shard = self.detector.next_shard
        self.detector.observe(self.shards[shard].read())

    # -- what must hold ------------------------------------------------------------

    @invariant()
    def done_only_when_nothing_is_left(self) -> None:
        if self.detector.done:
            left = {s.index: (list(s.queued), dict(s.leases)) for s in self.shards}
            in_flight = {w.name: list(w.outbox) for w in self.workers if w.outbox}
            assert self.quiet(), f"done while work is left: {left}, in flight {in_flight}"

    @invariant()
    def done_within_two_passes_of_idle(self) -> None:
        if not self.shards:
            return
        quiet = self.quiet()
        if self.was_quiet:
            assert quiet, "idle is not stable: work appeared after every shard was idle"
        elif quiet:
            self.was_quiet = True
            # the first pass that begins after this moment
            in_pass = self.detector.next_shard > 0
            self.first_quiet_pass = self.detector.passes + (2 if in_pass else 1)
        if quiet and self.detector.passes >= self.first_quiet_pass + 1:
            assert self.detector.done, "idle for two full passes, and not done"

    def teardown(self) -> None:
        if self.shards and self.quiet():
            for _ in range(3 * len(self.shards)):
                self.read()
            assert self.detector.done


SETTINGS = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TestShardedCrawl = ShardedCrawl.TestCase
TestShardedCrawl.settings = SETTINGS


class NaiveCrawl(ShardedCrawl):
    detector_class = NaiveDetector


class CounterlessCrawl(ShardedCrawl):
    detector_class = CounterlessDetector


#: The foil must be caught on every run, not on lucky ones: a fixed seed,
#: and no example database to remember the failure from a previous run.
#: (The search needs many examples: a pass must read every shard idle while
#: work is left, which few random interleavings do.)
FOIL_SETTINGS = settings(
    SETTINGS,
    max_examples=2000,
    stateful_step_count=30,
    derandomize=True,
    database=None,
    print_blob=False,
    phases=[Phase.generate],  # caught is enough: no shrinking
)


def test_a_one_pass_detector_is_caught_by_the_same_machine() -> None:
    with pytest.raises(AssertionError, match="done while work is left"):
        run_state_machine_as_test(NaiveCrawl, settings=FOIL_SETTINGS)


def test_two_idle_passes_without_counters_are_fooled_by_a_shuttle_run_twice() -> None:
    """Hypothesis's random interleavings rarely run the shuttle in two
    passes in a row (none in 2,000 examples), so here it is by hand: one
    URL at a time, each page linking to the other shard, each link sent
    just behind the detector's read."""
    shards = [Shard(0), Shard(1)]
    shards[1].admit(["a"])
    counterless, exact = CounterlessDetector(2), Detector(2)

    def read(shard: int) -> None:
        reading = shards[shard].read()
        assert reading.idle
        counterless.observe(reading)
        exact.observe(reading)

    def shuttle(source: int, url: str, link: str) -> None:
        assert shards[source].lease("w") == url
        shards[1 - source].admit([link])
        assert shards[source].release("w", url)

    read(0)
    shuttle(1, "a", "b")  # b goes to shard 0, just read
    read(1)
    shuttle(0, "b", "c")  # c to shard 1, before pass two reads shard 0
    read(0)
    shuttle(1, "c", "d")  # d to shard 0, just read again
    read(1)
    assert counterless.done  # wrong: d is queued on shard 0
    assert shards[0].queued == ["d"]
    assert not exact.done  # shard 0's counter moved between its reads


# -- the pure pieces directly ----------------------------------------------------------


def test_a_shuttle_between_reads_fools_one_pass_but_not_two() -> None:
    """The shuttle by hand: the detector reads shard 0, a worker leasing on
    shard 1 sends a link to shard 0 and releases, the detector reads shard 1."""
    shards = [Shard(0), Shard(1)]
    shards[1].admit(["a"])
    naive, exact = NaiveDetector(2), Detector(2)
    url = shards[1].lease("w")
    assert url == "a"
    for detector in (naive, exact):
        detector.observe(ShardReading(0, True, 0))  # shard 0 read while idle
    shards[0].admit(["b"])  # the link, before the release
    shards[1].release("w", "a")
    reading = shards[1].read()
    assert naive.observe(reading) is True  # wrong: b is queued on shard 0
    assert exact.observe(reading) is False
    assert not all_idle(shards)
    assert [r.shard for r in exact.last_pass] == [0, 1]


def test_counters_catch_what_idle_readings_miss() -> None:
    first = [ShardReading(0, True, 3), ShardReading(1, True, 5)]
    assert quiet_twice(first, first)
    assert not quiet_twice(first, [ShardReading(0, True, 4), ShardReading(1, True, 5)])
    assert not quiet_twice(first, [ShardReading(0, False, 3), ShardReading(1, True, 5)])


def test_the_shard_books() -> None:
    shard = Shard(0)
    assert shard.idle and shard.activity == 0
    assert shard.admit(["a", "b", "a"]) == 2 and shard.activity == 1
    assert shard.admit(["a"]) == 0 and shard.activity == 1  # seen: no bump
    assert shard.lease("w1") == "a" and shard.activity == 2
    assert shard.release("w2", "a") is False  # not w2's lease
    assert shard.reclaim("w1") == 1 and shard.queued == ["a", "b"] and shard.activity == 3
    assert shard.release("w1", "a") is False  # reclaimed: no longer w1's
    assert shard.lease("w2") == "a" and shard.release("w2", "a")
    assert shard.lease("w2") == "b" and shard.release("w2", "b") and shard.idle


def test_the_detector_reads_in_order() -> None:
    detector = Detector(2)
    with pytest.raises(ValueError, match="shard 0"):
        detector.observe(ShardReading(1, True, 0))
    with pytest.raises(ValueError, match="at least one"):
        Detector(0)


def test_a_changed_or_restarted_primary_stops_the_crawl() -> None:
    guard = FailoverGuard({0: "node-a/run-1", 1: "node-b/run-1"})
    assert guard.check({0: "node-a/run-1", 1: "node-b/run-1"}) is None
    line = guard.check({0: "node-c/run-1", 1: "node-b/run-1"})  # failover
    assert line is not None and "shard 0" in line and "\n" not in line
    assert guard.check({0: "node-a/run-2", 1: "node-b/run-1"}) is not None  # restart
    assert guard.check({1: "node-b/run-1"}) is not None  # no primary for shard 0
