"""What parsing a page costs the crawl's process: inline, in the parse
co-process (``engine/parse_process.py``), or through ``trio_parallel``.

    python benchmarks/bench_coparse.py [--doc-dir /usr/share/doc/postgresql-doc-15/html]
        [--workers 16] [--rounds 3]

Every HTML file of the tree is parsed for links by ``--workers`` tasks (as
the crawl's workers would), with no network: the figure that matters is the
main process's CPU time per page (``time.process_time``), since the crawl is
bound by that process; the wall time per page and the pages the child took
are printed too. Modes run alternately, ``--rounds`` times. The co-process
is started and ready before the clock starts (as in a crawl after its first
pages); so is trio_parallel's worker cache.
"""

from __future__ import annotations

import argparse
import glob
import os
import time
from collections.abc import Awaitable, Callable

import trio

from trio_crawl.core.parse import extract_links
from trio_crawl.engine.parse_process import ParseProcess

Parse = Callable[[bytes, str], Awaitable[list[str] | None]]


async def run_mode(
    parse: Parse, pages: list[tuple[str, bytes]], workers: int
) -> tuple[float, float]:
    """(main CPU s, wall s) to parse every page with ``workers`` tasks."""
    todo = iter(pages)

    async def worker() -> None:
        for url, body in todo:
            links = await parse(body, url)
            if links is None:
                extract_links(body, url, "text/html")

    cpu, wall = time.process_time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(workers):
            nursery.start_soon(worker)
    return time.process_time() - cpu, time.perf_counter() - wall


def read_tree(doc_dir: str) -> list[tuple[str, bytes]]:
    """Every HTML file under ``doc_dir``, as (URL, body)."""
    files = sorted(glob.glob(os.path.join(doc_dir, "**", "*.html"), recursive=True))
    pages = []
    for name in files:
        with open(name, "rb") as file:
            pages.append((f"http://127.0.0.1/{os.path.relpath(name, doc_dir)}", file.read()))
    return pages


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--doc-dir", default="/usr/share/doc/postgresql-doc-15/html")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pages = read_tree(args.doc_dir)
    print(
        f"{len(pages)} pages, {sum(len(b) for _, b in pages) / 1e6:.1f} MB, {args.workers} workers"
    )

    async def inline(body: bytes, url: str) -> list[str] | None:
        return extract_links(body, url, "text/html")

    modes: dict[str, Parse] = {"inline": inline}
    # Every page to the child: the protocol's cost, not the crawl's balance.
    process = ParseProcess(start_after=1, max_in_flight=args.workers)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(process.serve)
        await process.links(b"", "http://x/", "text/html")
        while not process.ready:  # noqa: ASYNC110 (a state of the child, no event)
            await trio.sleep(0.01)

        async def coprocess(body: bytes, url: str) -> list[str] | None:
            return await process.links(body, url, "text/html")

        modes["co-process"] = coprocess
        try:
            import trio_parallel

            limiter = trio.CapacityLimiter(1)  # one worker process, as the co-process

            async def parallel(body: bytes, url: str) -> list[str] | None:
                return await trio_parallel.run_sync(
                    extract_links, body, url, "text/html", limiter=limiter
                )

            await parallel(b"", "http://x/")  # its worker started and warm
            modes["trio_parallel"] = parallel
        except ImportError:
            print("(trio-parallel not installed: no figures for it)")
        for round_ in range(args.rounds):
            for name, parse in modes.items():
                before = process.pages
                cpu, wall = await run_mode(parse, pages, args.workers)
                took = process.pages - before
                print(
                    f"round {round_ + 1} {name:14} main CPU {cpu / len(pages) * 1e6:6.0f} us/page"
                    f"  wall {wall / len(pages) * 1e6:6.0f} us/page"
                    + (f"  ({took} of {len(pages)} in the child)" if name == "co-process" else "")
                )
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
