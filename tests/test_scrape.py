"""Handlers, requests, items: the scraping API under virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

import trio_crawl
from trio_crawl import CrawlRecord, Page, Request

from fakes import FakeFetcher, FakePage

SITE = "http://shop.test"


def three_level_site(listings: int, per_listing: int = 2) -> dict[str, FakePage]:
    """Listing pages -> item pages -> review pages; each listing links to the next."""
    pages: dict[str, FakePage] = {}
    for n in range(listings):
        details = [f"/item/{n}-{k}" for k in range(per_listing)]
        nxt = [f"/list/{n + 1}"] if n + 1 < listings else []
        pages[f"{SITE}/list/{n}"] = FakePage(links=[*details, *nxt, "/about"])
        for d in details:
            pages[SITE + d] = FakePage(links=[d.replace("/item/", "/reviews/"), "/list/0"])
            pages[SITE + d.replace("/item/", "/reviews/")] = FakePage(links=["/about"])
    pages[f"{SITE}/about"] = FakePage()
    return pages


async def parse_listing(page: Page) -> AsyncIterator[object]:
    for link in page.links():
        if "/item/" in link:
            yield page.follow(link, parse_item, listing=page.url)
        elif "/list/" in link:
            yield page.follow(link, parse_listing)


async def parse_item(page: Page) -> AsyncIterator[object]:
    item_id = page.url.rsplit("/", 1)[1]
    yield {"item": item_id, "listing": page.meta["listing"]}
    for link in page.links():
        if "/reviews/" in link:
            yield page.follow(link, parse_reviews, item=item_id)


async def parse_reviews(page: Page) -> list[object]:
    return [{"reviews_of": page.meta["item"], "depth": page.depth}]


async def test_three_level_scrape_of_1000_listings(autojump_clock: object) -> None:
    listings = 1000
    fetcher = FakeFetcher(three_level_site(listings))
    items: list[dict[str, object]] = []
    with trio.fail_after(10_000):
        async with trio_crawl.open_crawler(
            [Request(f"{SITE}/list/0", parse_listing)],
            fetcher=fetcher,
            ignore_robots=True,
            workers=16,
        ) as crawl:
            async for item in crawl.items():
                assert isinstance(item, dict)
                items.append(item)
    summary = crawl.summary
    assert summary is not None and summary.items == len(items)
    details = [i for i in items if "item" in i]
    reviews = [i for i in items if "reviews_of" in i]
    expected_ids = sorted(f"{n}-{k}" for n in range(listings) for k in range(2))
    assert sorted(d["item"] for d in details) == expected_ids  # each exactly once
    assert sorted(r["reviews_of"] for r in reviews) == expected_ids
    assert all(d["listing"] == f"{SITE}/list/{d['item'].split('-')[0]}" for d in details)
    # /about is linked everywhere but no handler asked for it: never fetched.
    assert f"{SITE}/about" not in fetcher.urls
    assert len(fetcher.urls) == len(set(fetcher.urls)) == listings * 5


async def test_handler_errors_are_records_and_the_crawl_goes_on(autojump_clock: object) -> None:
    async def picky(page: Page) -> AsyncIterator[object]:
        yield {"url": page.url}
        if page.url.endswith("/1"):
            raise ValueError("cannot parse this one")
        for link in page.links():
            yield page.follow(link)

    pages = {f"{SITE}/0": FakePage(links=["/1", "/2"]), f"{SITE}/1": FakePage(links=["/3"])}
    pages.update({f"{SITE}/{n}": FakePage() for n in (2, 3)})
    records: list[CrawlRecord] = []
    summary = await trio_crawl.run_crawl(
        [f"{SITE}/0"],
        fetcher=FakeFetcher(pages),
        handler=picky,
        on_record=records.append,
        ignore_robots=True,
        debug=True,
    )
    by_url = {r.url: r for r in records}
    bad = by_url[f"{SITE}/1"]
    assert bad.status == 200 and bad.error is not None and bad.error.kind == "handler"
    assert bad.error.message == "ValueError: cannot parse this one"
    assert bad.error.traceback is not None and "cannot parse" in bad.error.traceback
    assert set(by_url) == {f"{SITE}/{n}" for n in (0, 1, 2)}
    assert summary.items == 3 and summary.failures == {"handler": 1}


async def test_fail_fast_reraises_the_bare_exception(autojump_clock: object) -> None:
    async def broken(page: Page) -> None:
        raise KeyError("no price")

    with pytest.raises(KeyError, match="no price"):
        async with trio_crawl.open_crawler(
            [f"{SITE}/0"],
            fetcher=FakeFetcher({f"{SITE}/0": FakePage()}),
            handler=broken,
            fail_fast=True,
            ignore_robots=True,
        ) as crawl:
            await crawl.wait()


async def test_a_reader_that_leaves_cancels_the_crawl(autojump_clock: object) -> None:
    async def many_items(page: Page) -> AsyncIterator[object]:
        for i in range(1000):
            yield i
        yield page.follow("/next")

    pages = {f"{SITE}/0": FakePage(), f"{SITE}/next": FakePage(delay=100)}
    fetcher = FakeFetcher(pages)
    with trio.fail_after(10):
        async with trio_crawl.open_crawler(
            [f"{SITE}/0"], fetcher=fetcher, handler=many_items, ignore_robots=True, buffer=4
        ) as crawl:
            async for item in crawl.items():
                if item == 10:
                    break
    assert trio.current_time() == 0.0  # no waiting for anything after leaving
    assert crawl.summary is not None and crawl.summary.stopped
    assert fetcher.urls == [f"{SITE}/0"]  # the handler was stopped by backpressure


async def test_a_slow_reader_slows_the_handlers(autojump_clock: object) -> None:
    async def three(page: Page) -> AsyncIterator[object]:
        for i in range(3):
            yield (page.url, i)

    pages = {f"{SITE}/0": FakePage()}
    async with trio_crawl.open_crawler(
        [f"{SITE}/0"], fetcher=FakeFetcher(pages), handler=three, ignore_robots=True, buffer=0
    ) as crawl:
        got = []
        async for item in crawl.items():
            await trio.sleep(1)
            got.append(item)
    assert got == [(f"{SITE}/0", i) for i in range(3)]
    assert trio.current_time() == 3.0


async def test_meta_and_handler_survive_redirects(autojump_clock: object) -> None:
    async def start(page: Page) -> AsyncIterator[object]:
        yield page.follow("/moved", landing, origin="start")
        yield page.follow("http://elsewhere.test/x", landing)  # out of scope: None
        yield Request("mailto:someone@shop.test", landing)  # not a URL we fetch

    async def landing(page: Page) -> AsyncIterator[object]:
        yield (page.url, dict(page.meta), page.depth)

    pages = {
        f"{SITE}/0": FakePage(),
        f"{SITE}/moved": FakePage(status=301, headers={"location": "/new"}),
        f"{SITE}/new": FakePage(),
    }
    fetcher = FakeFetcher(pages)
    async with trio_crawl.open_crawler(
        [Request(f"{SITE}/0", start)], fetcher=fetcher, ignore_robots=True
    ) as crawl:
        items = [i async for i in crawl.items()]
    assert items == [(f"{SITE}/new", {"origin": "start"}, 1)]
    assert fetcher.urls == [f"{SITE}/0", f"{SITE}/moved", f"{SITE}/new"]


async def test_page_views_are_lazy_and_consistent(autojump_clock: object) -> None:
    seen: list[object] = []

    async def look(page: Page) -> None:
        assert "soup" not in page.__dict__ and "tree" not in page.__dict__
        seen.append(page.soup.find("a")["href"])
        seen.append(page.tree.xpath("//a/@href")[0])  # type: ignore[union-attr]
        seen.append(page.links())
        seen.append(page.text)

    pages = {f"{SITE}/0": FakePage(links=["/a#x"])}
    await trio_crawl.run_crawl(
        [f"{SITE}/0"], fetcher=FakeFetcher(pages), handler=look, ignore_robots=True
    )
    assert seen == ["/a#x", "/a#x", [f"{SITE}/a"], '<a href="/a#x">x</a>']


async def test_records_and_items_streams_together(autojump_clock: object) -> None:
    async def one(page: Page) -> AsyncIterator[object]:
        yield "item"

    async with trio_crawl.open_crawler(
        [f"{SITE}/0"], fetcher=FakeFetcher({f"{SITE}/0": FakePage()}), handler=one,
        ignore_robots=True,
    ) as crawl:  # fmt: skip
        records = crawl.records()
        items = crawl.items()
        summary = await crawl.wait()
    assert summary.records == 1 and summary.items == 1
    assert [r async for r in records] == [] and [i async for i in items] == []


async def test_priority_orders_queued_requests(autojump_clock: object) -> None:
    async def fan_out(page: Page) -> AsyncIterator[object]:
        yield page.follow("/low", leaf, priority=-1)
        yield page.follow("/normal", leaf)
        yield page.follow("/high", leaf, priority=5)
        yield page.follow("/higher", leaf, priority=9)

    async def leaf(page: Page) -> None:
        return None

    pages = {f"{SITE}/{p}": FakePage() for p in ("0", "low", "normal", "high", "higher")}
    fetcher = FakeFetcher(pages)
    await trio_crawl.run_crawl(
        [Request(f"{SITE}/0", fan_out)], fetcher=fetcher, workers=1, ignore_robots=True
    )
    assert fetcher.urls == [f"{SITE}/{p}" for p in ("0", "higher", "high", "normal", "low")]


async def test_handlers_can_parse_in_a_worker_thread() -> None:
    import threading

    main_thread = threading.get_ident()

    def heavy(body: bytes) -> tuple[int, bool]:
        return len(body), threading.get_ident() != main_thread

    async def parse(page: Page) -> AsyncIterator[object]:
        yield await page.run_sync(heavy, page.body)

    pages = {f"{SITE}/0": FakePage(links=["/a"])}
    with trio.fail_after(10):
        async with trio_crawl.open_crawler(
            [f"{SITE}/0"], fetcher=FakeFetcher(pages), handler=parse, ignore_robots=True
        ) as crawl:
            items = [i async for i in crawl.items()]
    assert items == [(len(pages[f"{SITE}/0"].body()), True)]


async def test_a_config_handler_gets_non_html_bodies_and_relative_requests(
    autojump_clock: object,
) -> None:
    async def api(page: Page) -> AsyncIterator[object]:
        data = page.json()
        yield data["value"]
        if data.get("next"):
            yield Request(data["next"])  # relative, resolved against the page
        yield Request("ftp://elsewhere/")  # not followable: dropped, not counted

    pages = {
        f"{SITE}/api/1": FakePage(
            raw=b'{"value": 1, "next": "2"}', content_type="application/json"
        ),
        f"{SITE}/api/2": FakePage(raw=b'{"value": 2}', content_type="application/json"),
    }
    items: list[object] = []
    records: list[CrawlRecord] = []
    await trio_crawl.run_crawl(
        [f"{SITE}/api/1"],
        fetcher=FakeFetcher(pages),
        handler=api,
        on_item=items.append,
        on_record=records.append,
        ignore_robots=True,
    )
    assert items == [1, 2]
    assert [(r.url, r.links) for r in records] == [(f"{SITE}/api/1", 1), (f"{SITE}/api/2", 0)]


async def test_a_late_reader_of_items_still_gets_every_item(autojump_clock: object) -> None:
    async def forty_one(page: Page) -> AsyncIterator[object]:
        for i in range(41):
            yield (page.url, i)

    pages = {f"{SITE}/{n}": FakePage() for n in range(4)}
    starts = [f"{SITE}/{n}" for n in range(4)]
    with trio.fail_after(100):
        async with trio_crawl.open_crawler(
            starts, fetcher=FakeFetcher(pages), handler=forty_one, ignore_robots=True, buffer=8
        ) as crawl:
            await trio.sleep(5)  # the crawl runs (and waits for us) meanwhile
            items = [i async for i in crawl.items()]
    assert len(items) == len(set(items)) == 164
    assert crawl.summary.items == 164


async def test_items_nobody_reads_pause_the_crawl_and_say_so(autojump_clock: object) -> None:
    async def many(page: Page) -> AsyncIterator[object]:
        for i in range(10):
            yield i

    with pytest.warns(RuntimeWarning, match="items wait for a reader"):
        async with trio_crawl.open_crawler(
            f"{SITE}/0", fetcher=FakeFetcher({f"{SITE}/0": FakePage()}), handler=many,
            ignore_robots=True, buffer=2,
        ) as crawl:  # fmt: skip
            records = []
            with trio.move_on_after(60) as waited:
                async for record in crawl.records():
                    records.append(record)
    assert waited.cancelled_caught and records == []  # paused before its record
    assert crawl.summary.stopped and crawl.summary.items < 10


async def test_on_item_callers_are_not_held_up_by_an_unread_stream(
    autojump_clock: object,
) -> None:
    async def many(page: Page) -> AsyncIterator[object]:
        for i in range(10):
            yield i

    got: list[object] = []
    async with trio_crawl.open_crawler(
        f"{SITE}/0", fetcher=FakeFetcher({f"{SITE}/0": FakePage()}), handler=many,
        ignore_robots=True, buffer=2, on_item=got.append,
    ) as crawl:  # fmt: skip
        records = [r async for r in crawl]
    assert len(records) == 1 and got == list(range(10))


async def test_the_summary_is_there_after_the_block_and_not_before(
    autojump_clock: object,
) -> None:
    async with trio_crawl.open_crawler(
        f"{SITE}/0", fetcher=FakeFetcher({f"{SITE}/0": FakePage()}), ignore_robots=True
    ) as crawl:
        with pytest.raises(RuntimeError, match="has not ended"):
            crawl.summary  # noqa: B018
        urls = [r.url async for r in crawl]
    assert urls == [f"{SITE}/0"]
    assert crawl.summary.records == 1


async def test_one_start_url_may_be_a_plain_string(autojump_clock: object) -> None:
    fetcher = FakeFetcher({f"{SITE}/0": FakePage(links=["/1"]), f"{SITE}/1": FakePage()})
    summary = await trio_crawl.run_crawl(f"{SITE}/0", fetcher=fetcher, ignore_robots=True)
    assert summary.records == 2
    summary = await trio_crawl.run_crawl(
        Request(f"{SITE}/1"), fetcher=FakeFetcher({f"{SITE}/1": FakePage()}), ignore_robots=True
    )
    assert summary.records == 1


async def test_pages_support_css_selectors(autojump_clock: object) -> None:
    found: list[str] = []

    async def css(page: Page) -> None:
        assert page.tree is not None
        found.extend(a.get("href") or "" for a in page.tree.cssselect("a"))

    pages = {f"{SITE}/0": FakePage(links=["/a", "/b"])}
    await trio_crawl.run_crawl(
        [f"{SITE}/0"], fetcher=FakeFetcher(pages), handler=css, ignore_robots=True
    )
    assert found == ["/a", "/b"]
