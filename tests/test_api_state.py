"""The library resumes too: ``open_crawler(..., state="crawl.db")`` and
``run_crawl(..., state=...)`` against a real server on 127.0.0.1, with a real
SQLite file; every crawl bounded by ``trio.fail_after``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import trio

import trio_crawl
from trio_crawl.testing import Site, page, serve_site

PAGES = 60


def ring_site() -> Site:
    routes = {
        f"/p/{i}": page(f"/p/{(i + 1) % PAGES}", f"/p/{(i * 7) % PAGES}") for i in range(PAGES)
    }
    return Site(routes)


async def test_open_crawler_with_state_resumes_where_it_stopped(tmp_path: Path) -> None:
    db = str(tmp_path / "crawl.db")
    seen: list[str] = []
    with serve_site(ring_site()) as server:
        start = server.url("/p/0")
        with trio.fail_after(60):
            # First run: leave the block after 20 records (cancels the crawl).
            async with trio_crawl.open_crawler(start, state=db, workers=4) as crawl:
                async for record in crawl:
                    seen.append(record.url)
                    if len(seen) == 20:
                        break
            first = len(seen)
            # Second run, the same call: only what is left.
            async with trio_crawl.open_crawler(start, state=db, workers=4) as crawl:
                async for record in crawl:
                    seen.append(record.url)
            summary = crawl.summary
        fetched = Counter(t for t in server.targets() if t != "/robots.txt")
    assert set(seen) == {server.url(f"/p/{i}") for i in range(PAGES)}
    # At least once: a URL recorded twice was in flight when the first run
    # was cancelled (its Finish may not have reached the file).
    assert len(seen) - PAGES <= 4
    assert first == 20 and summary.records == len(seen) - first
    # Fetches cancelled in flight by the first run's end have no record.
    assert len(seen) <= sum(fetched.values()) <= len(seen) + 4


async def test_run_crawl_with_state_twice_fetches_nothing_new(tmp_path: Path) -> None:
    db = str(tmp_path / "crawl.db")
    with serve_site(ring_site()) as server:
        with trio.fail_after(60):
            first = await trio_crawl.run_crawl(server.url("/p/0"), state=db)
            before = len(server.log)
            again = await trio_crawl.run_crawl(server.url("/p/0"), state=db)
        after = [r.target for r in server.log[before:] if r.target != "/robots.txt"]
    assert first.records == PAGES
    assert again.records == 0 and after == []


async def test_a_different_crawl_in_the_state_file_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "crawl.db")
    with serve_site(ring_site()) as server:
        with trio.fail_after(60):
            await trio_crawl.run_crawl(server.url("/p/0"), state=db, max_pages=5)
            with pytest.raises(trio_crawl.StateUsageError, match=r"holds a different crawl"):
                await trio_crawl.run_crawl(server.url("/p/0"), state=db, max_pages=9)
