"""The asks fetcher: one ``asks.Session`` (h11 over anyio 3), driven by trio.

asks 3.0.0, its last release, needs anyio 3, and anyio 3 works only on
trio < 0.24 (trio 0.24 removed ``trio.MultiError``, which anyio 3 subclasses).
pip cannot install asks beside a current trio-crawl (httpx2 needs anyio 4), so
there is no ``trio_crawl[asks]`` extra: the nox session ``asks`` installs a
set that works (asks 3.0.0, anyio 3.7.1, trio 0.23.2) and runs the whole suite
there. Nothing imports asks until ``open_asks_fetcher`` runs;
``import trio_crawl`` never needs it.

Rules (the ``Fetcher`` rules of ``base.py``, and how this module keeps them;
what every fetcher shares is in ``request``, ``body``, ``decode`` and ``errors``):

1. One session for the crawl, ``connections=FetchConfig.max_connections``.
   asks's own semaphore is released once the head has arrived, so a
   ``trio.Semaphore`` of the same size covers the whole exchange, body
   included: at most ``max_connections`` sockets are ever busy.
2. Redirects are never followed (``follow_redirects=False``) and asks never
   retries on its own (``retries=0``): retries are the engine's decision.
3. The body is streamed (``stream=True``). asks hands over the h11
   connection and the socket of a streamed answer; ``_BodyReader`` reads them
   itself rather than through asks's ``StreamBody`` iterator, which inflates
   each read without bound (a gzip bomb grows 1000x per read), raises
   ``KeyError`` on codings it does not know (``br``, ``identity``), cannot
   read raw deflate, and lets ``EndOfStream`` escape at the end of a body
   delimited by the connection closing. ``body.read_capped`` (shared with
   the httpx fetcher) decodes in bounded steps; wire and decoded sizes are
   capped at ``max_bytes``.
4. Keep-alive: asks asks for ``Connection: close`` unless told otherwise and
   never pools the socket of a streamed answer. We send ``keep-alive`` and
   give back (``Session.return_to_pool``) a socket whose answer was read to
   its end and whose h11 state allows another request. Before each request
   and after each give-back, idle sockets the server has closed (readable
   while idle) are dropped, and at most ``max_connections`` idle sockets are
   kept (oldest closed first):
   asks checks neither, so a long crawl would otherwise reuse dead
   connections and hold one open socket per host ever visited.
5. Deadlines: ``connect_timeout`` is asks's ``connection_timeout``;
   ``timeout`` is asks's head ``timeout`` and, with ``trio.fail_after``, the
   total for the whole exchange (slot wait, connect, head and body).
6. Every foreign exception becomes a ``FetchError`` on one path,
   ``errors.translated_errors`` with this module's ``error_kind``, the
   original as ``__cause__``. Anything it does not know is a bug and
   escapes unchanged.
7. A socket that is not given back to the pool is closed in a bounded,
   shielded scope (``body.close_shielded``), whatever ended the fetch
   (answer read, error, cancel).
8. TLS: peers are verified against ``FetchConfig.ca_bundle``, else
   ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else Python's default context (see
   ``fetch.tls``). asks speaks HTTP/1.1 only: ``FetchConfig.http2`` is
   ignored.
9. What asks cannot do: repeated response headers other than ``Set-Cookie``
   keep only their last value (asks stores headers in a dict), and header
   bytes that are not UTF-8 are a ``protocol`` error. We send our own
   ``Host`` header (asks builds a wrong one for IPv6 literals).
10. Identity as in every fetcher (``fetch.identity``: headers, basic auth,
    cookies; asks's own cookie keeping stays off). asks cannot use a proxy:
    ``open_asks_fetcher`` refuses a ``FetchConfig.proxy``, and proxy
    variables in the environment are ignored.
11. One process-wide side effect: loading asks installs a warnings filter
    for the ``trio.MultiError`` deprecation that anyio 3 triggers on import
    and whenever an exception leaves one of its task groups (every cancelled
    connect). It matches only that message from ``anyio._backends._trio``.

asks internals used (pinned: asks 3.0.0 will not change): a streamed
answer's ``body.h11_connection`` and ``body.sock``, ``Session._conn_pool``
(a deque of idle sockets, newest on the left) and ``Session.return_to_pool``.

Exceptions and their kinds (see ``error_kind``)::

    asks RequestTimeout, TimeoutError                                -> timeout
    ssl.SSLError (handshake, certificate), or one behind a
        connect failure                                              -> tls
    OSError (refused, DNS), other asks
        ConnectivityError, unsupported scheme or no host             -> connect
    anyio BrokenResourceError / EndOfStream, ConnectionResetError,
        BrokenPipeError, asks BadHttpResponse from the peer closing
        before a complete head                                       -> reset
    asks BadHttpResponse, h11 RemoteProtocolError (truncated body,
        bad chunking), h11 LocalProtocolError, UnicodeDecodeError    -> protocol
    zlib.error, brotli.error                                         -> decode
"""

