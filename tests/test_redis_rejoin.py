"""A worker taken for dead joins again once, however slow the join.

The heartbeat (``frontiers/redis/liveness.py``) renews under the worker's
current name. Once Redis has said "not alive", that name is out of the crawl
until the join under a new name is done: a renewal sent meanwhile is
answered "not alive" again and, if heeded, makes the worker join a second
time (and say so twice), handing away the leases of its first new join.
Under load a join is slow enough for a renewal to fall inside it (seen as
two rejoin warnings in tests/test_redis_cli.py's frozen-worker test).

Here the heartbeat runs against a fake ``Calls`` under a ``MockClock``: the
question is only what it sends and when, not Redis's answer to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from trio_crawl.frontiers.redis.liveness import Signals, heartbeat

LEASE = 3.0
COUNTERS = [0, 1, 1, 0, 0, 0, 1]  # done, unfinished, fresh, leased, started, finished, seen


class FakeCalls:
    """Records each renewal; only ``alive`` names are in the crawl."""

    def __init__(self) -> None:
        self.renewed: list[str] = []
        self.alive: set[str] = set()

    async def fcall(self, name: str, args: Sequence[object]) -> Any:
        await trio.lowlevel.checkpoint()
        assert name == "renew", name
        owner = str(args[0])
        self.renewed.append(owner)
        return [1 if owner in self.alive else 0, COUNTERS]

    async def check_eviction(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_no_renewal_goes_out_under_the_old_name_while_the_worker_joins_again(
    autojump_clock: object,
) -> None:
    calls, signals = FakeCalls(), Signals()
    name, joins = ["w#1"], [0]
    calls.alive.add("w#1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: heartbeat(
                calls,  # type: ignore[arg-type]
                signals,
                lease=LEASE,
                owner=lambda: name[0],
                joins=lambda: joins[0],
                counters=lambda counts: None,
                renewed=lambda sent_at: None,
                check_idle=lambda: None,
            )
        )
        await trio.sleep(LEASE / 3 * 2.5)  # two renewals: alive
        assert calls.renewed == ["w#1", "w#1"] and not signals.rejoin
        calls.alive.clear()  # taken for dead while frozen
        await trio.sleep(LEASE / 3)
        assert calls.renewed[-1] == "w#1" and signals.rejoin  # heard once
        # The sync loop joins again (as RedisFrontier._reregister does): the
        # join itself is slow, ten heartbeat periods, the flag still set.
        joins[0] += 1
        sent = len(calls.renewed)
        await trio.sleep(LEASE / 3 * 10)
        assert calls.renewed[sent:] == []  # nothing said in the dead name's stead
        name[0] = "w#2"
        calls.alive.add("w#2")
        signals.rejoin = False  # joined
        await trio.sleep(LEASE / 3 * 2)
        assert calls.renewed[sent:] == ["w#2", "w#2"] and not signals.rejoin
        nursery.cancel_scope.cancel()
