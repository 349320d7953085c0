"""What this worker holds and what it has yet to tell Redis.

A ``Lease`` is a URL Redis leased to this worker; its token (the lease's
attempt number in Redis) makes a move of a lease Redis took back a no-op
there. The ``Batch`` (the outbox) gathers moves (finishes with their links,
puts back, retries) until the next sync call carries them; batching is what
lets one Redis serve thousands of pages a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import trio

from ...core.frontier import Entry
from .turns import Turn

#: Longest time a finished page's move waits in the outbox for company.
BATCH_DELAY = 0.02


@dataclass(slots=True)
class Lease:
    """A URL Redis has leased to this worker."""

    digest: bytes
    token: int
    entry: Entry
    refetch: bool
    #: When it may start (its host is spaced: --rate, Crawl-delay), or None.
    turn: Turn | None = None
    started: bool = False
    #: Its move (finish, put back, defer) has been queued for Redis.
    moved: bool = False
    #: Admissions to send with the finish (7 fields each).
    children: list[object] = field(default_factory=list)
    #: This worker's join (``RedisFrontier.reregistered``) when it was taken:
    #: a lease of an earlier join was lost.
    join: int = 0


@dataclass(slots=True)
class Batch:
    ops: list[object] = field(default_factory=list)
    #: Leases whose move is in ``ops`` (forgotten once the call returns).
    leases: list[Lease] = field(default_factory=list)
    urgent: bool = False
    first_at: float = math.inf
    confirmed: trio.Event = field(default_factory=trio.Event)

    def add(self, op: list[object], now: float) -> None:
        if not self.ops:
            self.first_at = now
        self.ops += op


def put_back(failed: Batch, later: Batch) -> Batch:
    """A sync call failed: its moves go back in front of ``later`` (the
    outbox filled meanwhile); the outbox to use from now on.

    A call that fails as the crawl is cancelled (coredis's connection task
    is cancelled with it, so the shield of the call layer does not save it)
    may or may not have run in Redis. ``aclose`` sends the moves again: one
    Redis applied already is refused by its stale token, and one it never
    saw is not lost. Lost, a finish left its page leased, and ``bye`` queued
    it again: fetched twice after a graceful stop.
    """
    failed.ops += later.ops
    failed.leases += later.leases
    failed.urgent = failed.urgent or later.urgent
    failed.first_at = min(failed.first_at, later.first_at)
    failed.confirmed = later.confirmed
    return failed
