"""The adaptive revisit schedule (issue #33 item 7, ``core/revisit_schedule.py``):
its rules one by one, its properties under hypothesis, and a page that changes
every few hours revisited whenever due over simulated weeks under MockClock."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl.core.revisit_schedule import (
    REMEMBERED,
    RevisitHistory,
    RevisitPolicy,
    after_visit,
    first_visit,
    is_due,
)

HOUR = 3_600.0
DAY = 24 * HOUR
POLICY = RevisitPolicy()
T0 = 1_700_000_000.0  # epoch seconds: the simulated crawls start here


# -- the rules, one by one ------------------------------------------------------


def test_a_new_page_is_due_after_the_initial_interval_and_counts_as_changed() -> None:
    history = first_visit(POLICY, T0)
    assert history == RevisitHistory(interval=DAY, next_due=T0 + DAY, changes=1, visits=1)
    assert not is_due(history, T0 + DAY - 1) and is_due(history, T0 + DAY)


def test_unchanged_on_time_grows_by_the_factor() -> None:
    history = first_visit(POLICY, T0)
    after = after_visit(POLICY, history, changed=False, now=history.next_due)
    assert after.interval == DAY * 1.25 and after.changes == 0b10 and after.visits == 2


def test_an_early_unchanged_visit_grows_only_by_what_it_observed() -> None:
    history = first_visit(POLICY, T0)
    early = after_visit(POLICY, history, changed=False, now=T0 + DAY / 10)
    assert early.interval == DAY  # a tenth of a day unchanged says nothing about a day
    half = after_visit(POLICY, history, changed=False, now=T0 + DAY * 0.9)
    assert half.interval == pytest.approx(DAY * 0.9 * 1.25)
    late = after_visit(POLICY, history, changed=False, now=T0 + 3 * DAY)
    assert late.interval == DAY * 1.25  # late is no licence to leap


def test_a_change_right_after_an_unchanged_visit_holds_the_interval() -> None:
    history = RevisitHistory(interval=DAY, next_due=T0, changes=0b1110, visits=9)
    after = after_visit(POLICY, history, changed=True, now=T0)
    assert after.interval == DAY and after.changes == 0b11101


def test_changes_shrink_gently_while_an_unchanged_visit_is_remembered() -> None:
    history = RevisitHistory(interval=DAY, next_due=T0, changes=0b1011_1111, visits=20)
    after = after_visit(POLICY, history, changed=True, now=T0)
    # the 8th visit back, unchanged, is still remembered
    assert after.interval == pytest.approx(DAY * 0.95)
    gone = after_visit(POLICY, after, changed=True, now=after.next_due)
    assert gone.changes == 0xFF and gone.interval == pytest.approx(DAY * 0.95 * 0.5)


def test_a_page_changed_on_every_visit_comes_down_fast() -> None:
    history = first_visit(POLICY, T0)
    history = after_visit(POLICY, history, changed=True, now=history.next_due)
    assert history.interval == DAY / 2  # both visits (all it has) found it changed
    for _ in range(10):
        history = after_visit(POLICY, history, changed=True, now=history.next_due)
    assert history.interval == POLICY.minimum


def test_the_interval_is_bounded() -> None:
    history = RevisitHistory(interval=POLICY.maximum, next_due=T0, changes=0, visits=3)
    assert after_visit(POLICY, history, changed=False, now=T0).interval == POLICY.maximum


@pytest.mark.parametrize(
    "values",
    [
        {"minimum": 0.0},
        {"minimum": -1.0},
        {"initial": 10.0, "minimum": 20.0},
        {"initial": 100 * DAY},
        {"grow": 0.9},
        {"shrink": 0.0},
        {"settle": 1.5},
        {"shrink": 0.99, "settle": 0.9},
        {"maximum": math.inf},
        {"grow": math.nan},
    ],
)
def test_a_policy_out_of_its_rules_is_refused(values: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="revisit policy"):
        RevisitPolicy(**values)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"interval": "1", "next_due": 0.0, "changes": 1, "visits": 1},
        {"interval": 0.0, "next_due": 0.0, "changes": 1, "visits": 1},
        {"interval": 1.0, "next_due": math.nan, "changes": 1, "visits": 1},
        {"interval": 1.0, "next_due": 0.0, "changes": 256, "visits": 1},
        {"interval": 1.0, "next_due": 0.0, "changes": 1.0, "visits": 1},
        {"interval": 1.0, "next_due": 0.0, "changes": True, "visits": 1},
        {"interval": 1.0, "next_due": 0.0, "changes": 1, "visits": 0},
    ],
)
def test_a_damaged_history_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="not a revisit history"):
        RevisitHistory.from_json(data)


# -- properties -----------------------------------------------------------------


@st.composite
def policies(draw: st.DrawFn) -> RevisitPolicy:
    minimum = draw(st.floats(1.0, 10 * DAY))
    maximum = minimum * draw(st.floats(1.0, 1000.0))
    initial = draw(st.floats(minimum, maximum))
    shrink = draw(st.floats(0.01, 1.0))
    settle = draw(st.floats(shrink, 1.0))
    grow = draw(st.floats(1.0, 4.0))
    return RevisitPolicy(initial, minimum, maximum, grow=grow, settle=settle, shrink=shrink)


@st.composite
def histories(draw: st.DrawFn, policy: RevisitPolicy) -> RevisitHistory:
    interval = draw(st.floats(policy.minimum, policy.maximum))
    last_visit = draw(st.floats(0.0, 2e9))
    return RevisitHistory(
        interval=interval,
        next_due=last_visit + interval,
        changes=draw(st.integers(0, 255)),
        visits=draw(st.integers(1, 10_000)),
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[RevisitPolicy, RevisitHistory, float]:
    policy = draw(policies())
    history = draw(histories(policy))
    previous = history.next_due - history.interval
    now = previous + draw(st.floats(0.0, 3 * history.interval))
    return policy, history, now


@given(cases(), st.booleans())
def test_the_interval_stays_within_its_bounds_and_next_due_follows(
    case: tuple[RevisitPolicy, RevisitHistory, float], changed: bool
) -> None:
    policy, history, now = case
    after = after_visit(policy, history, changed=changed, now=now)
    assert policy.minimum <= after.interval <= policy.maximum
    assert after.next_due == now + after.interval
    assert after.visits == history.visits + 1


@given(cases())
def test_unchanged_never_shrinks_and_changed_never_grows(
    case: tuple[RevisitPolicy, RevisitHistory, float],
) -> None:
    policy, history, now = case
    assert after_visit(policy, history, changed=False, now=now).interval >= history.interval
    assert after_visit(policy, history, changed=True, now=now).interval <= history.interval


@given(cases(), st.integers(1, 40), st.lists(st.floats(0.0, 3.0), min_size=40, max_size=40))
def test_the_interval_is_monotone_in_consecutive_unchanged_visits(
    case: tuple[RevisitPolicy, RevisitHistory, float], count: int, lateness: list[float]
) -> None:
    policy, history, now = case
    intervals = [history.interval]
    for k in range(count):
        history = after_visit(policy, history, changed=False, now=now)
        intervals.append(history.interval)
        now = history.next_due - history.interval + history.interval * lateness[k]
    assert intervals == sorted(intervals)
    # visited when due, every unchanged visit grows it by the factor, up to the maximum
    on_time = [policy.initial]
    history = first_visit(policy, T0)
    for _ in range(count):
        history = after_visit(policy, history, changed=False, now=history.next_due)
        on_time.append(history.interval)
    assert on_time == sorted(on_time)
    assert on_time[-1] == pytest.approx(min(policy.maximum, policy.initial * policy.grow**count))


@given(cases(), st.booleans())
def test_a_history_survives_a_json_round_trip(
    case: tuple[RevisitPolicy, RevisitHistory, float], changed: bool
) -> None:
    policy, history, now = case
    for value in (history, after_visit(policy, history, changed=changed, now=now)):
        assert RevisitHistory.from_json(json.loads(json.dumps(value.to_json()))) == value


@given(policies(), st.lists(st.booleans(), max_size=40))
def test_the_bitmask_keeps_the_last_8_outcomes(
    policy: RevisitPolicy, outcomes: list[bool]
) -> None:
    history = first_visit(policy, T0)
    for changed in outcomes:
        history = after_visit(policy, history, changed=changed, now=history.next_due)
    seen = [True, *outcomes]  # the first visit counts as a change
    expected = sum(1 << i for i, changed in enumerate(reversed(seen[-REMEMBERED:])) if changed)
    assert history.changes == expected
    assert history.visits == len(seen)


# -- a page that changes every P hours, revisited whenever due ---------------------

#: the band the settled interval stays in, as a fraction of the change period:
#: at most ``grow`` past it (it grows only on an unchanged visit, so from below
#: the period), and at least ``shrink`` times the lowest point of its probing
#: (eight changes in a row halve it once; it climbs back)
SETTLED = (0.4, 1.25)
#: the settled interval's mean, as a fraction of the period (0.84 measured)
MEAN = (0.8, 1.0)
#: at most this share of the visits find the page unchanged (0.21 measured)
WASTE = 0.22


@dataclass
class Revisits:
    """What a revisiting crawler saw of one page."""

    period: float
    intervals: list[tuple[float, float]] = field(default_factory=list)  # (time, interval)
    fetches: int = 0
    unchanged: int = 0


def settle_after(period: float, start: float) -> float:
    """When the interval must be in its band: the fast descent from ``start``
    (a geometric series: under twice its first term) plus 40 periods of probing."""
    return 2 * start + 40 * period


def simulate(period: float, phase: float, start: float, weeks: float) -> Revisits:
    """The schedule alone, visit by visit (the change is at every ``k * period + phase``)."""
    policy = RevisitPolicy(initial=start)
    seen = Revisits(period)
    history = first_visit(policy, T0)
    version = math.floor(-phase / period)
    while history.next_due < T0 + weeks * 7 * DAY:
        now = history.next_due
        current = math.floor((now - T0 - phase) / period)
        seen.fetches += 1
        seen.unchanged += current == version
        history = after_visit(policy, history, changed=current != version, now=now)
        version = current
        seen.intervals.append((now - T0, history.interval))
    return seen


def assert_settled(seen: Revisits, start: float) -> None:
    after = settle_after(seen.period, start)
    settled = [interval / seen.period for t, interval in seen.intervals if t >= after]
    assert settled, "the simulation is too short to judge"
    low, high = SETTLED
    assert low <= min(settled) and max(settled) <= high, (min(settled), max(settled))
    assert MEAN[0] <= sum(settled) / len(settled) <= MEAN[1], sum(settled) / len(settled)
    assert seen.unchanged <= WASTE * seen.fetches, (seen.unchanged, seen.fetches)


@settings(deadline=None, max_examples=60)
@given(
    period=st.floats(1.5 * HOUR, 80 * HOUR),
    phase=st.floats(0.0, 1.0),
    start=st.sampled_from([HOUR, DAY, 30 * DAY]),
)
def test_the_interval_settles_near_any_change_period(
    period: float, phase: float, start: float
) -> None:
    weeks = (settle_after(period, start) + 200 * period) / (7 * DAY)
    assert_settled(simulate(period, phase * period, start, weeks), start)


class ChangingPage:
    """A page whose body is rewritten every ``period`` seconds of the (mock)
    clock, the first time ``phase`` seconds in."""

    def __init__(self, period: float, phase: float) -> None:
        self.period = period
        self.phase = phase

    def body(self) -> bytes:
        version = math.floor((trio.current_time() - self.phase) / self.period)
        return f"<p>edition {version}</p>".encode()


async def revisit_when_due(page: ChangingPage, seen: Revisits, until: float) -> None:
    """Fetch the page, then sleep until it is due again, as ``--recrawl due`` run
    by a timer would; a visit is "changed" when the body's digest differs."""
    digest = hashlib.sha1(page.body()).digest()
    history = first_visit(POLICY, T0 + trio.current_time())
    while history.next_due - T0 < until:
        await trio.sleep_until(history.next_due - T0)
        assert is_due(history, T0 + trio.current_time())
        now_digest = hashlib.sha1(page.body()).digest()
        seen.fetches += 1
        seen.unchanged += now_digest == digest
        history = after_visit(
            POLICY, history, changed=now_digest != digest, now=T0 + trio.current_time()
        )
        digest = now_digest
        seen.intervals.append((trio.current_time(), history.interval))


@pytest.mark.parametrize("hours", [3, 7, 26])
def test_a_page_changing_every_few_hours_is_revisited_at_about_its_rhythm(hours: int) -> None:
    period, weeks = hours * HOUR, 8
    pages = [ChangingPage(period, 0.0), ChangingPage(period, 0.37 * period)]
    seen = [Revisits(period), Revisits(period)]

    async def main() -> None:
        with trio.fail_after(weeks * 7 * DAY + DAY):  # mock seconds: the clock jumps
            async with trio.open_nursery() as nursery:
                for page, record in zip(pages, seen, strict=True):
                    nursery.start_soon(revisit_when_due, page, record, weeks * 7 * DAY)
        assert trio.current_time() >= (weeks * 7 - 2) * DAY  # weeks went by, simulated

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    for record in seen:
        assert_settled(record, DAY)
        # about one fetch per period, plus the few of finding it (a day at first)
        assert record.fetches <= weeks * 7 * DAY / (MEAN[0] * period) + 10
