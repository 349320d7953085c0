"""What depth bookkeeping costs in memory, and how many depth updates a crawl writes.

Crawls a random site of N pages (30 random links each, plus one) held in
memory, under trio's MockClock, so no sockets and no waiting: page times
are lognormal (median 18 ms), and a share of pages (``--slow``) takes 5 s.
Prints the peak memory traced (``tracemalloc``) during the crawl, the
records and the ``depth_update`` lines written, with and without
``--max-depth``.

A finished page keeps references to the pages its links lead to until no
shorter path to it can come (``core/frontier.py`` rule 7); run it with
``--src`` on an older checkout to compare.

Run: ``python benchmarks/bench_depth_memory.py [--pages 20000] [--slow 0.01]``
"""

from __future__ import annotations

import argparse
import inspect
import os
import random
import subprocess
import sys
import tracemalloc

import trio
import trio.testing

from trio_crawl import CrawlConfig, Crawler, FetchResult

LINKS = 30


class SiteFetcher:
    """Serves generated pages from a dict with a virtual-time delay each."""

    def __init__(self, pages: dict[str, tuple[bytes, float]]) -> None:
        self.pages = pages

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        body, delay = self.pages[url]
        await trio.sleep(delay)
        return FetchResult(url, 200, {"content-type": "text/html"}, body, delay)

    async def aclose(self) -> None:
        return None


def site(n: int, slow: float, seed: int = 0) -> dict[str, tuple[bytes, float]]:
    rng = random.Random(seed)

    def url(i: int) -> str:
        return f"http://bench.test/section/{i:08d}/page-{i % 997:04d}.html"

    pages = {}
    for i in range(n):
        links = [url(rng.randrange(n)) for _ in range(LINKS)] + [url((i * 7 + 1) % n)]
        body = "".join(f'<a href="{link}">x</a>' for link in links).encode()
        delay = 5.0 if rng.random() < slow else rng.lognormvariate(-4, 1)
        pages[url(i)] = (body, delay)
    return pages


def measure(n: int, slow: float, max_depth: int | None, seed: int) -> None:
    pages = site(n, slow, seed)
    start = next(iter(pages))
    updates = 0

    def count(update: object) -> None:
        nonlocal updates
        updates += 1

    async def main() -> None:
        config = CrawlConfig.from_options(
            start_urls=[start], ignore_robots=True, workers=16, max_depth=max_depth
        )
        # An older trio-crawl (--src) has no depth updates.
        corrects = "on_depth_update" in inspect.signature(Crawler).parameters
        options = {"on_depth_update": [count]} if corrects else {}
        crawler = Crawler(config, SiteFetcher(pages), **options)  # type: ignore[arg-type]
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        await crawler.run()
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        print(
            f"max_depth={max_depth}  records={crawler.stats.records:,}  "
            f"depth updates={updates if corrects else 'n/a'}  "
            f"peak traced={peak / 1e6:.1f} MB",
            flush=True,
        )

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--slow", type=float, default=0.01, help="share of 5 s pages")
    parser.add_argument("--src", help="run this on another checkout of trio-crawl")
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="of the random site")
    args = parser.parse_args()
    if args.src:
        env = {**os.environ, "PYTHONPATH": args.src}
        argv = [sys.executable, __file__, "--pages", str(args.pages), "--slow", str(args.slow)]
        argv += ["--max-depth", str(args.max_depth), "--seed", str(args.seed)]
        subprocess.run(argv, check=True, env=env, cwd=args.src)
        return
    print(f"{args.pages:,} pages, {args.slow:.0%} of them take 5 s")
    measure(args.pages, args.slow, None, args.seed)
    measure(args.pages, args.slow, args.max_depth, args.seed)


if __name__ == "__main__":
    main()
