"""The Redis frontier against a real redis-server (tests/redis_fixture.py).

Several crawlers in one trio process, each with its own ``RedisFrontier``
(as separate processes would have), crawl in-memory sites (tests/fakes.py)
through one crawl in Redis. Their records together must be the
single-process crawl: every URL once, at its BFS depth.

They crawl through the library's entrance, ``run_crawl(...,
frontier=redis_frontier(...))``; the tests that reach into a worker's
frontier (a stalled heartbeat, a sync call cut off) open it with
``open_redis_frontier`` and run the private engine on it, since no public
entrance hands out the frontier it opens.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_crawl import (
    CrawlConfig,
    CrawlRecord,
    DepthUpdate,
    Page,
    Request,
    open_crawler,
    redis_frontier,
    run_crawl,
)

# The private engine, on a frontier a test reaches into: see the module docstring.
from trio_crawl.engine.crawler import Crawler
from trio_crawl.errors import ConfigError, RedisUnavailable
from trio_crawl.frontiers.redis import check_crawl, open_redis_frontier
from trio_crawl.testing import Site, page, serve_site

import redis_fixture
from fakes import FakeFetcher, FakePage, bfs_depths
from redis_fixture import RedisServer

# coredis needs anyio 4: not there in `nox -s asks` (anyio 3 for asks).
pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

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
    """``workers`` crawlers of one Redis crawl; their records, corrected by
    the depth updates they wrote (each after the record it corrects), and
    their end times."""
    records: list[list[CrawlRecord]] = [[] for _ in range(workers)]
    updates: list[DepthUpdate] = []
    written: dict[str, CrawlRecord] = {}

    def on_record(i: int, record: CrawlRecord) -> None:
        records[i].append(record)
        written[record.url] = record
        last_record[0] = trio.current_time()

    def on_update(update: DepthUpdate) -> None:
        # From any worker, but only after the record it corrects.
        record = written[update.url]
        assert record.depth == update.previous_depth, (record, update)
        written[update.url] = dataclasses.replace(
            record, depth=update.depth, referrer=update.referrer
        )
        updates.append(update)

    ends: list[float] = [0.0] * workers
    last_record = [0.0]
    options.setdefault("ignore_robots", True)
    options.setdefault("workers", 4)
    options.setdefault("retries", 1)

    fetcher = FakeFetcher(pages)  # one site for all: its 503-then-200 pages answer once

    async def one(i: int) -> None:
        await run_crawl(
            list(start),
            frontier=redis_frontier(server.url, name, name=f"w{i}"),
            fetcher=fetcher,
            on_record=functools.partial(on_record, i),
            on_depth_update=on_update,
            **options,  # type: ignore[arg-type]
        )
        ends[i] = trio.current_time()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for i in range(workers):
                nursery.start_soon(one, i)
    await assert_consistent(server, name)
    corrected = [[written.get(r.url, r) if updates else r for r in part] for part in records]
    # They end together: none before the crawl's last record (of any worker).
    assert min(ends) >= last_record[0], (ends, last_record)
    return corrected, ends


async def assert_consistent(server: RedisServer, name: str) -> None:
    """The crawl's counters agree with its keys, and no URL is in two places."""
    assert await check_crawl(server.url, name) == []


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
        parts, _ = await crawl_shared(redis_server, name, pages, workers, max_depth=max_depth)
        check_exact([r for part in parts for r in part], graph, max_depth)


async def test_a_crawl_that_is_done_ends_a_joining_worker_at_once(
    redis_server: RedisServer, crawl_id: str
) -> None:
    pages = {url(0): FakePage(links=[url(1)]), url(1): FakePage()}
    parts, _ = await crawl_shared(redis_server, crawl_id, pages, 1)
    assert sorted(r.url for r in parts[0]) == [url(0), url(1)]
    parts, _ = await crawl_shared(redis_server, crawl_id, pages, 2)
    assert parts == [[], []]


async def test_the_page_budget_is_one_count_for_all_workers(redis_server: RedisServer) -> None:
    rng = random.Random(5)
    graph = {n: [rng.randrange(200) for _ in range(5)] for n in range(200)}
    pages = {url(n): FakePage(links=[url(c) for c in children]) for n, children in graph.items()}
    for budget in (0, 1, 7, 40):
        name = f"budget-{budget}-{rng.random()}"
        parts, _ = await crawl_shared(redis_server, name, pages, 3, max_pages=budget)
        fetched = [r for part in parts for r in part if r.attempts]
        assert len(fetched) == min(budget, 200)
        assert len({r.url for r in fetched}) == len(fetched)


