"""``--render`` wiring: the crawl's rules handed to the rendering fetcher.

The rendering fetcher (``fetch.chromium``) cannot import the engine; this
module gives it what it needs from the crawl: the scope, whether requisites
and robots.txt count, a ``RobotsCache`` for the browser's own requests, and
the crawl's politeness schedule (``CrawlPoliteness``), so that what a page's
scripts ask for waits for its host as the crawler's requests do.
Only a crawl that renders imports it (``fetchers.open_fetcher``), and with it
the Chromium fetcher; what a render adds to the summary is
``statistics.with_render_statistics``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ..core.config import CrawlConfig
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
from .politeness import HostSlots, ScheduleRoom
from .resources import resolve_browser
from .robots_gate import RobotsCache


@asynccontextmanager
async def open_render_fetcher(
    config: CrawlConfig, inner: Fetcher
) -> AsyncIterator[ChromiumFetcher]:
    """``inner`` with its HTML pages rendered under ``config``'s rules."""
    settings = RenderSettings(
        executable=resolve_browser(config),  # looked up on PATH now, not in the config
        user_agent=config.fetch.user_agent,
        # A tab is heavy (tens of MB): a self-sized pool does not grow the
        # browser; its workers wait for one of the first pool size's tabs.
        max_tabs=config.initial_workers,
        render_wait=config.rendering.render_wait,
        timeout=config.fetch.timeout,
        auto=config.rendering.render == "auto",
        proxy=config.fetch.proxy,
        keep_requisites=config.follow.page_requisites,
        retries=config.fetch.retries,
        cookies=config.fetch.cookies,
    )
    policy = RequestPolicy(
        config.scope().allows,
        page_requisites=config.follow.page_requisites,
        obey_robots=not config.politeness.ignore_robots,
    )

    def robots(fetcher: Fetcher) -> RobotsLookup:
        cache = RobotsCache(fetcher, config.fetch.user_agent)
        return cache.policy_nowait, cache.policy_for

    async with open_chromium_fetcher(
        inner, settings, policy, None if config.politeness.ignore_robots else robots
    ) as fetcher:
        yield fetcher


class CrawlPoliteness:
    """The crawl's schedule as the browser's requests meet it
    (``fetch.chromium.subrequests.Politeness``): a request waits for its
    host's turn (rate, Crawl-delay, random wait, per-host concurrency)
    among the crawler's own; ``request_over`` frees the slot of a page
    about to be rendered."""

    def __init__(
        self,
        schedule: ScheduleRoom,
        request_over: Callable[[str], None],
        crawl_delay: Callable[[str, float | None], None],
    ) -> None:
        self._schedule = schedule
        self.request_over = request_over
        self._crawl_delay = crawl_delay

    def robots_read(self, url: str, crawl_delay: float | None) -> None:
        self._crawl_delay(_host(url), crawl_delay)

    @asynccontextmanager
    async def turn(self, url: str) -> AsyncIterator[None]:
        host = _host(url)
        if not await self._schedule.wait_turn(host):
            raise NoTurn(url)
        try:
            yield
        finally:
            self._schedule.release(host)


def attach_render(
    fetcher: ChromiumFetcher,
    schedule: ScheduleRoom,
    slots: HostSlots,
    crawl_delay: Callable[[str, float | None], None],
) -> None:
    """Put ``fetcher``'s browser requests under the crawl's ``schedule``
    (and a host's Crawl-delay, through ``crawl_delay``); the crawler takes
    no slot for a requisite the browser already loaded."""
    slots.answers = fetcher.requests.has_answer
    fetcher.attach(CrawlPoliteness(schedule, slots.release, crawl_delay))


def _host(url: str) -> str:
    return host_port(canonicalize(url) or url)  # the policy let only canonical ones by
