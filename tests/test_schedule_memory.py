"""The politeness schedule forgets idle hosts (engine/schedule.py, rule 8)
without changing a single decision: direct cases, and a hypothesis state
machine that drives a forgetting schedule and one that keeps every host
with the same operations and compares every answer."""

from __future__ import annotations

import random
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from trio_crawl.engine.fifo import Fifo
from trio_crawl.engine.schedule import RATE_SLACK, PoliteSchedule

H = "a.test:80"


def test_an_unlimited_host_is_forgotten_when_its_last_request_ends() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(max_per_host=2)
    assert s.try_start("a", H, 0.0) and s.try_start("b", H, 0.0)
    s.release(H, 0.1)
    assert s.known_hosts == 1
    s.release(H, 0.2)
    assert s.known_hosts == 0 and s.in_flight(H) == 0
    assert s.try_start("c", H, 0.0)  # seen again: starts as before


def test_a_rated_host_is_kept_until_its_next_start_is_due() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=1)
    gap = 1 + RATE_SLACK
    assert s.try_start("a1", H, 0.0)
    s.release(H, 0.1)
    assert s.try_start("b1", "b:80", 0.5)  # time passes, not enough for H
    assert s.known_hosts == 2
    assert not s.try_start("a2", H, 0.6)  # still waits out its interval
    assert s.pop_ready(gap) == ["a2"] and s.try_start("a2", H, gap)
    s.release(H, gap)
    s.release("b:80", gap)  # b is due at 1 + slack: kept until a call at that time
    s.forget_idle(2 * gap - 0.01)
    assert s.known_hosts == 1  # H is not due before 2 * gap
    s.forget_idle(2 * gap)
    assert s.known_hosts == 0


def test_a_forgotten_host_keeps_its_crawl_delay() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=10)
    s.set_crawl_delay(H, 2.0)
    s.set_crawl_delay("plain:80", None)
    assert s.known_hosts == 0  # a delay alone is one float, not a host
    assert s.try_start("a", H, 0.0)
    s.release(H, 0.5)
    s.forget_idle(2.49)
    assert s.known_hosts == 1  # its next start (the end plus the delay) is not due
    s.forget_idle(100.0)
    assert s.known_hosts == 0
    assert s.crawl_delay(H) == 2.0 and s.crawl_delay("plain:80") == 0.0
    assert s.try_start("b", H, 100.0) and not s.try_start("c", H, 103.0)  # b in flight
    s.release(H, 101.0)
    assert s.next_deadline() == pytest.approx(103.0)


def test_a_deferred_retry_does_not_keep_its_host() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=1)
    assert s.try_start("a", H, 0.0)
    s.release(H, 0.0)
    s.defer("a", H, 5.0)
    s.forget_idle(2.0)
    assert s.known_hosts == 0 and s.waiting == 1
    assert s.pop_ready(5.0) == ["a"] and s.try_start("a", H, 5.0)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.one_of(st.integers(0, 10**6), st.just("pop")), max_size=300))
def test_fifo_behaves_like_a_deque(ops: list[int | str]) -> None:
    """Appends and pops in any mix (long runs of each reach the compaction)."""
    fifo: Fifo[int] = Fifo()
    model: deque[int] = deque()
    for op in ops:
        if op == "pop":
            if model:
                assert fifo.popleft() == model.popleft()
            else:
                with pytest.raises(IndexError):
                    fifo.popleft()
        else:
            assert isinstance(op, int)
            fifo.append(op)
            model.append(op)
        assert list(fifo) == list(model) and len(fifo) == len(model)
        assert bool(fifo) == bool(model)
    fifo.clear()
    assert not fifo and list(fifo) == []


def test_a_long_fifo_drops_what_it_gave() -> None:
    fifo = Fifo(range(1000))
    for expected in range(990):
        assert fifo.popleft() == expected
    assert list(fifo) == list(range(990, 1000))
    assert len(fifo._items) < 1000  # compacted on the way, not kept for ever


HOSTS = st.sampled_from(["a:80", "b:80", "c:80"])


