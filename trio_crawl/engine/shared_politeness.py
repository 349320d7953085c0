"""The politeness room of a crawl whose frontier is shared between processes.

With ``--redis`` the server decides when a host may get its next request:
it leases a host's URL only when the host's next start time (``--rate``,
Crawl-delay) is near and it has fewer requests in flight than
``--per-host-concurrency``, counted over every worker of the crawl, and
says when that start time (its *turn*) is: this room parks the URL until
then (``try_start``), as it parks a retry in one process. Local limits on
top would only slow each worker down, so this room has none; it passes a
robots.txt Crawl-delay and every retry to the frontier, so that a retry's
next request is spaced like any other as the server sees it. A rendered
page's own requests (``wait_turn``) take turns of their host from the
server too, so they count for the host's rate as every worker sees it.

robots.txt is fetched once for the whole crawl too: the robots cache of
each worker fetches through ``SharedRobotsFetcher``, which asks the frontier
for the response another worker stored, or fetches and stores it.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from ..core.frontier import Entry
from ..core.models import FetchResult
from ..fetch.base import Fetcher
from ..frontiers.base import FrontierBackend, SharedPoliteness, SharedRobots
from .politeness import Job, ScheduleRoom
from .schedule import PoliteSchedule


class SharedScheduleRoom(ScheduleRoom):
    """A ``ScheduleRoom`` with no local limits; the shared frontier spaces requests."""

    def __init__(self, shared: SharedPoliteness, publish: Callable[[Entry], None]) -> None:
        super().__init__(PoliteSchedule[Job](), publish)
        self._shared = shared

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        self._shared.set_crawl_delay(host, delay)

    def try_start(self, entry: Entry, host: str) -> bool:
        """Start ``entry`` now, or park it until its turn (False)."""
        at = self._shared.not_before(entry)
        if at is None:
            return super().try_start(entry, host)
        self.schedule.unreserve(entry, host)  # if the timer handed it back a moment early
        super().defer(entry, host, at - trio.current_time())
        return False

    async def wait_turn(self, host: str) -> bool:
        """A turn of ``host`` from the server, then the local bookkeeping
        (no limits here: at once) that ``release`` balances."""
        if not await self._shared.wait_turn(host):
            return False
        return await super().wait_turn(host)

    def defer(self, entry: Entry, host: str, delay: float) -> None:
        self._shared.defer(entry, delay)


class SharedRobotsFetcher:
    """The fetcher the robots cache uses when the frontier shares robots.txt."""

    def __init__(self, fetcher: Fetcher, shared: SharedRobots) -> None:
        self._fetcher = fetcher
        self._shared = shared

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        async def fetch_here() -> FetchResult:
            return await self._fetcher.fetch(url, headers, any_body=any_body)

        return await self._shared.fetch_robots_once(url, fetch_here)

    async def aclose(self) -> None:
        return None  # the crawl's fetcher is not ours to close


def robots_fetcher(fetcher: Fetcher, frontier: FrontierBackend) -> Fetcher:
    """The fetcher for robots.txt: shared through the frontier if it can."""
    if isinstance(frontier, SharedRobots):
        return SharedRobotsFetcher(fetcher, frontier)
    return fetcher