from __future__ import annotations

import importlib
import os
import select
import socket
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import h11
import trio
from anyio.abc import SocketAttribute

from ..core.http import FetchConfig
from ..core.models import FetchResult
from ..errors import FetchError
from .body import (
    close_shielded,
    content_length,
    declared_too_large,
    drains,
    join_header,
    read_capped,
    skips_body,
)
from .decode import ACCEPT_ENCODING, is_decode_error
from .errors import translated_errors
from .identity import Identity
from .request import check_url, request_headers
from .tls import is_tls_failure, ssl_context

__all__ = [
    "AsksFetcher",
    "AsksFetcherStatistics",
    "error_kind",
    "load_asks",
    "make_session",
    "open_asks_fetcher",
]

_READ_SIZE = 64 * 1024  # bytes asked of the socket per read while streaming a body

#: The one deprecation anyio 3 triggers under trio 0.22/0.23, on import and
#: whenever an exception leaves one of its task groups.
_MULTIERROR_MESSAGE = r"trio\.MultiError is deprecated"
_MULTIERROR_MODULE = r"anyio\._backends\._trio$"


# -- loading asks --------------------------------------------------------------


def load_asks() -> Any:
    """Import asks and anyio's trio backend, or explain why they cannot run.

    anyio loads its trio backend on first use, deep inside the first fetch;
    loading it here makes a trio too new for anyio 3 fail at once, with a
    message that says what to install, instead of as a bug in a fetch.
    Raises ``ImportError``.
    """
    try:
        asks = importlib.import_module("asks")  # untyped: attributes are Any
        warnings.filterwarnings(
            "ignore",
            message=_MULTIERROR_MESSAGE,
            category=FutureWarning,
            module=_MULTIERROR_MODULE,
        )
        importlib.import_module("anyio._backends._trio")
    except ImportError as exc:
        raise ImportError(
            f"the asks fetcher needs asks 3 with anyio 3, on trio < 0.24 ({exc}); "
            "the nox session 'asks' shows an install that works"
        ) from exc
    except AttributeError as exc:  # anyio 3 on a trio without MultiError
        raise ImportError(
            f"asks needs anyio 3, which does not run on trio {getattr(trio, '__version__', '?')} "
            f"({exc}); the asks fetcher needs trio < 0.24 (the nox session 'asks' pins "
            "versions that work)"
        ) from exc
    return asks


# -- the one place foreign exceptions are translated -----------------------------

_KINDS: dict[tuple[str, str], str] = {
    # (top-level module, class name) -> kind; the first hit along the MRO wins
    ("asks", "RequestTimeout"): "timeout",
    ("asks", "BadHttpResponse"): "protocol",
    ("asks", "ConnectivityError"): "connect",
    ("anyio", "BrokenResourceError"): "reset",
    ("anyio", "EndOfStream"): "reset",
    ("h11", "RemoteProtocolError"): "protocol",
    ("h11", "LocalProtocolError"): "protocol",
    ("builtins", "TimeoutError"): "timeout",
    ("builtins", "ConnectionResetError"): "reset",
    ("builtins", "ConnectionAbortedError"): "reset",
    ("builtins", "BrokenPipeError"): "reset",
    ("builtins", "OSError"): "connect",
    ("builtins", "UnicodeDecodeError"): "protocol",
    ("brotli", "error"): "decode",
    ("ssl", "SSLEOFError"): "reset",  # the peer closed the TLS stream
    ("ssl", "SSLZeroReturnError"): "reset",
    ("ssl", "SSLError"): "tls",
}

#: What h11 says (wrapped by asks in BadHttpResponse) when the peer closes
#: before a whole head: after nothing at all, and after part of a head.
_NO_HEAD = ("can't handle event type ConnectionClosed", "peer unexpectedly closed connection")


def error_kind(exc: BaseException) -> str | None:
    """The ``FetchError`` kind for a failure, or ``None`` if it is a bug.

    Classes are matched by module and name along the MRO, so this runs (and
    is tested) without asks installed.
    """
    if is_decode_error(exc):
        return "decode"
    for cls in type(exc).__mro__:
        kind = _KINDS.get((cls.__module__.split(".")[0], cls.__name__))
        if kind is None:
            continue
        cause = str(exc.__cause__ or "")
        if cls.__name__ == "BadHttpResponse" and any(text in cause for text in _NO_HEAD):
            return "reset"  # closed before a complete head: the peer hung up
        if kind == "connect" and is_tls_failure(exc):
            return "tls"
        return kind
    return None


