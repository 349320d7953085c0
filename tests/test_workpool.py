"""WorkPool on its own: no HTTP, no crawling, exact ends under MockClock.

Rules of this module: every test runs under the autojump clock, so "when did
it end" is an exact virtual time, and hypothesis drives random producer
graphs and timings through the pool.
"""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl import WorkPool


class Counter:
    """A room: a list of held items with a ``waiting`` count."""

    def __init__(self) -> None:
        self.items: list[int] = []

    @property
    def waiting(self) -> int:
        return len(self.items)


async def test_ends_exactly_when_the_last_item_is_done(autojump_clock: object) -> None:
    pool = WorkPool[int](workers=3)
    done: list[tuple[int, float]] = []

    async def handle(n: int) -> None:
        await trio.sleep(n)
        if n < 3:
            pool.publish(n + 1)
            pool.publish(n + 2)
        done.append((n, trio.current_time()))

    pool.publish(0)
    await pool.run(handle)
    assert trio.current_time() == max(t for _, t in done)
    assert sorted(n for n, _ in done) == [0, 1, 2, 2, 3, 3, 3, 4, 4]
    stats = pool.statistics()
    assert (stats.published, stats.completed, stats.queued, stats.active) == (9, 9, 0, 0)


async def test_nothing_published_ends_at_once(autojump_clock: object) -> None:
    pool = WorkPool[int](workers=2)

    async def handle(n: int) -> None:
        raise AssertionError("no work was published")

    await pool.run(handle)
    assert trio.current_time() == 0


async def test_a_room_holds_the_end_back_until_it_hands_its_items_over(
    autojump_clock: object,
) -> None:
    room = Counter()
    pool = WorkPool[int](workers=2)
    pool.add_room(room)
    handled: list[tuple[int, float]] = []

    async def handle(n: int) -> None:
        handled.append((n, trio.current_time()))
        if n == 0:
            room.items.extend([1, 2])  # parked for later, still unfinished

    async def release_later() -> None:
        await trio.sleep(5)
        while room.items:
            pool.publish(room.items.pop())  # same step: leaves the room, enters the channel

    pool.publish(0)
    await pool.run(handle, helpers=[release_later])
    assert sorted(handled) == [(0, 0.0), (1, 5.0), (2, 5.0)]
    assert trio.current_time() == 5


async def test_priorities_are_counted_as_queued_work(autojump_clock: object) -> None:
    """Regression (issue #9, bug 3): items in the priority heap are part of the
    buffer. With 1 s items and one worker, every item must run."""
    pool = WorkPool[str](workers=1)
    order: list[str] = []

    async def handle(name: str) -> None:
        await trio.sleep(1)
        order.append(name)
        if name == "start":
            pool.publish("low", priority=-1)
            pool.publish("high", priority=5)
            pool.publish("normal")
            pool.publish("higher", priority=9)

    pool.publish("start")
    await pool.run(handle)
    assert order == ["start", "higher", "high", "normal", "low"]
    assert trio.current_time() == 5


def test_an_idle_check_right_after_a_prioritized_publish_keeps_the_item() -> None:
    """Regression (issue #9, bug 3): the priority heap is part of the queued
    work. A room publishes a prioritized item and, in the same step, drops
    another and calls check_idle(): the supervisor may run before the woken
    worker, and must see the heap. Trio's scheduler order varies, so try many
    times; an idle rule without the heap loses the item in about half."""

    async def once() -> list[str]:
        room = Counter()
        pool = WorkPool[str](workers=1)
        pool.add_room(room)
        handled: list[str] = []

        async def handle(item: str) -> None:
            await trio.sleep(0.5)
            handled.append(item)

        async def hand_over() -> None:
            room.items.append(0)
            await trio.sleep(1)
            pool.publish("urgent", priority=3)
            room.items.clear()
            pool.check_idle()

        pool.publish("first")
        await pool.run(handle, helpers=[hand_over])
        return handled

    for _ in range(40):
        handled = trio.run(once, clock=trio.testing.MockClock(autojump_threshold=0))
        assert handled == ["first", "urgent"]


async def test_a_room_that_drops_items_calls_check_idle(autojump_clock: object) -> None:
    room = Counter()
    pool = WorkPool[int](workers=1)
    pool.add_room(room)

    async def handle(n: int) -> None:
        room.items.append(n + 1)

    async def drop_later() -> None:
        await trio.sleep(3)
        room.items.clear()
        pool.check_idle()

    pool.publish(0)
    await pool.run(handle, helpers=[drop_later])
    assert trio.current_time() == 3


