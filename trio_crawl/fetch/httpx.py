"""The pure-Python fetcher: one shared ``httpx2.AsyncClient``, driven by trio.

Rules (the ``Fetcher`` rules of ``_fetch.py``, and how this module keeps them):

1. One client, one pool, for the whole crawl: ``max_connections`` and
   ``max_keepalive_connections`` both equal ``FetchConfig.max_connections``,
   so every crawler task can keep its connection alive between pages.
2. Redirects are never followed (``follow_redirects=False`` on every request,
   so a user-supplied client cannot turn it on by default).
3. The body is streamed raw and decoded here, by ``BodyDecoder``, in bounded
   steps: at most ``_STEP`` decoded bytes exist beyond what has been counted
   against ``max_bytes``, so a gzip bomb stops at the cap whatever httpx
   version the client comes from. The wire size is capped as well.
4. Unknown content codings are passed through undecoded, as browsers do;
   broken gzip/deflate/brotli data is ``FetchError("decode")``.
5. Deadlines: httpx enforces connect and read timeouts; ``trio.fail_after``
   around the whole exchange enforces the total (pool wait included).
6. Every foreign exception becomes a ``FetchError`` in exactly one place,
   ``error_kind``, with the original as ``__cause__``. Anything it does not
   know is a bug and escapes unchanged.
7. A response is always closed in a bounded, shielded scope, even when the
   fetch is cancelled, so a cancelled fetch can never keep its pool slot.
   (httpx/httpcore have leaked slots on cancellation under trio: encode/httpx
   #1461, #2139, #2294, encode/httpcore#642. httpx2 2.16 passes the stress test
   in ``tests/test_fetchers.py`` even without this guard; a user-supplied
   client from an older httpx may not.)

Exceptions and their kinds (see ``error_kind``)::

    (httpx = httpx, httpx2, or an httpcore class of the same name)
    trio.TooSlowError, httpx TimeoutException (connect/read/write/pool)  -> timeout
    httpx ConnectError, ProxyError, UnsupportedProtocol, InvalidURL      -> connect
    httpx ReadError, WriteError, CloseError                              -> reset
    httpx RemoteProtocolError "Server disconnected ..." (no answer yet)  -> reset
    httpx RemoteProtocolError (truncated body, bad chunking, bad head),
          LocalProtocolError                                             -> protocol
    httpx DecodingError, zlib.error, brotli.error                        -> decode
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import trio

from ..core.http import FetchConfig, is_html_content_type
from ..core.models import FetchError, FetchResult
from .base import translated_errors

try:
    import brotli as _brotli
except ImportError:  # pragma: no cover - brotli is an optional extra
    _brotli = None

__all__ = ["BodyDecoder", "HttpxFetcher", "error_kind", "open_httpx_fetcher"]

_STEP = 64 * 1024  # most decoded bytes produced per decompressor call
_DRAIN_LIMIT = 16 * 1024  # skipped bodies this small are read to keep the connection
_CLOSE_GRACE = 2.0  # seconds a cancelled fetch may spend releasing its connection


def _brotli_is_bounded() -> bool:
    """brotli >= 1.2 can cap the output of one call; older versions cannot,
    so we neither advertise nor decode ``br`` with them."""
    if _brotli is None:
        return False
    try:
        _brotli.Decompressor().process(b"", output_buffer_limit=1)
    except TypeError:
        return False
    return True


_BROTLI = _brotli_is_bounded()
ACCEPT_ENCODING = "gzip, deflate, br" if _BROTLI else "gzip, deflate"


# -- decoding (pure) ----------------------------------------------------------


class _Zlib:
    """gzip or deflate. Deflate is zlib-wrapped per RFC 9110, but some servers
    send raw deflate: the first two bytes tell which, so deflate holds back
    input until it has two."""

    def __init__(self, coding: str) -> None:
        self._d: Any = zlib.decompressobj(zlib.MAX_WBITS | 16) if coding == "gzip" else None
        self._pending = b""

    def _choose(self) -> bytes:
        data, self._pending = self._pending, b""
        head = data[:2]
        wrapped = len(head) == 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
        self._d = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return data

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._d is None:
            self._pending += data
            if len(self._pending) < 2:
                return
            data = self._choose()
        out = self._d.decompress(data, _STEP)
        while out:
            yield out
            out = self._d.decompress(self._d.unconsumed_tail, _STEP)

    def finish(self) -> Iterator[bytes]:
        if self._d is None:
            if not self._pending:
                return
            yield from self.feed(self._choose())
        yield self._d.flush()


class _Brotli:
    def __init__(self) -> None:
        assert _brotli is not None
        self._d = _brotli.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        if not data:
            return
        out = self._d.process(data, output_buffer_limit=_STEP)
        while True:
            if out:
                yield out
            # brotli wants empty input until it has emitted what it holds
            if self._d.can_accept_more_data() or self._d.is_finished():
                return
            out = self._d.process(b"", output_buffer_limit=_STEP)

    def finish(self) -> Iterator[bytes]:
        yield from ()


class BodyDecoder:
    """Undo ``Content-Encoding`` incrementally, never producing more than
    64 KiB per step, so the caller can stop as soon as its cap is passed.

    ``feed(chunk)`` and ``finish()`` yield decoded pieces. Codings are undone
    in reverse order of application; ``identity`` and unknown codings pass
    through. Raises ``zlib.error`` / ``brotli.error`` on corrupt data.
    """

    def __init__(self, content_encoding: str | None) -> None:
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        self._stages: list[_Zlib | _Brotli] = []
        for coding in reversed(codings):
            if coding in ("gzip", "x-gzip"):
                self._stages.append(_Zlib("gzip"))
            elif coding == "deflate":
                self._stages.append(_Zlib("deflate"))
            elif coding == "br" and _BROTLI:
                self._stages.append(_Brotli())

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._through(0, iter((data,)))

    def finish(self) -> Iterator[bytes]:
        return self._finish_from(0)

    def _through(self, index: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
        if index == len(self._stages):
            yield from pieces
            return
        stage = self._stages[index]
        for piece in pieces:
            yield from self._through(index + 1, stage.feed(piece))

    def _finish_from(self, index: int) -> Iterator[bytes]:
        if index == len(self._stages):
            return
        yield from self._through(index + 1, self._stages[index].finish())
        yield from self._finish_from(index + 1)


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
    if isinstance(exc, trio.TooSlowError):
        return "timeout"
    if isinstance(exc, zlib.error) or (_brotli is not None and isinstance(exc, _brotli.error)):
        return "decode"
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] not in _HTTPX_MODULES:
            continue
        kind = _HTTPX_KINDS.get(cls.__name__)
        if kind == "protocol" and "disconnected without sending" in str(exc):
            return "reset"  # closed before any answer: the peer hung up, not bad HTTP
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

    def __repr__(self) -> str:
        return f"<HttpxFetcher owns_client={self._owns_client} closed={self._closed}>"

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        """GET ``url`` once. A checkpoint; cancellation releases the connection.

        Raises ``FetchError`` (see the module docstring for the kinds).
        """
        with translated_errors(error_kind, self.config.timeout):
            with trio.fail_after(self.config.timeout):
                return await self._exchange(url, headers, any_body)

    async def _exchange(
        self, url: str, headers: dict[str, str] | None, any_body: bool
    ) -> FetchResult:
        start = trio.current_time()
        sent = {**self._headers, **headers} if headers else self._headers
        request = self._client.build_request("GET", url, headers=sent, timeout=self._timeout)
        response = await self._client.send(request, stream=True, follow_redirects=False)
        try:
            joined: dict[str, str] = {}
            for name, value in response.headers.multi_items():
                key = name.lower()
                joined[key] = f"{joined[key]}, {value}" if key in joined else value
            skip = (
                not any_body
                and self.config.html_only
                and not is_html_content_type(joined.get("content-type"))
            )
            if skip:
                await self._maybe_drain(response, joined)
                body = b""
            else:
                body = await self._read_body(response, joined)
            elapsed = trio.current_time() - start
            return FetchResult(url, response.status_code, joined, body, elapsed, skip)
        finally:
            with trio.move_on_after(_CLOSE_GRACE) as cleanup:
                cleanup.shield = True  # (the shield= argument needs trio >= 0.27)
                await response.aclose()

    async def _read_body(self, response: httpx2.Response, headers: dict[str, str]) -> bytes:
        cap = self.config.max_bytes
        declared = content_length(headers)
        if declared is not None and declared > cap and response.status_code not in (204, 304):
            raise FetchError("too_large", f"Content-Length {declared} > max_bytes {cap}")
        if response.is_stream_consumed:
            # Already in memory (a MockTransport answer, an event hook that read
            # it) and already decoded by httpx: nothing left to bound.
            if len(response.content) > cap:
                raise FetchError("too_large", f"more than {cap} bytes once decoded")
            return response.content
        return await read_capped(response.aiter_raw(), headers.get("content-encoding"), cap)

    async def _maybe_drain(self, response: httpx2.Response, headers: dict[str, str]) -> None:
        """Read a small unwanted body so its connection stays reusable; a big
        or unsized one is abandoned (closing the connection is cheaper)."""
        declared = content_length(headers)
        if declared is None or declared > _DRAIN_LIMIT or response.is_stream_consumed:
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


def content_length(headers: dict[str, str]) -> int | None:
    """The declared Content-Length, or None when absent or not a number."""
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


async def read_capped(chunks: AsyncIterator[bytes], encoding: str | None, cap: int) -> bytes:
    """Decode a raw body stream, stopping with ``FetchError("too_large")`` as
    soon as more than ``cap`` bytes arrive on the wire or come out of the
    decoder: a compression bomb is stopped early, never inflated whole.
    Shared by the httpx and asks fetchers."""
    decoder = BodyDecoder(encoding)
    body = bytearray()
    wire = 0
    async for raw in chunks:
        wire += len(raw)
        if wire > cap:
            raise FetchError("too_large", f"more than {cap} bytes on the wire")
        for piece in decoder.feed(raw):
            body += piece
            if len(body) > cap:
                raise FetchError("too_large", f"more than {cap} bytes once decoded")
    for piece in decoder.finish():
        body += piece
        if len(body) > cap:
            raise FetchError("too_large", f"more than {cap} bytes once decoded")
    return bytes(body)


def make_client(config: FetchConfig) -> httpx2.AsyncClient:
    """The client ``open_httpx_fetcher`` uses when given none.

    Environment proxy settings are ignored (``trust_env=False``): pass your own
    client to crawl through a proxy.
    """
    limits = httpx2.Limits(
        max_connections=config.max_connections,
        max_keepalive_connections=config.max_connections,
    )
    return httpx2.AsyncClient(
        limits=limits,
        timeout=httpx2.Timeout(config.timeout, connect=config.connect_timeout, pool=None),
        follow_redirects=False,
        headers={"User-Agent": config.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
        trust_env=False,
    )


@asynccontextmanager
async def open_httpx_fetcher(
    config: FetchConfig, client: httpx2.AsyncClient | None = None
) -> AsyncIterator[HttpxFetcher]:
    """An ``HttpxFetcher`` for the duration of the block.

    With no ``client``, creates one (``make_client``) and closes it on exit,
    even when the block is cancelled. A given client (``httpx2`` or plain
    ``httpx``) is used as is and left open.
    """
    owns = client is None
    fetcher = HttpxFetcher(
        config, make_client(config) if client is None else client, owns_client=owns
    )
    try:
        yield fetcher
    finally:
        with trio.move_on_after(_CLOSE_GRACE) as cleanup:
            cleanup.shield = True
            await fetcher.aclose()
