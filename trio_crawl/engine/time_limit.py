"""``max_time``: a graceful stop when the crawl has run for its time limit
(Scrapy's ``CLOSESPIDER_TIMEOUT``, a ``--max-time`` on the command line).

It is the same stop as a first SIGINT: no new fetches, in-flight pages get
``grace`` seconds, what was queued stays unfinished, so a ``--state`` crawl
resumes it. A crawl that is already stopping (a signal came first) is left
alone: a second ``stop()`` would cancel it at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


def stop_at_time_limit(
    max_time: float, stop: Callable[[], None], stopping: Callable[[], bool]
) -> Callable[[], Awaitable[None]]:
    """A helper task for the crawl's pool (started with the workers): sleeps
    ``max_time`` seconds (trio's clock), then calls ``stop()`` unless
    ``stopping()`` already says so. It is cancelled with the pool when the
    crawl ends first."""

    async def watch() -> None:
        await trio.sleep(max_time)
        if not stopping():
            stop()

    return watch
