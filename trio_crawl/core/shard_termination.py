"""When is a crawl done whose frontier is split over shards? Pure.

One Redis runs one command at a time, so the one-Redis frontier reads
"nothing unfinished" in one atomic call. A Redis Cluster has no call that
reads every shard at once: a detector reads them one after another, and work
moves between shards meanwhile (a page on shard A links to a host on shard
B). A reading of B that says "idle", followed by a reading of A that says
"idle", proves nothing: A's worker may have sent a link to B between them.

This module is the protocol that makes the end exact anyway, written as
plain objects so that it can be checked over every interleaving
(``tests/test_shard_termination.py``) before a frontier stands on it. The
shard side lives in Lua on each shard (``frontiers/cluster/termination.lua``
keeps the same books); this is its model and the detector both use.

The protocol
------------
1. **Each shard keeps its own books.** A shard is *idle* when it has no
   queued URL and no lease. It keeps an *activity* counter that every
   transition that can make it busy bumps, inside the same atomic call: an
   admission of a new URL, a lease, a lease reclaimed from a dead worker.
2. **Work moves only under a lease.** A worker sends a page's links to their
   shards, and waits for every admission's reply, *before* it releases the
   page's lease on its own shard. So work in flight between shards is always
   covered by a live lease somewhere: a busy shard.
3. **A lease that expires is work again.** A killed worker's lease is
   reclaimed when it expires: its URL is queued again and the counter
   bumped (the shard becomes busy, visibly). A lease outlives whatever its
   worker had sent (the lease's time-to-live is far longer than a call).
4. **The detector reads each shard once per pass** (one call per shard, not
   atomic across shards), in two passes, one after the other. It declares the
   crawl done only when every shard was idle in both passes *and* every
   shard's counter is the same in both. This is the four-counter idea
   (Mattern, 1987) with a shard's activity in place of message counts.

Why that is exact: a shard idle at both of its readings with no bump
between them was idle all along (leaving idle takes an admission, which
bumps; a lease needs something queued). Every shard's interval between its
two readings contains the instant pass one ended, so at that instant every
shard was idle at once: nothing queued, no lease, hence (rule 2) nothing in
flight. And idle is stable: with no lease held, no worker can send work.
docs/termination.md has the argument step by step, and what a failover does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ShardReading:
    """What one call to one shard says: its verdict and its counter."""

    shard: int
    idle: bool
    activity: int


class Shard:
    """One shard's books, as its atomic calls keep them: queued URLs, the
    seen set, the leases (URL -> worker), and the activity counter."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.queued: list[str] = []
        self.seen: set[str] = set()
        self.leases: dict[str, str] = {}
        self.activity = 0

    @property
    def idle(self) -> bool:
        return not self.queued and not self.leases

    def admit(self, urls: Iterable[str]) -> int:
        """Queue the URLs never seen here; one bump if any was new (a seen
        URL changes nothing, so it cannot make the shard busy)."""
        new = [url for url in dict.fromkeys(urls) if url not in self.seen]
        self.seen.update(new)
        self.queued.extend(new)
        if new:
            self.activity += 1
        return len(new)

    def lease(self, worker: str) -> str | None:
        """Hand the oldest queued URL to ``worker``; None when none is queued."""
        if not self.queued:
            return None
        url = self.queued.pop(0)
        self.leases[url] = worker
        self.activity += 1
        return url

    def release(self, worker: str, url: str) -> bool:
        """``worker`` finished ``url``. False when the lease is no longer
        its own (expired and reclaimed): the page is someone else's now."""
        if self.leases.get(url) != worker:
            return False
        del self.leases[url]
        return True

    def reclaim(self, worker: str) -> int:
        """``worker`` is dead (its leases expired): queue its URLs again,
        first in line, with one bump."""
        urls = [url for url, owner in self.leases.items() if owner == worker]
        for url in urls:
            del self.leases[url]
        self.queued[:0] = urls
        if urls:
            self.activity += 1
        return len(urls)

    def read(self) -> ShardReading:
        return ShardReading(self.index, self.idle, self.activity)


def all_idle(shards: Sequence[Shard]) -> bool:
    """The global condition the detector must never claim falsely: no URL
    queued and no lease held on any shard. (With rule 2, a link in flight
    implies a lease, so this also says nothing is in flight.)"""
    return all(shard.idle for shard in shards)


class Detector:
    """Reads shards round-robin, in passes, and says when the crawl is done.

    Feed it one reading at a time, of the shard ``next_shard`` names, taken
    after the previous reading was answered. ``observe`` returns True once
    the pass just completed and the pass before it were both all idle with
    every counter unchanged; that stays True. Once every shard is idle for
    good, it says done within two passes begun after that moment.
    """

    def __init__(self, shards: int) -> None:
        if shards < 1:
            raise ValueError("a crawl has at least one shard")
        self.shards = shards
        self.done = False
        self.passes = 0
        self._current: list[ShardReading] = []
        self._previous: list[ShardReading] | None = None

    @property
    def last_pass(self) -> Sequence[ShardReading]:
        """The readings of the last complete pass (after "done": the
        counters each shard is sealed with)."""
        return self._previous or []

    @property
    def next_shard(self) -> int:
        return len(self._current)

    def observe(self, reading: ShardReading) -> bool:
        if reading.shard != self.next_shard:
            raise ValueError(f"expected a reading of shard {self.next_shard}, got {reading.shard}")
        if self.done:
            return True
        self._current.append(reading)
        if len(self._current) == self.shards:
            finished, self._current = self._current, []
            self.passes += 1
            self.done = self._previous is not None and quiet_twice(self._previous, finished)
            self._previous = finished
        return self.done


def quiet_twice(first: Sequence[ShardReading], second: Sequence[ShardReading]) -> bool:
    """The detector's rule over two complete passes, the second begun after
    the first ended: every reading idle, every counter unchanged."""
    return (
        len(first) == len(second)
        and all(r.idle for r in (*first, *second))
        and all(a.activity == b.activity for a, b in zip(first, second, strict=True))
    )


class FailoverGuard:
    """What keeps a failover from ending a crawl wrongly.

    Redis replicates asynchronously: a primary that fails over (or restarts)
    may take acknowledged admissions with it, and its shard then reads idle
    with an old counter, which later admissions may bring back to the very
    number seen before. Writes are lost only when the process that took them
    goes, so the guard compares each shard's serving node (its id and its
    run id, which changes at every restart) with what it was when the crawl
    began. The detector's driver asks ``check`` after the readings of the
    pass that said done, and before it believes it: any change means one
    line and a stop (to resume), never "done".
    """

    def __init__(self, nodes: Mapping[int, str]) -> None:
        self.nodes = dict(nodes)

    def check(self, nodes: Mapping[int, str]) -> str | None:
        """None when every shard is still served by the node (and process)
        it began with; else the line to stop with."""
        for shard in sorted(self.nodes):
            now = nodes.get(shard)
            if now != self.nodes[shard]:
                return (
                    f"shard {shard}'s primary changed during the crawl "
                    f"({self.nodes[shard]} -> {now}): acknowledged writes may be lost; "
                    "stopping, run the same command to resume"
                )
        return None
