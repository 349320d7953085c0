"""The politeness schedule on its own: exact times, no clock, no trio."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.engine.schedule import RATE_SLACK, PoliteSchedule

H = "a.test:80"


def test_unlimited_host_always_starts() -> None:
    s: PoliteSchedule[str] = PoliteSchedule()
    assert all(s.try_start(f"j{i}", H, 0.0) for i in range(100))
    assert s.in_flight(H) == 100 and s.waiting == 0 and s.next_deadline() is None


def test_rate_spaces_starts_and_parks_the_rest() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=5)
    gap = 0.2 * (1 + RATE_SLACK)
    assert s.try_start("a", H, 0.0)
    assert not s.try_start("b", H, 0.0)
    assert not s.try_start("c", H, 0.05)
    assert s.waiting == 2
    assert s.next_deadline() == pytest.approx(gap)
    assert s.pop_ready(gap - 1e-9) == []
    assert s.pop_ready(gap) == ["b"]
    # b is reserved: a newcomer waits behind it even though the slot is "free".
    assert not s.try_start("d", H, gap)
    assert s.try_start("b", H, gap + 0.01)
    assert s.next_deadline() == pytest.approx(2 * gap + 0.01)
    assert s.pop_ready(2 * gap + 0.01) == ["c"]


def test_other_hosts_are_not_blocked() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=1)
    assert s.try_start("a1", "a:80", 0.0)
    assert not s.try_start("a2", "a:80", 0.0)
    assert s.try_start("b1", "b:80", 0.0)


def test_a_crawl_delay_counts_from_the_end_of_the_request_before() -> None:
    """Rule 9: one request at a time, the next the delay after the end."""
    s: PoliteSchedule[str] = PoliteSchedule()
    s.set_crawl_delay(H, 2.0)
    assert s.crawl_delay(H) == 2.0 and s.interval == 0
    assert s.try_start("a", H, 0.0)
    assert not s.try_start("b", H, 0.0)
    assert not s.try_start("c", H, 5.0)  # "a" is still in flight
    assert s.next_deadline() is None  # only its end can tell when
    assert s.pop_ready(100.0) == []
    s.release(H, 3.0)
    assert s.next_deadline() == 5.0  # the end, plus the delay: no slack needed
    assert s.pop_ready(4.99) == []
    assert s.pop_ready(5.0) == ["b"]
    assert s.try_start("b", H, 5.0)
    s.release(H, 5.5)
    assert s.pop_ready(7.49) == [] and s.pop_ready(7.5) == ["c"]


def test_a_rate_and_a_crawl_delay_both_hold() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=10)
    interval = 0.1 * (1 + RATE_SLACK)
    assert s.interval == pytest.approx(interval)
    s.set_crawl_delay(H, 2.0)
    s.set_crawl_delay("b:80", 0.01)
    assert s.crawl_delay(H) == 2.0 and s.crawl_delay("b:80") == 0.01
    assert s.try_start("a1", H, 0.0) and s.try_start("b1", "b:80", 0.0)
    assert not s.try_start("a2", H, 0.0) and not s.try_start("b2", "b:80", 0.0)
    s.release(H, 0.5)
    s.release("b:80", 0.0)
    assert s.pop_ready(interval) == ["b2"]  # the rate's interval is the longer gap
    assert s.pop_ready(2.49) == [] and s.pop_ready(2.5) == ["a2"]  # the delay's
    s.set_crawl_delay("b:80", None)
    assert s.crawl_delay("b:80") == 0.0


def test_per_host_concurrency_released_by_finish_not_time() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(max_per_host=2)
    assert s.try_start("a", H, 0.0) and s.try_start("b", H, 0.0)
    assert not s.try_start("c", H, 0.0)
    assert s.next_deadline() is None  # only a release can free it
    assert s.pop_ready(100.0) == []
    s.release(H, 50.0)
    assert s.pop_ready(100.0) == ["c"]
    assert s.try_start("c", H, 100.0)
    assert s.in_flight(H) == 2


def test_defer_is_a_backoff() -> None:
    s: PoliteSchedule[str] = PoliteSchedule()
    s.defer("r", H, 3.5)
    assert s.waiting == 1 and s.next_deadline() == 3.5
    assert s.pop_ready(3.4) == []
    assert s.pop_ready(3.5) == ["r"]
    assert s.waiting == 0
    assert s.try_start("r", H, 3.6)


def test_drain_empties_everything() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=1)
    s.try_start("a", H, 0)
    s.try_start("b", H, 0)
    s.defer("c", H, 10)
    assert sorted(s.drain()) == ["b", "c"]
    assert s.waiting == 0 and s.next_deadline() is None


def test_release_of_idle_host_is_a_bug() -> None:
    s: PoliteSchedule[str] = PoliteSchedule()
    s.try_start("a", H, 0)
    s.release(H, 1.0)
    with pytest.raises(RuntimeError, match="schedule invariant broken"):
        s.release(H, 2.0)


def test_urgent_jobs_go_ahead_of_parked_ones_in_their_own_order() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=1)
    gap = 1 + RATE_SLACK
    assert s.try_start("page1", H, 0.0)
    assert not s.try_start("page2", H, 0.0)
    assert not s.try_start("script1", H, 0.1, urgent=True)
    assert not s.try_start("script2", H, 0.2, urgent=True)
    assert s.waiting == 3
    assert s.pop_ready(gap) == ["script1"]
    assert s.try_start("script1", H, gap)
    assert s.pop_ready(2 * gap) == ["script2"]
    assert s.try_start("script2", H, 2 * gap)
    assert s.pop_ready(3 * gap) == ["page2"]


def test_an_urgent_job_starts_at_once_past_parked_ones_when_the_host_is_free() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(max_per_host=2)
    assert s.try_start("page1", H, 0.0) and s.try_start("page2", H, 0.0)
    assert not s.try_start("page3", H, 0.0)
    s.release(H, 0.0)
    # The slot went to page3 (reserved on its way to a crawler): an urgent job waits.
    assert s.pop_ready(0.0) == ["page3"]
    assert not s.try_start("script", H, 0.0, urgent=True)
    assert s.try_start("page3", H, 0.0)
    s.release(H, 0.0)
    assert s.pop_ready(0.0) == ["script"]


def test_withdraw_takes_a_parked_or_reserved_job_away() -> None:
    s: PoliteSchedule[str] = PoliteSchedule(rate=1)
    gap = 1 + RATE_SLACK
    assert s.try_start("a", H, 0.0)
    assert not s.try_start("turn", H, 0.0, urgent=True)
    assert not s.try_start("b", H, 0.0)
    s.withdraw("turn", H)
    assert s.waiting == 1
    assert s.pop_ready(gap) == ["b"]  # the withdrawn turn holds nothing up
    assert not s.try_start("turn2", H, gap, urgent=True)  # b is reserved
    assert s.try_start("b", H, gap)
    assert s.pop_ready(2 * gap) == ["turn2"]
    s.withdraw("turn2", H)  # reserved, then given up: the slot is free again
    assert s.try_start("c", H, 2 * gap)
    assert s.waiting == 0 and s.in_flight(H) == 3


@settings(max_examples=200, deadline=None)
@given(
    rate=st.one_of(st.none(), st.floats(0.5, 50)),
    cap=st.one_of(st.none(), st.integers(1, 4)),
    delay=st.one_of(st.none(), st.floats(0.05, 2)),
    jobs=st.lists(
        st.tuples(st.sampled_from("abc"), st.floats(0, 5), st.booleans()), min_size=1, max_size=40
    ),
    seed=st.integers(0, 2**32),
)
def test_random_runs_respect_rate_cap_and_delay_and_start_everything(
    rate: float | None,
    cap: int | None,
    delay: float | None,
    jobs: list[tuple[str, float, bool]],
    seed: int,
) -> None:
    """Drive the schedule like the engine does, with random request durations;
    some jobs are urgent; host "a" may have a Crawl-delay."""
    rng = random.Random(seed)
    s: PoliteSchedule[int] = PoliteSchedule(rate=rate, max_per_host=cap)
    s.set_crawl_delay("a", delay)
    arrivals = sorted((t, i, host) for i, (host, t, _) in enumerate(jobs))
    starts: dict[str, list[float]] = {}
    last_end: dict[str, float] = {}
    running: list[tuple[float, str]] = []  # (end time, host)
    channel: list[tuple[int, str]] = []
    now = 0.0
    started = set()
    for _ in range(10_000):
        if not (arrivals or running or channel or s.waiting):
            break
        # Next event: an arrival, a request end, or the schedule's deadline.
        candidates = [t for t, _, _ in arrivals[:1]] + [e for e, _ in running]
        deadline = s.next_deadline()
        if deadline is not None:
            candidates.append(deadline)
        if not channel:
            now = max(now, min(candidates))
        for t, i, host in list(arrivals):
            if t <= now:
                arrivals.remove((t, i, host))
                channel.append((i, host))
        for end, host in list(running):
            if end <= now:
                running.remove((end, host))
                s.release(host, now)
                last_end[host] = now
        channel.extend((j, jobs[j][0]) for j in s.pop_ready(now))
        while channel:
            i, host = channel.pop(0)
            if s.try_start(i, host, now, urgent=jobs[i][2]):
                assert i not in started
                started.add(i)
                if host == "a" and delay is not None:
                    assert s.in_flight(host) == 1  # one at a time
                    assert now >= last_end.get(host, -math.inf) + delay
                starts.setdefault(host, []).append(now)
                running.append((now + rng.uniform(0, 1), host))
                if cap is not None:
                    assert s.in_flight(host) <= cap
    assert started == set(range(len(jobs)))
    if rate is not None:
        for times in starts.values():
            for earlier, later in itertools.pairwise(times):
                assert later - earlier >= 1 / rate - 1e-9


def test_remove_where_takes_parked_and_deferred_jobs_and_keeps_the_rest() -> None:
    s = PoliteSchedule[str](rate=1.0)
    assert s.try_start("a1", "a", 0.0)
    assert not s.try_start("a2", "a", 0.0)  # parked behind the rate
    assert not s.try_start("retry-a3", "a", 0.0)
    s.defer("b1", "b", 5.0)
    s.defer("retry-b2", "b", 6.0)
    assert s.waiting == 4
    removed = s.remove_where(lambda job: not job.startswith("retry"))
    assert sorted(removed) == ["a2", "b1"]
    assert s.waiting == 2
    s.release("a", 0.5)
    interval = 1.0 * (1 + RATE_SLACK)
    assert s.next_deadline() == interval
    assert s.pop_ready(interval) == ["retry-a3"]
    assert s.pop_ready(6.0) == ["retry-b2"]
    assert s.waiting == 0
