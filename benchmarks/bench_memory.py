"""Bytes per URL held by the frontier: seen (done) and queued.

    python benchmarks/bench_memory.py [--count 1000000]

Measures RSS growth (ru_maxrss and /proc statm) while admitting COUNT distinct
60-character URLs into a Frontier (queued), then finishing them (done), and
compares with a bare Python set of the same strings.
"""

from __future__ import annotations

import argparse
import gc
import os

from trio_crawl.core.frontier import Frontier


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def urls(count: int) -> list[str]:
    return [
        f"http://bench.example.test/section/{i:010d}/page-{i % 997:04d}.html" for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1_000_000)
    args = parser.parse_args()
    n = args.count

    gc.collect()
    base = rss_bytes()
    strings = urls(n)
    after_strings = rss_bytes()
    per_string = (after_strings - base) / n
    print(f"{n:,} URL strings of {len(strings[0])} chars: {per_string:.0f} B each")

    bare = set(strings)
    after_set = rss_bytes()
    print(
        f"Python set of them: +{(after_set - after_strings) / n:.0f} B per URL (plus the string)"
    )
    del bare
    gc.collect()

    frontier = Frontier(in_scope=lambda u: True)
    before = rss_bytes()
    (root,) = frontier.add_start("http://bench.example.test/")
    frontier.start(root)
    queued = frontier.finish(root, strings)
    after_queued = rss_bytes()
    print(f"Frontier, queued: +{(after_queued - before) / n:.0f} B per URL (plus the string)")
    for entry in queued:
        frontier.start(entry)
        frontier.finish(entry)
    del queued
    gc.collect()
    after_done = rss_bytes()
    print(
        f"Frontier, done (seen only): +{(after_done - before) / n:.0f} B per URL (plus the string)"
    )
    print(f"total per seen URL incl. its string: {(after_done - before) / n + per_string:.0f} B")


if __name__ == "__main__":
    main()
