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

httpx2's ``AsyncHTTPTransport`` takes no network backend, so ``use_backend``
sets the one attribute its httpcore pool reads for every new connection
(httpcore's ``AsyncConnectionPool(network_backend=...)``); it refuses,
loudly, a transport without it (another httpx version).
"""

from __future__ import annotations

import math
import socket
from collections.abc import Iterable
from functools import partial

import httpcore2
import httpx2
import trio

from .dns.resolve import CachingResolver, connect_first, is_ip_literal

__all__ = ["ResolvingBackend", "use_backend"]

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
            return await connect(host, timeout=timeout)
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                try:
                    addresses = await self.resolver.addresses(host)
                except socket.gaierror as exc:
                    raise httpcore2.ConnectError(exc) from exc
                return await connect_first(addresses, connect)
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
