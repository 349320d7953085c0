"""A page with hundreds of thousands of links (issue #18, item 10): its links
reach the frontier in chunks of at most ``LINK_CHUNK`` as the parse finds
them, never as one list, and the record still counts every distinct link.

The engine's side is what is tested, so the site is a ``FakeFetcher``; the
page is parsed for real (3-6 MB bodies, in a parse thread). ``workers=1`` and
``max_pages=2``: the one crawler is busy with the page until its last chunk
is admitted, so every link is admitted before the budget is spent.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from trio_crawl import CrawlConfig, CrawlRecord
from trio_crawl.core.frontier import Entry
from trio_crawl.core.parse import LINK_CHUNK
from trio_crawl.core.scope import Scope

# The private engine: it runs on frontiers built here that watch their batches.
from trio_crawl.engine.crawler import Crawler
from trio_crawl.engine.distinct import DistinctCounter
from trio_crawl.frontiers.memory import MemoryFrontier
from trio_crawl.frontiers.sqlite import CrawlState, DiskBacklog, SqliteFrontier

from fakes import FakeFetcher, FakePage

SITE = "http://huge.test"
LINKS = 200_000
MiB = 1024 * 1024


def huge_body(n: int, *, times: int = 1) -> bytes:
    """A page of ``n`` distinct links, each ``times`` times."""
    links = b"".join(b'<a href="/l/%d">%d</a>\n' % (i, i) for i in range(n))
    return b"<!doctype html><html><body>" + links * times + b"</body></html>"


class Batches:
    """The sizes of the link lists a frontier is handed, however it gets them."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def note(self, links: Sequence[str] | None) -> None:
        if links:
            self.sizes.append(len(links))


class WatchesBatches:
    """Mixed into a frontier: notes the size of every batch of links it gets."""

    batches: Batches

    async def admit_links(self, parent: Entry, links: Sequence[str]) -> None:
        self.batches.note(links)
        await super().admit_links(parent, links)  # type: ignore[misc]

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        self.batches.note(links)
        await super().finish(entry, links)  # type: ignore[misc]


class WatchedMemoryFrontier(WatchesBatches, MemoryFrontier):
    batches = Batches()


class WatchedSqliteFrontier(WatchesBatches, SqliteFrontier):
    batches = Batches()


async def crawl_huge_page(
    frontier_kind: str, tmp_path: Path, body: bytes
) -> tuple[list[CrawlRecord], Batches, int]:
    """(records, batches, URLs the frontier knows) of a crawl of the page."""
    start = f"{SITE}/"
    config = CrawlConfig.from_options(
        start_urls=[start], ignore_robots=True, workers=1, max_pages=2
    )
    fetcher = FakeFetcher({start: FakePage(raw=body)})
    records: list[CrawlRecord] = []
    frontier: WatchedMemoryFrontier | WatchedSqliteFrontier
    if frontier_kind == "memory":
        frontier = WatchedMemoryFrontier([start], scope=Scope([start]), max_pages=2)
        frontier.batches = Batches()
    else:
        state = CrawlState.open(tmp_path / "huge.db")
        state.add_seeds([start])
        frontier = WatchedSqliteFrontier(
            DiskBacklog(state), scope=Scope([start]), max_pages=2, window=100
        )
        frontier.batches = Batches()
    try:
        crawler = Crawler(config, fetcher, frontier=frontier, on_record=[records.append])
        with trio.fail_after(100):
            await crawler.run()
        if isinstance(frontier, WatchedMemoryFrontier):
            known = frontier.statistics().seen
        else:
            known = frontier._backlog.state.progress()["total"]
    finally:
        if isinstance(frontier, WatchedSqliteFrontier):
            frontier._backlog.state.close()
    return records, frontier.batches, known


@pytest.mark.parametrize("frontier_kind", ["memory", "sqlite"])
async def test_a_huge_page_reaches_the_frontier_in_chunks(
    frontier_kind: str, tmp_path: Path
) -> None:
    # Every link twice: the record counts the distinct ones.
    body = huge_body(LINKS // 2, times=2)
    records, batches, known = await crawl_huge_page(frontier_kind, tmp_path, body)
    page = next(r for r in records if r.url == f"{SITE}/")
    assert (page.status, page.error, page.links) == (200, None, LINKS // 2)
    assert known == LINKS // 2 + 1  # every link admitted, and the page itself
    # In chunks as the parse went: never the page's links as one list.
    assert len(batches.sizes) > 2 and max(batches.sizes) <= LINK_CHUNK
    assert sum(batches.sizes) == LINKS  # each link once per chunk it was found in


async def test_a_huge_page_with_a_state_file_stays_small(tmp_path: Path) -> None:
    """The whole crawl's Python allocations: the page (6 MB, allocated
    before), its fetch and parse, the state file's work. Before chunking
    the peak was ~64 MiB (the links as raw hrefs, canonical URLs, sets of
    both, one Admit op each); now the link pipeline is a few chunks."""
    body = huge_body(LINKS)
    tracemalloc.start()
    try:
        records, _, known = await crawl_huge_page("sqlite", tmp_path, body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert records[0].links == LINKS and known == LINKS + 1
    assert peak < 32 * MiB, f"peak {peak / MiB:.1f} MiB"


def test_distinct_counter_counts_a_link_found_in_several_chunks_once() -> None:
    counter = DistinctCounter()
    assert counter.count() == 0
    counter.add(["a", "b"])
    assert counter.count() == 2  # one chunk: its length, no hashing
    counter.add(["b", "c"])
    counter.add(["a"])
    assert counter.count() == 3
