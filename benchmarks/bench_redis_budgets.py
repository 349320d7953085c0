"""What host budgets cost inside Redis (``frontiers/redis/budgets.py``;
docs/scaling.md quotes it).

Starts its own redis-server (127.0.0.1, free port, persistence off), then
drives the crawl's server-side functions directly, as one worker would, with
no HTTP: a crawl of N pages (default 20,000) on H hosts (default 50), each
page finished with L links (default 10: new pages and pages already seen,
half of them on other hosts), in sync calls of 200 finishes. The same crawl
three times in one run:

1. no budgets;
2. budgets that never bite (``--max-pages-per-host`` and ``--max-hosts``
   above the site's);
3. budgets that bite: at most N / (2H) pages per host and H / 2 hosts.

For each: the pages finished, Redis's CPU (``INFO cpu``, user + system) and
its ``FCALL`` time (``INFO commandstats``) per page finished, and the URLs
the budgets refused (a fair share of CPU goes to refused links when the
budgets bite: each is looked up and counted).

    python benchmarks/bench_redis_budgets.py [--pages N] [--hosts H] [--links L]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import BenchRedis, open_redis, redis_available

from trio_crawl.frontiers.redis import keys_prefix, wire
from trio_crawl.frontiers.redis import lua as redis_lua


def fcall_usec(server: BenchRedis) -> int:
    """Microseconds Redis spent in ``FCALL`` so far (``INFO commandstats``)."""
    for line in server.command("INFO", "commandstats").decode(errors="replace").splitlines():
        if line.startswith("cmdstat_fcall:"):
            fields = dict(part.split("=") for part in line.split(":", 1)[1].split(","))
            return int(fields["usec"])
    return 0


def page_url(i: int, hosts: int) -> str:
    return f"http://www.host-{i % hosts}.test/section/{i % 97}/page-{i}.html"


async def crawl(
    server: BenchRedis, name: str, pages: int, hosts: int, links: int, budgets: dict[str, int]
) -> dict[str, Any]:
    """One crawl driven through the functions; its figures."""
    import coredis

    client = coredis.Redis.from_url(server.url)
    rng = random.Random(7)
    async with client:
        prefix = keys_prefix(name)

        async def call(fn: str, *args: object) -> Any:
            return await client.fcall(redis_lua.function(fn), keys=[prefix], args=list(args))

        await client.function_load(redis_lua.LIBRARY, replace=True)
        identity = {"max_pages_per_host": None, "max_hosts": None, **budgets}
        start = page_url(0, hosts)
        hello = await call(
            "hello",
            *wire.hello_args(
                "bench", 3600, may_create=True, identity_json=json.dumps(identity),
                max_pages=None, rate=None, per_host_concurrency=None, read_robots=False,
                max_depth=None, settle=True, starts=wire.admission(start, 0, ""),
            ),
        )  # fmt: skip
        owner = hello[2]
        cpu0, fcall0 = server.cpu_seconds(), fcall_usec(server)
        finished = refused = 0
        pending: list[object] = []
        while True:
            reply = wire.SyncReply.parse(
                await call("sync", *wire.sync_args(owner, 200, 200, pending))
            )
            refused += reply.over_budget
            pending = []
            for taken in reply.taken:
                j = int(taken.url.rsplit("page-", 1)[1].split(".")[0])
                children: list[object] = []
                for _ in range(links):
                    near = min(pages - 1, j + rng.randrange(1, 40))
                    target = near if rng.random() < 0.5 else rng.randrange(pages)
                    children += wire.admission(page_url(target, hosts), taken.depth + 1, taken.url)
                pending += wire.finish_op(taken.digest, taken.token, True, children)
            finished += len(reply.taken)
            if not reply.taken and not pending and reply.counters.done:
                break
        cpu = server.cpu_seconds() - cpu0
        fcall = fcall_usec(server) - fcall0
        problems = await client.fcall_ro(redis_lua.function("check"), keys=[prefix])
        assert problems == [], problems
    return {"finished": finished, "cpu": cpu, "fcall": fcall, "refused": refused}


async def main_async(server: BenchRedis, pages: int, hosts: int, links: int) -> None:
    runs = [
        ("no budgets", {}),
        ("budgets that never bite", {"max_pages_per_host": pages, "max_hosts": hosts}),
        (
            "budgets that bite",
            {"max_pages_per_host": max(1, pages // (2 * hosts)), "max_hosts": max(1, hosts // 2)},
        ),
    ]
    print(f"{pages:,} pages on {hosts} hosts, {links} links a page, one worker, no HTTP")
    for i, (label, budgets) in enumerate(runs):
        r = await crawl(server, f"budgets-{i}", pages, hosts, links, budgets)
        n = max(r["finished"], 1)
        print(
            f"  {label:<24} {r['finished']:>7,} pages  Redis CPU {r['cpu'] * 1e6 / n:6.1f} us/page"
            f"  FCALL {r['fcall'] / n:6.1f} us/page  refused {r['refused']:,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--links", type=int, default=10)
    args = parser.parse_args()
    why = redis_available()
    if why:
        sys.exit(why)
    with open_redis() as server:
        trio.run(main_async, server, args.pages, args.hosts, args.links)


if __name__ == "__main__":
    main()
