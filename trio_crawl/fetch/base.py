"""The fetch boundary: the ``Fetcher`` protocol the engine depends on.

The engine never imports an HTTP library. A fetcher turns one URL into a
``FetchResult`` or raises ``FetchError`` (kind from ``ERROR_KINDS``); every other
exception escaping ``fetch`` is a bug in the fetcher and ends the crawl loudly.

Rules every fetcher keeps (tests in ``tests/test_fetchers.py`` hold them to it):

1. Never follow redirects: the crawler does, one record per hop.
2. Decode gzip/deflate (and brotli where available); cap the *decoded* and the
   *wire* size at ``FetchConfig.max_bytes`` and raise ``FetchError("too_large")``.
   A compressed body that is corrupt or cut short is ``FetchError("decode")``.
3. When ``FetchConfig.html_only`` and the response's content type is not
   HTML-ish, skip the body (``body_skipped=True``) rather than download it.
4. Cancellation at any point leaves the fetcher usable: no leaked pool slot,
   connection or handle.
5. Deadlines from ``FetchConfig`` are enforced by the fetcher (connect, read
   and total), and surface as ``FetchError("timeout")``.
6. Failures take one path: the whole exchange runs inside
   ``errors.translated_errors`` with the fetcher's own classifier; bad
   request input is refused by ``request`` before any library sees it, so
   every fetcher gives the same kind for the same fault.
7. Send each request once: no library may resend it behind the crawler's
   retry policy (libcurl would, after a reused connection dies).

What the fetchers share lives beside this module, one job each: ``errors``
(translation), ``request`` (URL and request-header checks), ``identity``
(headers, basic auth and cookies; the proxy comes from ``core.proxy``), ``body`` (limits,
skipping, draining, header joining, releasing connections) and ``decode``
(content codings in bounded steps).
"""

from __future__ import annotations

from typing import Protocol

from ..core.models import FetchResult


class Fetcher(Protocol):
    """Turns a URL into a response. Implementations: ``HttpxFetcher`` (pure
    Python, httpx2), ``CurlFetcher`` (libcurl via pycurl, driven by trio)."""

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        """Fetch ``url`` once. Checkpoint; cancellable at any point.

        ``any_body=True`` reads the body whatever its content type (robots.txt,
        sitemaps), overriding ``FetchConfig.html_only`` for this call.
        Raises ``FetchError`` for network/protocol failures.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and handles. Idempotent."""
        ...
