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

With ``--redis [URL]`` the same crawls also run on a Redis frontier, with
one worker process (``redis x1``) and with ``--processes 2`` (``redis x2``;
the chain's ``t`` is read from whichever worker recorded it). Without a URL
a redis-server of its own is started on a free port (persistence off).

Run: ``python benchmarks/bench_slow_page.py [--src DIR] [--rounds N] [--redis [URL]]``.
``--src`` puts another checkout first on ``PYTHONPATH`` for the crawls (to
compare with an older trio-crawl). Rounds run the compared crawls in turn,
so a load that changes affects them alike; medians are printed. Printed
figures, not a timed test.
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
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import open_redis

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


#: The frontiers compared: name -> extra arguments (``{redis}``, ``{id}``: filled in).
FRONTIERS: dict[str, list[str]] = {
    "memory": [],
    "--state": ["--state", "{tmp}/crawl.db"],
    "redis x1": ["--redis", "{redis}", "--crawl-id", "{id}"],
    "redis x2": ["--redis", "{redis}", "--crawl-id", "{id}", "--processes", "2"],
}


@contextlib.contextmanager
def redis_server(url: str | None) -> Iterator[str]:
    """``url``, or a redis-server of its own (servers.py; stopped after)."""
    if url is not None:
        yield url
        return
    with open_redis() as server:
        yield server.url


def crawl(
    name: str, slow: bool, frontier: str, src: str | None, redis: str | None = None
) -> tuple[float, float, int]:
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
        fill = {"tmp": tmp, "redis": redis or "", "id": f"bench-{uuid.uuid4().hex[:8]}"}
        args += [arg.format(**fill) for arg in FRONTIERS[frontier]]
        started = time.monotonic()
        # cwd: ``-m`` puts the working directory first on sys.path.
        subprocess.run(args, check=True, env=env, timeout=120, cwd=tmp)
        wall = time.monotonic() - started
        outputs = sorted(Path(tmp).glob("out*.jsonl"))  # out.1.jsonl ... with --processes
        lines = [json.loads(line) for o in outputs for line in o.read_text().splitlines()]
    records = [r for r in lines if not r.get("depth_update")]
    (end,) = [r["t"] for r in records if r["url"] == last]
    return float(end), wall, len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="a trio-crawl checkout to run instead of this one")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--redis",
        nargs="?",
        const="",
        metavar="URL",
        help="also on a Redis frontier (x1, x2 processes); no URL: start a redis-server",
    )
    args = parser.parse_args()
    frontiers = ["memory", "--state"]
    if args.redis is not None:
        frontiers += ["redis x1", "redis x2"]
    print(f"{'scenario':<12} {'frontier':<9} {'slow part':<9} {'chain done (t, s)':>18} "
          f"{'crawl (wall, s)':>16} {'records':>8}")  # fmt: skip
    with contextlib.ExitStack() as stack:
        redis = None
        if args.redis is not None:
            redis = stack.enter_context(redis_server(args.redis or None))
        for name in ("hang", "crawl-delay"):
            kinds = [(frontier, slow) for frontier in frontiers for slow in (False, True)]
            runs: dict[tuple[str, bool], list[tuple[float, float, int]]] = {k: [] for k in kinds}
            for _ in range(args.rounds):  # in turn: a changing load affects all alike
                for frontier, slow in kinds:
                    runs[frontier, slow].append(crawl(name, slow, frontier, args.src, redis))
            for frontier, slow in kinds:
                done = runs[frontier, slow]
                end = statistics.median(r[0] for r in done)
                wall = statistics.median(r[1] for r in done)
                print(
                    f"{name:<12} {frontier:<9} {'yes' if slow else 'no':<9} "
                    f"{end:>18.2f} {wall:>16.2f} {done[0][2]:>8}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
