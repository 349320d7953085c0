"""The HTTP vocabulary the pure core and the fetchers share: how a fetcher is
configured, the default User-Agent, and which content types are pages.

Pure: no HTTP client and no trio here. Fetchers (``trio_crawl.fetch``) import
this module; it imports nothing of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .content_type import is_html_content_type as is_html_content_type
from .identity import Credentials

if TYPE_CHECKING:
    # Only in annotations: http.cookiejar pulls in urllib.request and
    # http.client (~8 ms at start-up); a crawl with cookies imports it itself.
    from http.cookiejar import CookieJar

DEFAULT_USER_AGENT = "trio-crawl/0.1 (+https://github.com/trio-crawl/trio-crawl)"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSettings:
    """How to talk to servers, as a user says it: written once, here, for
    the two configurations that hold it. ``FetchConfig`` (one fetcher's)
    adds what a fetcher is given resolved, and ``core.settings.Fetching``
    (a crawl's) adds the crawl's own choices (the client, its retries, the
    credentials to resolve).
    """

    user_agent: str = DEFAULT_USER_AGENT
    timeout: float = 30.0  # total seconds for one exchange
    connect_timeout: float = 10.0
    max_bytes: int = 10 * 1024 * 1024
    html_only: bool = True
    ca_bundle: str | None = None
    http2: bool = False
    cookies: CookieJar | None = field(default=None, repr=False, compare=False)
    proxy: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchConfig(ClientSettings):
    """How a fetcher talks to servers (``ClientSettings``), with its
    connections, headers and credentials resolved. Keyword-only; all fields
    have defaults.

    ``max_connections`` should match the number of crawler tasks, so that the
    pool never makes a crawler wait for a slot another crawler is not using.

    ``ca_bundle`` is a PEM file (or an OpenSSL hashed directory) of the CAs
    that https peers are verified against, instead of the system's; without
    it, ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` (and ``CURL_CA_BUNDLE`` for
    curl) are honoured. ``http2`` offers HTTP/2 (ALPN ``h2``) on https
    connections; without it every fetcher speaks HTTP/1.1.
    """

    max_connections: int = 16
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    trusted_origins: tuple[str, ...] = ()
    credentials: tuple[Credentials, ...] = field(default=(), repr=False)
