"""Every fetcher implementation the shared suite in ``test_fetchers.py`` runs.

An entry is ``(name, factory)``: ``factory(config)`` returns an async context
manager that yields a ``Fetcher`` and releases everything on exit. A new
fetcher joins the suite by appending itself here; optional ones are appended
only when their module exists (an import error inside it stays loud), or,
for asks, only when asks can run on this trio.

``KNOWN_GAPS`` lists shared tests a fetcher is known to fail, with the
reason: ``conftest.py`` marks those cases ``xfail(strict=True)``, so a gap
that closes shows up as a failure and its entry must go.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from trio_crawl.core.http import FetchConfig
from trio_crawl.fetch.asks import load_asks, open_asks_fetcher
from trio_crawl.fetch.base import Fetcher
from trio_crawl.fetch.httpx import open_httpx_fetcher

FetcherFactory = Callable[[FetchConfig], AbstractAsyncContextManager[Fetcher]]

FETCHER_FACTORIES: list[tuple[str, FetcherFactory]] = [("httpx", open_httpx_fetcher)]

if importlib.util.find_spec("trio_crawl.fetch.curl") is not None:
    from trio_crawl.fetch.curl import open_curl_fetcher

    FETCHER_FACTORIES.append(("curl", open_curl_fetcher))

try:
    load_asks()  # asks 3 needs anyio 3, which runs only on trio < 0.24: nox -s asks
except ImportError:
    pass
else:
    FETCHER_FACTORIES.append(("asks", open_asks_fetcher))

#: (fetcher name, shared test function name) -> why that fetcher cannot pass it.
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("asks", "test_a_cookie_that_cannot_be_sent_back_is_not_kept"): (
        "asks decodes response headers as UTF-8: a Latin-1 Set-Cookie makes the whole "
        "answer a protocol error before the jar sees it"
    ),
    ("asks", "test_html_page_body_headers_elapsed"): (
        "asks keeps response headers in a dict: a repeated header keeps only its last value"
    ),
    ("httpx", "test_a_one_line_http09_answer_is_a_protocol_error"): (
        "httpcore2 says 'Server disconnected without sending a response' whether or not bytes "
        "came before the close: a head-less answer without a blank line looks like a reset"
    ),
    ("asks", "test_a_one_line_http09_answer_is_a_protocol_error"): (
        "h11's 'peer unexpectedly closed connection' after part of a head is read as the peer "
        "hanging up (reset), as it is for a head cut short"
    ),
}
