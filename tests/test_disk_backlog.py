"""``DiskBacklog`` rule 4: pages' offers share the state file's thread calls.

Each test holds the backlog's thread (its limiter) from the test task, so the
offers of several pages queue up exactly as they do behind a busy thread in
a broad crawl, then lets it go and looks at the file and at what each caller
got. No timing is involved: ``wait_all_tasks_blocked`` says when all wait.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_crawl.frontiers.sqlite import CrawlState, DiskBacklog, Offered, Start, disk_backlog

SITE = "http://backlog.test"


def url(n: int | str) -> str:
    return f"{SITE}/{n}"


def known(state: CrawlState) -> dict[str, int]:
    conn = state._file.conn
    assert conn is not None
    return {u: d for u, d in conn.execute("SELECT url, depth FROM urls")}


def started_pages(state: CrawlState, pages: int) -> None:
    """Page 0 with links 1..pages, each fetched (FETCHING): ready to offer."""
    state.add_seeds([url(0)])
    state.take_queued(1)
    state.apply([Start(url(0))])
    state.offer_links(url(0), [url(i) for i in range(1, pages + 1)], room=99, max_depth=None)
    state.apply([Start(url(i)) for i in range(1, pages + 1)])


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each batch of offers run in one thread call."""
    sizes: list[int] = []
    real = disk_backlog._run_offers

    def recording(
        batch: list[disk_backlog._Offer], ahead: Callable[[Sequence[str]], None]
    ) -> None:
        sizes.append(len(batch))
        real(batch, ahead)

    monkeypatch.setattr(disk_backlog, "_run_offers", recording)
    return sizes


async def test_offers_queued_behind_a_busy_thread_share_one_call(
    tmp_path: Path, batches: list[int]
) -> None:
    """Five pages offer while the thread is busy: one thread call runs all
    five, in arrival order, and each caller gets its own page's outcome: the
    new URLs (two of them shared: the first page to offer one admits it)."""
    with CrawlState.open(tmp_path / "s.db") as state:
        started_pages(state, 5)
        backlog = DiskBacklog(state)
        got: dict[int, Offered] = {}

        async def offer(page: int) -> None:
            links = [url(f"{page}-a"), url("shared"), url(f"{page}-b")]
            got[page] = await backlog.offer_links(
                url(page), links, room=99, max_depth=None, settles=True
            )

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await backlog._limiter.acquire()  # the thread is busy
                for page in range(1, 6):
                    nursery.start_soon(offer, page)
                    await trio.testing.wait_all_tasks_blocked()
                backlog._limiter.release()
        assert batches == [5]
        assert [r.url for r in got[1].kept] == [url("1-a"), url("shared"), url("1-b")]
        for page in range(2, 6):
            assert [r.url for r in got[page].kept] == [url(f"{page}-a"), url(f"{page}-b")]
        assert {u: d for u, d in known(state).items() if "-" in u or "shared" in u} == {
            **{url(f"{p}-{x}"): 2 for p in range(1, 6) for x in "ab"},
            url("shared"): 2,
        }


async def test_an_offer_is_cancellable_until_a_thread_call_takes_it(
    tmp_path: Path, batches: list[int]
) -> None:
    """A page cancelled while its offer waits leaves nothing in the file; the
    offers around it are run. Once taken, an offer runs to the end and its
    caller gets the outcome, as from a thread call of its own."""
    with CrawlState.open(tmp_path / "s.db") as state:
        started_pages(state, 3)
        backlog = DiskBacklog(state)
        got: dict[int, Offered] = {}
        scopes = {page: trio.CancelScope() for page in (1, 2, 3)}

        async def offer(page: int) -> None:
            with scopes[page]:
                got[page] = await backlog.offer_links(
                    url(page), [url(f"{page}-a")], room=99, max_depth=None, settles=True
                )

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await backlog._limiter.acquire()
                for page in (1, 2, 3):
                    nursery.start_soon(offer, page)
                    await trio.testing.wait_all_tasks_blocked()
                scopes[2].cancel()  # waiting, not taken: it goes
                scopes[1].cancel()  # the leader: its own and the others' go on
                await trio.testing.wait_all_tasks_blocked()
                backlog._limiter.release()
        assert batches == [2]
        assert sorted(got) == [1, 3]
        assert [r.url for r in got[1].kept] == [url("1-a")]
        assert url("2-a") not in known(state)
        assert url("3-a") in known(state)


async def test_each_offer_in_a_call_has_its_own_exception(
    tmp_path: Path, batches: list[int]
) -> None:
    """An offer that fails (a page the file does not know: the engine's bug)
    raises in its own caller; the others in the same call are applied."""
    with CrawlState.open(tmp_path / "s.db") as state:
        started_pages(state, 2)
        backlog = DiskBacklog(state)
        outcomes: dict[str, object] = {}

        async def offer(page: str) -> None:
            try:
                await backlog.offer_links(
                    url(page), [url(f"{page}-a")], room=99, max_depth=None, settles=True
                )
                outcomes[page] = "ok"
            except RuntimeError as exc:
                outcomes[page] = str(exc)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await backlog._limiter.acquire()
                for page in ("1", "nowhere", "2"):
                    nursery.start_soon(offer, page)
                    await trio.testing.wait_all_tasks_blocked()
                backlog._limiter.release()
        assert batches == [3]
        assert outcomes == {
            "1": "ok",
            "nowhere": f"crawl state invariant broken: offer from unknown page {url('nowhere')!r}",
            "2": "ok",
        }
        assert url("1-a") in known(state) and url("2-a") in known(state)


@pytest.mark.parametrize("fails", [False, True])
async def test_a_batch_of_offers_reads_its_new_urls_ahead_at_once(
    tmp_path: Path, batches: list[int], fails: bool
) -> None:
    """Rule 5: the new URLs every offer of a thread call kept in memory go to
    ``read_ahead`` in one call, before any caller has its outcome; a read
    that fails changes no outcome (it is only a shortcut)."""
    with CrawlState.open(tmp_path / "s.db") as state:
        started_pages(state, 3)
        backlog = DiskBacklog(state)
        reads: list[list[str]] = []
        got: dict[int, Offered] = {}

        def read_ahead(urls: Sequence[str]) -> None:
            assert not got  # before any caller has its outcome
            reads.append(list(urls))
            if fails:
                raise OSError("disk gone")

        backlog.read_ahead = read_ahead

        async def offer(page: int) -> None:
            links = [url(f"{page}-a"), url("shared")]
            got[page] = await backlog.offer_links(
                url(page), links, room=99, max_depth=None, settles=True
            )

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await backlog._limiter.acquire()  # the thread is busy
                for page in range(1, 4):
                    nursery.start_soon(offer, page)
                    await trio.testing.wait_all_tasks_blocked()
                backlog._limiter.release()
        assert batches == [3]
        assert reads == [[url("1-a"), url("shared"), url("2-a"), url("3-a")]]
        assert [r.url for r in got[1].kept] == [url("1-a"), url("shared")]
        assert [r.url for r in got[3].kept] == [url("3-a")]
