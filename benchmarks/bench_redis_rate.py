"""One host at ``--rate 250``: pages/s in memory against Redis (issue #37 item 4).

A rate-limited crawl is mostly idle, so it should reach its rate whatever
the frontier: in memory, on Redis with one worker, and with ``--processes 2``
(two workers sharing the host's rate). Each crawl is the command line in a
subprocess against one real server on 127.0.0.1 (a tree of ``--pages``
pages, each linking ten more), which logs when each request arrived. The
rate is read off those server-side times, so all rows are measured alike:

* ``pages/s``: page requests after the first, over the time from the first
  to the last (robots.txt left out): what the server saw;
* ``max/1s``: the most requests in any one-second window (at most the rate:
  ``engine/schedule.py`` rule 1);
* ``redis CPU``: the redis-server's CPU over the crawl (``INFO cpu``), and
  per page.

Run: ``python benchmarks/bench_redis_rate.py [--rate 250] [--pages 1500]
[--rounds 1] [--src DIR]``. ``--src`` runs another checkout's trio-crawl
(an older commit, to compare). Rounds run the rows in turn, so that a load
that changes affects them alike; medians are printed. Printed figures, not
a timed test.
"""

from __future__ import annotations

import argparse
import bisect
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import BenchRedis, open_redis, redis_available

from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page

#: The rows: name -> extra arguments (``{redis}``, ``{id}``: filled in).
ROWS: dict[str, list[str]] = {
    "memory": [],
    "redis x1": ["--redis", "{redis}", "--crawl-id", "{id}"],
    "redis x2": ["--redis", "{redis}", "--crawl-id", "{id}", "--processes", "2"],
}


def tree_site(pages: int) -> Site:
    """``/`` links ``/p/0`` to ``/p/9``; ``/p/i`` links ``/p/10i+10`` to ``/p/10i+19``."""

    def route(request: SiteRequest) -> Response:
        path = request.target.split("?")[0]
        if path == "/robots.txt":
            return Response(status=404)
        first = 0 if path == "/" else (int(path.rsplit("/", 1)[1]) + 1) * 10
        return page(*(f"/p/{i}" for i in range(first, min(first + 10, pages))))

    return Site({}, fallback=route)


def max_in_window(times: list[float], window: float = 1.0) -> int:
    """The most of ``times`` (sorted) in any half-open window of ``window`` s."""
    return max((bisect.bisect_left(times, t + window) - i for i, t in enumerate(times)), default=0)


def crawl(
    row: str, server: SiteServer, rate: float, redis: BenchRedis | None, src: str | None
) -> tuple[float, int, int, float]:
    """One crawl: (pages/s, max in 1 s, pages, redis CPU seconds)."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src or here, env.get("PYTHONPATH")) if p)
    before = len(server.log)
    cpu = redis.cpu_seconds() if redis is not None else 0.0
    with tempfile.TemporaryDirectory() as tmp:
        fill = {"redis": redis.url if redis else "", "id": f"rate-{uuid.uuid4().hex[:8]}"}
        args = [sys.executable, "-m", "trio_crawl", server.url("/"), "-q", "-o", f"{tmp}/o.jsonl"]
        args += ["--rate", f"{rate:g}", *(a.format(**fill) for a in ROWS[row])]
        # cwd: ``-m`` puts the working directory first on sys.path.
        subprocess.run(args, check=True, env=env, timeout=600, cwd=tmp)
    cpu = redis.cpu_seconds() - cpu if redis is not None else 0.0
    times = sorted(r.time for r in server.log[before:] if r.target != "/robots.txt")
    per_s = (len(times) - 1) / (times[-1] - times[0])
    return per_s, max_in_window(times), len(times), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=250.0)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--src", help="a trio-crawl checkout to run instead of this one")
    args = parser.parse_args()
    why = redis_available()
    if why is not None:
        sys.exit(f"bench_redis_rate: {why}")
    runs: dict[str, list[tuple[float, int, int, float]]] = {row: [] for row in ROWS}
    with open_redis() as redis, serve_site(tree_site(args.pages)) as server:
        for _ in range(args.rounds):
            for row in ROWS:
                used = None if row == "memory" else redis
                runs[row].append(crawl(row, server, args.rate, used, args.src))
                time.sleep(0.5)
    print(f"--rate {args.rate:g}, {args.pages} pages, one host, medians of {args.rounds}")
    print(f"{'frontier':<10} {'pages/s':>8} {'of memory':>10} {'max/1s':>7} {'pages':>6} "
          f"{'redis CPU':>10} {'per page':>9}")  # fmt: skip
    memory = statistics.median(r[0] for r in runs["memory"])
    for row, done in runs.items():
        per_s = statistics.median(r[0] for r in done)
        cpu = statistics.median(r[3] for r in done)
        pages = done[0][2]
        cpu_cells = f"{cpu:>9.2f}s {cpu / pages * 1e6:>7.0f}us" if row != "memory" else ""
        print(
            f"{row:<10} {per_s:>8.1f} {per_s / memory:>9.0%} "
            f"{max(r[1] for r in done):>7} {pages:>6} {cpu_cells}",
            flush=True,
        )


if __name__ == "__main__":
    main()
