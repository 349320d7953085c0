"""The pure-Python fetcher: one shared ``httpx2.AsyncClient``, driven by trio.

Rules (the ``Fetcher`` rules of ``base.py``, and how this module keeps them;
what every fetcher shares is in ``request``, ``body``, ``decode`` and ``errors``):

1. One client, one pool, for the whole crawl: ``max_connections`` and
   ``max_keepalive_connections`` both equal ``FetchConfig.max_connections``,
   so every crawler task can keep its connection alive between pages.
2. Redirects are never followed (``follow_redirects=False`` on every request,
   so a user-supplied client cannot turn it on by default).
3. The body is streamed raw and decoded by ``body.read_capped`` in bounded
   steps: at most 64 KiB of decoded bytes exist beyond what has been counted
   against ``max_bytes``, so a gzip bomb stops at the cap whatever httpx
   version the client comes from. The wire size is capped as well.
4. Unknown content codings are passed through undecoded, as browsers do;
   broken gzip/deflate/brotli data is ``FetchError("decode")``.
5. Deadlines: httpx enforces connect and read timeouts; ``trio.fail_after``
   around the whole exchange enforces the total (pool wait included).
   (rules 8, 9 and 11 concern only the client ``make_client`` builds; a
   user-supplied client keeps its own TLS and HTTP/2 settings.)
6. Every foreign exception becomes a ``FetchError`` on one path,
   ``errors.translated_errors`` with this module's ``error_kind``, the
   original as ``__cause__``. Anything it does not know is a bug and
   escapes unchanged.
7. A response is always closed in a bounded, shielded scope
   (``body.close_shielded``), even when the fetch is cancelled, so a
   cancelled fetch can never keep its pool slot.
   (httpx/httpcore have leaked slots on cancellation under trio: encode/httpx
   #1461, #2139, #2294, encode/httpcore#642. httpx2 2.16 passes the stress test
   in ``tests/test_fetchers.py`` even without this guard; a user-supplied
   client from an older httpx may not.)
8. TLS: peers are verified against ``FetchConfig.ca_bundle``, else
   ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else httpcore2's default (OpenSSL's
   default paths on Linux; see ``fetch.tls``).
9. HTTP/2 is offered on https connections only with ``FetchConfig.http2``,
   which needs the ``h2`` package (``pip install 'trio-crawl[http2]'``).
10. Identity and proxies are decided outside httpx, as in every fetcher:
    headers and cookies by ``fetch.identity`` (the client's own cookie jar
    refuses everything, so httpx never keeps or sends a cookie behind its
    back), the proxy of each request by ``fetch.proxy`` through
    ``ProxyRouter`` (httpx's own reading of the environment is off:
    ``trust_env=False``). A user-supplied client gets the identity headers
    and cookies too, but keeps its own transport, proxies and cookie jar.
11. Host names are looked up once per crawl, off the event loop: every
    transport of the client connects through one ``ResolvingBackend``
    (``fetch.httpx_network``) sharing one ``CachingResolver``
    (``fetch.dns.resolve``); TLS and the ``Host`` header keep the name.

Exceptions and their kinds (see ``error_kind``)::

    (httpx = httpx, httpx2, or an httpcore class of the same name)
    httpx TimeoutException (connect/read/write/pool)                    -> timeout
    httpx ConnectError caused by an ssl.SSLError (handshake failed)    -> tls
    httpx ConnectError, ProxyError, UnsupportedProtocol, InvalidURL      -> connect
    httpx ReadError, WriteError, CloseError                              -> reset
    httpx RemoteProtocolError "Server disconnected ..." (no answer yet)  -> reset
    httpx RemoteProtocolError (truncated body, bad chunking, bad head),
          LocalProtocolError                                             -> protocol
    httpx DecodingError, zlib.error, brotli.error                        -> decode
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx2
import trio

from ..core.http import FetchConfig
from ..core.models import FetchResult
from ..core.proxy import ProxyChooser
from .body import (
    close_shielded,
    content_length,
    declared_too_large,
    drains,
    joined_headers,
    read_capped,
    skips_body,
    too_large,
)
from .decode import ACCEPT_ENCODING, is_decode_error
from .dns.resolve import CachingResolver
from .errors import translated_errors
from .httpx_network import ResolvingBackend, use_backend
from .identity import Identity
from .request import check_url, request_headers
from .tls import is_tls_failure, ssl_context

Transport = httpx2.AsyncBaseTransport

__all__ = [
    "ACCEPT_ENCODING",
    "HttpxFetcher",
    "ProxyRouter",
    "error_kind",
    "make_client",
    "open_httpx_fetcher",
]


# -- the one place foreign exceptions are translated -----------------------------

#: httpcore shares the class names; its errors should arrive wrapped by httpx,
#: but one that slips through still means the same thing.
_HTTPX_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2")

_HTTPX_KINDS: dict[str, str] = {
    # most specific first within each branch of the httpx tree; first MRO hit wins
    "TimeoutException": "timeout",
    "ConnectError": "connect",
    "ProxyError": "connect",
    "UnsupportedProtocol": "connect",
    "InvalidURL": "connect",
    "ReadError": "reset",
    "WriteError": "reset",
    "CloseError": "reset",
    "RemoteProtocolError": "protocol",
    "LocalProtocolError": "protocol",
    "ProtocolError": "protocol",
    "DecodingError": "decode",
}


def error_kind(exc: BaseException) -> str | None:
    """The ``FetchError`` kind for a failure, or ``None`` if it is a bug.

    httpx classes are matched by name along the MRO, so a client from plain
    ``httpx`` (same tree, different module) maps just like ``httpx2``, and so
    does an httpcore error that escaped httpx's own translation.
    """
    if is_decode_error(exc):
        return "decode"
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] not in _HTTPX_MODULES:
            continue
        kind = _HTTPX_KINDS.get(cls.__name__)
        if kind == "protocol" and "disconnected without sending" in str(exc):
            return "reset"  # closed before any answer: the peer hung up, not bad HTTP
        if kind == "connect" and is_tls_failure(exc):
            return "tls"
        if kind is not None:
            return kind
    return None


# -- the fetcher ----------------------------------------------------------------


class HttpxFetcher:
    """Fetch pages through one shared httpx client.

    Prefer ``open_httpx_fetcher``. Direct construction suits tests with
    ``httpx2.MockTransport``; the client is closed by ``aclose`` only when
    ``owns_client`` is true.
    """

    def __init__(
        self, config: FetchConfig, client: httpx2.AsyncClient, *, owns_client: bool = False
    ) -> None:
        self.config = config
        self._client = client
        self._owns_client = owns_client
        self._closed = False
        self._timeout = httpx2.Timeout(config.timeout, connect=config.connect_timeout, pool=None)
        self._headers = {"User-Agent": config.user_agent, "Accept-Encoding": ACCEPT_ENCODING}
        self._identity = Identity(config)

    def __repr__(self) -> str:
        return f"<HttpxFetcher owns_client={self._owns_client} closed={self._closed}>"

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        """GET ``url`` once. A checkpoint; cancellation releases the connection.

        Raises ``FetchError`` (see the module docstring for the kinds).
        """
        with translated_errors(error_kind, self.config.timeout):
            check_url(url)
            extra = request_headers(self._identity.outgoing(url, headers))
            with trio.fail_after(self.config.timeout):
                return await self._exchange(url, extra, any_body)

    async def _exchange(
        self, url: str, headers: dict[str, str] | None, any_body: bool
    ) -> FetchResult:
        start = trio.current_time()
        sent = {**self._headers, **headers} if headers else self._headers
        request = self._client.build_request("GET", url, headers=sent, timeout=self._timeout)
        response = await self._client.send(request, stream=True, follow_redirects=False)
        try:
            self._identity.received(url, response.headers.get_list("set-cookie"))
            joined = joined_headers(response.headers.multi_items())
            skip = skips_body(self.config.html_only, any_body, joined.get("content-type"))
            if skip:
                await self._maybe_drain(response, joined)
                body = b""
            else:
                body = await self._read_body(response, joined)
            elapsed = trio.current_time() - start
            return FetchResult(
                url, response.status_code, joined, body, elapsed, skip, response.http_version
            )
        finally:
            await close_shielded(response.aclose)

    async def _read_body(self, response: httpx2.Response, headers: dict[str, str]) -> bytes:
        cap = self.config.max_bytes
        error = declared_too_large(response.status_code, content_length(headers), cap)
        if error is not None:
            raise error
        if response.is_stream_consumed:
            # Already in memory (a MockTransport answer, an event hook that read
            # it) and already decoded by httpx: nothing left to bound.
            if len(response.content) > cap:
                raise too_large(cap)
            return response.content
        return await read_capped(response.aiter_raw(), headers.get("content-encoding"), cap)

    async def _maybe_drain(self, response: httpx2.Response, headers: dict[str, str]) -> None:
        """Read a small unwanted body so its connection stays reusable; a big
        or unsized one is abandoned (closing the connection is cheaper)."""
        if not drains(content_length(headers)) or response.is_stream_consumed:
            return
        async for _ in response.aiter_raw():
            pass

    async def aclose(self) -> None:
        """Close the client if we created it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self._client.aclose()


