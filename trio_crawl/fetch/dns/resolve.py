"""Host names resolved off the event loop and once per crawl: the trio side
of ``name_cache``, for the fetchers whose library resolves each new
connection on its own (httpx; libcurl has its own cache).

Rules
-----
1. A lookup runs ``trio.socket.getaddrinfo`` (in a worker thread: the event
   loop never blocks on DNS), or the ``Resolve`` function given to
   ``CachingResolver`` (tests name hosts like ``a.test`` with one).
2. One ``CachingResolver`` per fetcher, so per crawl: a name is looked up
   once and its addresses kept for ``ANSWER_SECONDS`` (the curl fetcher's
   DNS cache keeps them as long), at most ``MAX_NAMES`` names (least
   recently used forgotten first). Lookups of one name by many tasks at once
   are one lookup: the others wait for its answer.
3. A name that does not resolve (``socket.gaierror``) is kept as a failure
   for ``FAILURE_SECONDS`` and raised again, as a new ``socket.gaierror``
   with the same code and message, to whoever asks meanwhile. A temporary
   failure (``EAI_AGAIN``: the resolver did not answer), any other error and
   a cancelled lookup keep nothing, so the next attempt asks again.
4. ``connect_first`` connects to the addresses of one name the way
   ``trio.open_tcp_stream`` does (RFC 8305 "happy eyeballs"): in the order
   ``ordered_addresses`` gives, a new attempt every ``HAPPY_EYEBALLS_DELAY``
   seconds or as soon as the previous one failed; the first to connect wins
   and the others are cancelled (or closed, if they connected too).
   Only the connection uses the address: TLS (SNI, certificate check) and
   the ``Host`` header keep the name, since the caller passes the name there.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import trio

from ..body import close_shielded
from .name_cache import Hit, NameCache, NameCacheStatistics, Step, name_key

__all__ = [
    "ANSWER_SECONDS",
    "FAILURE_SECONDS",
    "HAPPY_EYEBALLS_DELAY",
    "MAX_NAMES",
    "CachingResolver",
    "Resolve",
    "connect_first",
    "is_ip_literal",
    "ordered_addresses",
    "system_resolve",
]

ANSWER_SECONDS = 3600.0  # as the curl fetcher's DNS_CACHE_SECONDS
FAILURE_SECONDS = 10.0
MAX_NAMES = 10_000  # ~0.3 KB each: a few MB at most, whatever the crawl
HAPPY_EYEBALLS_DELAY = 0.25  # trio.open_tcp_stream's default

#: Looks a host name up: its IP addresses, best first. Raises
#: ``socket.gaierror`` when the name does not resolve.
Resolve = Callable[[str], Awaitable[Sequence[str]]]


def ordered_addresses(infos: Sequence[tuple[object, ...]]) -> tuple[str, ...]:
    """The distinct IP addresses of ``getaddrinfo`` answers, in its order,
    except that the first address of the other family moves to second place
    (RFC 6555 section 5.4, as ``trio.open_tcp_stream`` does), so a broken
    IPv6 route costs one staggered attempt, not all of them."""
    seen: dict[str, int] = {}
    for info in infos:
        family, sockaddr = info[0], info[4]
        assert isinstance(sockaddr, tuple) and isinstance(family, int)
        seen.setdefault(str(sockaddr[0]), family)
    addresses = list(seen)
    if addresses:
        first_family = seen[addresses[0]]
        for i, address in enumerate(addresses[1:], start=1):
            if seen[address] != first_family:
                addresses.insert(1, addresses.pop(i))
                break
    return tuple(addresses)


async def system_resolve(name: str) -> tuple[str, ...]:
    """``name``'s addresses from ``getaddrinfo``, run in a worker thread."""
    infos = await trio.socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return ordered_addresses(infos)


def is_ip_literal(host: str) -> bool:
    """Whether ``host`` is an IP address (nothing to look up)."""
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class _Failure:
    code: int
    message: str

    def error(self) -> socket.gaierror:
        return socket.gaierror(self.code, self.message)


