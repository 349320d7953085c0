"""What stands between a URL and its first request: the host's robots.txt.

The first URL of a host fetches robots.txt (others wait on that one fetch,
``RobotsCache``), applies its Crawl-delay to the schedule (at most
``max_crawl_delay``: a robots.txt asking for a day between requests must not
keep the crawl going for ever; the capped hosts are noted for the summary) and, with
``--sitemaps``, seeds the crawl from the host's sitemaps. Then each URL gets
one verdict:

* ALLOW: go on to the schedule and the fetch;
* WAIT: robots.txt failed (5xx, timeout) on a reachable server, so the host
  is disallowed for a while: the URL waits (parked, still unfinished) for one
  re-fetch of robots.txt, ``ROBOTS_RETRY_PERIOD`` later, then is judged again;
* DISALLOW: recorded with kind ``robots``, never requested;
* UNREACHABLE: the robots.txt request failed in a way that means the host
  cannot be talked to (``HOST_FAILURE_KINDS``: refused, unreachable, silent
  until the timeout, a TLS handshake that failed, a reset, an answer that is
  not HTTP): its pages are recorded with that kind at once, never requested
  (a dead host, a bad certificate or https sent to an http port is not a
  robots.txt refusal, and waiting ``ROBOTS_RETRY_PERIOD`` for the same
  failure again only made the crawl longer). The message is the failure's;
  it starts with ``robots.txt:`` except for ``connect`` (a refused
  connection is the host's, whichever URL asked).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable

from ..core.frontier import Entry
from .politeness import ScheduleRoom
from .robots_gate import RobotsCache

#: How long an unreachable robots.txt keeps its host disallowed before the
#: one re-fetch its URLs wait for.
ROBOTS_RETRY_PERIOD = 10.0

SeedSitemaps = Callable[[str, list[str]], Awaitable[None]]


class Verdict(enum.Enum):
    ALLOW = "allow"
    WAIT = "wait"
    DISALLOW = "robots"
    UNREACHABLE = "unreachable"


class HostGate:
    """robots.txt verdicts for URLs, and the per-host set-up on first sight."""

    def __init__(
        self,
        robots: RobotsCache | None,
        schedule: ScheduleRoom,
        seed_sitemaps: SeedSitemaps | None = None,
        *,
        max_crawl_delay: float = float("inf"),
        capped_delays: dict[str, float] | None = None,
    ) -> None:
        self._robots = robots
        self._schedule = schedule
        self._seed_sitemaps = seed_sitemaps
        self._max_crawl_delay = max_crawl_delay
        #: host:port -> the Crawl-delay its robots.txt asked for, when capped.
        self.capped_delays = {} if capped_delays is None else capped_delays
        self._hosts_set_up: set[str] = set()
        #: Hosts whose Crawl-delay a rendered page's request applied first.
        self._delays_seen: set[str] = set()
        self._waited: set[Entry] = set()

    async def check(self, entry: Entry, host: str) -> tuple[Verdict, tuple[str, str] | None]:
        """The verdict for ``entry`` and, for DISALLOW and UNREACHABLE, the
        error ``(kind, message)`` to record. A checkpoint when robots.txt must
        be fetched or sitemaps read."""
        robots = self._robots
        if robots is None:
            return Verdict.ALLOW, None
        policy = robots.policy_nowait(entry.url)
        if policy is None:
            policy = await robots.policy_for(entry.url)
        if host not in self._hosts_set_up:
            self._hosts_set_up.add(host)
            self._set_crawl_delay(host, policy.crawl_delay)
            if self._seed_sitemaps is not None:
                await self._seed_sitemaps(entry.url, policy.sitemaps)
        if policy.allows(entry.url):
            return Verdict.ALLOW, None
        if policy.temporary:
            failure = robots.host_failure(entry.url)
            if failure is not None:
                message = failure.message
                if failure.kind != "connect":
                    message = f"robots.txt: {message}"
                return Verdict.UNREACHABLE, (failure.kind, message)
            if entry not in self._waited:
                self._waited.add(entry)
                return Verdict.WAIT, None
        self._waited.discard(entry)
        return Verdict.DISALLOW, ("robots", f"disallowed ({policy.reason})")

    def crawl_delay_seen(self, host: str, delay: float | None) -> None:
        """``host``'s robots.txt was read for a request that is no URL of the
        crawl (a rendered page's script on another allowed host): its
        Crawl-delay counts from now, as if a URL of the host had come first.
        Not a checkpoint."""
        if host not in self._hosts_set_up and host not in self._delays_seen:
            self._delays_seen.add(host)
            self._set_crawl_delay(host, delay)

    def _set_crawl_delay(self, host: str, delay: float | None) -> None:
        if delay is not None and delay > self._max_crawl_delay:
            self.capped_delays[host] = delay
            delay = self._max_crawl_delay
        self._schedule.set_crawl_delay(host, delay)
