"""When is a crawl done? The race in the well-known answer, and an exact one.

Every crawler task is both a consumer of URLs (it takes them from a shared
channel) and a producer (it publishes the links it finds). So "the channel is
empty" does not mean "done": a crawler may be about to publish more.

The well-known trio pattern: each crawler holds a CapacityLimiter token while
it works; a supervisor ends the crawl when no token is borrowed and the
channel's buffer is empty. ``naive_crawl`` below is that pattern, with the
supervisor checking after every scheduling step instead of once a second
(the sleep only makes the race rarer, never impossible).

The race: ``await receive()`` takes a URL *and then* checkpoints; a memory
channel even hands a URL straight to a waiting receiver without it ever
entering the buffer. Between taking the URL and borrowing the token, the
crawler holds a URL that neither the buffer nor the limiter shows. A
supervisor that looks then sees "nothing left" and cancels: the URL is lost.

``exact_crawl`` closes the window: a crawler takes the URL with
``receive_nowait()`` and borrows its token in the same synchronous step, and
idle crawlers wait in a ParkingLot instead of inside ``receive()``. The task
that returns the last token checks the condition and wakes the supervisor:
no polling, and the crawl ends the moment the last page is done.

``pool_crawl`` is the same crawl on ``trio_crawl.WorkPool``, which packages
exactly that mechanism (plus priorities, rooms and a graceful stop) so that
you do not have to write it again.

Run it: ``python examples/termination.py`` (no network: the "site" is a dict).
"""

from __future__ import annotations

import math
import random

import trio
import trio.lowlevel

from trio_crawl import WorkPool

#: A tiny site: page -> links. 0 links to everything through a few levels.
SITE: dict[int, list[int]] = {n: [c for c in (2 * n + 1, 2 * n + 2) if c < 63] for n in range(63)}


async def fetch(page: int, rng: random.Random) -> list[int]:
    """Pretend to download and parse a page: take some time, return links."""
    await trio.sleep(rng.random() * 0.001)
    return SITE[page]


async def naive_crawl(workers: int, seed: int) -> set[int]:
    """The well-known pattern. Returns the pages it fetched (may miss some)."""
    rng = random.Random(seed)
    seen = {0}
    fetched: set[int] = set()
    limiter = trio.CapacityLimiter(workers)
    send, receive = trio.open_memory_channel[int](math.inf)

    async def crawler(receive: trio.MemoryReceiveChannel[int]) -> None:
        async for page in receive:  # <- takes a page, then checkpoints...
            async with limiter:  # <- ...before the token is borrowed
                fetched.add(page)
                for link in await fetch(page, rng):
                    if link not in seen:
                        seen.add(link)
                        send.send_nowait(link)

    async def supervisor(nursery: trio.Nursery) -> None:
        while True:
            await trio.lowlevel.checkpoint()  # the usual version sleeps 1 s here
            stats = receive.statistics()
            if limiter.borrowed_tokens == 0 and stats.current_buffer_used == 0:
                nursery.cancel_scope.cancel()
                return

    async with trio.open_nursery() as nursery:
        send.send_nowait(0)
        for _ in range(workers):
            nursery.start_soon(crawler, receive.clone())
        nursery.start_soon(supervisor, nursery)
    return fetched


async def exact_crawl(workers: int, seed: int) -> set[int]:
    """The invariant: every unfinished page is in the buffer or held by a
    crawler that has a token. Taking and borrowing are one atomic step."""
    rng = random.Random(seed)
    seen = {0}
    fetched: set[int] = set()
    limiter = trio.CapacityLimiter(workers)
    send, receive = trio.open_memory_channel[int](math.inf)
    work_posted = trio.lowlevel.ParkingLot()
    done = trio.Event()

    def publish(send: trio.MemorySendChannel[int], page: int) -> None:
        send.send_nowait(page)
        work_posted.unpark()  # wake one idle crawler, if any

    async def crawler(
        receive: trio.MemoryReceiveChannel[int], send: trio.MemorySendChannel[int]
    ) -> None:
        async with receive, send:
            while True:
                try:
                    page = receive.receive_nowait()  # no checkpoint...
                except trio.WouldBlock:
                    await work_posted.park()
                    continue
                limiter.acquire_on_behalf_of_nowait(page)  # ...before this
                try:
                    fetched.add(page)
                    for link in await fetch(page, rng):
                        if link not in seen:
                            seen.add(link)
                            publish(send, link)  # before our token goes back
                finally:
                    limiter.release_on_behalf_of(page)
                    if (
                        limiter.borrowed_tokens == 0
                        and not receive.statistics().current_buffer_used
                    ):
                        done.set()  # only a release can make this true

    async def supervisor(nursery: trio.Nursery) -> None:
        await done.wait()  # woken by an event, not by polling
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        publish(send, 0)
        for _ in range(workers):
            nursery.start_soon(crawler, receive.clone(), send.clone())
        nursery.start_soon(supervisor, nursery)
    return fetched


async def pool_crawl(workers: int, seed: int) -> set[int]:
    """``exact_crawl`` on ``trio_crawl.WorkPool``: the handler only crawls."""
    rng = random.Random(seed)
    seen = {0}
    fetched: set[int] = set()
    pool = WorkPool[int](workers)

    async def handle(page: int) -> None:
        fetched.add(page)
        for link in await fetch(page, rng):
            if link not in seen:
                seen.add(link)
                pool.publish(link)  # synchronous, before our token goes back

    pool.publish(0)
    await pool.run(handle)  # returns the moment the last page is done
    return fetched


def main() -> None:
    runs = 50
    lost = dict.fromkeys(("naive", "exact", "WorkPool"), 0)
    for seed in range(runs):
        for name, crawl in (
            ("naive", naive_crawl),
            ("exact", exact_crawl),
            ("WorkPool", pool_crawl),
        ):
            got = trio.run(crawl, 8, seed)
            if len(got) != len(SITE):
                if name != "naive":
                    raise SystemExit(f"{name} lost pages with seed {seed}: a bug!")
                lost[name] += 1
    for name, count in lost.items():
        print(f"{name} supervisor: lost pages in {count} of {runs} runs")


if __name__ == "__main__":
    main()