class _NoCookies(DefaultCookiePolicy):
    """Keeps nothing, sends nothing: the policy of the client's own jar (rule 10)."""

    def set_ok(self, cookie: object, request: object) -> bool:
        return False

    def return_ok(self, cookie: object, request: object) -> bool:
        return False


class ProxyRouter(httpx2.AsyncBaseTransport):
    """Sends each request directly or through the proxy ``fetch.proxy``
    chooses for its URL: one transport (one pool) per proxy, made when first
    needed, all closed with the router."""

    def __init__(self, chooser: ProxyChooser, make: Callable[[str | None], Transport]) -> None:
        self._chooser = chooser
        self._make = make
        self._transports: dict[str | None, Transport] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        proxy = self._chooser.proxy_for(str(request.url))
        transport = self._transports.get(proxy)
        if transport is None:
            transport = self._transports[proxy] = self._make(proxy)
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            await transport.aclose()


def make_client(
    config: FetchConfig, resolver: CachingResolver | None = None
) -> httpx2.AsyncClient:
    """The client ``open_httpx_fetcher`` uses when given none.

    Proxies follow ``FetchConfig.proxy`` and the environment (``fetch.proxy``)
    and CA settings are honoured (rule 8); the client keeps no cookies
    (rule 10). Host names are looked up through ``resolver`` (rule 11; a new
    ``CachingResolver`` when None), shared by every transport. Raises
    ``ImportError`` for ``http2`` without the ``h2`` package, and
    ``FileNotFoundError`` for a ``ca_bundle`` that does not exist.
    """
    limits = httpx2.Limits(
        max_connections=config.max_connections,
        max_keepalive_connections=config.max_connections,
    )
    if config.http2 and importlib.util.find_spec("h2") is None:
        raise ImportError(
            "HTTP/2 with the httpx fetcher needs the h2 package: pip install 'trio-crawl[http2]'"
        )
    context = ssl_context(config.ca_bundle, os.environ)
    verify = True if context is None else context
    backend = ResolvingBackend(CachingResolver() if resolver is None else resolver)

    def transport(proxy: str | None) -> Transport:
        made = httpx2.AsyncHTTPTransport(
            verify=verify, http2=config.http2, limits=limits, proxy=proxy, trust_env=False
        )
        use_backend(made, backend)
        return made

    chooser = ProxyChooser(config.proxy, os.environ)
    return httpx2.AsyncClient(
        verify=verify,
        http2=config.http2,
        limits=limits,
        transport=ProxyRouter(chooser, transport) if chooser.may_proxy else transport(None),
        cookies=CookieJar(policy=_NoCookies()),
        timeout=httpx2.Timeout(config.timeout, connect=config.connect_timeout, pool=None),
        follow_redirects=False,
        headers={"User-Agent": config.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
        trust_env=False,
    )


@asynccontextmanager
async def open_httpx_fetcher(
    config: FetchConfig,
    client: httpx2.AsyncClient | None = None,
    *,
    resolver: CachingResolver | None = None,
) -> AsyncIterator[HttpxFetcher]:
    """An ``HttpxFetcher`` for the duration of the block.

    With no ``client``, creates one (``make_client``, with ``resolver``) and
    closes it on exit, even when the block is cancelled. A given client
    (``httpx2`` or plain ``httpx``) is used as is and left open (and resolves
    names its own way: ``resolver`` is then a ``ValueError``).
    """
    if client is not None and resolver is not None:
        raise ValueError("open_httpx_fetcher(): give a client or a resolver, not both")
    owns = client is None
    fetcher = HttpxFetcher(
        config, make_client(config, resolver) if client is None else client, owns_client=owns
    )
    try:
        yield fetcher
    finally:
        await close_shielded(fetcher.aclose)
