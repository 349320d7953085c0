"""Host names looked up once per crawl (fetch.dns.resolve, fetch.httpx_network).

Rules of this suite: host names are ``*.test``, answered by a resolver the
test injects (it counts lookups and says 127.0.0.1), so nothing leaves the
machine; servers listen on 127.0.0.1, port 0; time is ``MockClock`` wherever
it matters; every I/O test runs under ``trio.fail_after``.
"""

from __future__ import annotations

import dataclasses
import socket
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from trio_crawl.core.http import FetchConfig
from trio_crawl.core.models import CrawlRecord
from trio_crawl.engine.api import run_crawl
from trio_crawl.errors import FetchError
from trio_crawl.fetch.dns.resolve import CachingResolver, connect_first, ordered_addresses
from trio_crawl.fetch.httpx import open_httpx_fetcher
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page

NXDOMAIN = socket.gaierror(socket.EAI_NONAME, "Name or service not known")


class CountingResolver:
    """Says 127.0.0.1 for every name but those in ``missing``; counts lookups.
    With ``gate``, each lookup waits for it first."""

    def __init__(self, *, missing: Sequence[str] = (), gate: trio.Event | None = None) -> None:
        self.missing = set(missing)
        self.gate = gate
        self.lookups: Counter[str] = Counter()
        self.error: BaseException = NXDOMAIN

    async def __call__(self, name: str) -> list[str]:
        self.lookups[name] += 1
        if self.gate is not None:
            await self.gate.wait()
        await trio.lowlevel.checkpoint()
        if name in self.missing:
            raise self.error
        return ["127.0.0.1"]


# -- the cache, under trio ------------------------------------------------------


async def test_concurrent_lookups_of_one_name_are_one(autojump_clock: Any) -> None:
    gate = trio.Event()
    counting = CountingResolver(gate=gate)
    resolver = CachingResolver(counting)
    answers: list[tuple[str, ...]] = []

    async def ask(name: str) -> None:
        answers.append(await resolver.addresses(name))

    async with trio.open_nursery() as nursery:
        for name in ("a.test", "A.test", "a.TEST", "b.test"):
            nursery.start_soon(ask, name)
        await trio.testing.wait_all_tasks_blocked()
        assert resolver.statistics().waits == 2
        gate.set()
    assert counting.lookups == Counter({"a.test": 1, "b.test": 1})
    assert answers == [("127.0.0.1",)] * 4


async def test_answers_expire_and_failures_are_kept_briefly(autojump_clock: Any) -> None:
    counting = CountingResolver(missing=["gone.test"])
    resolver = CachingResolver(counting, ttl=100, failure_ttl=10)
    for _ in range(3):
        assert await resolver.addresses("a.test") == ("127.0.0.1",)
        with pytest.raises(socket.gaierror) as info:
            await resolver.addresses("gone.test")
        assert (info.value.errno, info.value.strerror) == (NXDOMAIN.errno, NXDOMAIN.strerror)
    assert counting.lookups == Counter({"a.test": 1, "gone.test": 1})
    await trio.sleep(10)
    with pytest.raises(socket.gaierror):
        await resolver.addresses("gone.test")
    await resolver.addresses("a.test")
    assert counting.lookups == Counter({"a.test": 1, "gone.test": 2})
    await trio.sleep(90)
    await resolver.addresses("a.test")
    assert counting.lookups["a.test"] == 2


async def test_a_temporary_failure_is_not_kept() -> None:
    counting = CountingResolver(missing=["slow.test"])
    counting.error = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    resolver = CachingResolver(counting)
    for _ in range(2):
        with pytest.raises(socket.gaierror):
            await resolver.addresses("slow.test")
    assert counting.lookups["slow.test"] == 2


async def test_a_waiter_takes_over_a_cancelled_lookup(autojump_clock: Any) -> None:
    gate = trio.Event()
    counting = CountingResolver(gate=gate)
    resolver = CachingResolver(counting)
    got: list[tuple[str, ...]] = []

    async def wait_for_answer() -> None:
        got.append(await resolver.addresses("a.test"))

    async with trio.open_nursery() as nursery:
        with trio.move_on_after(1):  # the first asker gives up
            nursery.start_soon(wait_for_answer)
            await resolver.addresses("a.test")
        await trio.testing.wait_all_tasks_blocked()
        assert counting.lookups["a.test"] == 2  # the waiter asked again itself
        gate.set()
    assert got == [("127.0.0.1",)]


def test_addresses_keep_getaddrinfo_order_but_alternate_the_family_early() -> None:
    v4, v6 = socket.AF_INET, socket.AF_INET6

    def info(family: int, host: str) -> tuple[object, ...]:
        return (family, socket.SOCK_STREAM, 6, "", (host, 0))

    answer = [info(v6, "::1"), info(v6, "::2"), info(v6, "::1"), info(v4, "10.0.0.1")]
    assert ordered_addresses(answer) == ("::1", "10.0.0.1", "::2")
    assert ordered_addresses([info(v4, "10.0.0.1"), info(v4, "10.0.0.2")]) == (
        "10.0.0.1",
        "10.0.0.2",
    )


# -- connecting to the first address that answers -------------------------------