# -- sockets and bodies ------------------------------------------------------------


def _readable_now(raw: socket.socket) -> bool:
    """Whether an idle socket has something to read: end of stream, a reset,
    or bytes nobody asked for. Either way it must not carry a request."""
    fd = raw.fileno()
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([raw], [], [], 0)  # pragma: no cover - Windows
    return bool(readable)


def _is_stale(sock: Any) -> bool:
    raw = sock.extra(SocketAttribute.raw_socket, None)
    return raw is None or _readable_now(raw)


class _BodyReader:
    """One streamed body, read from the h11 connection and socket that asks
    hands over. ``reusable`` once the answer was read to its end and neither
    side asked to close."""

    def __init__(self, stream_body: Any) -> None:
        self._h11: h11.Connection = stream_body.h11_connection
        self.sock: Any = stream_body.sock
        self._ended = False

    async def next_chunk(self) -> bytes | None:
        """The next piece of the (still encoded) body, ``None`` at its end.
        Checkpoint. Raises h11 ``RemoteProtocolError`` on a truncated or
        malformed body, anyio ``BrokenResourceError`` on a reset."""
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await self.sock.receive(_READ_SIZE)
                except anyio.EndOfStream:
                    data = b""  # h11 decides: end of a close-delimited body, or truncation
                self._h11.receive_data(data)
            elif isinstance(event, h11.Data):
                return bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._ended = True
                return None
            else:
                raise RuntimeError(f"unexpected h11 event in a response body: {event!r}")

    @property
    def reusable(self) -> bool:
        return (
            self._ended and self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE
        )


# -- the fetcher ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AsksFetcherStatistics:
    """A snapshot of an ``AsksFetcher``.

    ``busy``: fetches holding one of the ``max_connections`` slots;
    ``idle``: kept-alive sockets waiting in the session's pool (at most
    ``max_connections`` between fetches); ``closed``: ``aclose`` ran.
    """

    busy: int
    idle: int
    closed: bool


class AsksFetcher:
    """Fetch pages through one shared ``asks.Session``.

    Create it with ``open_asks_fetcher``. ``session`` is an ``asks.Session``;
    ``aclose`` closes it (and every idle socket in it).
    """

    def __init__(self, config: FetchConfig, session: Any) -> None:
        self.config = config
        self._session = session
        self._slots = trio.Semaphore(config.max_connections)
        self._closed = False
        self._identity = Identity(config)

    def __repr__(self) -> str:
        stats = self.statistics()
        return f"<AsksFetcher busy={stats.busy} idle={stats.idle} closed={stats.closed}>"

    def statistics(self) -> AsksFetcherStatistics:
        return AsksFetcherStatistics(
            busy=self.config.max_connections - self._slots.value,
            idle=len(self._session._conn_pool),
            closed=self._closed,
        )

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        """GET ``url`` once. A checkpoint; cancellation closes the connection.

        Raises ``FetchError`` (see the module docstring for the kinds), and
        ``RuntimeError`` after ``aclose``.
        """
        if self._closed:
            raise RuntimeError("fetch() on a closed AsksFetcher")
        with translated_errors(error_kind, self.config.timeout):
            check_url(url)
            host = _host_header(url)
            extra = request_headers(self._identity.outgoing(url, headers))
            with trio.fail_after(self.config.timeout):
                async with self._slots:
                    return await self._exchange(url, host, extra, any_body)

    async def _exchange(
        self, url: str, host: str, headers: dict[str, str] | None, any_body: bool
    ) -> FetchResult:
        start = trio.current_time()
        await self._tidy_pool()
        sent = {"Host": host, **headers} if headers else {"Host": host}
        response = await self._session.get(
            url,
            headers=sent,
            stream=True,
            follow_redirects=False,
            retries=0,
            timeout=self.config.timeout,
            connection_timeout=self.config.connect_timeout,
        )
        # asks streams only answers it expects a body for; others arrive read
        # (empty), their socket already back in the pool.
        streamed = not isinstance(response.body, bytes | bytearray)
        reader = _BodyReader(response.body) if streamed else None
        try:
            self._identity.received(url, _set_cookies(response.headers))
            joined = _joined_headers(response.headers)
            skip = skips_body(self.config.html_only, any_body, joined.get("content-type"))
            body = b""
            if reader is None:
                body = bytes(response.body)
            elif skip:
                await _maybe_drain(reader, joined)
            else:
                body = await self._read_body(reader, joined, response.status_code)
            elapsed = trio.current_time() - start
            version = f"HTTP/{response.http_version}" if response.http_version else None
            return FetchResult(url, response.status_code, joined, body, elapsed, skip, version)
        finally:
            if reader is not None:
                await self._release(reader)

    async def _read_body(self, reader: _BodyReader, headers: dict[str, str], status: int) -> bytes:
        cap = self.config.max_bytes
        error = declared_too_large(status, content_length(headers), cap)
        if error is not None:
            raise error
        return await read_capped(_chunks(reader), headers.get("content-encoding"), cap)

    async def _release(self, reader: _BodyReader) -> None:
        """Give a cleanly finished socket back to the pool; close any other.
        Neither path can be interrupted half-way (``return_to_pool`` has no
        checkpoint; the close is shielded)."""
        if reader.reusable and not self._closed:
            await self._session.return_to_pool(reader.sock)
            await self._tidy_pool()
        else:
            await close_shielded(reader.sock.aclose)

    async def _tidy_pool(self) -> None:
        """Drop idle sockets the server has closed, and keep at most
        ``max_connections`` idle ones (the pool's right end is the oldest).
        Runs before each request and after a socket is given back (asks
        gives back the sockets of bodyless answers itself)."""
        pool = self._session._conn_pool
        doomed = [sock for sock in pool if _is_stale(sock)]
        for sock in doomed:
            pool.remove(sock)
        while len(pool) > self.config.max_connections:
            doomed.append(pool.pop())
        for sock in doomed:
            await close_shielded(sock.aclose)

    async def aclose(self) -> None:
        """Close the session and its idle sockets. Idempotent; a fetch still
        running closes its own socket when it ends."""
        if self._closed:
            return
        self._closed = True
        await self._session.close()


