"""The Redis frontier against a real redis-server (tests/redis_fixture.py).

Several crawlers in one trio process, each with its own ``RedisFrontier``
(as separate processes would have), crawl in-memory sites (tests/fakes.py)
through one crawl in Redis. Their records together must be the
single-process crawl: every URL once, at its BFS depth.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import pytest
import trio

from trio_crawl import CrawlConfig, Crawler, CrawlRecord
from trio_crawl.frontiers.redis import open_redis_frontier

import redis_fixture
from fakes import FakeFetcher, FakePage, bfs_depths
from redis_fixture import RedisServer

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id

SITE = "http://site.test"


def url(n: int | str) -> str:
    return f"{SITE}/{n}"


def random_graph(rng: random.Random, size: int) -> dict[int, list[int]]:
    graph: dict[int, list[int]] = {}
    for node in range(size):
        graph[node] = [rng.randrange(size) for _ in range(rng.randint(0, 6))]
    return graph


def pages_of(graph: dict[int, list[int]], rng: random.Random) -> dict[str, FakePage]:
    """Pages for ``graph``; a page that fails for good loses its links (in
    ``graph`` too: the crawl cannot see them)."""
    pages = {}
    for node, children in graph.items():
        kind = rng.random()
        if kind < 0.1:
            pages[url(node)] = FakePage(status=500, links=[url(c) for c in children])
            graph[node] = []
        elif kind < 0.2:
            pages[url(node)] = FakePage(first=[503], links=[url(c) for c in children])
        else:
            pages[url(node)] = FakePage(links=[url(c) for c in children], delay=rng.random() / 200)
    return pages


async def crawl_shared(
    server: RedisServer,
    name: str,
    pages: dict[str, FakePage],
    workers: int,
    start: Sequence[str] = (url(0),),
    **options: object,
) -> tuple[list[list[CrawlRecord]], list[float]]:
    """``workers`` crawlers of one Redis crawl; their records and end times."""
    records: list[list[CrawlRecord]] = [[] for _ in range(workers)]
    ends: list[float] = [0.0] * workers
    options.setdefault("ignore_robots", True)
    options.setdefault("workers", 4)
    options.setdefault("retries", 1)

    fetcher = FakeFetcher(pages)  # one site for all: its 503-then-200 pages answer once

    async def one(i: int) -> None:
        config = CrawlConfig(start_urls=list(start), **options)  # type: ignore[arg-type]
        async with open_redis_frontier(server.url, name, config, name=f"w{i}") as frontier:
            crawler = Crawler(config, fetcher, frontier=frontier, on_record=[records[i].append])
            await crawler.run()
            ends[i] = trio.current_time()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for i in range(workers):
                nursery.start_soon(one, i)
    return records, ends


def check_exact(
    records: list[CrawlRecord], graph: dict[int, list[int]], max_depth: int | None = None
) -> None:
    depths = bfs_depths(graph, max_depth)
    counts = Counter(r.url for r in records)
    assert [u for u, n in counts.items() if n > 1] == []
    assert set(counts) == {url(n) for n in depths}
    by_url = {r.url: r for r in records}
    for node, depth in depths.items():
        record = by_url[url(node)]
        assert record.depth == depth, record
        if depth:
            parent = int(record.referrer.rsplit("/", 1)[1])  # type: ignore[union-attr]
            assert depths[parent] == depth - 1
            assert node in graph[parent]


@pytest.mark.parametrize("workers", [2, 3, 4])
async def test_several_crawlers_equal_the_single_crawl(
    redis_server: RedisServer, workers: int
) -> None:
    for seed in range(6):
        rng = random.Random(seed * 10 + workers)
        graph = random_graph(rng, rng.randint(1, 120))
        pages = pages_of(graph, rng)
        max_depth = rng.choice([None, None, 2, 4])
        name = f"exact-{workers}-{seed}-{rng.random()}"
        parts, ends = await crawl_shared(redis_server, name, pages, workers, max_depth=max_depth)
        check_exact([r for part in parts for r in part], graph, max_depth)
        assert max(ends) - min(ends) < 0.5


async def test_a_crawl_that_is_done_ends_a_joining_worker_at_once(
    redis_server: RedisServer, crawl_id: str
) -> None:
    pages = {url(0): FakePage(links=[url(1)]), url(1): FakePage()}
    parts, _ = await crawl_shared(redis_server, crawl_id, pages, 1)
    assert sorted(r.url for r in parts[0]) == [url(0), url(1)]
    parts, _ = await crawl_shared(redis_server, crawl_id, pages, 2)
    assert parts == [[], []]
