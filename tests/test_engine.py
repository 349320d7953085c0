"""The engine with an in-memory site under virtual time.

Rules of this suite: no sockets (tests/fakes.py serves pages from a dict);
``trio.testing.MockClock`` with autojump for anything timed, so times are
asserted exactly; every crawl is bounded by ``trio.fail_after`` in virtual time.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import random
import sys
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_crawl import CrawlConfig, CrawlRecord, DepthUpdate
from trio_crawl.core.digest import sha1_digest
from trio_crawl.core.pool_sizing import INITIAL_WORKERS

# The private engine: a seeded rng=, stop() mid-run, its stats and its frontier.
from trio_crawl.engine.crawler import Crawler
from trio_crawl.engine.schedule import RATE_SLACK

from fakes import FakeFetcher, FakePage, bfs_depths

SITE = "http://site.test"


def url(n: int | str) -> str:
    return f"{SITE}/{n}"


async def crawl(
    fetcher: FakeFetcher,
    start: list[str] | None = None,
    updates: list[DepthUpdate] | None = None,
    **options: object,
) -> tuple[Crawler, list[CrawlRecord]]:
    records: list[CrawlRecord] = []
    options.setdefault("ignore_robots", True)
    config = CrawlConfig.from_options(start_urls=start or [url(0)], **options)  # type: ignore[arg-type]
    crawler = Crawler(
        config,
        fetcher,
        on_record=[records.append],
        on_depth_update=[updates.append] if updates is not None else [],
        rng=random.Random(0),
    )
    with trio.fail_after(10_000):
        await crawler.run()
    return crawler, records


def corrected(records: list[CrawlRecord], updates: list[DepthUpdate]) -> list[CrawlRecord]:
    """The records with their depth updates applied (each after its record)."""
    by_url = {r.url: r for r in records}
    for u in updates:
        assert by_url[u.url].depth == u.previous_depth > u.depth
        by_url[u.url] = dataclasses.replace(by_url[u.url], depth=u.depth, referrer=u.referrer)
    return [by_url[r.url] for r in records]


async def test_ends_exactly_when_the_last_page_finishes(autojump_clock: object) -> None:
    pages = {
        url(0): FakePage(links=[url(1)], delay=1.0),
        url(1): FakePage(links=[url(2)], delay=1.0),
        url(2): FakePage(delay=1.5),
    }
    start = trio.current_time()
    crawler, records = await crawl(FakeFetcher(pages), workers=4)
    assert trio.current_time() - start == 3.5
    assert crawler.summary().elapsed == 3.5
    assert [r.url for r in records] == [url(0), url(1), url(2)]
    assert [r.depth for r in records] == [0, 1, 2]


async def test_no_start_urls_in_scope_still_ends(autojump_clock: object) -> None:
    crawler, records = await crawl(FakeFetcher({}), workers=2)
    assert [(r.url, r.status) for r in records] == [(url(0), 404)]
    assert crawler.frontier.unfinished == 0


async def test_records_shape_and_fields(autojump_clock: object) -> None:
    pages = {
        url(0): FakePage(links=[url(1), url(1) + "#frag", "http://other.test/x", "mailto:a@b"]),
        url(1): FakePage(status=500, first=[503, 503]),
    }
    _, records = await crawl(FakeFetcher(pages), retries=2)
    root, failed = records
    assert root.to_json() == {
        "url": url(0),
        "status": 200,
        "depth": 0,
        "error": None,
        "redirect": None,
        "referrer": None,
        "content_type": "text/html",
        "elapsed_ms": 0.0,
        "links": 2,
        "attempts": 1,
        "t": 0.0,
        "size": len(pages[url(0)].body()),
        "digest": sha1_digest(pages[url(0)].body()),  # the WARC's payload digest
        "workers": INITIAL_WORKERS,  # a sized pool's count: on the first record, then on changes
    }
    assert "workers" not in failed.to_json()
    assert (failed.url, failed.status, failed.referrer, failed.attempts) == (
        url(1),
        500,
        url(0),
        3,
    )
    assert failed.error is not None and failed.error.kind == "http_5xx"


async def test_retry_after_is_honoured_exactly(autojump_clock: object) -> None:
    pages = {url(0): FakePage(first=[503, 429], headers={"retry-after": "5"})}
    fetcher = FakeFetcher(pages)
    _, records = await crawl(fetcher, retries=2)
    assert [c.start for c in fetcher.calls] == [0.0, 5.0, 10.0]
    assert (records[0].status, records[0].attempts, records[0].error) == (200, 3, None)


async def test_retry_after_is_capped(autojump_clock: object) -> None:
    pages = {url(0): FakePage(first=[503], headers={"retry-after": "3600"})}
    fetcher = FakeFetcher(pages)
    await crawl(fetcher, retries=1, max_retry_after=7)
    assert [c.start for c in fetcher.calls] == [0.0, 7.0]


async def test_failures_become_records_after_retries(autojump_clock: object) -> None:
    pages = {
        url(0): FakePage(links=[url(1), url(2)]),
        url(1): FakePage(first=["timeout", "timeout", "timeout"]),
        url(2): FakePage(first=["reset"]),
    }
    fetcher = FakeFetcher(pages)
    _, records = await crawl(fetcher, retries=2)
    by_url = {r.url: r for r in records}
    assert by_url[url(1)].error is not None and by_url[url(1)].error.kind == "timeout"
    assert by_url[url(1)].attempts == 3
    assert by_url[url(2)].status == 200 and by_url[url(2)].attempts == 2
    assert fetcher.urls.count(url(1)) == 3


async def test_backoff_does_not_hold_a_crawler(autojump_clock: object) -> None:
    # One worker: while url(1) waits out its back-off, url(2) is fetched.
    pages = {
        url(0): FakePage(links=[url(1), url(2)]),
        url(1): FakePage(first=[503], headers={"retry-after": "10"}),
        url(2): FakePage(delay=1.0),
    }
    fetcher = FakeFetcher(pages)
    await crawl(fetcher, workers=1, retries=1)
    assert [(c.url, c.start) for c in fetcher.calls] == [
        (url(0), 0.0),
        (url(1), 0.0),
        (url(2), 0.0),
        (url(1), 10.0),
    ]


async def test_rate_limit_spaces_requests_per_host(autojump_clock: object) -> None:
    children = [url(i) for i in range(1, 6)]
    other = "http://other.test/"
    pages = {url(0): FakePage(links=[*children, other]), other: FakePage()}
    pages.update({c: FakePage(delay=0.01) for c in children})
    fetcher = FakeFetcher(pages)
    await crawl(fetcher, workers=8, rate=2, allow_domains=["other.test"])
    gap = 0.5 * (1 + RATE_SLACK)
    starts = [c.start for c in fetcher.calls if c.url.startswith(SITE)]
    assert starts == pytest.approx([i * gap for i in range(6)])
    # The other host is not behind site.test's queue (no head-of-line blocking).
    assert [c.start for c in fetcher.calls if c.url == other] == [pytest.approx(0.0)]


async def test_per_host_concurrency(autojump_clock: object) -> None:
    pages = {url(0): FakePage(links=[url(i) for i in range(1, 10)])}
    pages.update({url(i): FakePage(delay=1.0) for i in range(1, 10)})
    fetcher = FakeFetcher(pages)
    await crawl(fetcher, workers=8, per_host_concurrency=3)
    assert fetcher.max_in_flight == 3
    assert trio.current_time() == 3.0


async def test_crawl_delay_from_robots(autojump_clock: object) -> None:
    """Each page takes 0.5 s: the next request starts the Crawl-delay after
    the previous one ended (engine/schedule.py, rule 9), not after it started."""
    pages = {url(0): FakePage(links=[url(1), url(2), url(3)], delay=0.5)}
    pages.update({url(i): FakePage(delay=0.5) for i in range(1, 4)})
    robots = "User-agent: *\nCrawl-delay: 2\nDisallow: /3\n"
    fetcher = FakeFetcher(pages, robots=robots)
    _, records = await crawl(fetcher, workers=4, ignore_robots=False)
    assert [c.start for c in fetcher.calls] == pytest.approx([0.0, 2.5, 5.0])
    assert url(3) not in fetcher.urls
    (denied,) = [r for r in records if r.url == url(3)]
    assert denied.error is not None and denied.error.kind == "robots"
    assert fetcher.robots_calls == [f"{SITE}/robots.txt"]


@pytest.mark.parametrize(("options", "gap"), [({}, 60.0), ({"max_crawl_delay": 4.0}, 4.0)])
async def test_a_huge_crawl_delay_is_capped(
    autojump_clock: object, options: dict[str, float], gap: float
) -> None:
    """#18 item 3: ``Crawl-delay: 99999999`` used to keep the crawl going for
    ever; the schedule now spaces requests by ``max_crawl_delay`` (60 s by
    default) and the summary names the host."""
    pages = {url(0): FakePage(links=[url(1), url(2)]), url(1): FakePage(), url(2): FakePage()}
    fetcher = FakeFetcher(pages, robots="User-agent: *\nCrawl-delay: 99999999\n")
    crawler, records = await crawl(fetcher, workers=4, ignore_robots=False, **options)
    assert [c.start for c in fetcher.calls] == pytest.approx([0.0, gap, 2 * gap])
    assert trio.current_time() == pytest.approx(2 * gap)
    assert len(records) == 3
    assert crawler.summary().capped_crawl_delays == {"site.test:80": 99999999.0}


async def test_a_crawl_delay_under_the_cap_is_not_noted(autojump_clock: object) -> None:
    pages = {url(0): FakePage(links=[url(1)]), url(1): FakePage()}
    fetcher = FakeFetcher(pages, robots="User-agent: *\nCrawl-delay: 3\n")
    crawler, _ = await crawl(fetcher, ignore_robots=False, max_crawl_delay=3.0)
    assert [c.start for c in fetcher.calls] == pytest.approx([0.0, 3.0])
    assert crawler.summary().capped_crawl_delays == {}


async def test_redirect_hops_are_records(autojump_clock: object) -> None:
    pages = {
        url(0): FakePage(links=[url("a"), url("loop1"), url("away")]),
        url("a"): FakePage(status=301, headers={"location": "/b"}),
        url("b"): FakePage(status=302, headers={"location": "c#x"}),
        url("c"): FakePage(),
        url("loop1"): FakePage(status=302, headers={"location": "/loop2"}),
        url("loop2"): FakePage(status=302, headers={"location": "/loop1"}),
        url("away"): FakePage(status=301, headers={"location": "http://else.test/"}),
    }
    fetcher = FakeFetcher(pages)
    _, records = await crawl(fetcher)
    got = {r.url: (r.status, r.redirect, r.error.kind if r.error else None) for r in records}
    assert got == {
        url(0): (200, None, None),
        url("a"): (301, url("b"), None),
        url("b"): (302, url("c"), None),
        url("c"): (200, None, None),
        url("loop1"): (302, url("loop2"), None),
        url("loop2"): (302, url("loop1"), "redirect_loop"),
        url("away"): (301, "http://else.test/", "out_of_scope_redirect"),
    }
    assert sorted(fetcher.urls) == sorted(got)
    assert {r.url: r.depth for r in records}[url("c")] == 1


async def test_redirect_chain_is_capped_at_ten_hops(autojump_clock: object) -> None:
    pages = {url(i): FakePage(status=302, headers={"location": f"/{i + 1}"}) for i in range(30)}
    fetcher = FakeFetcher(pages)
    _, records = await crawl(fetcher)
    assert len(fetcher.calls) == 11
    assert records[-1].error is not None and records[-1].error.kind == "too_many_redirects"


async def test_max_pages_is_exact(autojump_clock: object) -> None:
    pages = {url(i): FakePage(links=[url(j) for j in range(40)]) for i in range(40)}
    fetcher = FakeFetcher(pages)
    crawler, records = await crawl(fetcher, workers=16, max_pages=7)
    assert len(fetcher.calls) == 7 and len(records) == 7
    assert crawler.frontier.unfinished == 0


async def test_an_exception_while_parsing_is_a_record(
    autojump_clock: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trio_crawl.engine.pages as engine

    real = engine.extract_links

    def flaky(body: bytes, page_url: str, content_type: str | None) -> list[str]:
        if page_url == url(1):
            raise ValueError("boom")
        return real(body, page_url, content_type)

    monkeypatch.setattr(engine, "extract_links", flaky)
    pages = {url(0): FakePage(links=[url(1), url(2)]), url(1): FakePage(), url(2): FakePage()}
    _, records = await crawl(FakeFetcher(pages))
    by_url = {r.url: r for r in records}
    assert by_url[url(1)].error is not None and by_url[url(1)].error.kind == "internal"
    assert "boom" in by_url[url(1)].error.message
    assert by_url[url(2)].error is None


async def test_a_fetcher_bug_fails_loudly(autojump_clock: object) -> None:
    class Broken(FakeFetcher):
        async def fetch(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            raise KeyError("fetcher bug")

    with pytest.RaisesGroup(
        pytest.RaisesExc(KeyError, match="fetcher bug"), flatten_subgroups=True
    ):
        await crawl(Broken({}))


async def test_graceful_stop_finishes_in_flight_and_starts_nothing(autojump_clock: object) -> None:
    pages = {url(0): FakePage(links=[url(i) for i in range(1, 50)])}
    pages.update({url(i): FakePage(delay=2.0, links=[url(i + 100)]) for i in range(1, 50)})
    records: list[CrawlRecord] = []
    fetcher = FakeFetcher(pages)
    config = CrawlConfig.from_options(start_urls=[url(0)], workers=4, ignore_robots=True, grace=10)
    crawler = Crawler(config, fetcher, on_record=[records.append])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(crawler.run)
        await trio.sleep(1.0)
        crawler.stop()
    assert trio.current_time() == 2.0  # the 4 in-flight pages finished, nothing else
    assert len(fetcher.calls) == 5 and len(records) == 5
    summary = crawler.summary()
    assert summary.stopped and summary.unfinished == 50 - 5 + 4


async def test_second_stop_cancels_at_once(autojump_clock: object) -> None:
    pages = {url(0): FakePage(delay=100.0)}
    fetcher = FakeFetcher(pages)
    config = CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True)
    crawler = Crawler(config, fetcher)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(crawler.run)
        await trio.sleep(1.0)
        crawler.stop()
        await trio.sleep(1.0)
        crawler.stop()
    assert trio.current_time() == 2.0
    assert crawler.stats.records == 0


async def test_grace_period_runs_out(autojump_clock: object) -> None:
    pages = {url(0): FakePage(delay=100.0)}
    crawler = Crawler(
        CrawlConfig.from_options(start_urls=[url(0)], ignore_robots=True, grace=3),
        FakeFetcher(pages),
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(crawler.run)
        await trio.sleep(1.0)
        crawler.stop()
    assert trio.current_time() == 4.0


def _load_termination_example():  # type: ignore[no-untyped-def]
    path = Path(__file__).parents[1] / "examples" / "termination.py"
    spec = importlib.util.spec_from_file_location("termination_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_naive_supervisor_loses_urls_and_ours_never_does() -> None:
    example = _load_termination_example()
    naive_losses = sum(
        len(trio.run(example.naive_crawl, 8, seed)) != len(example.SITE) for seed in range(30)
    )
    exact_losses = sum(
        len(trio.run(example.exact_crawl, 8, seed)) != len(example.SITE) for seed in range(30)
    )
    assert naive_losses >= 10, f"the race should show in most runs, saw {naive_losses}/30"
    assert exact_losses == 0


# -- property: random sites, random timings, several worker counts --------


sites = st.integers(1, 25).flatmap(
    lambda n: st.tuples(
        st.lists(st.lists(st.integers(-3, n - 1), max_size=5), min_size=n, max_size=n),
        st.lists(st.sampled_from([200, 200, 200, 404, 500, 503]), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.0, 0.0, 0.05, 0.5, 2.0, 8.0]), min_size=n, max_size=n),
    )
)


@settings(max_examples=300, deadline=None)
@given(
    site=sites,
    workers=st.sampled_from([1, 2, 3, 8, 32]),
    max_depth=st.one_of(st.none(), st.integers(0, 4)),
    seed=st.integers(0, 1000),
)
def test_random_sites_are_crawled_exactly(
    site: tuple[list[list[int]], list[int], list[float]],
    workers: int,
    max_depth: int | None,
    seed: int,
) -> None:
    links, statuses, delays = site
    jitter = random.Random(seed)
    pages: dict[str, FakePage] = {}
    graph: dict[int, list[int]] = {}
    for n, (targets, status, delay) in enumerate(zip(links, statuses, delays, strict=True)):
        hrefs = [f"http://out.test/{-t}" if t < 0 else url(t) for t in targets]
        graph[n] = [t for t in targets if t >= 0] if status == 200 else []
        first = [503] if jitter.random() < 0.2 else []
        pages[url(n)] = FakePage(
            status=status, links=hrefs, delay=delay * jitter.random(), first=first
        )

    async def main() -> tuple[FakeFetcher, list[CrawlRecord]]:
        fetcher = FakeFetcher(pages)
        updates: list[DepthUpdate] = []
        _, records = await crawl(
            fetcher, updates=updates, workers=workers, max_depth=max_depth, retries=1
        )
        return fetcher, corrected(records, updates)

    fetcher, records = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    expected = {url(n) for n in bfs_depths(graph, max_depth)}
    assert not [u for u in fetcher.urls if not u.startswith(SITE)]
    assert {r.url for r in records} == expected
    assert len(records) == len(expected)  # one record per URL, none lost or doubled
    for r in records:  # a URL is fetched once, plus its retries
        assert fetcher.urls.count(r.url) == r.attempts
    # Each record, corrected by its depth updates, has its BFS depth, and its
    # referrer is a page one link closer to the start that links to it
    # (issues #9, #12 and #18).
    depths = bfs_depths(graph, max_depth)
    for r in records:
        node = int(r.url.rsplit("/", 1)[1])
        assert r.depth == depths[node], r
        if node == 0:
            assert r.referrer is None
        else:
            assert r.referrer is not None
            parent = int(r.referrer.rsplit("/", 1)[1])
            assert depths[parent] == r.depth - 1 and node in graph[parent], r


async def test_unreachable_robots_parks_its_urls_for_one_refetch(autojump_clock: object) -> None:
    pages = {url(0): FakePage(links=[url(1)]), url(1): FakePage()}
    fetcher = FakeFetcher(pages, robots=[(503, ""), (200, "User-agent: *\nDisallow:\n")])
    _, records = await crawl(fetcher, ignore_robots=False)
    assert [(c.url, c.start) for c in fetcher.calls] == [(url(0), 10.0), (url(1), 10.0)]
    assert all(r.error is None for r in records)
    assert len(fetcher.robots_calls) == 2


async def test_robots_that_stays_unreachable_disallows(autojump_clock: object) -> None:
    fetcher = FakeFetcher({url(0): FakePage()}, robots=[(500, "")])
    _, records = await crawl(fetcher, ignore_robots=False)
    assert fetcher.calls == []
    assert records[0].error is not None and records[0].error.kind == "robots"
    assert trio.current_time() == 10.0


async def test_a_host_that_never_answers_robots_fails_after_one_timeout(
    autojump_clock: object,
) -> None:
    """A black hole (accepts, never answers): its pages are recorded as
    timeouts when robots.txt times out, never requested, with no wait for a
    second robots.txt timeout (that was a 30 + 10 + 30 s tail)."""
    pages = {url(0): FakePage(links=[url(1)]), url(1): FakePage()}
    fetcher = FakeFetcher(pages, robots=[("timeout", "")])
    _, records = await crawl(fetcher, ignore_robots=False, start=[url(0), url(1)])
    assert fetcher.calls == [] and len(fetcher.robots_calls) == 1
    assert [(r.url, r.error and r.error.kind) for r in records] == [
        (url(0), "timeout"),
        (url(1), "timeout"),
    ]
    assert trio.current_time() == 30.0


async def test_sitemaps_seed_the_crawl(autojump_clock: object) -> None:
    sitemap = f"{SITE}/sitemap.xml"
    nested = f"{SITE}/more.xml"
    index = (
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{nested}</loc></sitemap></sitemapindex>"
    )
    urlset = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{url('orphan')}</loc></url><url><loc>http://else.test/x</loc></url>"
        "</urlset>"
    )
    pages = {
        url(0): FakePage(),
        url("orphan"): FakePage(),
        sitemap: FakePage(raw=index.encode(), content_type="application/xml"),
        nested: FakePage(raw=urlset.encode(), content_type="application/xml"),
    }
    robots = f"User-agent: *\nDisallow:\nSitemap: {sitemap}\n"
    fetcher = FakeFetcher(pages, robots=robots)
    _, records = await crawl(fetcher, ignore_robots=False, sitemaps=True)
    by_url = {r.url: r for r in records}
    assert set(by_url) == {url(0), url("orphan")}
    assert by_url[url("orphan")].depth == 0 and by_url[url("orphan")].referrer == nested
    assert "http://else.test/x" not in fetcher.urls


async def test_a_record_has_its_shortest_depth_and_a_referrer_one_link_closer(
    autojump_clock: object,
) -> None:
    """Regression (issues #9, #12 and #18): the long way to X (0 -> b -> c ->
    x) is fast, the short one (0 -> a -> x) slow. X's record is not held
    back: it says depth 3 (referrer c), and a depth update, once a is done,
    says depth 2 with referrer a."""
    pages = {
        url(0): FakePage(links=[url("a"), url("b")]),
        url("a"): FakePage(links=[url("x")], delay=5.0),
        url("b"): FakePage(links=[url("c")]),
        url("c"): FakePage(links=[url("x")]),
        url("x"): FakePage(),
    }
    updates: list[DepthUpdate] = []
    _, records = await crawl(FakeFetcher(pages), updates=updates, workers=4)
    assert [(r.url, r.t) for r in records if r.url == url("x")] == [(url("x"), 0.0)]
    assert [(u.url, u.depth, u.referrer, u.previous_depth, u.t) for u in updates] == [
        (url("x"), 2, url("a"), 3, 5.0)
    ]
    by_url = {r.url: r for r in corrected(records, updates)}
    assert (by_url[url("x")].depth, by_url[url("x")].referrer) == (2, url("a"))
    assert (by_url[url("c")].depth, by_url[url("c")].referrer) == (2, url("b"))
    assert len(records) == 5
