"""A crawl whose pool sizes itself, under MockClock with a FakeFetcher: it grows
when its workers wait on slow servers, the per-host limit still holds for
every host, and it ends exactly with nothing fetched twice."""

from __future__ import annotations

from trio_crawl.core.config import CrawlConfig
from trio_crawl.core.models import CrawlRecord
from trio_crawl.core.pool_sizing import INITIAL_WORKERS
from trio_crawl.engine.crawler import Crawler

from fakes import FakeFetcher, FakePage


def site(hosts: int, pages: int, delay: float) -> dict[str, FakePage]:
    out = {}
    for h in range(hosts):
        base = f"http://h{h}.test"
        links = [f"{base}/{p}" for p in range(1, pages)]
        if h + 1 < hosts:
            links.append(f"http://h{h + 1}.test/0")
        out[f"{base}/0"] = FakePage(links=links, delay=delay)
        for p in range(1, pages):
            out[f"{base}/{p}"] = FakePage(delay=delay)
    return out


async def test_a_sized_crawl_grows_on_slow_hosts_and_keeps_the_per_host_limit(
    autojump_clock: object,
) -> None:
    pages = site(hosts=40, pages=30, delay=1.0)
    fetcher = FakeFetcher(pages)
    records: list[CrawlRecord] = []
    config = CrawlConfig.from_options(
        start_urls=[f"http://h{h}.test/0" for h in range(40)],  # 40 hosts at once
        span_hosts=True,
        per_host_concurrency=8,
        ignore_robots=True,
    )
    crawler = Crawler(config, fetcher, on_record=[records.append])
    summary = await crawler.run()
    assert sorted(r.url for r in records) == sorted(pages)
    assert len(fetcher.calls) == len(pages)  # nothing fetched twice
    assert max(n for _, n in summary.worker_history) > INITIAL_WORKERS  # it grew
    assert summary.sized and summary.worker_history[0] == (0.0, INITIAL_WORKERS)
    # Per host, never more than 8 at once, whatever the pool's size.
    for h in range(40):
        starts = sorted(
            (c.start, c.end) for c in fetcher.calls if c.url.startswith(f"http://h{h}.test/")
        )
        for start, _ in starts:
            in_flight = sum(1 for s, e in starts if s <= start and (e is None or e > start))
            assert in_flight <= 8


async def test_a_pinned_crawl_does_not_resize(autojump_clock: object) -> None:
    pages = site(hosts=10, pages=10, delay=1.0)
    config = CrawlConfig.from_options(start_urls=["http://h0.test/0"], span_hosts=True, workers=4)
    crawler = Crawler(config, FakeFetcher(pages), on_record=[])
    summary = await crawler.run()
    assert summary.worker_history == ((0.0, 4),) and not summary.sized
    assert summary.peak_workers <= 4


async def test_the_progress_line_and_the_summary_show_the_workers(autojump_clock: object) -> None:
    from rich.console import Console

    from trio_crawl.cli.progress import progress_line, summary_table

    pages = site(hosts=40, pages=30, delay=1.0)
    starts = [f"http://h{h}.test/0" for h in range(40)]
    config = CrawlConfig.from_options(start_urls=starts, span_hosts=True, ignore_robots=True)
    crawler = Crawler(config, FakeFetcher(pages), on_record=[])
    summary = await crawler.run()
    stats = crawler.statistics()
    assert f"{stats.workers:,} workers" in progress_line(stats).plain
    console = Console(width=200, record=True)
    console.print(summary_table(summary))
    text = console.export_text()
    assert "│ workers " in text and f"{INITIAL_WORKERS} → " in text  # grown from the start
    assert f"(sized by itself; at most {summary.peak_workers:,} at once)" in text


async def test_a_sized_crawl_sends_one_site_at_most_16_at_once(autojump_clock: object) -> None:
    """No --per-host-concurrency: growing for many hosts must not mean more at
    once to one site than the old fixed default (16 in all) allowed."""
    pages = site(hosts=1, pages=300, delay=1.0)
    fetcher = FakeFetcher(pages)
    config = CrawlConfig.from_options(start_urls=["http://h0.test/0"], ignore_robots=True)
    await Crawler(config, fetcher, on_record=[]).run()
    assert len(fetcher.calls) == 300 and fetcher.max_in_flight == 16
    pinned = FakeFetcher(pages)
    await Crawler(
        CrawlConfig.from_options(start_urls=["http://h0.test/0"], workers=40), pinned
    ).run()
    assert pinned.max_in_flight == 40  # -w alone sets no per-host limit, as before
