"""Termination when limits combine: page budgets with rate and concurrency
limits, dead hosts, stops. Engine with an in-memory site under MockClock;
every crawl is bounded by ``trio.fail_after`` in virtual time, so a hang is a
failure, not a stuck suite."""

from __future__ import annotations

import random

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl import CrawlConfig, CrawlRecord, FetchError, FetchResult

# The private engine: these tests seed its retry jitter (rng=) and read its parts.
from trio_crawl.engine.crawler import Crawler

from fakes import FakeFetcher, FakePage

HOSTS = ("http://a.test", "http://b.test")


def site(n: int, fanout: int, rng: random.Random) -> dict[str, FakePage]:
    pages = {}
    for host in HOSTS:
        for i in range(n):
            links = [f"{rng.choice(HOSTS)}/{rng.randrange(n)}" for _ in range(fanout)]
            pages[f"{host}/{i}"] = FakePage(links=links, delay=rng.choice([0.0, 0.01, 0.3]))
    return pages


async def crawl(fetcher: object, **options: object) -> tuple[Crawler, list[CrawlRecord]]:
    records: list[CrawlRecord] = []
    options.setdefault("ignore_robots", True)
    config = CrawlConfig.from_options(  # type: ignore[arg-type]
        start_urls=[f"{HOSTS[0]}/0"], allow_domains=["b.test"], **options
    )
    crawler = Crawler(config, fetcher, on_record=[records.append], rng=random.Random(0))  # type: ignore[arg-type]
    with trio.fail_after(100_000):
        await crawler.run()
    return crawler, records


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 40),
    fanout=st.integers(0, 6),
    max_pages=st.one_of(st.none(), st.integers(0, 60)),
    rate=st.one_of(st.none(), st.sampled_from([0.5, 5.0, 40.0])),
    per_host=st.one_of(st.none(), st.integers(1, 3)),
    workers=st.sampled_from([1, 4, 16]),
    seed=st.integers(0, 1000),
)
def test_budgets_with_rate_and_concurrency_limits_always_end(
    n: int,
    fanout: int,
    max_pages: int | None,
    rate: float | None,
    per_host: int | None,
    workers: int,
    seed: int,
) -> None:
    """Regression (issue #13, item 1): with the page budget spent while URLs
    waited for --rate or --per-host-concurrency, the crawl never ended."""
    pages = site(n, fanout, random.Random(seed))

    async def main() -> tuple[Crawler, FakeFetcher, list[CrawlRecord]]:
        fetcher = FakeFetcher(pages)
        crawler, records = await crawl(
            fetcher, max_pages=max_pages, rate=rate, per_host_concurrency=per_host, workers=workers
        )
        stats = crawler.statistics()
        assert (stats.queued, stats.active, stats.waiting) == (0, 0, 0)
        return crawler, fetcher, records

    crawler, fetcher, records = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    fetched = fetcher.urls
    assert len(fetched) == len(set(fetched))  # each URL once
    assert sorted(r.url for r in records) == sorted(fetched)
    if max_pages is not None:
        assert len(fetched) <= max_pages
    assert crawler.frontier.unfinished == 0


async def test_budget_spent_with_urls_waiting_for_the_rate_ends_at_once(
    autojump_clock: object,
) -> None:
    """The CLI case of issue #13: --max-pages 60 --rate 40 on one host."""
    pages = {
        f"{HOSTS[0]}/{i}": FakePage(links=[f"{HOSTS[0]}/{j}" for j in range(166)])
        for i in range(166)
    }
    fetcher = FakeFetcher(pages)
    _, records = await crawl(fetcher, max_pages=60, rate=40.0, workers=16)
    assert len(records) == 60 == len(fetcher.urls)
    # The 60th start is at 59 intervals; the crawl ends with it, not later.
    assert trio.current_time() == fetcher.calls[-1].end


class DeadHostFetcher(FakeFetcher):
    """Every request to ``dead`` fails to connect, robots.txt included."""

    def __init__(self, pages: dict[str, FakePage], dead: str) -> None:
        super().__init__(pages)
        self.dead = dead
        self.dead_calls: list[str] = []

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        if url.startswith(self.dead):
            self.dead_calls.append(url)
            await trio.sleep(0.1)
            raise FetchError("connect", "Connection refused")
        return await super().fetch(url, headers, any_body=any_body)


async def test_a_dead_host_is_a_connect_error_at_once_not_a_robots_refusal(
    autojump_clock: object,
) -> None:
    """Regression (issue #13, item 3): a host that refuses connections gave
    'robots' records after a 10 s wait. Now its pages are 'connect' failures
    as soon as robots.txt could not be reached, and other hosts go on."""
    pages = {f"{HOSTS[0]}/0": FakePage(links=[f"{HOSTS[1]}/x", f"{HOSTS[1]}/y", f"{HOSTS[0]}/1"])}
    pages[f"{HOSTS[0]}/1"] = FakePage()
    fetcher = DeadHostFetcher(pages, HOSTS[1])
    _, records = await crawl(fetcher, ignore_robots=False)
    by_url = {r.url: r for r in records}
    for dead in (f"{HOSTS[1]}/x", f"{HOSTS[1]}/y"):
        error = by_url[dead].error
        assert error is not None and error.kind == "connect"
        assert error.message == "Connection refused"
    assert by_url[f"{HOSTS[0]}/1"].error is None
    assert fetcher.dead_calls == [f"{HOSTS[1]}/robots.txt"]  # robots once; pages not tried
    assert trio.current_time() < 1
