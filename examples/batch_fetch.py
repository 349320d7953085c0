"""Fetch a million URLs with bounded concurrency and bounded memory.

No crawl here, just a long list of URLs to fetch once each. Twisted does this
with a DeferredSemaphore or a Cooperator. In trio it is a plain shape:

* a *producer* task walks a lazy generator of URLs and sends each one into a
  memory channel with no buffer. ``send`` waits until a worker takes the URL,
  so at most one URL exists ahead of the workers, whatever the count;
* N *worker* tasks share clones of the receive end. Each takes a URL, fetches
  it and folds the outcome into a few counters. Nothing is kept per URL;
* when the generator runs out, the producer closes its send end; each worker's
  ``async for`` then ends, and so does the nursery. No sentinels, no polling.

The workers share one trio_crawl fetcher (``trio_crawl.open_fetcher``): HTTP
keep-alive, gzip, size caps, timeouts. Its failures are ``FetchError`` s
with a ``kind``, counted like any other outcome.

Run it: ``python examples/batch_fetch.py [--count N] [--workers W]``. It
serves every ``/<n>`` path from a local server and prints the progress, the
pages per second, and the peak memory, which stays flat as the count grows.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import resource
import time
from collections import Counter
from collections.abc import Iterator
from multiprocessing.connection import Connection

import trio

import trio_crawl
from trio_crawl import CrawlConfig, Fetcher, FetchError
from trio_crawl.testing import Response, Site, SiteRequest, serve_site


def urls(base_url: str, count: int) -> Iterator[str]:
    """The URLs to fetch, made one at a time as they are needed."""
    for n in range(count):
        yield f"{base_url}/{n}"


class Tally:
    """Outcomes folded into counters as they arrive; prints progress."""

    def __init__(self, total: int, report_every: int) -> None:
        self.total = total
        self.report_every = report_every
        self.outcomes: Counter[int | str] = Counter()  # status, or FetchError kind
        self.bytes = 0
        self.done = 0
        self.started = self.last = time.monotonic()

    def add(self, outcome: int | str, size: int = 0) -> None:
        self.outcomes[outcome] += 1
        self.bytes += size
        self.done += 1
        self.last = time.monotonic()
        if self.done % self.report_every == 0 or self.done == self.total:
            print(
                f"{self.done:>10,} fetched  {self.rate():8,.0f} pages/s  "
                f"peak RSS {peak_rss_mib():6.1f} MiB"
            )

    def rate(self) -> float:
        return self.done / (self.last - self.started) if self.done else 0.0


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --8<-- [start:fetch_all]
async def fetch_all(base_url: str, count: int, workers: int = 64) -> Tally:
    """Fetch ``base_url/0`` to ``base_url/<count - 1>``, ``workers`` at a time."""
    tally = Tally(count, report_every=max(1, count // 10))

    async def produce(send: trio.MemorySendChannel[str]) -> None:
        async with send:  # closing it ends the workers' loops
            for url in urls(base_url, count):
                await send.send(url)  # waits for a worker: no backlog

    async def work(fetcher: Fetcher, receive: trio.MemoryReceiveChannel[str]) -> None:
        async with receive:
            async for url in receive:
                try:
                    result = await fetcher.fetch(url)
                except FetchError as exc:
                    tally.add(exc.kind)
                else:
                    tally.add(result.status, len(result.body))

    # The fetcher is set up from the same options as a crawl. The start URL
    # is required by CrawlConfig but plays no part in fetching.
    config = CrawlConfig.from_options(start_urls=[base_url], workers=workers)
    async with trio_crawl.open_fetcher(config) as fetcher:
        send, receive = trio.open_memory_channel[str](0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, send)
            async with receive:  # the workers hold clones; drop the original
                for _ in range(workers):
                    nursery.start_soon(work, fetcher, receive.clone())
    return tally


# --8<-- [end:fetch_all]


def numbered_page(request: SiteRequest) -> Response:
    """The server's answer to every path: a tiny page naming its number."""
    number = request.target.lstrip("/")
    if not number.isdigit():
        return Response(status=404)
    return Response(body=f"<!doctype html><p>page {number}</p>".encode())


def serve(pipe: Connection) -> None:
    """The server process: serve ``/<n>`` until the parent closes the pipe.

    It runs apart from us so that the memory we report is the fetcher's
    alone. ``SiteServer`` logs every request for the tests' sake; a million
    of them would take a gigabyte, so we drop the log as we go.
    """
    with serve_site(Site(routes={}, fallback=numbered_page)) as server:
        pipe.send(server.base_url)
        while not pipe.poll(1.0):  # True once the parent has closed its end
            server.log.clear()


@contextlib.contextmanager
def server_process() -> Iterator[str]:
    """Run ``serve`` in a child process; yield its base URL."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=serve, args=(theirs,), daemon=True)
    process.start()
    try:
        yield ours.recv()
    finally:
        ours.close()
        process.join(10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fetch many URLs from a local server.")
    parser.add_argument("--count", type=int, default=1_000_000, help="URLs to fetch")
    parser.add_argument("--workers", type=int, default=64, help="fetches at once")
    args = parser.parse_args(argv)
    with server_process() as base_url:
        tally = trio.run(fetch_all, base_url, args.count, args.workers)
    print(f"outcomes: {dict(tally.outcomes)}; {tally.bytes:,} body bytes")
    print(f"{tally.done:,} URLs at {tally.rate():,.0f} pages/s, peak RSS {peak_rss_mib():.1f} MiB")


if __name__ == "__main__":
    main()
