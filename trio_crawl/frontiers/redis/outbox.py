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

from ...core.frontier import Entry, EntryState
from . import wire
from .payloads import decode_payload
from .turns import Turn

#: Longest time a finished page's move waits in the outbox for company.
BATCH_DELAY = 0.02
#: A batch this heavy goes at once (a full admission weighs 1, a known
#: link 1/8, a finish 4 more): Redis runs one call at a time, and every
#: other worker waits behind it, so a call must hold it for a few
#: milliseconds at most. A new URL's admission costs Redis 10-20 us of CPU;
#: at 600 a call took up to 11 ms, at 200 at most 4 ms, for some 5 us a
#: page more (``benchmarks/redis_replay.py --clients 1 --call-cpu``).
CALL_WEIGHT = 200


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
    #: Digests of links Redis accepted before (``sent_links.py``).
    known: list[bytes] = field(default_factory=list)
    #: Links sent in full at ``link_depth``, to confirm once Redis accepts them.
    fresh: list[str] = field(default_factory=list)
    #: The depth the page's links were found at (its depth + 1, as it knew).
    link_depth: int = 0
    #: This worker's join (``RedisFrontier.reregistered``) when it was taken:
    #: a lease of an earlier join was lost.
    join: int = 0


@dataclass(slots=True)
class Batch:
    ops: list[object] = field(default_factory=list)
    #: Leases whose move is in ``ops`` (forgotten once the call returns).
    leases: list[Lease] = field(default_factory=list)
    #: Links sent in full, their depth and their lease's join
    #: (``SentLinks.pend``): known once the call succeeds.
    sent: list[tuple[list[str], int, int]] = field(default_factory=list)
    #: Admission work the batch asks of Redis (see ``CALL_WEIGHT``).
    weight: int = 0
    #: (end of an op in ``ops``, the batch's weight up to it), for each ``add``.
    cuts: list[tuple[int, int]] = field(default_factory=list)
    urgent: bool = False
    first_at: float = math.inf
    confirmed: trio.Event = field(default_factory=trio.Event)

    def full(self, moves: int) -> bool:
        """Whether the batch should go now: ``moves`` moves, or its weight."""
        return len(self.leases) >= moves or self.weight >= CALL_WEIGHT

    def add(self, op: list[object], now: float, weight: int = 1) -> None:
        if not self.ops:
            self.first_at = now
        self.ops += op
        self.weight += weight
        self.cuts.append((len(self.ops), self.weight))

    def calls(self) -> list[list[object]]:
        """The ops cut into calls of at most ``CALL_WEIGHT`` each (an op is
        never cut; ops added without ``add`` go with the next one)."""
        out: list[list[object]] = []
        start, base, last_end, last_weight = 0, 0, 0, 0
        for end, weight in self.cuts:
            if weight - base > CALL_WEIGHT and last_end > start:
                out.append(self.ops[start:last_end])
                start, base = last_end, last_weight
            last_end, last_weight = end, weight
        out.append(self.ops[start:])
        return out


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
    shift, base = len(failed.ops), failed.weight
    failed.cuts += [(end + shift, weight + base) for end, weight in later.cuts]
    failed.ops += later.ops
    failed.leases += later.leases
    failed.sent += later.sent
    failed.weight += later.weight
    failed.urgent = failed.urgent or later.urgent
    failed.first_at = min(failed.first_at, later.first_at)
    failed.confirmed = later.confirmed
    return failed


def entry_of(taken: wire.Taken, deferred: Entry | None) -> Entry:
    """The entry of a URL Redis leased to this worker: ``deferred``, the one
    this worker retried, if it is the same URL, or a new one."""
    entry = deferred
    if entry is None or entry.url != taken.url:
        payload = decode_payload(taken.url, taken.payload)
        entry = Entry(taken.url, taken.depth, taken.referrer, taken.chain, payload)
    else:  # a retry: a shorter path may have lowered it meanwhile
        entry.depth, entry.referrer = taken.depth, taken.referrer
    entry.attempts = taken.tries
    entry.state = EntryState.FETCHING if entry.attempts else EntryState.QUEUED
    return entry