async def follow_with_meta(page: Page) -> AsyncIterator[object]:
    """A module-level handler: it can cross processes by name."""
    yield {"url": page.url, "hops": page.meta.get("hops", 0)}
    if page.meta.get("hops", 0) < 2:
        for link in page.links():
            yield Request(link, meta={"hops": page.meta.get("hops", 0) + 1})


async def test_handlers_and_their_requests_cross_workers(redis_server: RedisServer) -> None:
    pages = {
        url(0): FakePage(links=[url(1), url(2)]),
        url(1): FakePage(links=[url(3)]),
        url(2): FakePage(links=[url(3), url(4)]),
        url(3): FakePage(links=[url(5)]),
        url(4): FakePage(),
        url(5): FakePage(),
    }
    items: list[object] = []
    records: list[CrawlRecord] = []
    fetcher = FakeFetcher(pages)
    name = f"handler-{random.random()}"

    async def one(i: int) -> None:
        await run_crawl(
            url(0),
            frontier=redis_frontier(redis_server.url, name, name=f"h{i}"),
            fetcher=fetcher,
            on_record=records.append,
            on_item=items.append,
            ignore_robots=True,
            handler=follow_with_meta,
            workers=2,
        )

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(one, i)
    await assert_consistent(redis_server, name)
    assert sorted((item["url"], item["hops"]) for item in items) == [  # type: ignore[index]
        (url(0), 0), (url(1), 1), (url(2), 1), (url(3), 2), (url(4), 2),
    ]  # fmt: skip
    assert sorted(r.url for r in records) == [url(n) for n in range(5)]


async def test_a_handler_that_cannot_cross_processes_is_refused(
    redis_server: RedisServer, crawl_id: str
) -> None:
    async def local(page: Page) -> None:
        return None

    config = CrawlConfig.from_options(start_urls=[url(0)], handler=local)
    with pytest.raises(
        ConfigError,
        match=r"^handler= with open_redis_frontier\(\): .* use a module-level function$",
    ):
        async with open_redis_frontier(redis_server.url, crawl_id, config):
            pass
    with pytest.raises(
        ConfigError,
        match=r"^handler= with frontier=redis_frontier\(\): .* use a module-level function$",
    ):
        await run_crawl(url(0), frontier=redis_frontier(redis_server.url, crawl_id), handler=local)
    assert await check_crawl(redis_server.url, crawl_id) == ["the crawl is not in Redis"]


async def test_a_retry_goes_through_redis_and_keeps_its_attempts(
    redis_server: RedisServer, crawl_id: str
) -> None:
    pages = {url(0): FakePage(links=[url(1)]), url(1): FakePage(first=[503, "timeout"])}
    parts, _ = await crawl_shared(redis_server, crawl_id, pages, 2, retries=2)
    by_url = {r.url: r for part in parts for r in part}
    assert by_url[url(1)].status == 200
    assert by_url[url(1)].attempts == 3


async def test_unreachable_redis_raises_one_error() -> None:
    config = CrawlConfig.from_options(start_urls=[url(0)])
    with pytest.raises(RedisUnavailable, match="cannot connect to Redis"):
        async with open_redis_frontier(
            f"redis://127.0.0.1:{redis_fixture.free_port()}/0", "x", config
        ):
            pass


async def test_a_worker_taken_for_dead_loses_nothing_and_joins_again(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """Worker 0 never renews its lease (a stalled process): Redis takes it for
    dead, its URLs go to worker 1 (their records say "refetched"), its late
    moves are refused, and it joins again."""
    rng = random.Random(11)
    graph = {n: [rng.randrange(150) for _ in range(4)] for n in range(150)}
    pages = {
        url(n): FakePage(links=[url(c) for c in children], delay=0.06)
        for n, children in graph.items()
    }
    fetcher = FakeFetcher(pages)
    records: list[list[CrawlRecord]] = [[], []]
    frontiers = []

    async def one(i: int) -> None:
        config = CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True, workers=4)
        async with open_redis_frontier(
            redis_server.url, crawl_id, config, name=f"w{i}", lease=0.3 if i == 0 else 5.0
        ) as frontier:
            frontiers.append(frontier)
            if i == 0:

                async def stalled() -> None:
                    await trio.sleep_forever()

                frontier._heartbeat = stalled  # type: ignore[method-assign]
            crawler = Crawler(config, fetcher, frontier=frontier, on_record=[records[i].append])
            await crawler.run()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for i in range(2):
                nursery.start_soon(one, i)
    await assert_consistent(redis_server, crawl_id)
    everything = [r for part in records for r in part]
    counts = Counter(r.url for r in everything)
    assert set(counts) == {url(n) for n in bfs_depths(graph, None)}
    for u, n in counts.items():
        if n > 1:
            assert sum(bool(r.extra.get("refetched")) for r in everything if r.url == u) >= n - 1
    stalled_frontier = next(f for f in frontiers if f.owner.startswith("w0"))
    assert stalled_frontier.reregistered >= 1