class ForgettingMatchesKeeping(RuleBasedStateMachine):
    """Every answer of a forgetting schedule equals the one of a schedule
    that keeps every host, whatever the operations and their timing."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.next_job = 0
        self.ready: list[tuple[int, str]] = []  # handed over by pop_ready: reserved
        self.host_of: dict[int, str] = {}

    @initialize(
        rate=st.one_of(st.none(), st.sampled_from([0.5, 1.0, 4.0])),
        cap=st.one_of(st.none(), st.integers(1, 3)),
        random_wait=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def make(self, rate: float | None, cap: int | None, random_wait: bool, seed: int) -> None:
        def schedule(forget: bool) -> PoliteSchedule[int]:
            return PoliteSchedule(
                rate=rate,
                max_per_host=cap,
                random_wait=random_wait,
                rng=random.Random(seed),
                forget_idle_hosts=forget,
            )

        self.forgetting, self.keeping = schedule(True), schedule(False)

    def both(self, method: str, *args: object) -> object:
        mine = getattr(self.forgetting, method)(*args)
        theirs = getattr(self.keeping, method)(*args)
        assert mine == theirs, (method, args, mine, theirs)
        return mine

    @rule(dt=st.sampled_from([0.0, 0.01, 0.3, 1.0, 2.5]))
    def time_passes(self, dt: float) -> None:
        self.now += dt

    @rule(host=HOSTS)
    def new_url(self, host: str) -> None:
        job, self.next_job = self.next_job, self.next_job + 1
        self.host_of[job] = host
        self.both("try_start", job, host, self.now)

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), start=st.booleans())
    def handed_over(self, data: st.DataObject, start: bool) -> None:
        job, host = self.ready.pop(data.draw(st.integers(0, len(self.ready) - 1)))
        if start:
            assert self.both("try_start", job, host, self.now) is True
        else:
            self.both("unreserve", job, host)

    @rule(host=HOSTS)
    def request_ends(self, host: str) -> None:
        if self.keeping.in_flight(host):
            self.both("release", host, self.now)

    @rule(host=HOSTS, delay=st.sampled_from([0.0, 0.5, 3.0]))
    def retry_later(self, host: str, delay: float) -> None:
        job, self.next_job = self.next_job, self.next_job + 1
        self.host_of[job] = host
        self.both("defer", job, host, self.now + delay)

    @rule(host=HOSTS, delay=st.one_of(st.none(), st.sampled_from([0.2, 1.5])))
    def robots_says(self, host: str, delay: float | None) -> None:
        self.both("set_crawl_delay", host, delay)

    @rule()
    def hand_over(self) -> None:
        ready = self.forgetting.pop_ready(self.now)
        theirs = self.keeping.pop_ready(self.now)
        # the same jobs, each host's in the same order; hosts may interleave
        # differently (a forgotten host's due time is "long ago", not its own)
        assert sorted(ready) == sorted(theirs)
        for host in ("a:80", "b:80", "c:80"):
            mine = [job for job in ready if self.host_of[job] == host]
            assert mine == [job for job in theirs if self.host_of[job] == host]
        self.ready.extend((job, self.host_of[job]) for job in ready)

    @rule(parity=st.integers(0, 1))
    def budget_spent(self, parity: int) -> None:
        mine = self.forgetting.remove_where(lambda job: job % 2 == parity)
        assert sorted(mine) == sorted(self.keeping.remove_where(lambda job: job % 2 == parity))

    @rule()
    def forget(self) -> None:
        self.both("forget_idle", self.now)
        # every host still known is busy, or idle but not yet due
        for host, state in self.forgetting._hosts.items():
            busy = state.in_flight or state.queue or state.reserved
            assert busy or state.next_start > self.now, host

    @invariant()
    def same_answers(self) -> None:
        if not hasattr(self, "forgetting"):
            return
        # a deadline already past means "now" to the engine, whatever its value
        mine, theirs = self.forgetting.next_deadline(), self.keeping.next_deadline()
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert max(mine, self.now) == max(theirs, self.now)
        assert self.forgetting.waiting == self.keeping.waiting
        assert self.forgetting.hosts_in_flight == self.keeping.hosts_in_flight
        assert self.forgetting.known_hosts <= self.keeping.known_hosts
        for host in ("a:80", "b:80", "c:80"):
            self.both("in_flight", host)
            self.both("crawl_delay", host)


ForgettingMatchesKeeping.TestCase.settings = settings(
    max_examples=300, stateful_step_count=60, deadline=None
)
test_forgetting_matches_keeping = ForgettingMatchesKeeping.TestCase
