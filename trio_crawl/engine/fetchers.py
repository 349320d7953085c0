"""Opening a fetcher by name (``curl``, ``httpx``, ``asks``): the one place
that picks an HTTP client, lazily, so an unused one is never imported."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from ..core.config import FETCHERS, CrawlConfig
from ..core.http import FetchConfig
from ..errors import ConfigError
from ..fetch.base import Fetcher
from .resources import check_resources


@contextlib.asynccontextmanager
async def open_fetcher(
    config: CrawlConfig | FetchConfig, backend: str | None = None
) -> AsyncIterator[Fetcher]:
    """A fetcher owned by the block: ``backend`` ("curl", "httpx" or "asks";
    default: ``config.backend`` for a CrawlConfig, else "curl"), configured by
    ``config``; a CrawlConfig with ``render`` renders its pages through it.
    asks runs only on trio < 0.24 (docs/manual/fetchers.md; ``nox -s asks``).

    Example (no crawl, just fetching)::

        async with trio_crawl.open_fetcher(trio_crawl.FetchConfig(max_connections=64)) as f:
            result = await f.fetch("http://127.0.0.1:8000/")
    """
    if isinstance(config, CrawlConfig):
        check_resources(config)  # the CA bundle, netrc file and browser it names
        fetch_config = config.fetch_config()
        backend = backend or config.fetch.backend
    else:
        fetch_config = config
        backend = backend or "curl"
    if backend not in FETCHERS:
        raise ConfigError(f"unknown fetcher backend {backend!r}: one of {', '.join(FETCHERS)}")
    if (
        isinstance(config, CrawlConfig) and config.rendering.render
    ):  # --render: pages through Chromium
        from .render import open_render_fetcher

        async with (
            open_fetcher(fetch_config, backend) as inner,
            open_render_fetcher(config, inner) as rendering,
        ):
            yield rendering
        return
    if backend == "curl":
        from ..fetch.curl import open_curl_fetcher

        async with open_curl_fetcher(fetch_config) as curl:
            yield curl
    elif backend == "asks":
        from ..fetch.asks import open_asks_fetcher

        async with open_asks_fetcher(fetch_config) as asks:
            yield asks
    else:
        from ..fetch.httpx import open_httpx_fetcher

        async with open_httpx_fetcher(fetch_config) as httpx_fetcher:
            yield httpx_fetcher