async def test_stop_gives_busy_workers_the_grace_period(autojump_clock: object) -> None:
    pool = WorkPool[float](workers=2, grace=10)
    finished: list[float] = []

    async def handle(seconds: float) -> None:
        if pool.stopping:
            return  # a stopping pool's queued items are dropped by the worker
        await trio.sleep(seconds)
        finished.append(seconds)

    for seconds in (4.0, 30.0, 1.0, 1.0):
        pool.publish(seconds)

    async def stop_soon() -> None:
        await trio.sleep(2)
        pool.stop()

    await pool.run(handle, helpers=[stop_soon])
    # 4 s finishes within the grace period, the 1 s items queued behind it are
    # dropped, and 30 s is cancelled at 2 + 10 s.
    assert finished == [4.0]
    assert trio.current_time() == 12


async def test_a_wake_up_that_is_not_idle_does_not_end_the_pool(autojump_clock: object) -> None:
    """Regression (issue #9, bug 2): the old supervisor treated any wake-up that
    found work as a stop and gave a grace period that returned at once. A
    room's check_idle() while work is in flight must change nothing."""
    pool = WorkPool[int](workers=1, grace=0)
    finished: list[float] = []

    async def handle(n: int) -> None:
        await trio.sleep(5)
        finished.append(trio.current_time())

    async def nudge() -> None:
        await trio.sleep(1)
        pool._wake_supervisor.set()  # a spurious wake-up, as a race would give
        pool.check_idle()

    pool.publish(0)
    await pool.run(handle, helpers=[nudge])
    assert finished == [5.0]


async def test_a_worker_exception_propagates_and_cancels_the_rest(
    autojump_clock: object,
) -> None:
    pool = WorkPool[int](workers=2)

    async def handle(n: int) -> None:
        if n == 1:
            raise ValueError("boom")
        await trio.sleep(100)

    pool.publish(0)
    pool.publish(1)
    with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="^boom$")):
        await pool.run(handle)
    assert trio.current_time() == 0


async def test_a_pool_runs_once() -> None:
    pool = WorkPool[int](workers=1)

    async def handle(n: int) -> None:
        pass

    await pool.run(handle)
    with pytest.raises(RuntimeError, match=r"^a WorkPool runs once$"):
        await pool.run(handle)


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^workers must be at least 1$"):
        WorkPool[int](workers=0)


graphs = st.integers(min_value=1, max_value=40).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, n - 1), max_size=4), min_size=n, max_size=n)
)


@settings(max_examples=60, deadline=None)
@given(
    graph=graphs,
    workers=st.integers(1, 8),
    seed=st.integers(0, 2**32),
    park=st.booleans(),
)
def test_random_producer_graphs_end_exactly_after_the_last_item(
    graph: list[list[int]], workers: int, seed: int, park: bool
) -> None:
    """Each node is handled exactly once (the handler dedups), every node
    reachable from 0 is handled, and the pool ends at the instant the last
    handler returns: never earlier (lost work), never later (polling)."""
    rng = random.Random(seed)
    delays = [rng.choice([0, 0, 0.5, 1, 2.5]) for _ in graph]

    async def main() -> tuple[list[int], float, float]:
        pool = WorkPool[int](workers=workers)
        room = Counter()
        pool.add_room(room)
        seen = {0}
        handled: list[int] = []
        last_done = 0.0
        wake = trio.Event()

        async def handle(n: int) -> None:
            nonlocal last_done, wake
            await trio.sleep(delays[n])
            for child in graph[n]:
                if child not in seen:
                    seen.add(child)
                    if park and child % 3 == 0:
                        room.items.append(child)  # a room, released by a helper
                        wake.set()
                    else:
                        pool.publish(child)
            handled.append(n)
            last_done = trio.current_time()

        async def release() -> None:
            nonlocal wake
            while True:
                await wake.wait()
                wake = trio.Event()
                await trio.sleep(0.25)
                while room.items:
                    pool.publish(room.items.pop())

        pool.publish(0)
        await pool.run(handle, helpers=[release])
        return handled, last_done, trio.current_time()

    handled, last_done, ended = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    reachable = {0}
    todo = [0]
    while todo:
        for child in graph[todo.pop()]:
            if child not in reachable:
                reachable.add(child)
                todo.append(child)
    assert sorted(handled) == sorted(reachable)
    assert ended == last_done
