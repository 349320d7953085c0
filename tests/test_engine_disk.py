"""The engine with a disk backlog (``--state``) and a tiny memory window:
the same exactness as in memory, with URLs spilling to SQLite and back."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_crawl import CrawlConfig, CrawlRecord
from trio_crawl.core.scope import Scope

# The private engine: it runs on a SqliteFrontier built here (a small window).
from trio_crawl.engine.crawler import Crawler
from trio_crawl.frontiers.sqlite import CrawlState, DiskBacklog, SqliteFrontier

from fakes import FakeFetcher, FakePage

SITE = "http://disk.test"


def url(n: int) -> str:
    return f"{SITE}/{n}"


async def crawl_with_disk(
    pages: dict[str, FakePage], db: Path, *, window: int, workers: int, **options: object
) -> tuple[list[CrawlRecord], FakeFetcher, dict[str, int]]:
    state = CrawlState.open(db)
    try:
        refetched = state.recover()
        state.add_seeds([url(0)])
        config = CrawlConfig.from_options(
            start_urls=[url(0)], ignore_robots=True, workers=workers, **options
        )  # type: ignore[arg-type]
        fetcher = FakeFetcher(pages)
        records: list[CrawlRecord] = []
        frontier = SqliteFrontier(
            DiskBacklog(state),
            scope=Scope([url(0)]),
            max_depth=config.budgets.max_depth,
            max_pages=config.budgets.max_pages,
            window=window,
            already_started=state.progress()["done"],
            refetched=refetched,
        )
        crawler = Crawler(config, fetcher, frontier=frontier, on_record=[records.append])
        with trio.fail_after(30):
            await crawler.run()
        return records, fetcher, state.progress()
    finally:
        state.close()


async def test_spills_and_refills_through_a_window_of_two(tmp_path: Path) -> None:
    n = 300
    pages = {url(i): FakePage(links=[url((i * 7 + k) % n) for k in range(1, 9)]) for i in range(n)}
    records, fetcher, progress = await crawl_with_disk(
        pages, tmp_path / "a.db", window=2, workers=8
    )
    assert sorted(r.url for r in records) == sorted(url(i) for i in range(n))
    assert len(fetcher.urls) == n
    assert progress["done"] == n and progress["total"] == n


async def test_budget_leaves_the_rest_on_disk_for_the_next_run(tmp_path: Path) -> None:
    n = 60
    pages = {url(i): FakePage(links=[url((i + 1) % n), url((i * 3) % n)]) for i in range(n)}
    db = tmp_path / "b.db"
    first, _, progress = await crawl_with_disk(pages, db, window=4, workers=4, max_pages=10)
    assert len(first) == 10 and progress["done"] == 10
    rest, fetcher, progress = await crawl_with_disk(pages, db, window=4, workers=4)
    assert sorted(r.url for r in first + rest) == sorted(url(i) for i in range(n))
    assert progress["done"] == n
    assert not {r.url for r in first} & set(fetcher.urls)


_databases = itertools.count()

sites = st.integers(1, 40).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, n - 1), max_size=6), min_size=n, max_size=n)
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    links=sites,
    window=st.integers(1, 5),
    workers=st.sampled_from([1, 3, 16]),
    seed=st.integers(0, 99),
)
def test_random_sites_with_a_disk_backlog(
    tmp_path: Path, links: list[list[int]], window: int, workers: int, seed: int
) -> None:
    rng = random.Random(seed)
    pages = {
        url(i): FakePage(links=[url(t) for t in targets], status=rng.choice([200, 200, 404]))
        for i, targets in enumerate(links)
    }
    reachable = {0}
    todo = [0]
    while todo:
        node = todo.pop()
        if pages[url(node)].status != 200:
            continue
        for t in links[node]:
            if t not in reachable:
                reachable.add(t)
                todo.append(t)
    db = tmp_path / f"h{next(_databases)}.db"  # tmp_path is shared by all examples
    records, fetcher, _ = trio.run(
        lambda: crawl_with_disk(pages, db, window=window, workers=workers)
    )
    assert sorted(r.url for r in records) == sorted(url(i) for i in reachable)
    assert len(fetcher.urls) == len(set(fetcher.urls)) == len(reachable)


async def test_a_record_whose_write_stopped_the_crawl_is_not_marked_done(tmp_path: Path) -> None:
    """A sink that cannot write (disk full) stops the crawl from its record
    callback. The URL of that record must not be stored as done: a resume
    fetches it again, and the output file (reconciled on resume) is the truth
    for what did land."""
    n = 30
    pages = {url(i): FakePage(links=[url((i + 1) % n)]) for i in range(n)}
    state = CrawlState.open(tmp_path / "s.db")
    try:
        state.add_seeds([url(0)])
        config = CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True, workers=1)
        frontier = SqliteFrontier(DiskBacklog(state), scope=Scope([url(0)]), window=4)
        kept: list[str] = []

        def sink(record: CrawlRecord) -> None:
            if len(kept) == 5:
                crawler.stop()  # the sixth write failed: nothing kept
            else:
                kept.append(record.url)

        crawler = Crawler(config, FakeFetcher(pages), frontier=frontier, on_record=[sink])
        with trio.fail_after(30):
            await crawler.run()
        assert state.progress()["done"] == len(kept) == 5
    finally:
        state.close()
