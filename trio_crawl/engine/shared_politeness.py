"""The politeness room of a crawl whose frontier is shared between processes.

With ``--redis`` the server decides when a host may get its next request:
it leases a host's URL only when the host's next start time (``--rate``,
Crawl-delay) has come and it has fewer requests in flight than
``--per-host-concurrency``, counted over every worker of the crawl. Local
limits on top would only slow each worker down, so this room has none; it
passes a robots.txt Crawl-delay and every retry to the frontier, so that a
retry's next request is spaced like any other as the server sees it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.frontier import Entry
from ..core.schedule import PoliteSchedule
from ..frontiers.base import SharedPoliteness
from .politeness import ScheduleRoom


class SharedScheduleRoom(ScheduleRoom):
    """A ``ScheduleRoom`` with no local limits; the shared frontier spaces requests."""

    def __init__(self, shared: SharedPoliteness, publish: Callable[[Entry], None]) -> None:
        super().__init__(PoliteSchedule[Entry](), publish)
        self._shared = shared

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        self._shared.set_crawl_delay(host, delay)

    def defer(self, entry: Entry, host: str, delay: float) -> None:
        self._shared.defer(entry, delay)
