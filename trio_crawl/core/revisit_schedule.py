"""When a page is due again: an adaptive revisit interval per URL. Pure.

A recrawl that fetches every page every time wastes most of its requests on
pages that did not change, and one that waits too long serves stale copies.
Each URL therefore keeps a ``RevisitHistory``: its current revisit interval,
the time it is next due, and whether each of its last 8 visits found it
changed. ``--recrawl due`` asks ``is_due``; after every visit the crawl calls
``after_visit`` with what it found (changed or not), and stores the result.

Rules (``RevisitPolicy`` holds the numbers; defaults in brackets)
------------------------------------------------------------------
1. A page seen for the first time is due again after ``initial`` [1 day];
   that first visit counts as a change (its content is new to us).
2. **Unchanged** (a 304, or the same digest): the interval grows by ``grow``
   [x1.25], but only by what the visit observed: the base is the time since
   the previous visit when that is shorter than the interval (a full
   ``--recrawl`` run before the page was due says less about it). It never
   shrinks.
3. **Changed, right after an unchanged visit**: the interval holds. The
   page changed somewhere between "too early" and "now": the interval is
   about right, and shrinking here would undo what rule 2 just learned.
4. **Changed, the page was unchanged on some other of its last 8 visits**:
   the interval is near the page's rhythm; it shrinks gently, by ``settle``
   [x0.95], probing for the point where visits start finding it unchanged.
5. **Changed on every visit we remember** (the last 8, or all of them if
   fewer): the interval is too long, by how much nobody can tell; it
   shrinks fast, by ``shrink`` [x0.5].
6. The interval stays within [``minimum``, ``maximum``] [1 hour, 30 days],
   and the page is next due at the visit's time plus the interval.

Why these rules (the prior art, and where they part)
----------------------------------------------------
Nutch's AdaptiveFetchSchedule and StormCrawler's adaptive scheduler move the
interval by a fixed factor: up when unchanged, down when changed. With only
"changed or not" to go on, that rule does not settle at the page's rhythm:
a visit finds a change whenever one happened since the last visit, so for a
page changing every P hours it finds one at any interval above P *and* at
most intervals a little below it, and every such find pulls the interval
down. In our simulation (``benchmarks/bench_revisit.py``) a fixed x1.2 /
x0.8 settles at 0.45 to 0.71 of P on average, and up to 57% of the visits
find nothing new (Nutch itself warns that larger factors destabilise it).
Here a change right after an unchanged visit holds (rule 3), changes shrink
gently while the page was recently seen unchanged (rule 4), and fast only
when it never was (rule 5, so a page starting with a far too long interval
still comes down in a few visits). In the same simulation (a page changing
every P, P from 90 minutes to 80 hours, any phase, starting at 1 hour,
1 day or 30 days) the settled interval averages 0.84 P, stays between
0.70 P and 0.97 P, and at most 21% of the visits find the page unchanged.
Soon after a far too long first interval it can still overshoot to 1.15 P
(it grows only from below P, by ``grow``) or, after eight changes in a row,
halve once to 0.42 P; ``tests/test_revisit_schedule.py`` holds it to that.
The resolution is the factors': finer factors settle closer to P but take
longer to follow a page whose rhythm changes.
Nutch's SYNC_DELTA (moving the next visit by the page's Last-Modified) is
left out: Last-Modified is missing on many pages and wrong on some, and the
digest is what says "changed" here. An error is not a visit: the caller
leaves the history as it was.

The history fits in four JSON numbers (``to_json``/``from_json``), stored
beside each URL's previous visit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: How many visits the ``changes`` bitmask remembers.
REMEMBERED = 8
_MASK = (1 << REMEMBERED) - 1


@dataclass(frozen=True, slots=True)
class RevisitPolicy:
    """Bounds (seconds) and factors of the adaptive interval (rules above)."""

    #: seconds until a new page is due again
    initial: float = 86_400.0
    minimum: float = 3_600.0
    maximum: float = 30 * 86_400.0
    #: unchanged: the interval times this (rule 2)
    grow: float = 1.25
    #: changed, but unchanged on one of the remembered visits (rule 4)
    settle: float = 0.95
    #: changed on every remembered visit (rule 5)
    shrink: float = 0.5

    def __post_init__(self) -> None:
        numbers = (self.initial, self.minimum, self.maximum, self.grow, self.settle, self.shrink)
        if not all(math.isfinite(n) for n in numbers):
            raise ValueError("revisit policy values must be finite numbers")
        if not 0 < self.minimum <= self.initial <= self.maximum:
            raise ValueError("revisit policy needs 0 < minimum <= initial <= maximum")
        if self.grow < 1 or not 0 < self.shrink <= self.settle <= 1:
            raise ValueError("revisit policy needs grow >= 1 and 0 < shrink <= settle <= 1")

    def bound(self, interval: float) -> float:
        """``interval`` held within [minimum, maximum]."""
        return min(self.maximum, max(self.minimum, interval))


@dataclass(frozen=True, slots=True)
class RevisitHistory:
    """One URL's schedule: what ``after_visit`` gives and the store keeps."""

    #: current revisit interval, seconds
    interval: float
    #: epoch seconds
    next_due: float
    #: bitmask of the last 8 visits' outcomes, bit 0 = latest, 1 = changed
    changes: int
    visits: int

    def to_json(self) -> dict[str, float | int]:
        return {
            "interval": self.interval,
            "next_due": self.next_due,
            "changes": self.changes,
            "visits": self.visits,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RevisitHistory:
        """The history ``to_json`` gave; ``ValueError`` for anything else
        (a damaged or foreign store is said, not guessed at)."""
        get = data.get
        values = (get("interval"), get("next_due"), get("changes"), get("visits"))
        interval, next_due, changes, visits = values
        # What ``to_json`` writes (a recrawl reads one a page): the checks
        # below without the pattern's cost. Anything else: the pattern.
        if (
            type(interval) is float
            and type(next_due) is float
            and type(changes) is int
            and type(visits) is int
            and math.isfinite(next_due)
            and 0 < interval < math.inf
            and 0 <= changes <= _MASK
            and visits >= 1
        ):
            return cls(interval, next_due, changes, visits)
        match values:
            case (
                int() | float() as interval,
                int() | float() as next_due,
                int() as changes,
                int() as visits,
            ) if (
                not any(isinstance(v, bool) for v in values)
                and math.isfinite(next_due)
                and 0 < interval < math.inf
                and 0 <= changes <= _MASK
                and visits >= 1
            ):
                return cls(float(interval), float(next_due), changes, visits)
        raise ValueError(f"not a revisit history: {dict(data)!r}")


def first_visit(policy: RevisitPolicy, now: float) -> RevisitHistory:
    """The schedule of a page just fetched for the first time (rule 1)."""
    return RevisitHistory(
        interval=policy.initial, next_due=now + policy.initial, changes=1, visits=1
    )


def after_visit(
    policy: RevisitPolicy, history: RevisitHistory, *, changed: bool, now: float
) -> RevisitHistory:
    """The schedule after a visit at ``now`` that found the page ``changed`` or not."""
    visits = history.visits + 1
    changes = ((history.changes << 1) | changed) & _MASK
    interval = history.interval
    if not changed:
        observed = now - (history.next_due - history.interval)  # since the previous visit
        interval = max(interval, min(interval, observed) * policy.grow)
    else:
        remembered = (1 << min(visits, REMEMBERED)) - 1
        if not history.changes & 1:
            pass  # rule 3: right after an unchanged visit, hold
        elif changes & remembered != remembered:
            interval *= policy.settle
        else:
            interval *= policy.shrink
    interval = policy.bound(interval)
    return RevisitHistory(
        interval=interval, next_due=now + interval, changes=changes, visits=visits
    )


def is_due(history: RevisitHistory, now: float) -> bool:
    """Whether the page should be fetched at ``now``."""
    return now >= history.next_due
