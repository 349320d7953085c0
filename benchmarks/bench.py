"""The one door to the benchmarks: list them, run one, check that they all still start.

    python benchmarks/bench.py list              (or: python -m benchmarks)
    python benchmarks/bench.py NAME [ARGS ...]   e.g. run --pages 500 --rounds 1
    python benchmarks/bench.py NAME --help       what NAME measures, and its options
    python benchmarks/bench.py check             every benchmark answers --help
    python benchmarks/bench.py test              the harness's own tests (pytest)

Each benchmark stays a script of its own, so ``python benchmarks/run.py`` (as the
docs and ``nox -s bench`` start it) keeps working. This file only knows their
names, what each measures in one line and what it needs beyond the venv: twenty
docstrings are too many to read to find the right one. Running one replaces this
process with the script (``os.execv``), so its output, exit code and Ctrl-C are
the script's own, and a measurement is not taken through a wrapper.

The shared pieces the benchmarks import instead of keeping copies are listed at
the end of ``list`` (``HELPERS``); a file of this folder that is neither a
benchmark nor a helper fails ``tests/test_benchmarks.py``, so a new script gets
its line here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Benchmark:
    name: str  # what ``bench.py NAME`` takes
    script: str  # the file in this folder
    summary: str  # what it measures, one line
    needs: str = ""  # beyond the venv; "" for nothing


#: Grouped by the question they answer; the order of ``list``.
GROUPS: dict[str, tuple[Benchmark, ...]] = {
    "trio-crawl against other tools": (
        Benchmark(
            "run",
            "run.py",
            "a generated site against Scrapy, exact-once checked; --warc; redis:N rows",
            "nginx (else a slower Python server), Scrapy, redis-server for redis:N",
        ),
        Benchmark(
            "realsite",
            "realsite.py",
            "the Python 3.11 docs against wget and Scrapy",
            "python3.11-doc (installed when root), wget, Scrapy",
        ),
        Benchmark(
            "broad",
            "broad.py",
            "1,000 / 100 loopback hosts with 100 ms latency against Scrapy",
            "nginx with libnginx-mod-http-lua, Scrapy",
        ),
        Benchmark(
            "discovery",
            "discovery.py",
            "hosts found by links, long-tailed latency, dead hosts and redirects",
            "nginx with libnginx-mod-http-lua, Scrapy",
        ),
        Benchmark(
            "mirror",
            "bench_mirror.py",
            "--mirror -k --page-requisites against wget -m -k -p",
            "wget, nginx (else a Python server)",
        ),
        Benchmark(
            "recrawl",
            "recrawl.py",
            "a changed site visited twice: --recrawl against wget/wget2 -N, Scrapy's cache",
            "nginx, wget, wget2, Scrapy",
        ),
        Benchmark(
            "render",
            "bench_render.py",
            "--render against a Playwright script, by tab count",
            "chromium, playwright (pip install 'trio-crawl[bench]')",
        ),
    ),
    "more than one process": (
        Benchmark(
            "two_process",
            "two_process.py",
            "one crawl split over P processes by URL hash (a prototype)",
            "nginx",
        ),
        Benchmark(
            "redis_memory",
            "bench_redis_memory.py",
            "bytes per queued and per seen URL inside Redis",
            "redis-server, coredis",
        ),
        Benchmark(
            "redis_budgets",
            "bench_redis_budgets.py",
            "Redis CPU per page with host budgets (none, never biting, biting)",
            "redis-server, coredis",
        ),
        Benchmark(
            "redis_replay",
            "redis_replay.py",
            "one Redis's ceiling: a crawl's frontier traffic from K clients, no HTTP",
            "redis-server, coredis",
        ),
        Benchmark(
            "cluster_replay",
            "cluster_replay.py",
            "the ceiling per shard: the replay on a Redis Cluster of 1, 2 and 3 primaries",
            "redis-server, coredis",
        ),
        Benchmark(
            "redis_rate",
            "bench_redis_rate.py",
            "one host at --rate 250: pages/s in memory against Redis (1 and 2 workers)",
            "redis-server, coredis",
        ),
    ),
    "where the CPU goes": (
        Benchmark(
            "profile_crawl",
            "profile_crawl.py",
            "CPU per page split by layer (synthetic site, a doc tree, broad)",
            "nginx with libnginx-mod-http-lua for --site broad",
        ),
        Benchmark(
            "coparse",
            "bench_coparse.py",
            "parsing inline, in the parse co-process or through trio_parallel",
            "a documentation tree (postgresql-doc-15 by default)",
        ),
        Benchmark("fetchers", "bench_fetchers.py", "CPU per request of each fetcher"),
        Benchmark(
            "warc",
            "bench_warc.py",
            "what --warc costs per page, by writer",
            "warcio, fastwarc for their rows",
        ),
        Benchmark("cookie_jar", "bench_cookie_jar.py", "cookies per request: stdlib jar or ours"),
        Benchmark(
            "parser_agreement",
            "parser_agreement.py",
            "lexbor and libxml2 find the same links, real and broken pages",
            "HTML files (/usr/share/doc by default)",
        ),
    ),
    "memory": (
        Benchmark("memory", "bench_memory.py", "bytes per URL in the frontier, queued and done"),
        Benchmark(
            "state_rss",
            "bench_state_rss.py",
            "peak RSS of a crawl seeded with 100k and 1M URLs, with --state and without",
        ),
        Benchmark(
            "huge_page", "bench_huge_page.py", "peak RSS of a page with 1,000,000 links, by mode"
        ),
        Benchmark("host_memory", "bench_host_memory.py", "bytes per known host while it waits"),
        Benchmark(
            "depth_memory",
            "bench_depth_memory.py",
            "memory of depth bookkeeping, and depth_update lines",
        ),
    ),
    "recrawl": (
        Benchmark(
            "revisit",
            "bench_revisit.py",
            "how near a page's rhythm the revisit schedule settles (simulated)",
        ),
    ),
    "behaviour under load": (
        Benchmark(
            "slow_page",
            "bench_slow_page.py",
            "a hanging page or a Crawl-delay host delays nothing else",
            "redis-server for --redis",
        ),
    ),
}

BENCHMARKS = {b.name: b for group in GROUPS.values() for b in group}

#: The files that are not benchmarks: what each one holds for the others.
HELPERS = {
    "bench.py": "this entry point",
    "__main__.py": "python -m benchmarks: the same as bench.py",
    "measure.py": "a child's wall, CPU and peak RSS; /proc readings; machine line; tables",
    "servers.py": "nginx or Python static server, redis-server, on 127.0.0.1",
    "pyserver.py": "the Python static server servers.py falls back on",
    "loopback_hosts.py": "thousands of 127.77.x.y hosts behind one nginx, with latency",
    "generate_site.py": "the generated site and its exact URL set (cached)",
    "exactness.py": "what each crawler's output says it fetched; the exact-once verdict",
    "bytecode.py": "how trio-crawl is started: its command, from bytecode",
    "redis_bench.py": "run.py's redis:N rows: one crawl in Redis over N processes",
    "recrawl_site.py": "recrawl.py's site: both versions and each URL's expected change",
    "recrawl_server.py": "recrawl.py's nginx: validator mix, a host ignoring them, byte log",
    "scrapy_crawl.py": "the Scrapy spider of run.py, realsite.py and recrawl.py",
    "scrapy_broad.py": "the Scrapy spider of broad.py and discovery.py",
    "warc_thread.py": "the WARC writer on a thread, which bench_warc.py measures",
    "cli_cpu_split.py": "a --trio-crawl-cmd wrapper: the crawl's CPU and its child's apart",
    # the harness's own tests (``bench.py test``; tests/test_benchmarks.py runs them)
    "test_bench.py": "tests of the harness: site, exactness, servers, measurement",
    "test_broad.py": "tests of broad.py's hosts, nginx config and verdicts",
    "test_realsite.py": "tests of realsite.py's readers and verdicts",
    "test_recrawl.py": "tests of recrawl.py's site plan, server and verdicts",
}


def find(name: str) -> Benchmark | None:
    """By its name (``mirror``) or its file's (``bench_mirror``, ``bench_mirror.py``)."""
    stem = name.removesuffix(".py")
    return BENCHMARKS.get(stem) or next(
        (b for b in BENCHMARKS.values() if b.script == f"{stem}.py"), None
    )


