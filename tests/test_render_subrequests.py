"""The browser's requests as the crawl sends them, without a browser: the
response store (pure), the schedule's turns (``ScheduleRoom.wait_turn``)
and ``BrowserRequests`` over the in-memory ``FakeFetcher``, all under
``MockClock(autojump_threshold=0)``: exact virtual times, no sockets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from trio_crawl.core.frontier import Entry
from trio_crawl.core.models import FetchResult
from trio_crawl.core.requisites import REQUISITE
from trio_crawl.engine.host_gate import HostGate
from trio_crawl.engine.politeness import HostSlots, Job, ScheduleRoom
from trio_crawl.engine.render import CrawlPoliteness
from trio_crawl.engine.schedule import RATE_SLACK, PoliteSchedule
from trio_crawl.fetch.chromium.store import ResponseStore
from trio_crawl.fetch.chromium.subrequests import BrowserRequests, NoTurn, forwarded_headers

from fakes import FakeFetcher, FakePage

H = "a.test:80"
SITE = "http://a.test"


def result(url: str, size: int = 10, status: int = 200, skipped: bool = False) -> FetchResult:
    return FetchResult(url, status, {"content-type": "text/css"}, b"x" * size, 0.0, skipped)


# -- the store -------------------------------------------------------------------


def test_the_store_keeps_final_answers_under_their_canonical_url() -> None:
    store = ResponseStore()
    assert store.put("HTTP://A.test:80/style.css#top", result(f"{SITE}/style.css"))
    assert store.get(f"{SITE}/style.css") is not None
    assert store.put(f"{SITE}/gone", result(f"{SITE}/gone", status=404))  # final too
    assert not store.put(f"{SITE}/busy", result(f"{SITE}/busy", status=503))  # asked again
    assert not store.put(f"{SITE}/big", result(f"{SITE}/big", skipped=True))
    assert store.get(f"{SITE}/busy") is None and store.get(f"{SITE}/big") is None


def test_the_store_drops_the_least_recently_used_past_its_bytes() -> None:
    store = ResponseStore(item_bytes=40, total_bytes=100, entry_bytes=0)
    assert not store.put(f"{SITE}/huge", result(f"{SITE}/huge", size=41))
    for name in "abc":
        assert store.put(f"{SITE}/{name}", result(f"{SITE}/{name}", size=40))
    # a and b fitted (80 bytes); c pushed out the least recently used, a.
    assert store.get(f"{SITE}/a") is None and len(store) == 2 and store.bytes == 80
    assert store.get(f"{SITE}/b") is not None  # b is now the most recent
    store.put(f"{SITE}/d", result(f"{SITE}/d", size=40))
    assert store.get(f"{SITE}/c") is None and store.get(f"{SITE}/b") is not None


def test_empty_answers_count_too() -> None:
    store = ResponseStore(total_bytes=10_000)  # each response counts 1 kB beside its body
    for i in range(100):
        store.put(f"{SITE}/tick?{i}", result(f"{SITE}/tick?{i}", size=0))
    assert len(store) == 9 and store.bytes == 9 * 1024
    assert store.get(f"{SITE}/tick?99") is not None and store.get(f"{SITE}/tick?90") is None


def test_the_browsers_headers_are_passed_on_but_those_the_fetcher_owns() -> None:
    browser = {"Accept": "application/json", "User-Agent": "x", "Host": "h", "Referer": "r"}
    sent = forwarded_headers({**browser, "Accept-Encoding": "br", "Connection": "keep-alive"})
    assert sent == {"Accept": "application/json", "Referer": "r"}
    assert forwarded_headers({"Host": "h"}) is None


# -- turns in the crawl's schedule ------------------------------------------------


def room(rate: float) -> tuple[ScheduleRoom, list[Entry]]:
    published: list[Entry] = []
    return ScheduleRoom(PoliteSchedule[Job](rate=rate), published.append), published


async def test_a_turn_goes_ahead_of_parked_urls_and_is_not_crawl_work(
    autojump_clock: trio.testing.MockClock,
) -> None:
    schedule, published = room(rate=1.0)
    gap = 1 + RATE_SLACK
    first, parked = Entry(f"{SITE}/1", 0, None), Entry(f"{SITE}/2", 0, None)
    granted: list[float] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(schedule.serve)
        assert schedule.try_start(first, H)
        assert not schedule.try_start(parked, H)

        async def turn() -> None:
            assert await schedule.wait_turn(H)
            granted.append(trio.current_time())
            schedule.release(H)

        nursery.start_soon(turn)
        await trio.testing.wait_all_tasks_blocked()
        assert schedule.waiting == 1  # the parked URL; the turn is not crawl work
        await trio.sleep(2 * gap + 0.01)
        assert granted == [pytest.approx(gap)]
        assert published == [parked]  # after the turn, an interval later
        nursery.cancel_scope.cancel()


async def test_a_cancelled_turn_holds_nothing_up_and_a_stopping_crawl_refuses_turns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    schedule, published = room(rate=1.0)
    gap = 1 + RATE_SLACK
    parked = Entry(f"{SITE}/2", 0, None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(schedule.serve)
        assert await schedule.wait_turn(H)  # the host was free
        with trio.move_on_after(0.5):
            await schedule.wait_turn(H)
            pytest.fail("a turn came before the interval")
        assert not schedule.try_start(parked, H)
        await trio.sleep(gap)
        assert published == [parked]  # on time: the cancelled turn was withdrawn
        assert schedule.try_start(parked, H)
        refused: list[str] = []

        politeness = CrawlPoliteness(schedule, lambda url: None, lambda host, delay: None)

        async def turn() -> None:
            try:
                async with politeness.turn(f"{SITE}/x"):
                    pytest.fail("a turn came to a stopping crawl")
            except NoTurn as exc:
                refused.append(str(exc))

        nursery.start_soon(turn)
        await trio.testing.wait_all_tasks_blocked()
        assert schedule.drain() == []  # turns are not the crawl's URLs
        await trio.testing.wait_all_tasks_blocked()
        assert refused == [f"{SITE}/x"]
        nursery.cancel_scope.cancel()


async def test_a_slot_is_released_once_whoever_says_so_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    schedule, _ = room(rate=1.0)
    slots = HostSlots(schedule)
    page = Entry(f"{SITE}/", 0, None)
    requisite = Entry(f"{SITE}/s.css", 1, None, payload=REQUISITE)
    assert schedule.try_start(page, H)
    slots.hold(page.url, held=True)
    slots.release(page.url)  # the fetcher: the page's request is over, its render goes on
    assert schedule.schedule.in_flight(H) == 0
    slots.release(page.url)  # the crawler, after the render: nothing more to release
    assert schedule.schedule.in_flight(H) == 0
    # A requisite the browser loaded is answered at once: it takes no slot.
    assert not slots.answered_at_once(requisite, H)
    slots.answers = {requisite.url}.__contains__
    assert slots.answered_at_once(requisite, H)
    assert not slots.answered_at_once(page, H)  # a page is fetched as ever
    slots.hold(requisite.url, held=False)
    slots.release(requisite.url)
    assert schedule.schedule.in_flight(H) == 0


def test_a_browser_only_hosts_crawl_delay_applies_once_and_capped() -> None:
    schedule, _ = room(rate=10.0)
    gate = HostGate(None, schedule, max_crawl_delay=5.0, capped_delays={})
    gate.crawl_delay_seen("cdn.test:80", 30.0)
    assert schedule.schedule.crawl_delay("cdn.test:80") == 5.0
    assert gate.capped_delays == {"cdn.test:80": 30.0}
    gate.crawl_delay_seen("cdn.test:80", None)  # read once: later reads change nothing
    assert schedule.schedule.crawl_delay("cdn.test:80") == 5.0


# -- BrowserRequests ------------------------------------------------------------


class Turns:
    """A ``Politeness`` whose turns come when the test says."""

    def __init__(self) -> None:
        self.open = trio.Event()
        self.taken: list[str] = []

    @asynccontextmanager
    async def turn(self, url: str) -> AsyncIterator[None]:
        await self.open.wait()
        self.taken.append(url)
        yield

    def request_over(self, url: str) -> None:
        pass

    def robots_read(self, url: str, crawl_delay: float | None) -> None:
        pass


def site() -> FakeFetcher:
    return FakeFetcher(
        {
            f"{SITE}/style.css": FakePage(delay=1.0, content_type="text/css", raw=b"css"),
            f"{SITE}/busy.json": FakePage(first=[503], content_type="application/json"),
            f"{SITE}/page": FakePage(links=["/a"]),
        }
    )


async def test_each_url_is_fetched_once_for_the_browser_and_the_crawler(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = site()
    requests = BrowserRequests(inner, ResponseStore(), keep_crawler=True)
    got: list[bytes] = []

    async def browser() -> None:
        got.append((await requests.for_browser(f"{SITE}/style.css", {})).body)

    async with trio.open_nursery() as nursery:  # two tabs want it at once
        nursery.start_soon(browser)
        nursery.start_soon(browser)
    assert got == [b"css", b"css"] and trio.current_time() == 1.0
    crawler = await requests.for_crawler(f"{SITE}/style.css", None, any_body=True)
    assert crawler.body == b"css"
    assert inner.urls == [f"{SITE}/style.css"]
    assert (requests.fetched, requests.reused) == (1, 2)
    # Not kept: an answer the crawl would ask again, and a byte range.
    for _ in range(2):
        await requests.for_browser(f"{SITE}/busy.json", {})
        await requests.for_browser(f"{SITE}/page", {"Range": "bytes=0-1"})
    assert inner.urls.count(f"{SITE}/busy.json") == 2 and inner.urls.count(f"{SITE}/page") == 2


async def test_the_crawler_gets_a_kept_answer_only_as_its_own_fetch_would_be(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = site()
    requests = BrowserRequests(inner, ResponseStore(), keep_crawler=False)
    await requests.for_browser(f"{SITE}/style.css", {})
    await requests.for_browser(f"{SITE}/page", {})
    # A page link to a stylesheet: the crawler would skip the body (html_only).
    plain = await requests.for_crawler(f"{SITE}/style.css", None, any_body=False)
    assert plain.body_skipped
    assert (await requests.for_crawler(f"{SITE}/page", None, any_body=False)).body != b""
    await requests.for_crawler(f"{SITE}/page", {"X-Mine": "1"}, any_body=False)  # its own headers
    assert inner.urls == [f"{SITE}/style.css", f"{SITE}/page", f"{SITE}/style.css", f"{SITE}/page"]
    # keep_crawler=False: what the crawler fetched is not kept for the browser.
    await requests.for_crawler(f"{SITE}/busy.json", None, any_body=True)
    await requests.for_crawler(f"{SITE}/busy.json", None, any_body=True)
    assert inner.urls.count(f"{SITE}/busy.json") == 2


async def test_the_browser_waits_for_its_turn_but_the_crawler_never_waits_for_that(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = site()
    requests = BrowserRequests(inner, ResponseStore(), keep_crawler=True)
    turns = Turns()
    requests.politeness = turns
    async with trio.open_nursery() as nursery:
        nursery.start_soon(requests.for_browser, f"{SITE}/style.css", {})
        await trio.testing.wait_all_tasks_blocked()
        assert inner.urls == []  # waiting for its host's turn
        # The crawler holds its slot already: it fetches for itself, at once.
        await requests.for_crawler(f"{SITE}/style.css", None, any_body=True)
        assert inner.urls == [f"{SITE}/style.css"] and trio.current_time() == 1.0
        turns.open.set()
    # The browser, given its turn, found the crawler's answer kept.
    assert inner.urls == [f"{SITE}/style.css"] and turns.taken == [f"{SITE}/style.css"]
