"""The Redis frontier (``--redis``): one crawl, many processes and machines.

Every worker process runs an ordinary crawl whose frontier is a
``RedisFrontier``. The crawl itself (seen set, queues, leases, counters)
lives in Redis, and every move of a URL between places is one call of a
server-side function (``lua.py``), which Redis runs atomically. So the
invariant of docs/termination.md holds across processes: every unfinished
URL is queued in Redis, leased to exactly one worker, or deferred; the
crawl-wide ``unfinished`` counter moves in the same calls, and the crawl is
done exactly when it reaches 0.

This process's side
-------------------
* ``serve()`` runs one *sync* call at a time: it carries this worker's
  batch of moves (``outbox.py``: pages finished with their new links, pages
  put back, retries deferred, Crawl-delays) and takes up to ``window``
  URLs, which are published to the local pool in the same synchronous step
  as they are counted in.
* ``waiting`` (this room's count) is at least 1 until Redis says the whole
  crawl is done, plus the moves sent but not yet confirmed; so the local
  ``WorkPool`` cannot end while any URL of the crawl is unfinished anywhere.
* When a sync call finds nothing to take, the worker is registered *idle*
  in the same call; a wake-up on the crawl's stream (``liveness.py``) says
  when to try again, and "done" ends every worker at the same moment.
* Leases: a heartbeat renews this worker's lease. A worker that stops
  renewing (killed, frozen) is taken for dead ``lease`` seconds later, and
  every URL it held is queued again; their records say ``"refetched":
  true``. A page's record is written before its finish is sent: delivery
  is at least once, and nothing is lost. A worker never *starts* a page
  whose lease may have run out (it has not heard a renewal within
  ``lease``, or it was taken for dead): such a page is put back, so every
  fetch happens under a lease, and counts for the host's rate and
  concurrency as every worker sees them.
* Integrity: every function refuses a crawl whose keys are gone (deleted,
  FLUSHALL), so no worker takes an empty crawl for a finished one; a server
  that may evict keys is refused; an error reply (OOM) stops the worker
  (``RedisRefused``); a worker frozen past its lease joins again and says so.

Depth
-----
No URL is held back for the sake of depth: Redis hands out the shallowest
queued URLs first, but never waits for a slow shallow page. A URL's depth
is the shortest path known when it is handed out; when a shorter path is
found later, Redis lowers it and passes the decrease on through the links
it keeps for finished pages (until they are settled, as in
``core/frontier.py`` rule 7). Every ``DepthCorrection`` (``attach``'s
``correct``) of a page comes from the worker that wrote its record: a page
still being fetched gets it right after its record, with its finish; a page
already recorded gets it at that worker's next sync, whichever worker's call
found the shorter path (Redis keeps it for that worker meanwhile, counted as
unfinished). So a page's corrections reach the consumer in the order Redis
made them, each naming the depth the one before it set: two workers' replies
could come back in either order. Links ``max_depth`` cut off are
kept as well, and admitted if a shorter path brings them within reach: so
exactly the pages within ``max_depth`` links are fetched, each once.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from ...core.config import CrawlConfig
from ...core.frontier import (
    MAX_REDIRECT_HOPS,
    DepthCorrection,
    Entry,
    EntryState,
    FrontierStatistics,
    RedirectOutcome,
)
from ...core.models import FetchResult
from ...errors import RedisLost
from ..base import DEFAULT_LEASE, Correct, Publish
from ..crawl_identity import SharedIdentity
from . import wire
from .browser_turns import wait_turn
from .budgets import redirect_target
from .calls import Calls
from .client import keys_prefix, redact_url
from .liveness import Signals, heartbeat, listen
from .outbox import BATCH_DELAY, Batch, Lease, entry_of, put_back
from .page_links import add_links, finish_ops
from .payloads import encode_payload
from .registration import hello_args, mismatch, rejoined
from .robots import fetch_robots_once
from .sent_links import SentLinks
from .turns import Turn, not_before

if TYPE_CHECKING:
    from .client import Client

#: At most this many retries are remembered here (to reuse their entries).
DEFERRED_CACHE = 200_000


def _unattached(entry: Entry) -> None:
    raise RuntimeError("frontier used before attach()")


def _uncorrected(correction: DepthCorrection) -> None:
    return None


class RedisFrontier:
    """A ``FrontierBackend`` shared through Redis; see the module docstring.

    Make one with ``open_redis_frontier`` (``opening.py``), which connects,
    creates or joins the crawl and registers this worker (``hello``, with
    ``registration.py``).
    """

    def __init__(
        self,
        client: Client,
        crawl_id: str,
        config: CrawlConfig,
        *,
        name: str,
        window: int | None = None,
        lease: float = DEFAULT_LEASE,
        url: str = "redis",
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.crawl_id = crawl_id
        self._calls = Calls(client, keys_prefix(crawl_id), crawl_id, redact_url(url), lease)
        self._config = config
        self._scope = config.scope()
        self._max_depth = config.budgets.max_depth
        self._name = name
        self._notice = notice or logging.getLogger(__name__).warning
        self.window = window or max(128, 8 * config.initial_workers)
        self._low_water = max(1, self.window // 2)
        self._batch_max = self.window
        self.lease = lease
        self._publish: Publish = _unattached
        self._check_idle: Callable[[], None] = lambda: None
        self._queued: Callable[[], int] = lambda: 0
        self._correct: Correct = _uncorrected
        # this worker
        self.owner = ""
        self.created = False
        #: A worker of this name had joined this crawl before (an earlier run).
        self.known_name = False
        self.stored_settings: dict[str, Any] = {}
        #: Until when this worker's lease surely holds (running time): the
        #: send time of the last renewal Redis accepted, plus ``lease``.
        self._alive_until = math.inf
        # what this process holds
        self._leases: dict[Entry, Lease] = {}
        self._deferred: dict[bytes, Entry] = {}
        self._pending = 0  # leases whose move is in the outbox or on the wire
        #: A sync call is on the wire: its reply may carry corrections to write.
        self._syncing = False
        self._outbox = Batch()
        # what Redis said last
        self._signals = Signals()
        self._remote_unfinished = 1
        self._remote = wire.NO_COUNTERS
        self._idle = False
        self._due_at = math.inf
        self._stopping = False
        self._closed = False
        self.refused = 0
        #: New URLs the host budgets refused in this worker's calls (``budgets.py``).
        self._over_budget = 0
        self.reregistered = 0
        #: Pages not started because this worker's lease may have run out,
        #: or their rate's turn had passed (``turns.py``).
        self.dropped_unleased = self.missed_turns = 0
        #: Links Redis accepted from this worker, and at what depth.
        budgets = (config.budgets.max_pages_per_host, config.budgets.max_hosts)
        self._sent = SentLinks(pending=budgets == (None, None))

    @property
    def calls(self) -> int:
        """Calls made to Redis so far."""
        return self._calls.count

    @property
    def _done(self) -> bool:
        return self._signals.done

    @property
    def _lost(self) -> BaseException | None:
        return self._calls.lost

    async def hello(self, *, again: bool = False) -> None:
        """Create the crawl (admitting the start URLs) or join it; register.
        ``again``: this worker was taken for dead and joins once more (a
        crawl whose keys are gone is then ``CrawlGone``, never re-created)."""
        identity = SharedIdentity.of(self._config)
        args = hello_args(self._config, identity, self._name, self.lease, again=again)
        sent_at = trio.current_time()
        raw = await self._calls.fcall("hello", args)
        reply = wire.HelloReply.parse(raw)
        self._calls.joined = True
        self._alive_until = sent_at + self.lease
        self.created = reply.created
        self.stored_settings = json.loads(reply.settings_json)
        self.owner = reply.owner
        if not again:  # the listener goes on from where it is
            self._signals.last_id = reply.last_id
            self.known_name = reply.known
        self._counters(reply.counters)
        if not self.created:
            differing = identity.differing(self.stored_settings)
            if differing:
                await self._calls.fcall("bye", [self.owner])
                raise mismatch(self.crawl_id, differing)

    def _counters(self, counts: wire.Counters) -> None:
        self._remote = counts
        self._remote_unfinished = counts.unfinished
        if counts.done:
            self._signals.done = True

    def _renewed(self, sent_at: float) -> None:
        self._alive_until = max(self._alive_until, sent_at + self.lease)

    # -- the face --------------------------------------------------------------

    def attach(
        self,
        publish: Publish,
        check_idle: Callable[[], None],
        queued: Callable[[], int],
        correct: Correct,
    ) -> None:
        self._publish = publish
        self._check_idle = check_idle
        self._queued = queued
        self._correct = correct

    async def admit_start_urls(self) -> None:
        # hello() admitted them when it created the crawl; a joining worker adds nothing.
        await trio.lowlevel.checkpoint()

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._calls.watch)
            nursery.start_soon(listen, self._calls, self._signals, self._check_idle)
            nursery.start_soon(self._heartbeat)
            await self._sync_loop()

    def want_more(self, queued: int) -> None:
        if queued < self._low_water:
            self._signals.kick.set()

    async def admit_seeds(self, urls: Sequence[str], referrer: str) -> None:
        ops: list[object] = []
        for url in urls:
            if self._scope.allows(url):
                ops += wire.admission(url, 0, referrer)
        if not ops:
            return
        batch = self._outbox
        batch.ops += wire.admit_op(ops)
        batch.urgent = True
        self._signals.kick.set()
        await batch.confirmed.wait()
        if self._lost is not None:
            raise self._lost

    def _within_reach(self, depth: int) -> bool:
        """Whether a link found at ``depth`` goes to Redis: within
        ``max_depth``, or one beyond it (kept there, and admitted if a
        shorter path to its page turns up)."""
        return self._max_depth is None or depth <= self._max_depth + 1

    def admit_request(self, parent: Entry, url: str, payload: object) -> bool:
        if not self._scope.allows(url):
            return False
        depth = parent.depth + 1
        if self._within_reach(depth):
            lease = self._leases[parent]
            lease.children += wire.admission(url, depth, parent.url, "", encode_payload(payload))
        return True

    async def admit_redirect(self, entry: Entry, target: str) -> RedirectOutcome:
        chain = (*entry.chain, entry.url)
        if target in chain:
            return RedirectOutcome.LOOP
        if len(chain) > MAX_REDIRECT_HOPS:
            return RedirectOutcome.TOO_MANY
        if not self._scope.judge_redirect(chain[0])(target):
            return RedirectOutcome.OUT_OF_SCOPE
        # Sent with this page's finish (which counts a refusal); whether the
        # target was known makes no difference to the record.
        lease = self._leases[entry]
        lease.children += wire.admission(
            target, entry.depth, entry.url, "\n".join(chain), encode_payload(entry.payload)
        )
        return await redirect_target(self._calls.fcall, self._sent, target, lease.join)

    def start(self, entry: Entry) -> bool:
        """The page budget was spent when Redis leased the URL (a global
        count). False (the page goes back to Redis) when this worker's lease
        may have run out: Redis may have handed the page to another worker,
        and a fetch outside a lease escapes the host's rate and concurrency."""
        lease, now = self._leases[entry], trio.current_time()
        if lease.join != self.reregistered or now >= self._alive_until:
            self.dropped_unleased += 1
            self.abandon(entry)
            return False
        if lease.turn is not None and lease.turn.missed(now):  # later turns were given out
            self.missed_turns += 1
            self.abandon(entry, missed_turn=True)
            return False
        lease.started = True
        entry.attempts += 1
        entry.state = EntryState.FETCHING
        return True

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        lease = self._leases[entry]
        depth = entry.depth + 1
        if links and self._within_reach(depth):
            add_links(
                lease, links, depth, entry.url, self._scope.allows, self._sent, self._max_depth
            )
        # No checkpoint: nothing is sent until ``recorded`` (a checkpoint per
        # page costs a trip through the scheduler).

    def recorded(self, entry: Entry) -> None:
        # The record is written: now Redis may forget the URL (at least once).
        lease = self._leases[entry]
        entry.state = EntryState.DONE
        if lease.fresh:
            self._outbox.sent.append(self._sent.pend(lease.fresh, lease.link_depth, lease.join))
        *parts, (op, weight) = finish_ops(lease)
        for part, part_weight in parts:  # links a call's worth at a time
            self._outbox.add(part, trio.current_time(), part_weight)
        self._send(lease, op, weight)
        lease.children, lease.known, lease.fresh = [], [], []

    def abandon(self, entry: Entry, *, missed_turn: bool = False) -> None:
        lease = self._leases.get(entry)
        if lease is None or lease.moved:
            return
        entry.state = EntryState.DROPPED
        self._send(lease, wire.release_op(lease.digest, lease.token, lease.started, missed_turn))

    def defer(self, entry: Entry, delay: float) -> None:
        """Retry ``entry`` after ``delay`` s: it goes back to Redis, so its
        next request obeys the host's rate as every worker sees it."""
        lease = self._leases[entry]
        entry.state = EntryState.QUEUED
        if len(self._deferred) > DEFERRED_CACHE:
            self._deferred.clear()
        self._deferred[lease.digest] = entry  # the same object if it comes back here
        self._send(lease, wire.defer_op(lease.digest, lease.token, delay, entry.attempts))

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        """robots.txt of ``host`` is read: its Crawl-delay (if any) applies to
        every worker, and the host may have more than one request in flight."""
        self._outbox.ops += wire.crawl_delay_op(host, delay)
        self._outbox.urgent = True
        self._signals.kick.set()

    def not_before(self, entry: Entry) -> float | None:  # its host's turn (turns.py)
        lease = self._leases.get(entry)
        return None if lease is None else not_before(lease.turn, trio.current_time())

    async def wait_turn(self, host: str) -> bool:
        return await wait_turn(self._calls, host, lambda: self.waiting == 0 or self._done)

    def stop(self) -> None:
        self._stopping = True
        self._signals.kick.set()

    async def fetch_robots_once(
        self, url: str, fetch: Callable[[], Awaitable[FetchResult]]
    ) -> FetchResult:
        """robots.txt once per crawl (``robots.py``)."""
        return await fetch_robots_once(
            self._calls, self.owner, lambda: self._signals.robots_changed, url, fetch
        )

    def was_refetched(self, entry: Entry) -> bool:
        return self._leases[entry].refetch

    @property
    def waiting(self) -> int:
        """Moves not yet confirmed, plus at least 1 while Redis has not said
        that the whole crawl is done: URLs queued there or held by other
        workers are unfinished work this worker must not end under."""
        if self._stopping or self._lost is not None or self._closed:
            return 0
        if self._done:
            # The call that made the crawl done may still be on the wire (its
            # "done" can come first, on the listener's connection): its reply
            # may carry corrections this worker must write.
            return self._pending + int(self._syncing)
        elsewhere = self._remote_unfinished - len(self._leases)
        return self._pending + max(1, elsewhere)

    @property
    def unfinished(self) -> int:
        if self._done or self._stopping or self._lost is not None:
            return len(self._leases)
        return len(self._leases) + max(1, self._remote_unfinished - len(self._leases))

    def over_host_budget(self) -> int:
        """Host budgets are counted in Redis (``budgets.py``, ``SharedHostBudgets``)."""
        return self._over_budget

    @property
    def budget_spent(self) -> bool:
        # Counted in Redis when a URL is leased: what this worker holds is
        # within the budget, and nothing beyond it is ever leased.
        return False

    @property
    def done(self) -> bool:
        """Whether Redis has said that the whole crawl is done."""
        return self._done

    @property
    def resumed(self) -> bool:
        """This worker joined a crawl already in Redis: as with a resumed
        state file, the crawl's outputs (``warc=``) are appended to."""
        return not self.created

    def statistics(self) -> FrontierStatistics:
        fetching = sum(1 for lease in self._leases.values() if lease.started)
        mine = {"refused": self._over_budget, "missed_turns": self.missed_turns}
        return self._remote.statistics(fetching=fetching, unfinished=self.unfinished, **mine)

    async def aclose(self) -> None:
        """Send what is pending, put back what this worker still holds, and
        leave the crawl. Bounded, and shielded from cancellation."""
        if self._closed:
            return
        self._closed = True
        if self._lost is not None:
            return
        with trio.move_on_after(10) as cleanup:
            cleanup.shield = True
            for entry, lease in list(self._leases.items()):
                if not lease.moved:  # in the channel, or cut off mid-fetch
                    entry.state = EntryState.DROPPED
                    self._send(lease, wire.release_op(lease.digest, lease.token, lease.started))
            try:
                if self._outbox.ops:
                    await self._round(want=0)
                await self._calls.fcall("bye", [self.owner])
            except RedisLost:
                pass

    # -- internals -------------------------------------------------------------

    def _send(self, lease: Lease, op: list[object], weight: int = 1) -> None:
        lease.moved = True
        batch = self._outbox
        batch.add(op, trio.current_time(), weight)
        batch.leases.append(lease)
        self._pending += 1
        if batch.full(self._batch_max) or self._queued() < self._low_water:
            self._signals.kick.set()

    def _want(self) -> int:
        if self._done or self._stopping or self._closed:
            return 0
        queued = self._queued()
        return self.window - queued if queued < self._low_water else 0

    def _round_needed(self, now: float) -> bool:
        batch = self._outbox
        want = self._want()
        if batch.ops and (
            batch.urgent
            or want
            or self._stopping
            or self._done
            or batch.full(self._batch_max)
            or now >= batch.first_at + BATCH_DELAY
        ):
            return True
        return bool(want) and (not self._idle or self._signals.remote_kick or now >= self._due_at)

    def _next_timer(self) -> float:
        at = math.inf
        if self._outbox.ops:
            at = self._outbox.first_at + BATCH_DELAY
        if self._idle and self._want():
            at = min(at, self._due_at)
        return at

    async def _sync_loop(self) -> None:
        signals = self._signals
        while True:
            signals.kick = trio.Event()
            if signals.rejoin:  # cleared once joined: no renewal under the old name
                await self._reregister()
                signals.rejoin = False
                continue
            if self._round_needed(trio.current_time()):
                await self._round(self._want())
                continue
            with trio.move_on_at(self._next_timer()):
                await signals.kick.wait()

    async def _round(self, want: int) -> None:
        """One sync call: this worker's moves, then a take of ``want`` URLs."""
        self._syncing = True
        try:
            await self._sync(want)
        finally:
            self._syncing = False
        self._check_idle()

    async def _sync(self, want: int) -> None:
        batch, self._outbox = self._outbox, Batch()
        confirmed = batch.confirmed
        self._signals.remote_kick = False
        *first, last = batch.calls()
        refused = over_budget = 0
        try:
            for ops in first:  # a heavy batch: a call's worth of moves at a time
                early = wire.SyncReply.parse(
                    await self._calls.fcall("sync", wire.sync_args(self.owner, 0, 0, ops))
                )
                refused += early.refused
                over_budget += early.over_budget
                self._counters(early.counters)
                for correction in early.corrections:
                    self._correct(correction)
            floor = min(want, self._config.initial_workers)
            raw = await self._calls.fcall("sync", wire.sync_args(self.owner, want, floor, last))
        except BaseException:
            self._outbox = put_back(batch, self._outbox)
            raise
        finally:
            confirmed.set()
        reply = wire.SyncReply.parse(raw)
        # From here to the end: synchronous, so what the reply says is applied
        # in one step (rule 2 of docs/termination.md).
        for lease in batch.leases:
            self._leases.pop(lease.entry, None)
            self._pending -= 1
        self._counters(reply.counters)
        refused += reply.refused
        over_budget += reply.over_budget
        self._over_budget += over_budget
        # A refused finish admitted nothing.
        self._sent.settle(batch.sent, accepted=not refused and not over_budget)
        # Moves of leases Redis had taken back (the retaker sends their links).
        self.refused += refused
        # Each after the record it corrects, and after the corrections made
        # before it: Redis gives a record's corrections only to the worker
        # that wrote it, in order (this call's finishes came after their records).
        for correction in reply.corrections:
            self._correct(correction)
        for taken in reply.taken:
            self._take(taken)
        # Registered as idle in Redis: a wake-up (or ``due``) will come.
        self._idle = reply.idle
        now = trio.current_time()
        self._due_at = now + reply.due / 1000 if reply.due >= 0 else math.inf
        if not reply.alive:
            self._signals.rejoin = True

    def _take(self, taken: wire.Taken) -> None:
        entry = entry_of(taken, self._deferred.pop(taken.digest, None))
        self._sent.confirm((taken.url,), taken.depth)  # Redis has it, at most that deep
        turn = Turn.parse(taken.turn, trio.current_time())
        self._leases[entry] = Lease(
            taken.digest, taken.token, entry, taken.refetch, turn, join=self.reregistered
        )
        self._publish(entry)

    async def _heartbeat(self) -> None:
        await heartbeat(
            self._calls,
            self._signals,
            lease=self.lease,
            owner=lambda: self.owner,
            joins=lambda: self.reregistered,
            counters=self._counters,
            renewed=self._renewed,
            check_idle=self._check_idle,
        )

    async def _reregister(self) -> None:
        """Redis took this worker for dead (it missed its lease): join again.
        What it still holds was queued again; its moves will be refused, and
        what waits in its channel is not started (``start``)."""
        self.reregistered += 1
        before = self.owner
        await self.hello(again=True)
        self._notice(rejoined(before, self.lease, self.owner))
