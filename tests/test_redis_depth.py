"""Depth on the Redis frontier: nothing held back, corrections as in memory.

Two crawlers share one crawl in a real redis-server (tests/redis_fixture.py).
A page's fetch is held until another page has been fetched or recorded
(events, not timers), to force the order in which paths are found.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
import trio.testing

from trio_crawl import (
    CrawlConfig,
    CrawlRecord,
    DepthUpdate,
    FetchResult,
    redis_frontier,
    run_crawl,
)
from trio_crawl.core.frontier import Entry
from trio_crawl.frontiers.redis import RedisFrontier, check_crawl, open_redis_frontier, wire

import redis_fixture
from fakes import FakeFetcher, FakePage
from redis_fixture import RedisServer

pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id

SITE = "http://site.test"


def url(name: str) -> str:
    return f"{SITE}/{name}"


class GatedFetcher(FakeFetcher):
    """A fake site where the fetch of some pages waits for an event."""

    def __init__(self, pages: dict[str, FakePage], gates: dict[str, trio.Event]) -> None:
        super().__init__(pages)
        self.gates = gates
        self.started: dict[str, trio.Event] = {u: trio.Event() for u in pages}

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        if url in self.started:
            self.started[url].set()
        gate = self.gates.get(url)
        if gate is not None:
            await gate.wait()
        return await super().fetch(url, headers, any_body=any_body)


Event = tuple[str, Any]


async def crawl(
    server: RedisServer,
    name: str,
    fetcher: FakeFetcher,
    on_record: Callable[[CrawlRecord], None] = lambda record: None,
    *,
    workers: int = 2,
    **options: Any,
) -> list[Event]:
    """``workers`` crawlers of one crawl; what they wrote, in order."""
    written: list[Event] = []

    def record(r: CrawlRecord) -> None:
        written.append(("record", r))
        on_record(r)

    def update(u: DepthUpdate) -> None:
        written.append(("update", u))

    async def one(i: int) -> None:
        await run_crawl(
            url(""),
            frontier=redis_frontier(server.url, name, name=f"w{i}"),
            fetcher=fetcher,
            on_record=record,
            on_depth_update=update,
            ignore_robots=True,
            workers=4,
            **options,
        )

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for i in range(workers):
                nursery.start_soon(one, i)
    assert await check_crawl(server.url, name) == []
    return written


def final_depths(written: Sequence[Event]) -> dict[str, tuple[int, str | None]]:
    """Each URL's depth and referrer, its record corrected by its updates;
    every update comes after the record it corrects and names its depth."""
    depths: dict[str, tuple[int, str | None]] = {}
    for kind, item in written:
        if kind == "record":
            assert item.url not in depths, f"{item.url} fetched twice"
            depths[item.url] = (item.depth, item.referrer)
        else:
            assert item.url in depths, f"an update of {item.url} before its record"
            assert depths[item.url][0] == item.previous_depth
            assert item.depth < item.previous_depth
            depths[item.url] = (item.depth, item.referrer)
    return depths


async def test_a_slow_shallow_page_holds_up_no_deeper_page(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """The shallow page answers only once the end of a 30-page chain has
    been fetched: with a depth gate, the chain would wait for it for ever."""
    chain = [url(f"c{i}") for i in range(30)]
    pages = {url(""): FakePage(links=[url("slow"), chain[0]]), url("slow"): FakePage()}
    for here, there in itertools.pairwise(chain):
        pages[here] = FakePage(links=[there])
    pages[chain[-1]] = FakePage()
    end_fetched = trio.Event()
    fetcher = GatedFetcher(pages, {url("slow"): end_fetched})

    def on_record(record: CrawlRecord) -> None:
        if record.url == chain[-1]:
            end_fetched.set()

    written = await crawl(redis_server, crawl_id, fetcher, on_record)
    depths = final_depths(written)
    assert depths[chain[-1]] == (30, chain[-2])
    assert depths[url("slow")] == (1, url(""))
    assert set(depths) == set(pages)


@pytest.mark.parametrize("order", ["recorded-first", "fetching-meanwhile"])
async def test_a_shorter_path_found_late_corrects_and_reaches_what_max_depth_cut_off(
    redis_server: RedisServer, crawl_id: str, order: str
) -> None:
    """root -> B -> C -> D -> E -> F, and root -> A -> D with A slow. D is
    first reached at depth 3 (max_depth), so E (4) is cut off; A's link then
    lowers D to 2: D's record gets a correction after it, and E, now 3
    links away, is fetched; F (4) is not.

    ``recorded-first``: A answers once D's record is written (D is done in
    Redis when A's links come). ``fetching-meanwhile``: A answers once D's
    fetch started, and D once A's record is written (D is leased when A's
    links come: its own worker corrects it)."""
    pages = {
        url(""): FakePage(links=[url("A"), url("B")]),
        url("A"): FakePage(links=[url("D")]),
        url("B"): FakePage(links=[url("C")]),
        url("C"): FakePage(links=[url("D")]),
        url("D"): FakePage(links=[url("E")]),
        url("E"): FakePage(links=[url("F")]),
        url("F"): FakePage(),
    }
    d_recorded, a_recorded = trio.Event(), trio.Event()
    if order == "recorded-first":
        fetcher = GatedFetcher(pages, {url("A"): d_recorded})
    else:
        fetcher = GatedFetcher(pages, {url("D"): a_recorded})
        fetcher.gates[url("A")] = fetcher.started[url("D")]

    def on_record(record: CrawlRecord) -> None:
        {url("D"): d_recorded, url("A"): a_recorded}.get(record.url, trio.Event()).set()

    written = await crawl(redis_server, crawl_id, fetcher, on_record, max_depth=3)
    depths = final_depths(written)
    assert depths == {
        url(""): (0, None),
        url("A"): (1, url("")),
        url("B"): (1, url("")),
        url("C"): (2, url("B")),
        url("D"): (2, url("A")),
        url("E"): (3, url("D")),
    }
    records = {item.url: item for kind, item in written if kind == "record"}
    updates = [item for kind, item in written if kind == "update"]
    assert records[url("D")].depth == 3  # as first found
    assert [(u.url, u.previous_depth, u.depth) for u in updates] == [(url("D"), 3, 2)]
    assert url("F") not in fetcher.urls


class Held:
    """One worker of a crawl, driven by hand: what Redis handed it, and the
    corrections it was given to write."""

    def __init__(self, frontier: RedisFrontier) -> None:
        self.frontier = frontier
        self.entries: dict[str, Entry] = {}
        self.corrections: list[tuple[str, int, int, str | None]] = []
        frontier.attach(
            lambda entry: self.entries.__setitem__(entry.url, entry),
            lambda: None,
            lambda: 0,
            lambda c: self.corrections.append((c.url, c.previous_depth, c.depth, c.referrer)),
        )

    async def take(self, name: str) -> None:
        """One sync call that takes one URL: ``name``."""
        await self.frontier._round(1)
        assert url(name) in self.entries, (name, list(self.entries))

    async def fetch(self, name: str, links: Sequence[str]) -> None:
        """Fetch, record and report the page (sent with the next sync)."""
        entry = self.entries.pop(url(name))
        assert self.frontier.start(entry)
        await self.frontier.finish(entry, [url(link) for link in links])
        self.frontier.recorded(entry)

    async def sync(self) -> wire.Counters:
        await self.frontier._round(0)
        return self.frontier._remote


async def held_sync(worker: Held) -> wire.Counters:
    """A sync call whose crawl's "done" reaches the worker (on the
    listener's connection) before the reply does: until the reply is read,
    the worker still waits (it may carry corrections to write), and no
    longer after."""
    frontier = worker.frontier
    calls = frontier._calls
    real = calls.fcall
    answered, read = trio.Event(), trio.Event()

    async def fcall(name: str, args: Sequence[object]) -> Any:
        reply = await real(name, args)
        frontier._signals.done = True  # what the listener does on "done"
        answered.set()
        await read.wait()
        return reply

    calls.fcall = fcall  # type: ignore[method-assign]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker.sync)
            await answered.wait()
            assert frontier.waiting == 1
            read.set()
    finally:
        calls.fcall = real  # type: ignore[method-assign]
    assert frontier.waiting == 0
    return frontier._remote


@pytest.mark.parametrize("owner", ["stays", "leaves"])
async def test_every_correction_of_a_page_is_written_by_the_worker_that_recorded_it(
    redis_server: RedisServer, crawl_id: str, owner: str
) -> None:
    """P is first found 3 links away (root -> x1 -> x2 -> P) and recorded by
    worker a; y1's link lowers it to 2 while a's finish is still unsent
    (a corrects it then), and a seed from worker b lowers it to 0 after.
    Both corrections are a's: had b written the second, the consumer could
    see it first (two replies on two sockets come back in either order),
    a 2 -> 0 right after a record that says 3. The crawl is not done before
    it is written: by a (whose call makes the crawl done: a does not end
    before it has read the reply), or (``leaves``: a leaves first) by the
    next worker that calls."""
    config = CrawlConfig.from_options(start_urls=[url("")], ignore_robots=True)
    async with (
        open_redis_frontier(redis_server.url, crawl_id, config, name="a") as fa,
        open_redis_frontier(redis_server.url, crawl_id, config, name="b") as fb,
    ):
        a, b = Held(fa), Held(fb)
        await a.take("")
        await a.fetch("", ["x1", "y1", "z1"])
        await a.take("x1")
        await b.take("y1")
        await b.take("z1")  # held: depth 1 unfinished, so P (2) is not settled
        await a.fetch("x1", ["x2"])
        await a.take("x2")
        await a.fetch("x2", ["P"])
        await a.take("P")
        assert a.entries[url("P")].depth == 3
        await a.fetch("P", [])  # recorded at 3; its finish waits in a's outbox
        await b.fetch("y1", ["P"])
        await b.sync()  # P, leased to a, goes down to 2
        await a.sync()  # a's finish: a corrects its record
        assert a.corrections == [(url("P"), 3, 2, url("y1"))]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fb.admit_seeds, [url("P")], url("sitemap"))
            await trio.testing.wait_all_tasks_blocked()
            await b.sync()  # a seed: P goes down to 0, a record of a's
        assert b.corrections == []
        assert await check_crawl(redis_server.url, crawl_id) == []
        await b.fetch("z1", [])
        counters = await b.sync()
        assert not counters.done and counters.unfinished == 1  # a's correction
        second = [(url("P"), 2, 0, url("sitemap"))]
        if owner == "stays":
            counters = await held_sync(a)
            assert (a.corrections[1:], b.corrections) == (second, [])
        else:
            await fa.aclose()
            counters = await b.sync()
            assert (a.corrections[1:], b.corrections) == ([], second)
        assert counters.done and counters.unfinished == 0
        assert await check_crawl(redis_server.url, crawl_id) == []


async def test_a_page_whose_worker_left_is_corrected_by_one_worker_from_then_on(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """P is recorded by a at depth 3, and a leaves. c's call lowers it to 2:
    a is gone, so c writes that correction, and P's next ones: b's seed
    lowers it to 0, and c writes that too, after its first."""
    config = CrawlConfig.from_options(start_urls=[url("")], ignore_robots=True)
    async with (
        open_redis_frontier(redis_server.url, crawl_id, config, name="a") as fa,
        open_redis_frontier(redis_server.url, crawl_id, config, name="b") as fb,
        open_redis_frontier(redis_server.url, crawl_id, config, name="c") as fc,
    ):
        a, b, c = Held(fa), Held(fb), Held(fc)
        await a.take("")
        await a.fetch("", ["x1", "y1", "z1"])
        await a.take("x1")
        await c.take("y1")
        await b.take("z1")  # held: P is not settled
        await a.fetch("x1", ["x2"])
        await a.take("x2")
        await a.fetch("x2", ["P"])
        await a.take("P")
        await a.fetch("P", [])
        await a.sync()
        await fa.aclose()
        await c.fetch("y1", ["P"])
        await c.sync()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fb.admit_seeds, [url("P")], url("sitemap"))
            await trio.testing.wait_all_tasks_blocked()
            await b.sync()
        await c.sync()
        assert (a.corrections, b.corrections) == ([], [])
        assert c.corrections == [(url("P"), 3, 2, url("y1")), (url("P"), 2, 0, url("sitemap"))]
        assert await check_crawl(redis_server.url, crawl_id) == []
