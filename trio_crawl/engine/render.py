"""``--render`` wiring: the crawl's rules handed to the rendering fetcher.

The rendering fetcher (``fetch.chromium``) cannot import the engine; this
module gives it what it needs from the crawl: the scope, whether requisites
and robots.txt count, and a ``RobotsCache`` for the browser's own requests.
Only a crawl that renders imports it (``fetchers.open_fetcher``), and with it
the Chromium fetcher; what a render adds to the summary is
``statistics.with_render_statistics``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..core.config import CrawlConfig
from ..fetch.base import Fetcher
from ..fetch.chromium import (
    ChromiumFetcher,
    RenderSettings,
    RequestPolicy,
    open_chromium_fetcher,
)
from ..fetch.chromium.session import RobotsLookup
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
