"""A rendered page's own requests take their host's turns from Redis.

With ``--render`` the browser asks the crawl for a page's scripts,
stylesheets and ``fetch()`` calls (``fetch/chromium/subrequests.py``); each
waits for a turn of its host (``engine/shared_politeness.py``). On Redis
the turn is the Lua ``turn``: the host's next start time, as a URL leased
to any worker gets one (``turns.py``), so the pages and the browser's
requests of every worker together keep to the host's ``--rate``.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from .calls import Calls
from .turns import Turn


async def wait_turn(calls: Calls, host: str, stopped: Callable[[], bool]) -> bool:
    """Wait for a turn of ``host``; False if the crawl stops first
    (``stopped``). A turn missed (this process was too late for it: someone
    may have the next one) is taken again, as a leased URL is given back."""
    while not stopped():
        wait_us = await calls.fcall("turn", [host])
        turn = Turn(trio.current_time() + wait_us / 1_000_000, strict=True)
        await trio.sleep_until(turn.at)
        if not turn.missed(trio.current_time()):
            return True
    return False
