"""How near a page's rhythm the revisit schedule settles, against a fixed factor.

    python benchmarks/bench_revisit.py [--up 1.2] [--down 0.8]

Simulated, no network: a page changes every P (P from 90 minutes to 80
hours, 8 phases, a first interval of 1 hour, 1 day or 30 days) and is
revisited whenever due, for 200 periods after both rules had time to settle
(six times the first interval plus 40 periods; tests/test_revisit_schedule.py
gives the shipped rule a third of that). Rows: ``core/revisit_schedule.py``
as shipped, and the fixed-factor rule of Nutch's and StormCrawler's adaptive
schedules (interval times ``--up`` when unchanged, ``--down`` when changed,
same bounds). Figures: the settled interval as a fraction of P (the lowest
and highest per-case mean, the lowest and highest value) and the largest
share of visits that found the page unchanged (wasted fetches). Then the
same for a page changing at random times (Poisson, mean P, 10 seeds).
"""

from __future__ import annotations

import argparse
import bisect
import math
import random
from collections.abc import Callable, Iterator

from trio_crawl.core.revisit_schedule import (
    RevisitHistory,
    RevisitPolicy,
    after_visit,
    first_visit,
)

HOUR, DAY = 3_600.0, 86_400.0
PERIODS = [h * HOUR for h in (1.5, 2, 3, 4.5, 6, 8, 11, 15, 20, 26, 33, 41, 50, 63, 80)]
PHASES = [0.0, 0.1, 0.25, 0.333, 0.5, 0.61, 0.77, 0.93]
STARTS = [HOUR, DAY, 30 * DAY]

Step = Callable[[RevisitPolicy, RevisitHistory, bool, float], RevisitHistory]


def ours(
    policy: RevisitPolicy, history: RevisitHistory, changed: bool, now: float
) -> RevisitHistory:
    return after_visit(policy, history, changed=changed, now=now)


def fixed(up: float, down: float) -> Step:
    def step(
        policy: RevisitPolicy, history: RevisitHistory, changed: bool, now: float
    ) -> RevisitHistory:
        interval = policy.bound(history.interval * (down if changed else up))
        return RevisitHistory(interval, now + interval, 0, history.visits + 1)

    return step


def visits(
    step: Step, start: float, end: float, changed_between: Callable[[float, float], bool]
) -> Iterator[tuple[float, float, bool]]:
    """(time, interval after the visit, changed) for each visit until ``end``."""
    policy = RevisitPolicy(initial=start)
    history = first_visit(policy, 0.0)
    last = 0.0
    while history.next_due < end:
        now = history.next_due
        changed = changed_between(last, now)
        history = step(policy, history, changed, now)
        last = now
        yield now, history.interval, changed


def periodic(step: Step) -> tuple[float, float, float, float, float]:
    means, low, high, waste = [], math.inf, 0.0, 0.0
    for period in PERIODS:
        for phase in PHASES:
            for start in STARTS:
                settled_at = 6 * start + 40 * period

                def changed(a: float, b: float, p: float = period, f: float = phase) -> bool:
                    return math.floor((b - f * p) / p) > math.floor((a - f * p) / p)

                seen = list(visits(step, start, settled_at + 200 * period, changed))
                tail = [interval / period for t, interval, _ in seen if t >= settled_at]
                means.append(sum(tail) / len(tail))
                low, high = min(low, *tail), max(high, *tail)
                waste = max(waste, sum(not c for *_, c in seen) / len(seen))
    return min(means), max(means), low, high, waste


def poisson(step: Step) -> tuple[float, float, float]:
    means, waste = [], 0.0
    for period in (3 * HOUR, 6 * HOUR, 24 * HOUR, 72 * HOUR):
        for seed in range(10):
            rng, end = random.Random(seed), 400 * period + 60 * DAY
            times, at = [], 0.0
            while at < end + 40 * DAY:
                at += rng.expovariate(1 / period)
                times.append(at)

            def changed(a: float, b: float, times: list[float] = times) -> bool:
                return bisect.bisect(times, b) > bisect.bisect(times, a)

            seen = list(visits(step, DAY, end, changed))
            tail = [interval / period for _, interval, _ in seen[len(seen) // 2 :]]
            means.append(sum(tail) / len(tail))
            waste = max(waste, sum(not c for *_, c in seen) / len(seen))
    return min(means), max(means), waste


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--up", type=float, default=1.2, help="fixed rule: unchanged factor")
    parser.add_argument("--down", type=float, default=0.8, help="fixed rule: changed factor")
    args = parser.parse_args()
    rules = [
        ("revisit_schedule", ours),
        (f"fixed x{args.up:g}/x{args.down:g}", fixed(args.up, args.down)),
    ]
    print("a page changing every P: the settled interval / P, and the share of visits wasted")
    head = f"{'rule':<20} {'mean (lowest..highest)':>24} {'min':>6} {'max':>6}"
    print(f"{head} {'wasted, at most':>16}")
    for name, step in rules:
        lo_mean, hi_mean, low, high, waste = periodic(step)
        print(
            f"{name:<20} {f'{lo_mean:.2f}..{hi_mean:.2f}':>24} {low:>6.2f} {high:>6.2f} "
            f"{waste:>15.0%}"
        )
    print("a page changing at random (Poisson, mean P): the interval / P in the second half")
    for name, step in rules:
        lo_mean, hi_mean, waste = poisson(step)
        print(f"{name:<20} {f'{lo_mean:.2f}..{hi_mean:.2f}':>24} {'':>6} {'':>6} {waste:>15.0%}")


if __name__ == "__main__":
    main()