async def test_the_seen_set_stays_exact_as_its_buckets_split(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """5,000 URLs make the seen set split its buckets dozens of times
    (linear hashing); every URL must still be found, and none twice."""
    import coredis

    from trio_crawl.frontiers.redis import keys_prefix, wire
    from trio_crawl.frontiers.redis import lua as redis_lua

    prefix = keys_prefix(crawl_id)
    client = coredis.Redis.from_url(redis_server.url)
    async with client:

        async def call(name: str, *args: object) -> Any:
            return await client.fcall(redis_lua.function(name), keys=[prefix], args=list(args))

        await client.function_load(redis_lua.LIBRARY, replace=True)
        start = url("start")
        hello = await call(
            "hello",
            *wire.hello_args(
                "t", 30, may_create=True, identity_json="{}", max_pages=None, rate=None,
                per_host_concurrency=None, read_robots=False, max_depth=None, settle=True,
                starts=wire.admission(start, 0, ""),
            ),
        )  # fmt: skip
        owner = hello[2]
        urls = [url(f"page-{i}?q={i * 7}") for i in range(5000)]
        for _ in range(2):  # the second pass admits nothing new
            for i in range(0, len(urls), 500):
                ops: list[object] = []
                for u in urls[i : i + 500]:
                    ops += wire.admission(u, 1, start)
                reply = await call("sync", *wire.sync_args(owner, 0, 0, wire.admit_op(ops)))
            counters = reply[2]  # done, unfinished, fresh, leased, started, finished, seen
            assert (counters[6], counters[1], counters[2]) == (5001, 5001, 5001)
        buckets = [k async for k in client.scan_iter(match=f"{prefix}S*")]
        assert len(buckets) > 100  # it did split
        total = 0
        for key in buckets:
            total += await client.hlen(key)
        assert total == 5001
    await assert_consistent(redis_server, crawl_id)


async def test_moves_of_a_sync_call_cut_off_by_the_end_are_sent_again(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """A graceful stop, and the sync call carrying the last finishes dies with
    the crawl's cancellation (as coredis's connection does): ``aclose`` must
    send those moves again, or ``bye`` queues the recorded pages once more and
    the resumed crawl fetches them twice."""
    graph = {n: [n + 1, n + 2] for n in range(60)}
    pages = {url(n): FakePage(links=[url(c) for c in graph.get(n, [])], delay=0.005)
             for n in range(62)}  # fmt: skip
    fetcher = FakeFetcher(pages)
    config = CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True, workers=4)
    first: list[CrawlRecord] = []
    cut: list[int] = []
    with trio.fail_after(30):
        async with open_redis_frontier(redis_server.url, crawl_id, config, name="a") as frontier:
            real = frontier._calls.fcall

            async def fcall(name: str, args: Sequence[object]) -> Any:
                if name == "sync" and crawler.stopping and not cut and "F" in args:
                    cut.append(args.count("F"))
                    await trio.sleep_forever()  # cancelled when the crawl ends
                return await real(name, args)

            frontier._calls.fcall = fcall  # type: ignore[method-assign]

            def on_record(record: CrawlRecord) -> None:
                first.append(record)
                if len(first) == 10:
                    crawler.stop()

            crawler = Crawler(config, fetcher, frontier=frontier, on_record=[on_record])
            await crawler.run()
    assert cut and cut[0] >= 1  # finishes were in the call that was cut off
    await assert_consistent(redis_server, crawl_id)  # a stopped crawl, at rest
    parts, _ = await crawl_shared(redis_server, crawl_id, pages, 1)
    second = parts[0]
    counts = Counter(r.url for r in first + second)
    assert [u for u, n in counts.items() if n > 1] == []
    assert set(counts) == {url(n) for n in range(62)}


async def test_the_consistency_check_finds_what_disagrees(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """The check recomputes the counters from the keys: a counter off by
    one, a queued URL in no queue, a lease held by no live worker."""
    import coredis

    from trio_crawl.frontiers.redis import keys_prefix

    config = CrawlConfig.from_options(start_urls=[url(0), url(1), url(2)], ignore_robots=True)
    prefix = keys_prefix(crawl_id)
    async with open_redis_frontier(redis_server.url, crawl_id, config, name="c") as frontier:
        await assert_consistent(redis_server, crawl_id)  # three queued, none leased
        client = coredis.Redis.from_url(redis_server.url)
        async with client:
            await client.hincrby(prefix + "m", "fresh", 1)
            assert await check_crawl(redis_server.url, crawl_id) == ["fresh: counted 3, stored 4"]
            await client.hincrby(prefix + "m", "fresh", -1)
            queue = prefix + "q:0:site.test:80"
            taken = await client.lpop(queue)
            assert taken is not None
            problems = await check_crawl(redis_server.url, crawl_id)
            assert len(problems) == 1
            assert problems[0].endswith(": queued, but in no queue of its depth and host")
            await client.lpush(queue, [taken])
            frontier.attach(lambda entry: None, lambda: None, lambda: 0, lambda correction: None)
            await frontier._round(want=1)  # it takes URLs
            await assert_consistent(redis_server, crawl_id)
            await client.zrem(prefix + "w", [frontier.owner])  # a worker lost from the set
            problems = await check_crawl(redis_server.url, crawl_id)
            await client.zadd(prefix + "w", {frontier.owner: 2**50})
    assert any("not a live worker" in p for p in problems), problems


async def test_settings_redis_cannot_serve_are_refused_before_any_fetch(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """page_requisites=True was a RuntimeError worded in CLI flags, mid-crawl."""
    from trio_crawl.frontiers.redis import unsupported

    fetcher = FakeFetcher({url(0): FakePage(links=[url(1)]), url(1): FakePage()})
    config = CrawlConfig.from_options(
        start_urls=[url(0)], ignore_robots=True, page_requisites=True
    )
    assert unsupported(config) is not None
    refused = r"^page_requisites=True cannot be combined with open_redis_frontier\(\) yet$"
    with pytest.raises(ConfigError, match=refused):
        async with open_redis_frontier(redis_server.url, crawl_id, config):
            raise AssertionError("opened")
    refused = r"^page_requisites=True cannot be combined with frontier=redis_frontier\(\) yet$"
    with pytest.raises(ConfigError, match=refused):  # once, when the crawl is built
        await run_crawl(
            url(0),
            frontier=redis_frontier(redis_server.url, crawl_id),
            fetcher=fetcher,
            ignore_robots=True,
            page_requisites=True,
        )
    assert fetcher.calls == []
    assert await check_crawl(redis_server.url, crawl_id) == ["the crawl is not in Redis"]
    assert unsupported(CrawlConfig(start_urls=[url(0)])) is None


async def test_a_redis_crawl_keeps_its_mirror_and_its_archive(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """``mirror=`` and ``warc=`` go through the same crawl builder on Redis as
    in memory: two workers of one crawl, each with its own archive and a
    shared mirror, save every page once between them (issue #35 item 1: a
    crawl built on the side door lost both)."""
    pytest.importorskip("warcio")
    from trio_crawl.outputs.warc import read_warc_responses

    site = Site({"/": page("/a", "/b"), "/a": page("/c"), "/b": page("/c"), "/c": page("/")})
    root = tmp_path / "mirror"
    archives = [tmp_path / f"crawl.{i}.warc.gz" for i in (1, 2)]
    records: list[CrawlRecord] = []
    with serve_site(site) as server:

        async def one(i: int) -> None:
            await run_crawl(
                server.url("/"),
                frontier=redis_frontier(redis_server.url, crawl_id, name=f"m{i}"),
                mirror=str(root),
                warc=str(archives[i]),
                on_record=records.append,
                workers=2,
            )

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for i in range(2):
                    nursery.start_soon(one, i)
    await assert_consistent(redis_server, crawl_id)
    pages = {server.url(p) for p in ("/", "/a", "/b", "/c")}
    assert sorted(r.url for r in records) == sorted(pages)  # each once, by one worker
    stored: dict[str, Any] = {}
    for archive in archives:
        if archive.exists():
            stored |= read_warc_responses(str(archive))
    assert set(stored) == pages
    saved = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    host = server.url("/").split("//")[1].rstrip("/")
    assert saved == [f"{host}/{name}" for name in ("a", "b", "c", "index.html")], saved


async def test_open_crawler_streams_a_redis_crawl(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """The other entrance: ``open_crawler(..., frontier=redis_frontier())``
    streams the records of this worker's share, and leaves the crawl at
    rest when its block ends."""
    pages = {url(0): FakePage(links=[url(1), url(2)]), url(1): FakePage(), url(2): FakePage()}
    spec = redis_frontier(redis_server.url, crawl_id, name="stream")
    streamed: list[str] = []
    with trio.fail_after(30):
        async with open_crawler(
            url(0), frontier=spec, fetcher=FakeFetcher(pages), ignore_robots=True
        ) as crawl:
            async for record in crawl:
                streamed.append(record.url)
    assert sorted(streamed) == [url(0), url(1), url(2)]
    assert crawl.summary.records == 3
    await assert_consistent(redis_server, crawl_id)
