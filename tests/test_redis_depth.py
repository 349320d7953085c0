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

from trio_crawl import CrawlConfig, Crawler, CrawlRecord, DepthUpdate, FetchResult
from trio_crawl.frontiers.redis import check_crawl, open_redis_frontier

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
        config = CrawlConfig(start_urls=[url("")], ignore_robots=True, workers=4, **options)
        async with open_redis_frontier(server.url, name, config, name=f"w{i}") as frontier:
            crawler = Crawler(
                config, fetcher, frontier=frontier, on_record=[record], on_depth_update=[update]
            )
            await crawler.run()

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