async def _maybe_drain(reader: _BodyReader, headers: dict[str, str]) -> None:
    """Read a small unwanted body so its connection stays reusable; a big or
    unsized one is abandoned (closing the connection is cheaper)."""
    if not drains(content_length(headers)):
        return
    while await reader.next_chunk() is not None:
        pass


def _joined_headers(headers: Any) -> dict[str, str]:
    """Lower-case names; asks keeps ``Set-Cookie`` as a list, joined here."""
    joined: dict[str, str] = {}
    for name, value in headers.lower_items():
        join_header(joined, name, ", ".join(value) if isinstance(value, list) else value)
    return joined


def _set_cookies(headers: Any) -> list[str]:
    """The answer's Set-Cookie fields (asks keeps a repeated one as a list)."""
    found: list[str] = []
    for name, value in headers.lower_items():
        if name == "set-cookie":
            found.extend(value if isinstance(value, list) else [value])
    return found


async def _chunks(reader: _BodyReader) -> AsyncIterator[bytes]:
    while (raw := await reader.next_chunk()) is not None:
        yield raw


def _host_header(url: str) -> str:
    """The ``Host`` header for ``url``; ``FetchError("connect")`` for a URL
    asks cannot fetch (asks would open TLS to port 80 for ``ftp://``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError("connect", f"cannot fetch {url!r}: only http(s) URLs with a host")
    return parts.netloc.rpartition("@")[2]


def make_session(config: FetchConfig) -> Any:
    """The ``asks.Session`` ``open_asks_fetcher`` uses. Raises ``ImportError``
    when asks cannot run here (see ``load_asks``)."""
    asks = load_asks()
    return asks.Session(
        ssl_context=ssl_context(config.ca_bundle, os.environ),
        connections=config.max_connections,
        headers={
            "User-Agent": config.user_agent,
            "Accept-Encoding": ACCEPT_ENCODING,
            "Connection": "keep-alive",
        },
    )


@asynccontextmanager
async def open_asks_fetcher(config: FetchConfig) -> AsyncIterator[AsksFetcher]:
    """An ``AsksFetcher`` for the duration of the block; its session is
    closed on exit, even when the block is cancelled.

    Raises ``ImportError`` before entering when asks (or an anyio 3 that runs
    on this trio) is missing, ``ValueError`` for a ``FetchConfig.proxy`` (rule 10).
    """
    if config.proxy:
        raise ValueError("--proxy is not supported with --fetcher asks")
    fetcher = AsksFetcher(config, make_session(config))
    try:
        yield fetcher
    finally:
        await close_shielded(fetcher.aclose)