class CachingResolver:
    """A crawl's host-name lookups, each done once and kept (rules 1-3).

    Create one per fetcher; ``addresses`` is safe to call from any number of
    tasks at once.
    """

    def __init__(
        self,
        resolve: Resolve = system_resolve,
        *,
        ttl: float = ANSWER_SECONDS,
        failure_ttl: float = FAILURE_SECONDS,
        max_names: int = MAX_NAMES,
    ) -> None:
        self._resolve = resolve
        self._cache: NameCache[tuple[str, ...] | _Failure] = NameCache(
            ttl=ttl, negative_ttl=failure_ttl, max_names=max_names
        )
        self._settled: dict[str, trio.Event] = {}  # names being looked up -> set when done

    def __repr__(self) -> str:
        return f"<CachingResolver {self._cache!r}>"

    def statistics(self) -> NameCacheStatistics:
        return self._cache.statistics()

    async def addresses(self, name: str) -> tuple[str, ...]:
        """``name``'s IP addresses, best first. A checkpoint only when a
        lookup is needed (ours or another task's); cancellation abandons our
        lookup, and a task waiting for it then looks the name up itself.

        Raises ``socket.gaierror`` when the name does not resolve (rule 3),
        and whatever else the lookup raised.
        """
        key = name_key(name)
        while True:
            step = self._cache.begin(key, trio.current_time())
            if isinstance(step, Hit):
                if isinstance(step.value, _Failure):
                    raise step.value.error()
                return step.value
            if step is Step.WAIT:
                await self._settled[key].wait()
                continue
            return await self._look_up(key)

    async def _look_up(self, key: str) -> tuple[str, ...]:
        settled = self._settled[key] = trio.Event()
        try:
            found = tuple(await self._resolve(key))
            if not found:
                raise socket.gaierror(socket.EAI_NONAME, "no address for the name")
        except socket.gaierror as exc:
            if exc.errno == socket.EAI_AGAIN or exc.errno is None:
                self._cache.abandon(key)
            else:
                failure = _Failure(exc.errno, exc.strerror or str(exc))
                self._cache.finish(key, failure, trio.current_time(), failed=True)
            raise
        except BaseException:
            self._cache.abandon(key)
            raise
        else:
            self._cache.finish(key, found, trio.current_time(), failed=False)
            return found
        finally:
            del self._settled[key]
            settled.set()


class _Closeable(Protocol):
    async def aclose(self) -> None: ...


S = TypeVar("S", bound=_Closeable)


async def connect_first(
    addresses: Sequence[str],
    connect: Callable[[str], Awaitable[S]],
    *,
    delay: float = HAPPY_EYEBALLS_DELAY,
) -> S:
    """The first of ``connect(address)`` to succeed, attempts staggered by
    ``delay`` seconds (rule 4). A checkpoint.

    When every attempt fails, the first attempt's exception is raised as it
    is (not in a group), so the caller's error handling sees what one
    connection attempt would raise. ``ValueError`` for no addresses.
    """
    if not addresses:
        raise ValueError("connect_first() needs at least one address")
    if len(addresses) == 1:
        return await connect(addresses[0])
    won: list[S] = []
    failures: dict[int, Exception] = {}  # attempt number -> its failure

    async def attempt(number: int, address: str, failed: trio.Event) -> None:
        try:
            stream = await connect(address)
        except Exception as exc:
            failures[number] = exc
            failed.set()
            return
        if won:  # another attempt connected in the same instant: keep one
            await close_shielded(stream.aclose)
            return
        won.append(stream)
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for number, address in enumerate(addresses):
            failed = trio.Event()
            nursery.start_soon(attempt, number, address, failed)
            with trio.move_on_after(delay):
                await failed.wait()
    if won:
        return won[0]
    raise failures[min(failures)]
