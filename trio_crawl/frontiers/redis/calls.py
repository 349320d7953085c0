"""The call layer: every call a worker makes to Redis, bounded and translated.

A call is shielded from cancellation and bounded by the call timeout,
counted in running time (``watch``); coredis's errors become the crawl's
(``RedisLost``, ``RedisRefused``, ``CrawlGone``), once, here. The first
such error is kept (``lost``): the frontier stops taking work once it is set.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ...errors import CrawlGone, RedisLost, RedisRefused
from . import lua, wire
from .client import eviction_policy, one_line

if TYPE_CHECKING:
    from .client import Client

#: Seconds a call may take before Redis counts as lost (at most the lease).
CALL_TIMEOUT = 20.0
#: The shortest call timeout, however short the lease.
MIN_CALL_TIMEOUT = 5.0
#: How the call timeout counts time: in ticks of this many seconds, a tick
#: that took much longer (the process was frozen) counting as one.
TICK = 0.25

T = TypeVar("T")


class Calls:
    """One worker's calls to crawl ``crawl_id`` (keys under ``prefix``)."""

    def __init__(self, client: Client, prefix: str, crawl_id: str, url: str, lease: float) -> None:
        self.client = client
        self.prefix = prefix
        self.crawl_id = crawl_id
        self.url = url  # masked: it goes into messages
        self.timeout = min(CALL_TIMEOUT, max(MIN_CALL_TIMEOUT, lease))
        #: Calls in flight -> running seconds they have left (``watch``).
        self._running: dict[trio.CancelScope, float] = {}
        self._watching = False
        #: The worker has joined the crawl: errors from now on are "mid-crawl".
        self.joined = False
        #: The error that stopped this worker (the first one).
        self.lost: RedisLost | None = None
        self.count = 0

    async def bounded(self, request: Awaitable[T]) -> T:
        """``request``, shielded from cancellation and bounded by the call
        timeout, counted in running time (``watch``): a freeze
        (SIGSTOP, a suspended VM) counts as one tick, so a thawed worker
        reads the answer waiting in its socket instead of saying that Redis
        did not answer. Before and after ``serve``, a plain deadline.

        Shielded: a call cut off by the end of the crawl would leave Redis
        and this worker disagreeing about what was finished and what was
        taken; and coredis shares a connection between calls, so one
        cancelled call breaks the others."""
        scope = trio.CancelScope(shield=True)
        if self._watching:
            self._running[scope] = self.timeout
        else:
            scope.deadline = trio.current_time() + self.timeout
        try:
            with scope:
                return await request
        finally:
            self._running.pop(scope, None)
        raise trio.TooSlowError  # only when the scope was cancelled: its time ran out

    async def watch(self) -> None:
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
                for scope, left in list(self._running.items()):
                    self._running[scope] = left - ran
                    if left - ran <= 0:
                        scope.cancel()
        finally:
            # The crawl is ending: calls still in flight keep their bound.
            self._watching = False
            for scope, left in self._running.items():
                scope.deadline = trio.current_time() + max(left, 0.0)

    async def fcall(self, name: str, args: Sequence[object]) -> Any:
        """One server-side function call; a lost connection is ``RedisLost``,
        an error reply ``RedisRefused``, a crawl whose keys are gone ``CrawlGone``."""
        import coredis.exceptions

        self.count += 1
        try:
            return await self.bounded(
                self.client.fcall(
                    lua.function(name),
                    keys=[self.prefix],  # the prefix: its hash tag routes the call
                    args=list(args),
                )
            )
        except coredis.exceptions.ResponseError as exc:
            if "Function not found" not in str(exc):
                raise self.refused(exc) from None
        except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
            # A connection opened for a call that is being cancelled fails with
            # a connection error: that is the cancellation, not a lost Redis.
            await trio.lowlevel.checkpoint_if_cancelled()
            raise self.lost_error(exc) from None
        await self.load_library()
        return await self.fcall(name, args)

    async def command(self, request: Awaitable[T]) -> T:
        """A plain command; a lost connection is ``RedisLost``."""
        import coredis.exceptions

        try:
            return await self.bounded(request)
        except coredis.exceptions.ResponseError as exc:
            raise self.refused(exc) from None
        except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
            await trio.lowlevel.checkpoint_if_cancelled()
            raise self.lost_error(exc) from None

    def lost_error(self, exc: BaseException) -> RedisLost:
        reason = one_line(str(exc) or type(exc).__name__)
        if isinstance(exc, trio.TooSlowError):
            reason = f"no answer in {self.timeout:g} s"
        return self.stop_with(
            RedisLost(f"lost the connection to Redis at {self.url}{self._when} ({reason})")
        )

    def refused(self, exc: BaseException) -> RedisLost:
        reason = one_line(str(exc))
        if reason.startswith(wire.GONE):
            return self.stop_with(
                CrawlGone(
                    f"crawl {self.crawl_id!r} is no longer in Redis at {self.url}: its keys "
                    "were deleted (FLUSHALL, --delete-crawl) or evicted mid-crawl"
                )
            )
        return self.stop_with(
            RedisRefused(f"Redis at {self.url} refused a call{self._when} ({reason})")
        )

    @property
    def _when(self) -> str:
        return " mid-crawl" if self.joined else " at the start"

    def stop_with(self, error: RedisLost) -> RedisLost:
        if self.lost is None:
            self.lost = error
        return self.lost

    async def load_library(self) -> None:
        """Load the crawl's functions; an error reply (OOM, a read-only
        replica) is ``RedisRefused``, as for any call."""
        import coredis.exceptions

        try:
            await self.bounded(self.client.function_load(lua.LIBRARY))
        except coredis.exceptions.ResponseError as exc:
            if "already exists" not in str(exc):
                reason = one_line(str(exc))
                raise self.stop_with(
                    RedisRefused(f"Redis at {self.url} refused the crawl's functions ({reason})")
                ) from None
        except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
            await trio.lowlevel.checkpoint_if_cancelled()
            raise self.lost_error(exc) from None

    async def check_eviction(self) -> None:
        """Refuse a Redis that may evict keys: an evicted queue or lease
        would leave the crawl waiting forever for URLs that no longer exist."""
        policy = await self.command(eviction_policy(self.client))
        if policy is not None and policy != "noeviction":
            raise self.stop_with(
                RedisRefused(
                    f"Redis at {self.url} now evicts keys (maxmemory-policy {policy}): "
                    "the crawl may lose URLs; set maxmemory-policy noeviction"
                )
            )
