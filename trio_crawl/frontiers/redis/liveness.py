"""How a worker stays alive in the crawl and hears of the others.

* The *listener* reads the crawl's wake-up stream with a blocking ``XREAD``
  from the id this worker was given when it joined, so no wake-up is lost
  and nothing polls: "w" (something changed: work may be there), "d" (the
  whole crawl is done: every worker reads it at the same moment), "r" (a
  robots.txt response was stored).
* The *heartbeat* renews this worker's lease every ``lease / 3`` s. A worker
  that stops renewing is taken for dead ``lease`` seconds later and what it
  held is queued again; a renewal answered "not alive" means that happened
  to this one (it was frozen or stalled): it must join again.

Both only set flags in ``Signals`` and kick the sync loop, which acts on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from . import wire
from .calls import Calls


@dataclass(slots=True)
class Signals:
    """What the listener and the heartbeat tell the sync loop."""

    #: Redis said the whole crawl is done.
    done: bool = False
    #: A wake-up came since the last sync call: another try to take is due.
    remote_kick: bool = False
    #: This worker was taken for dead: it must join again (set until it has).
    rejoin: bool = False
    #: The stream id read last (the listener goes on from there).
    last_id: str = "0-0"
    #: Set to wake the sync loop; replaced by a fresh one at each of its turns.
    kick: trio.Event = field(default_factory=trio.Event)
    #: Set (and replaced) when a robots.txt response was stored.
    robots_changed: trio.Event = field(default_factory=trio.Event)


async def listen(calls: Calls, signals: Signals, check_idle: Callable[[], None]) -> None:
    """Read the crawl's wake-up stream: work may be there, or it is done."""
    import coredis.exceptions

    key = calls.prefix + "wake"
    while True:
        try:
            reply = await calls.client.xread({key: signals.last_id}, block=0)
        except coredis.exceptions.ResponseError as exc:
            raise calls.refused(exc) from None
        except (coredis.exceptions.RedisError, OSError) as exc:
            await trio.lowlevel.checkpoint_if_cancelled()
            raise calls.lost_error(exc) from None
        for entries in (reply or {}).values():
            for item in entries:
                ident = item.identifier
                signals.last_id = ident.decode() if isinstance(ident, bytes) else ident
                if b"d" in item.field_values:
                    signals.done = True
                if b"r" in item.field_values:
                    signals.robots_changed.set()
                    signals.robots_changed = trio.Event()
        signals.remote_kick = True
        signals.kick.set()
        if signals.done:
            check_idle()


async def heartbeat(
    calls: Calls,
    signals: Signals,
    *,
    lease: float,
    owner: Callable[[], str],
    joins: Callable[[], int],
    counters: Callable[[wire.Counters], None],
    renewed: Callable[[float], None],
    check_idle: Callable[[], None],
) -> None:
    """Renew this worker's lease every ``lease / 3`` s; ``joins()`` counts
    its joins so far, ``owner()`` is its current name in the crawl,
    ``renewed(t)`` hears that a renewal sent at ``t`` was accepted."""
    while True:
        await trio.sleep(lease / 3)
        if signals.rejoin:
            # Taken for dead, and not joined again yet: the old name is no
            # longer in the crawl, and its "not alive" would make this
            # worker join twice (a join is slow under load).
            continue
        before = joins()
        sent_at = trio.current_time()
        reply = wire.RenewReply.parse(await calls.fcall("renew", wire.renew_args(owner(), lease)))
        counters(reply.counters)
        if reply.alive:
            renewed(sent_at)
        await calls.check_eviction()
        # A renewal sent before this worker joined again (or while it was
        # joining) is no news: joining twice would take back the leases of
        # the first new join.
        if not reply.alive and before == joins():
            signals.rejoin = True
            signals.kick.set()
        if signals.done:
            check_idle()
