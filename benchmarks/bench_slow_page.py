"""A slow shallow page must delay nothing else (issue #18 item 1).

Crawls real servers on 127.0.0.1 with the command line, in memory and with
``--state``, each scenario with and without its slow part, and prints when
the *rest* of the crawl was done: the ``t`` of the last record of the deep
chain, and the wall time of the whole crawl.

* ``hang``: ``/`` links ``/hang`` (answers after 30 s, past ``--timeout 2``;
  one retry) and the head of a 200-page link chain ``/c0 -> /c1 -> ...``.
* ``crawl-delay``: two start URLs on two servers. Host A has
  ``Crawl-delay: 1`` and 6 pages at depth 1; host B has a 200-page chain.

"Without" is the same site with the hanging page answering at once, or with
no Crawl-delay. The chain's figure should be the same with and without.

Run: ``python benchmarks/bench_slow_page.py [--src DIR] [--rounds N]``.
``--src`` puts another checkout first on ``PYTHONPATH`` for the crawls (to
compare with an older trio-crawl). Printed figures, not a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

CHAIN = 200
HANG_SECONDS = 30.0


def chain_routes(prefix: str = "") -> dict[str, Response]:
    routes = {f"/c{i}": page(f"/c{i + 1}") for i in range(CHAIN)}
    routes[f"/c{CHAIN}"] = page()
    return routes


def hang_site(slow: bool) -> Site:
    routes = chain_routes()
    routes["/"] = page("/hang", "/c0")
    routes["/hang"] = Response(body=b"<p>late</p>", delay=HANG_SECONDS if slow else 0.0)
    return Site(routes)


def delayed_host(slow: bool) -> Site:
    robots = "User-agent: *\nDisallow:\n" + ("Crawl-delay: 1\n" if slow else "")
    routes = {f"/s{i}": page() for i in range(6)}
    routes["/"] = page(*(f"/s{i}" for i in range(6)))
    routes["/robots.txt"] = Response(body=robots.encode(), content_type="text/plain")
    return Site(routes)


def chain_host() -> Site:
    routes = chain_routes()
    routes["/"] = page("/c0")
    return Site(routes)


@contextlib.contextmanager
def scenario(name: str, slow: bool) -> Iterator[tuple[list[str], str]]:
    """Start the servers; yield the start URLs and the chain's last URL."""
    if name == "hang":
        with serve_site(hang_site(slow)) as server:
            yield [server.url("/")], server.url(f"/c{CHAIN}")
    else:
        with serve_site(delayed_host(slow)) as a, serve_site(chain_host()) as b:
            yield [a.url("/"), b.url("/")], b.url(f"/c{CHAIN}")


def crawl(name: str, slow: bool, state: bool, src: str | None) -> tuple[float, float, int]:
    """One crawl: (t of the chain's last record, wall seconds, records)."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src or here, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp, scenario(name, slow) as (starts, last):
        out = Path(tmp) / "out.jsonl"
        args = [sys.executable, "-m", "trio_crawl", *starts, "-q", "-o", str(out)]
        args += ["--timeout", "2", "--retries", "1", "-w", "16"]
        if name == "hang":
            args.append("--ignore-robots")
        if state:
            args += ["--state", str(Path(tmp) / "crawl.db")]
        started = time.monotonic()
        # cwd: ``-m`` puts the working directory first on sys.path.
        subprocess.run(args, check=True, env=env, timeout=120, cwd=tmp)
        wall = time.monotonic() - started
        lines = [json.loads(line) for line in out.read_text().splitlines()]
    records = [r for r in lines if not r.get("depth_update")]
    (end,) = [r["t"] for r in records if r["url"] == last]
    return float(end), wall, len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="a trio-crawl checkout to run instead of this one")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(f"{'scenario':<12} {'frontier':<8} {'slow part':<9} {'chain done (t, s)':>18} "
          f"{'crawl (wall, s)':>16} {'records':>8}")  # fmt: skip
    for name in ("hang", "crawl-delay"):
        for state in (False, True):
            for slow in (False, True):
                runs = [crawl(name, slow, state, args.src) for _ in range(args.rounds)]
                end = statistics.median(r[0] for r in runs)
                wall = statistics.median(r[1] for r in runs)
                print(
                    f"{name:<12} {'--state' if state else 'memory':<8} "
                    f"{'yes' if slow else 'no':<9} {end:>18.2f} {wall:>16.2f} {runs[0][2]:>8}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