@dataclasses.dataclass
class FakeStream:
    address: str
    closed: bool = False

    async def aclose(self) -> None:
        self.closed = True


async def test_attempts_are_staggered_and_the_first_to_connect_wins(autojump_clock: Any) -> None:
    started: list[tuple[str, float]] = []
    cancelled: list[str] = []
    plan = {"x": (1000.0, None), "y": (0.1, None), "z": (0.0, OSError("refused"))}

    async def connect(address: str) -> FakeStream:
        started.append((address, trio.current_time()))
        delay, error = plan[address]
        try:
            await trio.sleep(delay)
        except trio.Cancelled:
            cancelled.append(address)
            raise
        if error is not None:
            raise error
        return FakeStream(address)

    stream = await connect_first(["x", "y", "z"], connect, delay=0.25)
    assert stream.address == "y" and trio.current_time() == pytest.approx(0.35)
    assert started == [("x", 0.0), ("y", 0.25)]  # y won before z was due
    assert cancelled == ["x"]


async def test_a_failed_attempt_starts_the_next_at_once_and_all_failing_raise_the_first(
    autojump_clock: Any,
) -> None:
    async def connect(address: str) -> FakeStream:
        await trio.sleep(0.01)
        raise OSError(f"refused by {address}")

    with pytest.raises(OSError, match=r"^refused by x$"):
        await connect_first(["x", "y", "z"], connect)
    assert trio.current_time() == pytest.approx(0.03)


async def test_a_second_attempt_that_connects_too_is_closed() -> None:
    go = trio.Event()
    made: list[FakeStream] = []
    won: list[FakeStream] = []

    async def connect(address: str) -> FakeStream:
        await go.wait()  # both attempts resume in the same batch, with no checkpoint after
        made.append(FakeStream(address))
        return made[-1]

    async def run() -> None:
        won.append(await connect_first(["x", "y"], connect, delay=0))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            go.set()
    # trio resumes a batch in random order: either may win, the other is closed
    assert sorted(s.address for s in made) == ["x", "y"]
    assert [s.closed for s in made] == [False, True] and won == [made[0]]


# -- the httpx fetcher in a crawl ------------------------------------------------


def linking_site() -> Site:
    """Every answer closes its connection, so each page is a new connection
    (and, without the cache, a new lookup). ``/`` links to four pages of its
    own host, to ``b.test`` and to ``gone.test`` (which does not resolve)."""

    def root(request: SiteRequest) -> Response:
        port = request.headers["host"].rpartition(":")[2]
        links = [f"/{i}" for i in range(1, 5)]
        links += [f"http://b.test:{port}/", f"http://gone.test:{port}/"]
        return dataclasses.replace(page(*links), close=True)

    pages = {f"/{i}": dataclasses.replace(page(), close=True) for i in range(1, 5)}
    return Site({"/": root, **pages})


async def test_a_crawl_looks_each_host_up_once() -> None:
    counting = CountingResolver(missing=["gone.test"])
    records: list[CrawlRecord] = []
    with serve_site(linking_site()) as server:
        with trio.fail_after(30):
            async with open_httpx_fetcher(
                FetchConfig(), resolver=CachingResolver(counting)
            ) as fetcher:
                await run_crawl(
                    f"http://a.test:{server.port}/",
                    fetcher=fetcher,
                    on_record=records.append,
                    span_hosts=True,
                    ignore_robots=True,
                    retries=0,
                    workers=4,
                )
        hosts = Counter(entry.headers["host"] for entry in server.log)
        connections = server.connections
    port = server.port
    assert hosts == Counter({f"a.test:{port}": 5, f"b.test:{port}": 5})
    assert connections == 10  # one per page: the cache, not keep-alive, saved the lookups
    assert counting.lookups == Counter({"a.test": 1, "b.test": 1, "gone.test": 1})
    (gone,) = [r for r in records if r.url.startswith("http://gone.test")]
    assert gone.status is None and gone.error is not None
    assert (gone.error.kind, gone.error.message) == (
        "connect",
        "ConnectError: [Errno -2] Name or service not known",
    )


async def test_ip_literals_are_not_looked_up() -> None:
    counting = CountingResolver()
    with serve_site(Site({"/": page()})) as server:
        with trio.fail_after(10):
            async with open_httpx_fetcher(
                FetchConfig(), resolver=CachingResolver(counting)
            ) as fetcher:
                result = await fetcher.fetch(server.url("/"))
    assert result.status == 200 and not counting.lookups


async def test_a_lookup_that_outlasts_the_connect_timeout_is_a_timeout() -> None:
    counting = CountingResolver(gate=trio.Event())  # never answers
    with trio.fail_after(10):
        async with open_httpx_fetcher(
            FetchConfig(connect_timeout=0.05), resolver=CachingResolver(counting)
        ) as fetcher:
            with pytest.raises(FetchError) as info:
                await fetcher.fetch("http://a.test:9/")
    assert info.value.kind == "timeout"


async def test_a_client_and_a_resolver_together_are_refused() -> None:
    async with httpx2.AsyncClient() as client:
        with pytest.raises(ValueError, match=r"^open_httpx_fetcher\(\): give a client or a"):
            async with open_httpx_fetcher(FetchConfig(), client, resolver=CachingResolver()):
                pass  # pragma: no cover
