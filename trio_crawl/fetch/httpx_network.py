"""httpcore's trio network backend, with host names resolved through the
crawl's ``CachingResolver`` (``fetch.dns.resolve``) instead of one
``getaddrinfo`` per new connection.

httpcore opens every connection with ``connect_tcp(host, port, ...)`` on its
pool's network backend, then ``start_tls(server_hostname=<the URL's host>)``
on the stream it got. ``ResolvingBackend`` answers ``connect_tcp`` for a
name by connecting to one of the name's cached addresses (``connect_first``)
through httpcore's own ``TrioBackend``; ``start_tls`` is untouched, so SNI
and the certificate check still use the name, and so does the ``Host``
header, which httpx builds from the URL.

Failures keep httpcore's types, which httpx translates as always: a name
that does not resolve is ``httpcore2.ConnectError`` carrying the
``socket.gaierror`` (message ``[Errno -2] Name or service not known``, as
the ``TrioBackend`` says it), and the connect deadline, lookup included, is
``httpcore2.ConnectTimeout``.

Every stream it opens is a ``WatchedStream``: it follows each HTTP/1.1
answer to its end (``fetch.answer_end``) and, when bytes came after an
answer, tells httpcore's pool the idle connection is readable, which is
how httpcore learns that a kept-alive connection must be dropped (its
``has_expired``): the stray bytes, already in h11's buffer, would be read as
the answer to the next request sent on it.

httpx2's ``AsyncHTTPTransport`` takes no network backend, so ``use_backend``
sets the one attribute its httpcore pool reads for every new connection
(httpcore's ``AsyncConnectionPool(network_backend=...)``); it refuses,
loudly, a transport without it (another httpx version).
"""

from __future__ import annotations

import math
import socket
import ssl
from collections.abc import Iterable
from functools import partial
from typing import Any

import httpcore2
import httpx2
import trio

from .answer_end import AnswerEnd
from .dns.resolve import CachingResolver, connect_first, is_ip_literal

__all__ = ["ResolvingBackend", "WatchedStream", "use_backend"]

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class ResolvingBackend(httpcore2.AsyncNetworkBackend):
    """``httpcore2.TrioBackend`` with names resolved by ``resolver``."""

    def __init__(
        self, resolver: CachingResolver, inner: httpcore2.AsyncNetworkBackend | None = None
    ) -> None:
        self.resolver = resolver
        self._inner = httpcore2.TrioBackend() if inner is None else inner

    def __repr__(self) -> str:
        return f"<ResolvingBackend {self.resolver!r}>"

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        connect = partial(
            self._inner.connect_tcp,
            port=port,
            local_address=local_address,
            socket_options=None if socket_options is None else list(socket_options),
        )
        if is_ip_literal(host):
            return WatchedStream(await connect(host, timeout=timeout))
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                try:
                    addresses = await self.resolver.addresses(host)
                except socket.gaierror as exc:
                    raise httpcore2.ConnectError(exc) from exc
                return WatchedStream(await connect_first(addresses, connect))
        except trio.TooSlowError as exc:
            raise httpcore2.ConnectTimeout(exc) from exc

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:  # pragma: no cover - the crawler never asks for one
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class WatchedStream(httpcore2.AsyncNetworkStream):
    """A connection's stream that knows when bytes came after an answer.

    Each write that starts a request (the first after an answer ended, or
    the first of all) starts following a new answer; each read is fed to
    it. Once bytes came after an answer, ``get_extra_info("is_readable")``
    says True for good: httpcore's pool then closes the connection instead
    of sending it another request. An HTTP/2 connection (its preface) is not
    followed: its frames are not HTTP/1.1 answers.
    """

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        self._answer: AnswerEnd | None = None
        self._followed = True
        self._spare = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        data = await self._inner.read(max_bytes, timeout)
        answer = self._answer
        if answer is not None and data:
            answer.feed(data)
            self._spare = self._spare or answer.spare
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if self._followed and buffer and (self._answer is None or self._answer.done):
            if buffer.startswith(b"PRI * HTTP/2.0"):
                self._followed = False
                self._answer = None
            else:
                self._answer = AnswerEnd(head_request=buffer.startswith(b"HEAD "))
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
    ) -> httpcore2.AsyncNetworkStream:
        return WatchedStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._spare:
            return True
        return self._inner.get_extra_info(info)


def use_backend(transport: httpx2.AsyncHTTPTransport, backend: ResolvingBackend) -> None:
    """Make ``transport``'s connection pool open its connections through
    ``backend``. Raises ``RuntimeError`` for an httpx2 whose transport has no
    such pool (the resolver cache would silently do nothing)."""
    pool = getattr(transport, "_pool", None)
    if not isinstance(getattr(pool, "_network_backend", None), httpcore2.AsyncNetworkBackend):
        raise RuntimeError(
            f"httpx2 {httpx2.__version__}: its transport has no httpcore pool with a "
            "network backend, so host names cannot be cached"
        )
    pool._network_backend = backend  # type: ignore[union-attr]
