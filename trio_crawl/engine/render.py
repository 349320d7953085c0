"""``--render`` wiring: the crawl's rules handed to the rendering fetcher.

The rendering fetcher (``fetch.chromium``) cannot import the engine; this
module gives it what it needs from the crawl: the scope, whether requisites
and robots.txt count, a ``RobotsCache`` for the browser's own requests, and
the crawl's politeness schedule (``CrawlPoliteness``), so that what a
page's scripts ask for waits for its host as the crawler's requests do.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ..core.config import CrawlConfig
from ..core.frontier import Entry
from ..core.requisites import REQUISITE
from ..core.stats import CrawlSummary
from ..core.url import canonicalize, host_port
from ..fetch.base import Fetcher
from ..fetch.chromium import (
    ChromiumFetcher,
    RenderSettings,
    RequestPolicy,
    open_chromium_fetcher,
)
from ..fetch.chromium.session import RobotsLookup
from ..fetch.chromium.subrequests import NoTurn
from .politeness import ScheduleRoom
from .robots_gate import RobotsCache


@asynccontextmanager
async def open_render_fetcher(
    config: CrawlConfig, inner: Fetcher
) -> AsyncIterator[ChromiumFetcher]:
    """``inner`` with its HTML pages rendered under ``config``'s rules."""
    assert config.browser is not None  # CrawlConfig resolves it when render is set
    settings = RenderSettings(
        executable=config.browser,
        user_agent=config.user_agent,
        # A tab is heavy (tens of MB): a self-sized pool does not grow the
        # browser; its workers wait for one of the first pool size's tabs.
        max_tabs=config.initial_workers,
        render_wait=config.render_wait,
        timeout=config.timeout,
        auto=config.render == "auto",
        proxy=config.proxy,
        keep_requisites=config.page_requisites,
    )
    policy = RequestPolicy(
        config.scope().allows,
        page_requisites=config.page_requisites,
        obey_robots=not config.ignore_robots,
    )

    def robots(fetcher: Fetcher) -> RobotsLookup:
        cache = RobotsCache(fetcher, config.user_agent)
        return cache.policy_nowait, cache.policy_for

    async with open_chromium_fetcher(
        inner, settings, policy, None if config.ignore_robots else robots
    ) as fetcher:
        yield fetcher


class HostSlots:
    """The host slots the crawler's requests hold, by URL, each released
    once: when its fetch ends or, for a page about to be rendered, when the
    fetcher says its request is over (``request_over``), so that the
    page's own requests can take the slot while it renders."""

    def __init__(self, schedule: ScheduleRoom, fetcher: ChromiumFetcher | None) -> None:
        self._schedule = schedule
        self._fetcher = fetcher
        self._held: Counter[str] = Counter()

    def answered_at_once(self, entry: Entry, host: str) -> bool:
        """Whether the fetcher has ``entry``'s answer without a request (a
        requisite the browser loaded); if so, its reserved slot, if any, is
        given back. Nothing between this and the fetch is a checkpoint, so
        the answer is still there when it is asked for."""
        fetcher = self._fetcher
        if fetcher is None or entry.payload is not REQUISITE:
            return False
        if not fetcher.requests.has_answer(entry.url):
            return False
        self._schedule.unreserve(entry, host)
        return True

    def hold(self, url: str, *, held: bool) -> None:
        """The request for ``url`` started with its host's slot (if ``held``)."""
        if held:
            self._held[url] += 1

    def release(self, url: str) -> None:
        """The request for ``url`` is over: its slot, if still held, is free."""
        count = self._held.pop(url, 0)
        if count:
            self._schedule.release(host_port(url))
            if count > 1:
                self._held[url] = count - 1


class CrawlPoliteness:
    """The crawl's schedule as the browser's requests meet it
    (``fetch.chromium.subrequests.Politeness``): a request waits for its
    host's turn (rate, Crawl-delay, random wait, per-host concurrency)
    among the crawler's own; ``request_over`` frees the slot of a page
    about to be rendered."""

    def __init__(self, schedule: ScheduleRoom, request_over: Callable[[str], None]) -> None:
        self._schedule = schedule
        self.request_over = request_over

    @asynccontextmanager
    async def turn(self, url: str) -> AsyncIterator[None]:
        host = host_port(canonicalize(url) or url)  # the policy let only canonical ones by
        if not await self._schedule.wait_turn(host):
            raise NoTurn(url)
        try:
            yield
        finally:
            self._schedule.release(host)


def attach_render(fetcher: Fetcher, schedule: ScheduleRoom) -> HostSlots:
    """The slots of a crawl on ``schedule``; a rendering fetcher's browser
    requests are put under the same schedule."""
    if not isinstance(fetcher, ChromiumFetcher):
        return HostSlots(schedule, None)
    slots = HostSlots(schedule, fetcher)
    fetcher.attach(CrawlPoliteness(schedule, slots.release))
    return slots


def with_render_statistics(summary: CrawlSummary, fetcher: Fetcher) -> CrawlSummary:
    """``summary`` with what the rendering fetcher did, if it is one."""
    if not isinstance(fetcher, ChromiumFetcher):
        return summary
    stats = fetcher.statistics()
    return dataclasses.replace(
        summary,
        rendered=stats.rendered,
        render_failures=stats.failed,
        browsers=stats.browsers,
        render_blocked=stats.blocked,
        render_requests=stats.requests,
        render_auto={
            r.pattern: f"{r.rendered:,} rendered, {r.static:,} as served: {r.reason}"
            for r in stats.auto
        },
    )
