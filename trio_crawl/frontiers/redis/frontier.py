"""The Redis frontier (``--redis``): one crawl, many processes and machines.

Every worker process runs an ordinary ``Crawler`` whose frontier is a
``RedisFrontier``. The crawl itself (seen set, queues, leases, counters)
lives in Redis, and every move of a URL between places is one call of a
server-side function (``redis_lua.py``), which Redis runs atomically. So the
invariant of docs/termination.md holds across processes: every unfinished
URL is queued in Redis, leased to exactly one worker, or deferred; the
crawl-wide ``unfinished`` counter moves in the same calls, and the crawl is
done exactly when it reaches 0.

This process's side
-------------------
* ``serve()`` runs one *sync* call at a time: it carries this worker's
  batch of moves (pages finished with their new links, pages put back,
  retries deferred, Crawl-delays) and takes up to ``window`` URLs, which
  are published to the local pool in the same synchronous step as they are
  counted in (one call per several pages: batching is what makes one Redis
  serve thousands of pages a second).
* ``waiting`` (this room's count) is at least 1 until Redis says the whole
  crawl is done, plus the moves sent but not yet confirmed; so the local
  ``WorkPool`` cannot end while any URL of the crawl is unfinished anywhere.
* When a sync call finds nothing to take, the worker is registered *idle*
  in the same call. Any later call that changes something sends a wake-up
  on the crawl's stream, and a listener task reads the stream with a
  blocking ``XREAD`` from the id it was given when it joined: no wake-up
  is lost, and nothing polls. The last finish sends "done"; every worker
  reads it at the same moment and its pool ends.
* Leases: a heartbeat renews this worker's lease every ``lease / 3`` s. A
  worker that stops renewing (killed) is taken for dead ``lease`` seconds
  later, and every URL it held is queued again; their records say
  ``"refetched": true``. A page's record is written before its finish is
  sent: delivery is at least once, and nothing is lost.
* Integrity: every function refuses a crawl whose keys are gone (deleted,
  FLUSHALL), so no worker takes an empty crawl for a finished one; a server
  that may evict keys is refused; an error reply (OOM) stops the worker
  (``RedisRefused``); a worker frozen past its lease joins again and says so.

Depth is exact, as in memory: Redis hands out a URL at depth ``k`` only
while no unfinished URL is shallower than ``k - 1`` (the depth gate).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import math
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ...core.config import CrawlConfig
from ...core.frontier import (
    MAX_REDIRECT_HOPS,
    Entry,
    EntryState,
    FrontierStatistics,
    RedirectOutcome,
)
from ...core.models import FetchResult
from ...core.scrape import Request
from ...core.url import mask_credentials
from ...errors import (
    CrawlGone,
    CrawlMismatch,
    FetchError,
    RedisFrontierError,
    RedisLost,
    RedisRefused,
    RedisUnavailable,
)
from . import lua as redis_lua
from . import wire
from ..base import Publish
from .wire import url_digest as url_digest  # re-exported: benchmarks, tests

if TYPE_CHECKING:
    import coredis

#: Seconds a worker's lease lasts without a renewal.
DEFAULT_LEASE = 30.0
#: Seconds a call may take before Redis counts as lost (at most the lease).
CALL_TIMEOUT = 20.0
#: The shortest call timeout, however short the lease.
MIN_CALL_TIMEOUT = 5.0
#: How the call timeout counts time: in ticks of this many seconds, a tick
#: that took much longer (the process was frozen) counting as one.
TICK = 0.25
#: Longest time a finished page's move waits in the outbox for company.
BATCH_DELAY = 0.02
#: Local cache of links already sent: at most this many URLs, then it starts over.
SENT_CACHE = 200_000
#: How long a shared robots.txt response is kept (a failure: a few seconds).
ROBOTS_TTL = 24 * 3600.0
ROBOTS_FAILURE_TTL = 5.0

T = TypeVar("T")


def redact_url(url: str) -> str:
    """``url`` as it may be printed: its password (or a lone user name,
    often a token) replaced by ``***``."""
    return mask_credentials(url)


def keys_prefix(crawl_id: str) -> str:
    return f"tc:{{{crawl_id}}}:"


def crawl_identity(config: CrawlConfig) -> dict[str, Any]:
    """The settings that make a crawl: stored when it is created, compared
    when a worker joins. ``rate`` and the rest are enforced by the server,
    so every worker must agree on them."""
    return {
        "start_urls": sorted(config.start_url_strings),
        "allow_domains": sorted(config.allow_domains),
        "max_depth": config.max_depth,
        "max_pages": config.max_pages,
        "rate": config.rate,
        "per_host_concurrency": config.per_host_concurrency,
        "ignore_robots": config.ignore_robots,
        "filters": config.url_filter().identity(),
    }


# -- Request payloads (handlers) travel as importable names --------------------


def _handler_name(handler: object) -> str:
    module = getattr(handler, "__module__", None)
    qualname = getattr(handler, "__qualname__", "")
    if not module or "<" in qualname:
        raise RedisFrontierError(
            f"handler {handler!r} cannot cross processes: use a module-level function"
        )
    return f"{module}:{qualname}"


def _import_handler(name: str) -> Any:
    module_name, _, qualname = name.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def encode_payload(payload: object) -> str:
    """A Request as JSON (its handler by importable name); '' for none."""
    if not isinstance(payload, Request):
        return ""
    try:
        return json.dumps(
            {
                "handler": None if payload.handler is None else _handler_name(payload.handler),
                "meta": dict(payload.meta),
                "headers": None if payload.headers is None else dict(payload.headers),
                "priority": payload.priority,
            },
            separators=(",", ":"),
        )
    except TypeError as exc:
        raise RedisFrontierError(f"a Request's meta must be JSON for --redis: {exc}") from None


def decode_payload(url: str, text: str) -> Request | None:
    if not text:
        return None
    data = json.loads(text)
    handler = None if data["handler"] is None else _import_handler(data["handler"])
    return Request(
        url,
        handler=handler,
        meta=data["meta"],
        headers=data["headers"],
        priority=data["priority"],
    )


# -- this process's bookkeeping ------------------------------------------------


@dataclass(slots=True)
class _Lease:
    """A URL Redis has leased to this worker."""

    digest: bytes
    token: int
    entry: Entry
    refetch: bool
    #: Its host is spaced (--rate, Crawl-delay): report the start to Redis.
    report: bool = False
    started: bool = False
    #: Its move (finish, put back, defer) has been queued for Redis.
    moved: bool = False
    #: Admissions to send with the finish (7 fields each).
    children: list[object] = field(default_factory=list)


@dataclass(slots=True)
class _Batch:
    ops: list[object] = field(default_factory=list)
    #: Leases whose move is in ``ops`` (forgotten once the call returns).
    leases: list[_Lease] = field(default_factory=list)
    urgent: bool = False
    first_at: float = math.inf
    confirmed: trio.Event = field(default_factory=trio.Event)


def _unattached(entry: Entry) -> None:
    raise RuntimeError("frontier used before attach()")


class RedisFrontier:
    """A ``FrontierBackend`` shared through Redis; see the module docstring.

    Make one with ``open_redis_frontier``, which connects, creates or joins
    the crawl and registers this worker.
    """

    def __init__(
        self,
        client: coredis.Redis[bytes],
        crawl_id: str,
        config: CrawlConfig,
        *,
        name: str,
        window: int | None = None,
        lease: float = DEFAULT_LEASE,
        url: str = "redis",
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self._client = client
        self.crawl_id = crawl_id
        self._prefix = keys_prefix(crawl_id)
        self._config = config
        self._scope = config.scope()
        self._max_depth = config.max_depth
        self._name = name
        self._url = redact_url(url)  # it goes into messages
        self._notice = notice or logging.getLogger(__name__).warning
        self.window = window or max(128, 8 * config.workers)
        self._low_water = max(1, self.window // 2)
        self._batch_max = self.window
        self.lease = lease
        self._call_timeout = min(CALL_TIMEOUT, max(MIN_CALL_TIMEOUT, lease))
        #: Calls in flight -> running seconds they have left (``_watch_calls``).
        self._calls: dict[trio.CancelScope, float] = {}
        self._watching = False
        self._publish: Publish = _unattached
        self._check_idle: Callable[[], None] = lambda: None
        self._queued: Callable[[], int] = lambda: 0
        # this worker
        self.owner = ""
        self._last_id = "0-0"
        self.created = False
        self.stored_settings: dict[str, Any] = {}
        # what this process holds
        self._leases: dict[Entry, _Lease] = {}
        self._deferred: dict[bytes, Entry] = {}
        self._pending = 0  # leases whose move is in the outbox or on the wire
        self._outbox = _Batch()
        self._sent: dict[str, int] = {}
        # what Redis said last
        self._done = False
        self._remote_unfinished = 1
        self._remote = wire.NO_COUNTERS
        self._idle = False
        self._due_at = math.inf
        self._remote_kick = False
        self._lost: RedisLost | None = None
        self._rejoin = False
        self._stopping = False
        self._closed = False
        self._kick = trio.Event()
        self._robots_changed = trio.Event()
        self.calls = 0
        self.refused = 0
        self.reregistered = 0

    # -- connecting ----------------------------------------------------------

    async def _bounded(self, request: Awaitable[T]) -> T:
        """``request``, shielded from cancellation and bounded by the call
        timeout, counted in running time (``_watch_calls``): a freeze
        (SIGSTOP, a suspended VM) counts as one tick, so a thawed worker
        reads the answer waiting in its socket instead of saying that Redis
        did not answer. Before and after ``serve``, a plain deadline.

        Shielded: a call cut off by the end of the crawl would leave Redis
        and this worker disagreeing about what was finished and what was
        taken; and coredis shares a connection between calls, so one
        cancelled call breaks the others."""
        scope = trio.CancelScope(shield=True)
        if self._watching:
            self._calls[scope] = self._call_timeout
        else:
            scope.deadline = trio.current_time() + self._call_timeout
        try:
            with scope:
                return await request
        finally:
            self._calls.pop(scope, None)
        raise trio.TooSlowError  # only when the scope was cancelled: its time ran out

    async def _watch_calls(self) -> None:
        """Count the running time of the calls in flight, in ticks; a tick
        that took much longer (the process was frozen) counts as two. A
        deadline of its own would expire in the same instant as the freeze
        ends, before the answer in the socket could be read."""
        self._watching = True
        try:
            while True:
                before = trio.current_time()
                await trio.sleep(TICK)
                ran = min(trio.current_time() - before, 2 * TICK)
                for scope, left in list(self._calls.items()):
                    self._calls[scope] = left - ran
                    if left - ran <= 0:
                        scope.cancel()
        finally:
            # The crawl is ending: calls still in flight keep their bound.
            self._watching = False
            for scope, left in self._calls.items():
                scope.deadline = trio.current_time() + max(left, 0.0)

    async def _fcall(self, name: str, args: Sequence[object]) -> Any:
        """One server-side function call; a lost connection is ``RedisLost``,
        an error reply ``RedisRefused``, a crawl whose keys are gone ``CrawlGone``."""
        import coredis.exceptions

        self.calls += 1
        try:
            return await self._bounded(
                self._client.fcall(
                    redis_lua.function(name),
                    keys=[self._prefix],  # the prefix: its hash tag routes the call
                    args=list(args),
                )
            )
        except coredis.exceptions.ResponseError as exc:
            if "Function not found" not in str(exc):
                raise self._refused(exc) from None
        except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
            # A connection opened for a call that is being cancelled fails with
            # a connection error: that is the cancellation, not a lost Redis.
            await trio.lowlevel.checkpoint_if_cancelled()
            raise self._lost_error(exc) from None
        await self._load_library()
        return await self._fcall(name, args)

    async def _command(self, request: Awaitable[T]) -> T:
        """A plain command; a lost connection is ``RedisLost``."""
        import coredis.exceptions

        try:
            return await self._bounded(request)
        except coredis.exceptions.ResponseError as exc:
            raise self._refused(exc) from None
        except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
            await trio.lowlevel.checkpoint_if_cancelled()
            raise self._lost_error(exc) from None

    def _lost_error(self, exc: BaseException) -> RedisLost:
        reason = _one_line(str(exc) or type(exc).__name__)
        if isinstance(exc, trio.TooSlowError):
            reason = f"no answer in {self._call_timeout:g} s"
        return self._stop_with(
            RedisLost(f"lost the connection to Redis at {self._url} mid-crawl ({reason})")
        )

    def _refused(self, exc: BaseException) -> RedisLost:
        reason = _one_line(str(exc))
        if reason.startswith(wire.GONE):
            return self._stop_with(
                CrawlGone(
                    f"crawl {self.crawl_id!r} is no longer in Redis at {self._url}: its keys "
                    "were deleted (FLUSHALL, --delete-crawl) or evicted mid-crawl"
                )
            )
        return self._stop_with(
            RedisRefused(f"Redis at {self._url} refused a call mid-crawl ({reason})")
        )

    def _stop_with(self, error: RedisLost) -> RedisLost:
        if self._lost is None:
            self._lost = error
        return self._lost

    async def _load_library(self) -> None:
        import coredis.exceptions

        try:
            await self._client.function_load(redis_lua.LIBRARY)
        except coredis.exceptions.ResponseError as exc:
            if "already exists" not in str(exc):
                message = f"cannot load the crawl functions into Redis: {_one_line(str(exc))}"
                raise RedisUnavailable(message) from None

    async def check_eviction(self) -> None:
        """Refuse a Redis that may evict keys: an evicted queue or lease
        would leave the crawl waiting forever for URLs that no longer exist."""
        policy = await self._command(eviction_policy(self._client))
        if policy is not None and policy != "noeviction":
            raise self._stop_with(
                RedisRefused(
                    f"Redis at {self._url} now evicts keys (maxmemory-policy {policy}): "
                    "the crawl may lose URLs; set maxmemory-policy noeviction"
                )
            )

    async def hello(self, *, again: bool = False) -> None:
        """Create the crawl (admitting the start URLs) or join it; register.
        ``again``: this worker was taken for dead and joins once more (a
        crawl whose keys are gone is then ``CrawlGone``, never re-created)."""
        config = self._config
        identity = crawl_identity(config)
        starts: list[object] = []
        for start in config.start_urls:
            url = start.url if isinstance(start, Request) else start
            starts += wire.admission(url, 0, "", "", encode_payload(start))
        raw = await self._fcall(
            "hello",
            wire.hello_args(
                self._name,
                self.lease,
                may_create=not again,
                identity_json=json.dumps(identity, sort_keys=True),
                max_pages=config.max_pages,
                rate=config.rate,
                per_host_concurrency=config.per_host_concurrency,
                read_robots=not config.ignore_robots,
                starts=starts,
            ),
        )
        reply = wire.HelloReply.parse(raw)
        self.created = reply.created
        self.stored_settings = json.loads(reply.settings_json)
        self.owner = reply.owner
        if not again:  # the listener goes on from where it is
            self._last_id = reply.last_id
        self._counters(reply.counters)
        if not self.created:
            differing = [k for k in identity if self.stored_settings.get(k) != identity[k]]
            if differing:
                await self._fcall("bye", [self.owner])
                raise CrawlMismatch(
                    f"crawl {self.crawl_id!r} in Redis has other settings "
                    f"({', '.join(differing)} differ): run it with the same arguments, "
                    "or give no URL to join it as it is, or use a new --crawl-id"
                )

    def _counters(self, counts: wire.Counters) -> None:
        self._remote = counts
        self._remote_unfinished = counts.unfinished
        if counts.done and not self._done:
            self._done = True

    # -- the face --------------------------------------------------------------

    def attach(
        self, publish: Publish, check_idle: Callable[[], None], queued: Callable[[], int]
    ) -> None:
        self._publish = publish
        self._check_idle = check_idle
        self._queued = queued

    async def admit_start_urls(self) -> None:
        # hello() admitted them when it created the crawl; a joining worker adds nothing.
        await trio.lowlevel.checkpoint()

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_calls)
            nursery.start_soon(self._listen)
            nursery.start_soon(self._heartbeat)
            await self._sync_loop()

    def want_more(self, queued: int) -> None:
        if queued < self._low_water:
            self._kick.set()

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
        self._kick.set()
        await batch.confirmed.wait()
        if self._lost is not None:
            raise self._lost

    def admit_requisites(self, parent: Entry, urls: Sequence[str]) -> None:
        raise RuntimeError("--page-requisites cannot be combined with --redis yet")

    def admit_request(self, parent: Entry, url: str, payload: object) -> bool:
        if not self._scope.allows(url):
            return False
        depth = parent.depth + 1
        if self._max_depth is None or depth <= self._max_depth:
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
        # Sent with this page's finish; whether the target was known makes no
        # difference to the record.
        self._leases[entry].children += wire.admission(
            target, entry.depth, entry.url, "\n".join(chain), encode_payload(entry.payload)
        )
        return RedirectOutcome.FOLLOW

    def start(self, entry: Entry) -> bool:
        # The page budget was spent when Redis leased the URL (a global count).
        lease = self._leases[entry]
        lease.started = True
        if lease.report:  # the host's next start is spaced from this one
            lease.report = False
            self._outbox.ops += wire.started_op(lease.digest, lease.token)
            self._outbox.urgent = True
            self._kick.set()
        entry.attempts += 1
        entry.state = EntryState.FETCHING
        return True

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        lease = self._leases[entry]
        depth = entry.depth + 1
        if links and (self._max_depth is None or depth <= self._max_depth):
            sent = self._sent
            allows = self._scope.allows
            children = lease.children
            if len(sent) > SENT_CACHE:
                sent.clear()
            for url in links:
                known = sent.get(url)
                if known is not None and known <= depth:
                    continue  # sent already (or out of scope: -1)
                if not allows(url):
                    sent[url] = -1
                    continue
                sent[url] = depth
                children += wire.admission(url, depth, entry.url)
        # No checkpoint: nothing is sent until ``recorded`` (a checkpoint per
        # page costs a trip through the scheduler).

    def recorded(self, entry: Entry) -> None:
        # The record is written: now Redis may forget the URL (at least once).
        lease = self._leases[entry]
        entry.state = EntryState.DONE
        children = lease.children
        self._send(lease, wire.finish_op(lease.digest, lease.token, lease.started, children))
        lease.children = []

    def abandon(self, entry: Entry) -> None:
        lease = self._leases.get(entry)
        if lease is None or lease.moved:
            return
        entry.state = EntryState.DROPPED
        self._send(lease, wire.release_op(lease.digest, lease.token, lease.started))

    def defer(self, entry: Entry, delay: float) -> None:
        """Retry ``entry`` after ``delay`` s: it goes back to Redis, so its
        next request obeys the host's rate as every worker sees it."""
        lease = self._leases[entry]
        entry.state = EntryState.QUEUED
        if len(self._deferred) > SENT_CACHE:
            self._deferred.clear()
        self._deferred[lease.digest] = entry  # the same object if it comes back here
        self._send(lease, wire.defer_op(lease.digest, lease.token, delay, entry.attempts))

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        """robots.txt of ``host`` is read: its Crawl-delay (if any) applies to
        every worker, and the host may have more than one request in flight."""
        self._outbox.ops += wire.crawl_delay_op(host, delay)
        self._outbox.urgent = True
        self._kick.set()

    def stop(self) -> None:
        self._stopping = True
        self._kick.set()

    async def fetch_robots_once(
        self, url: str, fetch: Callable[[], Awaitable[FetchResult]]
    ) -> FetchResult:
        """robots.txt once per crawl: the response another worker stored, or
        fetched here under a claim (``SET NX``) while the others wait for the
        stream's "r" wake-up. Stored for a day, a failure for a few seconds
        (the robots cache asks again after its retry period)."""
        from coredis.tokens import PureToken

        key = f"{self._prefix}rb:{url}"
        claim = f"{self._prefix}rbl:{url}"
        while True:
            changed = self._robots_changed  # before looking: a later store wakes us
            stored = await self._command(self._client.get(key))
            if stored is not None:
                return _robots_response(url, stored)
            if await self._command(
                self._client.set(claim, self.owner, condition=PureToken.NX, px=30_000)
            ):
                break
            with trio.move_on_after(30):  # the claimant may have died: claim again
                await changed.wait()
        try:
            result = await fetch()
        except FetchError as exc:
            value = json.dumps({"error": exc.kind, "message": exc.message})
            ttl = ROBOTS_FAILURE_TTL
            raised: FetchError | None = exc
        else:
            value = json.dumps(
                {
                    "status": result.status,
                    "headers": result.headers,
                    "body": result.body.decode("latin-1"),
                    "skipped": result.body_skipped,
                }
            )
            ttl = ROBOTS_TTL if result.status < 500 else ROBOTS_FAILURE_TTL
            raised = None
        await self._command(self._client.set(key, value, px=round(ttl * 1000)))
        await self._command(
            self._client.xadd(self._prefix + "wake", {"r": "1"}, trim_strategy=None)
        )
        if raised is not None:
            raise raised
        return result

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
            return self._pending
        elsewhere = self._remote_unfinished - len(self._leases)
        return self._pending + max(1, elsewhere)

    @property
    def unfinished(self) -> int:
        if self._done or self._stopping or self._lost is not None:
            return len(self._leases)
        return len(self._leases) + max(1, self._remote_unfinished - len(self._leases))

    @property
    def budget_spent(self) -> bool:
        # Counted in Redis when a URL is leased: what this worker holds is
        # within the budget, and nothing beyond it is ever leased.
        return False

    @property
    def done(self) -> bool:
        """Whether Redis has said that the whole crawl is done."""
        return self._done

    def statistics(self) -> FrontierStatistics:
        remote = self._remote
        fetching = sum(1 for lease in self._leases.values() if lease.started)
        return FrontierStatistics(
            seen=remote.seen,
            queued=remote.fresh,
            fetching=fetching,
            done=remote.finished,
            dropped=0,
            started=remote.started,
            unfinished=self.unfinished,
            held=0,
        )

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
                await self._fcall("bye", [self.owner])
            except RedisLost:
                pass

    # -- internals -------------------------------------------------------------

    def _send(self, lease: _Lease, op: list[object]) -> None:
        lease.moved = True
        batch = self._outbox
        if not batch.ops:
            batch.first_at = trio.current_time()
        batch.ops += op
        batch.leases.append(lease)
        self._pending += 1
        if len(batch.leases) >= self._batch_max or self._queued() < self._low_water:
            self._kick.set()

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
            or len(batch.leases) >= self._batch_max
            or now >= batch.first_at + BATCH_DELAY
        ):
            return True
        return bool(want) and (not self._idle or self._remote_kick or now >= self._due_at)

    def _next_timer(self) -> float:
        at = math.inf
        if self._outbox.ops:
            at = self._outbox.first_at + BATCH_DELAY
        if self._idle and self._want():
            at = min(at, self._due_at)
        return at

    async def _sync_loop(self) -> None:
        while True:
            self._kick = trio.Event()
            if self._rejoin:
                self._rejoin = False
                await self._reregister()
                continue
            if self._round_needed(trio.current_time()):
                await self._round(self._want())
                continue
            with trio.move_on_at(self._next_timer()):
                await self._kick.wait()

    async def _round(self, want: int) -> None:
        """One sync call: this worker's moves, then a take of ``want`` URLs."""
        batch, self._outbox = self._outbox, _Batch()
        confirmed = batch.confirmed
        self._remote_kick = False
        try:
            floor = min(want, self._config.workers)
            raw = await self._fcall("sync", wire.sync_args(self.owner, want, floor, batch.ops))
        except BaseException:
            self._put_back(batch)
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
        if reply.refused:
            # Moves of leases Redis had taken back: the links they carried were
            # not admitted, so this worker must not skip them if it meets them again.
            self.refused += reply.refused
            self._sent.clear()
        for taken in reply.taken:
            self._take(taken)
        # Registered as idle in Redis: a wake-up (or ``due``) will come.
        self._idle = reply.idle
        now = trio.current_time()
        self._due_at = now + reply.due / 1000 if reply.due >= 0 else math.inf
        if not reply.alive:
            self._rejoin = True
        self._check_idle()

    def _put_back(self, batch: _Batch) -> None:
        """A sync call failed: its moves go back in front of the outbox.

        A call that fails as the crawl is cancelled (coredis's connection
        task is cancelled with it, so the shield in ``_fcall`` does not save
        it) may or may not have run in Redis. ``aclose`` sends the moves
        again: one Redis applied already is refused by its stale token, and
        one it never saw is not lost. Lost, a finish left its page leased,
        and ``bye`` queued it again: fetched twice after a graceful stop.
        """
        later = self._outbox
        batch.ops += later.ops
        batch.leases += later.leases
        batch.urgent = batch.urgent or later.urgent
        batch.first_at = min(batch.first_at, later.first_at)
        batch.confirmed = later.confirmed
        self._outbox = batch

    def _take(self, taken: wire.Taken) -> None:
        entry = self._deferred.pop(taken.digest, None)
        if entry is None or entry.url != taken.url:
            payload = decode_payload(taken.url, taken.payload)
            entry = Entry(taken.url, taken.depth, taken.referrer, taken.chain, payload)
        entry.attempts = taken.tries
        entry.state = EntryState.FETCHING if entry.attempts else EntryState.QUEUED
        self._leases[entry] = _Lease(taken.digest, taken.token, entry, taken.refetch, taken.report)
        self._publish(entry)

    async def _reregister(self) -> None:
        """Redis took this worker for dead (it missed its lease): join again.
        What it still holds was queued again; its moves will be refused."""
        self.reregistered += 1
        self._sent.clear()
        before, held = self.owner, len(self._leases)
        await self.hello(again=True)
        self._notice(
            f"worker {before} was silent longer than its lease ({self.lease:g} s; frozen or "
            f"stalled): Redis handed the {held} pages it held to other workers, and pages "
            f"it fetched meanwhile may be fetched again (marked refetched); "
            f"it joined again as {self.owner}"
        )

    async def _listen(self) -> None:
        """Read the crawl's wake-up stream: work may be there, or it is done."""
        import coredis.exceptions

        key = self._prefix + "wake"
        while True:
            try:
                reply = await self._client.xread({key: self._last_id}, block=0)
            except coredis.exceptions.ResponseError as exc:
                raise self._refused(exc) from None
            except (coredis.exceptions.RedisError, OSError) as exc:
                await trio.lowlevel.checkpoint_if_cancelled()
                raise self._lost_error(exc) from None
            for entries in (reply or {}).values():
                for item in entries:
                    ident = item.identifier
                    self._last_id = ident.decode() if isinstance(ident, bytes) else ident
                    if b"d" in item.field_values:
                        self._done = True
                    if b"r" in item.field_values:
                        self._robots_changed.set()
                        self._robots_changed = trio.Event()
            self._remote_kick = True
            self._kick.set()
            if self._done:
                self._check_idle()

    async def _heartbeat(self) -> None:
        while True:
            await trio.sleep(self.lease / 3)
            joins = self.reregistered
            reply = wire.RenewReply.parse(
                await self._fcall("renew", wire.renew_args(self.owner, self.lease))
            )
            self._counters(reply.counters)
            await self.check_eviction()
            # A renewal sent before this worker joined again (or while it
            # was joining) is no news: joining twice would take back the
            # leases of the first new join.
            if not reply.alive and joins == self.reregistered:
                self._rejoin = True
                self._kick.set()
            if self._done:
                self._check_idle()


