"""Every fetcher implementation the shared suite in ``test_fetchers.py`` runs.

An entry is ``(name, factory)``: ``factory(config)`` returns an async context
manager that yields a ``Fetcher`` and releases everything on exit. A new
fetcher joins the suite by appending itself here; optional ones are appended
only when their module exists (an import error inside it stays loud).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from trio_crawl._fetch import FetchConfig, Fetcher
from trio_crawl._fetch_httpx import open_httpx_fetcher

FetcherFactory = Callable[[FetchConfig], AbstractAsyncContextManager[Fetcher]]

FETCHER_FACTORIES: list[tuple[str, FetcherFactory]] = [("httpx", open_httpx_fetcher)]

if importlib.util.find_spec("trio_crawl._fetch_curl") is not None:
    from trio_crawl._fetch_curl import open_curl_fetcher

    FETCHER_FACTORIES.append(("curl", open_curl_fetcher))
