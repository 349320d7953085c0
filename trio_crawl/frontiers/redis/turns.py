"""Turns: when a URL Redis leased may start, as a time this worker keeps.

Redis hands out a spaced host's URLs (``--rate``, Crawl-delay) ahead of
time, each with its *turn*: the host's next start time, the turn after it
one interval later (``functions.lua``: ``lease``, ``may_start``). The
worker holds the URL and starts it when its turn comes, instead of asking
Redis again once Redis has heard of the previous start: that round trip per
page held a host limited to ``--rate 250`` near 110 pages/s.

Why the rate stays exact across workers: a turn's wait is counted from the
end of the call that gave it (Redis reads its clock last), and this worker
counts it from when the answer arrived, which is later; so no request
starts before its turn, and turns are spaced by the interval. A request
may start late, though, and a later turn (another worker's) on time; a
rate's turn not taken within ``TURN_GRACE`` of its time is therefore given
back, unused (the URL goes back to Redis for a new turn). So the starts in
any window of T seconds have turns in a window of T + ``TURN_GRACE``: with
the interval 5% above 1/rate (``engine/schedule.py``'s ``RATE_SLACK``),
never more than ``rate`` starts in any second, which is rule 1 of
``engine/schedule.py``, and 25 ms of the 50 ms slack is left for the jitter
between a start and its arrival at the server.

A turn that is only a time to wait for (a Crawl-delay counts from the end
of the request before, one at a time) has no grace: nobody's turn comes
between, so a late start takes nothing from anyone.

Pure: times are the caller's (trio's running clock), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How late a rate's turn may still be taken (seconds); see the module docstring.
TURN_GRACE = 0.025


@dataclass(frozen=True, slots=True)
class Turn:
    """When a leased URL may start."""

    #: No start before this time (the worker's running clock).
    at: float
    #: A rate's turn: taken within ``TURN_GRACE`` of ``at``, or given back.
    strict: bool

    @classmethod
    def parse(cls, field: str, received: float) -> Turn | None:
        """The turn Redis wrote as ``field`` (``r`` or ``w`` and the
        microseconds to wait; ``''``: none, start at once), in an answer that
        arrived at ``received``."""
        if not field:
            return None
        kind, wait_us = field[0], int(field[1:])
        if kind not in "rw" or wait_us < 0:
            raise ValueError(f"not a turn: {field!r}")
        return cls(received + wait_us / 1_000_000, strict=kind == "r")

    def missed(self, now: float) -> bool:
        """Whether a start at ``now`` is too late for this turn."""
        return self.strict and now > self.at + TURN_GRACE


def not_before(turn: Turn | None, now: float) -> float | None:
    """When a URL with ``turn`` may start, if not yet at ``now`` (else None)."""
    if turn is None or now >= turn.at:
        return None
    return turn.at