def _robots_response(url: str, stored: bytes) -> FetchResult:
    data = json.loads(stored)
    if "error" in data:
        raise FetchError(data["error"], data["message"])
    return FetchResult(
        url,
        data["status"],
        data["headers"],
        data["body"].encode("latin-1"),
        0.0,
        data["skipped"],
    )


def default_worker_name(output: str | None) -> str:
    """This worker's name in the crawl: host and output file (a re-run with
    the same output takes its earlier run's leases back at once), else pid."""
    host = socket.gethostname()
    if output and output != "-":
        return f"{host}:{os.path.abspath(output)}"
    return f"{host}:pid{os.getpid()}"


def _one_line(text: str) -> str:
    """An error's text for a one-line message, any URL in it masked."""
    return mask_credentials(" ".join(text.split()))


def _single(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _redis_error_in(group: BaseException) -> RedisFrontierError | None:
    if isinstance(group, RedisFrontierError):
        return group
    if isinstance(group, BaseExceptionGroup):
        for exc in group.exceptions:
            found = _redis_error_in(exc)
            if found is not None:
                return found
    return None


def _client_for(url: str) -> coredis.Redis[bytes]:
    try:
        import coredis
    except ImportError:  # pragma: no cover - depends on the install
        raise RedisUnavailable(
            "--redis needs the coredis package: pip install 'trio-crawl[redis]'"
        ) from None
    try:
        from coredis.retry import NoRetryPolicy

        # No retries: a sync call that reached Redis must not run twice (a
        # second take would lease URLs this worker never hears of).
        return coredis.Redis.from_url(url, connect_timeout=5, retry_policy=NoRetryPolicy())
    except ValueError as exc:
        raise RedisUnavailable(f"bad Redis URL {redact_url(url)!r}: {exc}") from None


@contextlib.asynccontextmanager
async def open_client(url: str) -> AsyncIterator[coredis.Redis[bytes]]:
    """A connected coredis client. coredis runs its connections in a task
    group, so its errors come as ExceptionGroups: they leave this block as
    single exceptions (``RedisUnavailable`` when it cannot connect)."""
    client = _client_for(url)  # first: says so in one line if coredis is missing
    import coredis.exceptions

    entered = False
    try:
        async with client:
            entered = True
            try:
                with trio.fail_after(10):
                    await client.ping()
            except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
                message = f"cannot connect to Redis at {redact_url(url)}: {_one_line(str(exc))}"
                raise RedisUnavailable(message) from None
            yield client
    except BaseExceptionGroup as group:
        found = _redis_error_in(group)
        if found is not None:
            raise found from None
        single = _single(group)
        if not entered and isinstance(single, (coredis.exceptions.RedisError, OSError)):
            message = f"cannot connect to Redis at {redact_url(url)}: {_one_line(str(single))}"
            raise RedisUnavailable(message) from None
        if single is not group:
            raise single from None
        raise


@contextlib.asynccontextmanager
async def open_redis_frontier(
    url: str,
    crawl_id: str,
    config: CrawlConfig,
    *,
    name: str | None = None,
    window: int | None = None,
    lease: float = DEFAULT_LEASE,
    notice: Callable[[str], None] | None = None,
) -> AsyncIterator[RedisFrontier]:
    """Connect to Redis at ``url``, create or join crawl ``crawl_id``, and
    register this process as one of its workers.

    Raises ``RedisUnavailable`` (cannot connect, or a server that may
    evict keys: its ``maxmemory-policy`` must be ``noeviction``),
    ``CrawlMismatch`` (the crawl exists with other settings) and, from
    inside the block, ``RedisLost`` (``RedisRefused`` for an error reply such
    as OOM, ``CrawlGone`` when the crawl's keys vanish): single exceptions,
    never groups. ``notice`` receives one-line warnings (this worker was
    taken for dead and joined again); the default logs them.

    Example::

        async with open_redis_frontier("redis://127.0.0.1:6379/0", "docs", config) as frontier:
            summary = await Crawler(config, fetcher, frontier=frontier).run()
    """
    if config.handler is not None:
        _handler_name(config.handler)  # fail now if it cannot cross processes
    async with open_client(url) as client:
        frontier = RedisFrontier(
            client,
            crawl_id,
            config,
            name=name or default_worker_name(None),
            window=window,
            lease=lease,
            url=url,
            notice=notice,
        )
        await refuse_eviction(client, url)
        await frontier.hello()
        try:
            yield frontier
        finally:
            await frontier.aclose()


async def eviction_policy(client: coredis.Redis[bytes]) -> str | None:
    """The server's ``maxmemory-policy`` (None if INFO is not allowed)."""
    import coredis.exceptions

    try:
        info = await client.info("memory")
    except coredis.exceptions.ResponseError:
        return None
    policy = info.get("maxmemory_policy")
    return None if policy is None else str(policy)


async def refuse_eviction(client: coredis.Redis[bytes], url: str) -> None:
    """``RedisUnavailable`` unless the server keeps every key: with any other
    ``maxmemory-policy`` Redis may evict a queue or a lease under memory
    pressure, and the crawl would wait forever for URLs that no longer exist."""
    policy = await eviction_policy(client)
    if policy is not None and policy != "noeviction":
        raise RedisUnavailable(
            f"Redis at {redact_url(url)} may evict keys (maxmemory-policy {policy}): a crawl "
            "needs maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction)"
        )


async def check_server(url: str) -> None:
    """Connect, and refuse a server that may evict keys (``RedisUnavailable``)."""
    async with open_client(url) as client:
        await refuse_eviction(client, url)


async def _call_ro(client: coredis.Redis[bytes], name: str, prefix: str) -> Any:
    """A read-only function of the library, loading it first if needed."""
    function = redis_lua.function(name)
    try:
        return await client.fcall_ro(function, keys=[prefix])
    except Exception as exc:
        if "Function not found" not in str(exc):
            raise
    try:
        await client.function_load(redis_lua.LIBRARY)
    except Exception as load_error:
        if "already exists" not in str(load_error):
            raise
    return await client.fcall_ro(function, keys=[prefix])


async def check_crawl(url: str, crawl_id: str) -> list[str]:
    """A read-only consistency check of crawl ``crawl_id``: the counters
    recomputed from the keys (queued, leased, deferred, per depth, per host,
    seen), and no URL in two places or in none. What disagrees, one line
    each; an empty list when everything agrees. Safe on a running crawl (it
    is one atomic call), but meant for tests and for a crawl at rest."""
    async with open_client(url) as client:
        reply = await _call_ro(client, "check", keys_prefix(crawl_id))
    return [line.decode() if isinstance(line, bytes) else str(line) for line in reply]


async def delete_crawl(url: str, crawl_id: str, *, force: bool = False) -> int:
    """Delete every key of crawl ``crawl_id``; the number deleted (0: none
    there). A crawl with live workers is refused (``RedisFrontierError``)
    unless it is done or ``force``; its workers would stop with ``CrawlGone``."""
    status = await crawl_status(url, crawl_id)
    if status is not None and status.get("workers") and not status.get("done") and not force:
        raise RedisFrontierError(
            f"crawl {crawl_id!r} is running ({status['workers']} live workers): stop them "
            "first, or let it finish"
        )
    prefix = keys_prefix(crawl_id)
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"
    deleted = 0
    async with open_client(url) as client:
        # The counters first: from then on every worker's call says "gone".
        deleted += await client.delete([prefix + "m"])
        batch: list[str | bytes] = []
        async for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += await client.unlink(batch)
                batch = []
        if batch:
            deleted += await client.unlink(batch)
    return deleted


async def crawl_status(url: str, crawl_id: str) -> dict[str, Any] | None:
    """The crawl's counters and settings (None: no such crawl)."""
    async with open_client(url) as client:
        reply = await _call_ro(client, "status", keys_prefix(crawl_id))
    it = iter(reply)
    raw = {k.decode(): v.decode() for k, v in zip(it, it, strict=True)}
    if not raw.get("cfg"):
        return None
    status: dict[str, Any] = {k: int(float(v)) for k, v in raw.items() if v and k != "cfg"}
    status["settings"] = json.loads(raw["cfg"])
    return status


def status_lines(crawl_id: str, status: Mapping[str, Any]) -> list[str]:
    settings = status["settings"]
    state = "done" if status.get("done") else "running"
    budget = settings.get("max_pages")
    return [
        f"crawl {crawl_id}: {state}",
        f"start URLs: {' '.join(settings.get('start_urls') or [])}",
        "finished {finished:,}  queued {queued:,}  leased {leased:,}  retrying {delayed:,}  "
        "seen {seen:,}  started {started:,}{budget}  workers {workers}".format(
            finished=status.get("finished", 0),
            queued=status.get("unfinished", 0)
            - status.get("leased", 0)
            - status.get("delayed", 0),
            leased=status.get("leased", 0),
            delayed=status.get("delayed", 0),
            seen=status.get("n", 0),
            started=status.get("started", 0),
            budget=f"/{budget:,}" if budget is not None else "",
            workers=status.get("workers", 0),
        ),
    ]