def listing() -> str:
    width = max(len(name) for name in BENCHMARKS)
    lines = [
        "python benchmarks/bench.py NAME [--help | ARGS ...]",
        "(nox -s bench runs run and realsite; nox -s bench_broad runs broad)",
        "",
    ]
    for group, benchmarks in GROUPS.items():
        lines.append(f"{group}:")
        for b in benchmarks:
            lines.append(f"  {b.name:<{width}}  {b.summary}")
            if b.needs:
                lines.append(f"  {'':<{width}}    needs: {b.needs}")
        lines.append("")
    shared = [n for n in HELPERS if n not in ("bench.py", "__main__.py") and "test_" not in n]
    lines += textwrap.wrap("shared pieces (imported, not run): " + ", ".join(shared), 88)
    lines.append("the harness's own tests: python benchmarks/bench.py test")
    lines.append("figures and how to read them: benchmarks/README.md")
    return "\n".join(lines)


def check() -> int:
    """Start every benchmark with ``--help``, all at once: each imports what it uses
    and parses its options, so a renamed module or a broken import shows here, in
    seconds, rather than at the start of a half-hour run."""
    start = time.perf_counter()
    children = {
        b.name: subprocess.Popen(
            [sys.executable, str(HERE / b.script), "--help"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for b in BENCHMARKS.values()
    }
    failed = 0
    for name, child in children.items():
        out, err = child.communicate(timeout=300)
        ok = child.returncode == 0 and out.startswith("usage:")
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if not ok:
            print("\n".join(f"     {line}" for line in err.splitlines()[-8:]))
    elapsed = time.perf_counter() - start
    print(f"{len(children) - failed} of {len(children)} benchmarks start ({elapsed:.1f} s)")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("list", "-h", "--help"):
        print(listing())
        return 0
    command, rest = argv[0], argv[1:]
    if command == "check":
        return check()
    if command == "test":
        tests = sorted(str(p) for p in HERE.glob("test_*.py"))
        return subprocess.call([sys.executable, "-m", "pytest", "-q", *tests, *rest])
    benchmark = find(command)
    if benchmark is None:
        print(
            f"no benchmark {command!r}; `python benchmarks/bench.py list` names them",
            file=sys.stderr,
        )
        return 2
    script = str(HERE / benchmark.script)
    os.execv(sys.executable, [sys.executable, script, *rest])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
