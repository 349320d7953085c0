"""Speed and memory of the on-disk crawl state (``trio_crawl.frontiers.sqlite.state``).

Figures, on one core, with real SQLite files in a temporary directory:

- ``apply``: operations per second for batches of Admit ops (1,000 per batch, as the
  engine would flush them), into a new file and into one that already holds the
  seeds; and for "page-shaped" batches (Start, Finish and 10 Admits per page);
- ``filter_unseen``: microseconds per call for a page of 30 links, in four mixes:
  all new, all recent (navigation links every page repeats), all known but not
  recent (each one a database check), and a typical page (20 recent, 5 known, 5 new);
- ``add_seeds``: seconds for N seed URLs into a new file, and again on resume (all
  known, nothing added);
- ``take_queued`` (rows per second, 1,000 at a time) and ``recover`` after a stop;
- peak RSS (``VmHWM``, else ``resource.getrusage``) of a fresh process that opens a
  file of 100k and of N URLs and loads the seen-filter, before and after: bytes per
  URL. Most of the difference is SQLite's page cache (capped at 16 MiB), filled by
  the scan; the Bloom filter's own size is printed beside it.

Run: ``python benchmarks/bench_state.py [--seeds N] [--dir DIR]`` (N = 1,000,000 by
default: about a minute and 300 MB of disk in DIR, a temporary directory by default).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from trio_crawl.frontiers.sqlite import Admit, CrawlState, Finish, Op, Start

LINKS_PER_PAGE = 30


def url(i: int, kind: str = "s") -> str:
    """A URL of realistic length (~70 characters), unique per (kind, i)."""
    return f"https://www.site{i % 53}.example.com/{kind}/section-{i % 97}/article-{i}.html?p=1"


def seeds(n: int, kind: str = "s") -> Iterator[str]:
    return (url(i, kind) for i in range(n))


def bench_add_seeds(path: Path, n: int) -> None:
    with CrawlState.open(path) as state:
        t = time.perf_counter()
        added = state.add_seeds(seeds(n))
        first = time.perf_counter() - t
        t = time.perf_counter()
        again = state.add_seeds(seeds(n))
        second = time.perf_counter() - t
    assert added == n and again == 0, (added, again)
    print(f"add_seeds      {n:>9,} new URLs: {first:6.2f} s ({n / first:>9,.0f} URLs/s)")
    print(f"add_seeds      {n:>9,} known (resume): {second:6.2f} s ({n / second:>9,.0f} URLs/s)")


def bench_apply(path: Path, label: str, total: int, batch: int = 1000) -> None:
    with CrawlState.open(path) as state:
        base = state.progress()["total"]
        batches = [
            [Admit(url(base + i, "a"), 3, "https://www.example.com/") for i in range(j, j + batch)]
            for j in range(0, total, batch)
        ]
        t = time.perf_counter()
        for ops in batches:
            state.apply(ops)
        elapsed = time.perf_counter() - t
    print(f"apply Admit    {label}: {total / elapsed:>9,.0f} ops/s ({batch} per batch)")


def bench_apply_pages(path: Path, pages: int) -> None:
    """Per page: Start, Finish and 10 new links; 100 pages per batch."""
    with CrawlState.open(path) as state:
        state.recover()
        base = state.progress()["total"]
        taken = state.take_queued(pages)
        assert len(taken) == pages
        ops_per_batch: list[list[Op]] = []
        for j in range(0, pages, 100):
            ops: list[Op] = []
            for k, row in enumerate(taken[j : j + 100]):
                ops.append(Start(row.url))
                ops.append(Finish(row.url))
                ops.extend(Admit(url(base + (j + k) * 10 + m, "p"), 1, row.url) for m in range(10))
            ops_per_batch.append(ops)
        n_ops = sum(len(b) for b in ops_per_batch)
        t = time.perf_counter()
        for ops in ops_per_batch:
            state.apply(ops)
        elapsed = time.perf_counter() - t
    print(
        f"apply pages    (Start+Finish+10 Admit): {n_ops / elapsed:>9,.0f} ops/s,"
        f" {pages / elapsed:>7,.0f} pages/s"
    )


def bench_filter(path: Path, n_known: int, rounds: int = 2000) -> None:
    rng = random.Random(7)
    with CrawlState.open(path) as state:
        t = time.perf_counter()
        state.filter_unseen([])
        print(
            f"filter_unseen  first call (loads the Bloom filter): {time.perf_counter() - t:.2f} s"
        )
        nav = [url(i) for i in range(20)]
        state.filter_unseen(nav)  # now recent
        fresh = iter(range(10**9, 2 * 10**9))

        def new_links(k: int) -> list[str]:
            return [url(next(fresh), "n") for _ in range(k)]

        def known_links(k: int) -> list[str]:
            return [url(rng.randrange(1000, n_known)) for _ in range(k)]

        mixes: dict[str, Callable[[], list[str]]] = {
            "30 new": lambda: new_links(30),
            "30 recent": lambda: list(nav + nav[:10]),
            "30 known, not recent": lambda: known_links(30),
            "20 recent + 5 known + 5 new": lambda: nav + known_links(5) + new_links(5),
        }
        for name, make in mixes.items():
            pages = [make() for _ in range(rounds)]
            before = state.statistics()
            t = time.perf_counter()
            for links in pages:
                state.filter_unseen(links)
            elapsed = time.perf_counter() - t
            after = state.statistics()
            checks = (after.db_checks - before.db_checks) / rounds
            fps = after.false_positives - before.false_positives
            print(
                f"filter_unseen  {name:<28}: {elapsed / rounds * 1e6:7.1f} µs/page"
                f" ({checks:.1f} DB checks/page, {fps} false positives in {rounds} pages)"
            )


def bench_take_and_recover(path: Path, n: int) -> None:
    with CrawlState.open(path) as state:
        state.recover()
        t = time.perf_counter()
        taken = 0
        while taken < n:
            taken += len(state.take_queued(1000))
        elapsed = time.perf_counter() - t
        print(f"take_queued    1,000 at a time: {taken / elapsed:>9,.0f} rows/s")
        state.apply([Start(u) for u in [row.url for row in state.take_queued(500)]])
    t = time.perf_counter()
    with CrawlState.open(path) as state:
        back = state.recover()
        elapsed = time.perf_counter() - t
        total = state.progress()["total"]
    print(
        f"open+recover   {total:,} rows, {taken + 500:,} in memory, {len(back)} in flight:"
        f" {elapsed:.2f} s"
    )


def peak_rss() -> int:
    """Peak RSS of this process in bytes.

    ``getrusage``'s ``ru_maxrss`` survives ``exec`` on Linux, so a child started by
    a big parent reports the parent's peak; ``VmHWM`` (Linux) is this program's own.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss_child(path: str) -> None:
    """In a fresh process: peak RSS before and after loading the seen-filter."""
    state = CrawlState.open(path)
    n = state.progress()["total"]
    before = peak_rss()
    state.filter_unseen([])
    after = peak_rss()
    stats = state.statistics()
    state.close()
    print(json.dumps({"n": n, "before": before, "after": after, "bloom": stats.prefilter_bytes}))


def bench_rss(path: Path, label: str) -> None:
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    r = json.loads(out)
    n = r["n"]
    print(
        f"peak RSS       {label:>9} URLs: {r['before'] / 2**20:6.1f} MB before loading,"
        f" {r['after'] / 2**20:6.1f} MB after: {(r['after'] - r['before']) / n:5.2f} bytes/URL"
        f" (Bloom filter itself {r['bloom'] / n:.2f} bytes/URL)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        d = Path(tmp)
        big, small = d / "big.db", d / "small.db"
        n = args.seeds
        print(f"SQLite {__import__('sqlite3').sqlite_version}, Python {sys.version.split()[0]}")
        bench_add_seeds(big, n)
        with CrawlState.open(small) as state:
            state.add_seeds(seeds(100_000))
        bench_rss(small, "100,000")
        bench_rss(big, f"{n:,}")
        for batch in (1000, 5000):
            bench_apply(d / f"fresh{batch}.db", "into a new file   ", 200_000, batch)
            bench_apply(big, f"into {n:,}+ rows", 200_000, batch)
        bench_apply_pages(big, 10_000)
        bench_filter(big, n)
        bench_take_and_recover(big, 100_000)


if __name__ == "__main__":
    main()
