"""The libcurl fetcher (the default): pycurl's multi interface, driven by trio.

One module per job:

- ``fetcher``: ``CurlFetcher`` and ``open_curl_fetcher``, the pool of easy
  handles and the driver task;
- ``handle``: one easy handle, its options and callbacks, the CA bundle;
- ``collector``: one response from curl's callbacks (pure);
- ``watch``: waiting for curl's sockets (epoll, or one task per socket);
- ``errors``: curl error codes to ``FetchError`` kinds.
"""

from __future__ import annotations

from .collector import Collector
from .errors import CurlError, error_kind
from .fetcher import CurlFetcher, CurlFetcherStatistics, WatcherName, open_curl_fetcher
from .handle import find_ca_bundle

__all__ = [
    "Collector",
    "CurlError",
    "CurlFetcher",
    "CurlFetcherStatistics",
    "WatcherName",
    "error_kind",
    "find_ca_bundle",
    "open_curl_fetcher",
]
