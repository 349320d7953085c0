"""The fetch boundary: the ``Fetcher`` protocol the engine depends on.

The engine never imports an HTTP library. A fetcher turns one URL into a
``FetchResult`` or raises ``FetchError`` (kind from ``ERROR_KINDS``); every other
exception escaping ``fetch`` is a bug in the fetcher and ends the crawl loudly.

Rules every fetcher keeps (tests in ``tests/test_fetchers.py`` hold them to it):

1. Never follow redirects: the crawler does, one record per hop.
2. Decode gzip/deflate (and brotli where available); cap the *decoded* and the
   *wire* size at ``FetchConfig.max_bytes`` and raise ``FetchError("too_large")``.
3. When ``FetchConfig.html_only`` and the response's content type is not
   HTML-ish, skip the body (``body_skipped=True``) rather than download it.
4. Cancellation at any point leaves the fetcher usable: no leaked pool slot,
   connection or handle.
5. Deadlines from ``FetchConfig`` are enforced by the fetcher (connect, read
   and total), and surface as ``FetchError("timeout")``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Protocol

import trio

from ..core.models import FetchError, FetchResult


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


def to_fetch_error(exc: Exception, kind: str | None, total: float) -> FetchError | None:
    """The ``FetchError`` for a foreign exception that a fetcher's one mapping
    function classified as ``kind`` (None: not ours to translate, a bug).
    A trio deadline becomes a message about the total deadline."""
    if kind is None:
        return None
    if isinstance(exc, trio.TooSlowError):
        return FetchError(kind, f"no complete answer within the {total:g} s total deadline")
    detail = str(exc) or str(exc.__cause__ or "") or "(no message)"
    return FetchError(kind, f"{type(exc).__name__}: {detail}")


@contextlib.contextmanager
def translated_errors(
    error_kind: Callable[[Exception], str | None], total: float
) -> Iterator[None]:
    """Re-raise foreign exceptions that ``error_kind`` classifies as
    ``FetchError`` (original as ``__cause__``); anything else is a bug and
    passes through unchanged. The one translation point of a fetcher."""
    try:
        yield
    except FetchError:
        raise
    except Exception as exc:
        error = to_fetch_error(exc, error_kind(exc), total)
        if error is None:
            raise
        raise error from exc
