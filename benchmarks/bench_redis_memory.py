"""Memory in Redis per URL of a ``--redis`` crawl (docs/scaling.md quotes it).

Starts its own redis-server (127.0.0.1, free port, persistence off), then
drives the crawl's server-side functions directly, as workers would:

1. admit N URLs (default 100,000, about 60 characters each, on 10 hosts):
   ``used_memory`` per *queued* URL (seen set + entry + queue);
2. take and finish them all, in batches of 500: ``used_memory`` per *seen*
   URL once the crawl is done (only the seen set of 8-byte digests stays);
3. ``MEMORY USAGE`` of the seen set's buckets, summed, per URL;
4. the peak behind one slow start URL: a second crawl whose start page
   stays leased while every other page is finished, each with 10 (``--links``) links to
   pages already seen. No finished page's depth settles while a shallower
   page is unfinished, so Redis keeps each one (URL, depth, referrer, its
   links as digests) to correct its record should a shorter path turn up:
   ``used_memory`` per finished page then, and once the start page is done.

Also prints how long Redis took for the admissions and the take-and-finish
rounds (server-side work per page, without any crawling).

    python benchmarks/bench_redis_memory.py [--urls N] [--links L]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import open_redis, redis_available

from trio_crawl.frontiers.redis import keys_prefix, wire
from trio_crawl.frontiers.redis import lua as redis_lua


async def measure(url: str, n: int) -> None:
    import coredis

    client = coredis.Redis.from_url(url)
    async with client:
        prefix = keys_prefix("memory")

        async def call(name: str, *args: object) -> object:
            return await client.fcall(redis_lua.function(name), keys=[prefix], args=list(args))

        await client.function_load(redis_lua.LIBRARY, replace=True)
        base = int((await client.info("memory"))["used_memory"])
        start = "http://www.example-0.test/"
        hello = await call(
            "hello",
            *wire.hello_args(
                "bench", 30, may_create=True, identity_json="{}", max_pages=None, rate=None,
                per_host_concurrency=None, read_robots=False, max_depth=None, settle=True,
                starts=wire.admission(start, 0, ""),
            )
        )  # fmt: skip
        owner = hello[2]  # type: ignore[index]
        urls = [
            f"http://www.example-{i % 10}.test/section/{i % 97}/page-{i}.html?ref={i % 13}"
            for i in range(1, n)
        ]
        mean = sum(map(len, urls)) / len(urls)
        t0 = time.perf_counter()
        for i in range(0, len(urls), 2000):
            ops: list[object] = []
            for u in urls[i : i + 2000]:
                ops += wire.admission(u, 1, start)
            await call("sync", *wire.sync_args(owner, 0, 0, wire.admit_op(ops)))
        admit_s = time.perf_counter() - t0
        queued = int((await client.info("memory"))["used_memory"]) - base
        print(f"{n:,} URLs (mean length {mean:.0f} characters) admitted in {admit_s:.1f} s")
        print(f"  queued:  {queued / n:.0f} bytes of Redis memory per URL")
        t0 = time.perf_counter()
        rounds = 0
        pending: list[object] = []
        while True:
            reply = wire.SyncReply.parse(
                await call("sync", *wire.sync_args(owner, 500, 500, pending))  # type: ignore[arg-type]
            )
            rounds += 1
            pending = []
            for taken in reply.taken:
                pending += wire.finish_op(taken.digest, taken.token, True, [])
            if not reply.taken and reply.counters.done:
                break
        finish_s = time.perf_counter() - t0
        done = int((await client.info("memory"))["used_memory"]) - base
        seen_keys = [k async for k in client.scan_iter(match=f"{prefix}S*", count=1000)]
        seen_bytes = 0
        for k in seen_keys:
            seen_bytes += int(await client.memory_usage(k) or 0)
        print(
            f"  taken and finished in {finish_s:.1f} s ({rounds} rounds of 500: "
            f"{n / finish_s:,.0f} pages/s of server-side work)"
        )
        print(f"  done:    {done / n:.1f} bytes per seen URL (used_memory)")
        print(
            f"  seen set: {seen_bytes / n:.1f} bytes per URL in {len(seen_keys):,} buckets "
            "(MEMORY USAGE)"
        )


async def measure_unsettled(url: str, n: int, links: int = 10) -> None:
    """Step 4: what a finished page costs while its depth has not settled."""
    import coredis

    client = coredis.Redis.from_url(url)
    async with client:
        prefix = keys_prefix("unsettled")

        async def call(name: str, *args: object) -> Any:
            return await client.fcall(redis_lua.function(name), keys=[prefix], args=list(args))

        base = int((await client.info("memory"))["used_memory"])
        start = "http://www.example-0.test/"
        hello = await call(
            "hello",
            *wire.hello_args(
                "bench", 3600, may_create=True, identity_json="{}", max_pages=None, rate=None,
                per_host_concurrency=None, read_robots=False, max_depth=None, settle=True,
                starts=wire.admission(start, 0, ""),
            )
        )  # fmt: skip
        owner = hello[2]
        urls = [
            f"http://www.example-{i % 10}.test/section/{i % 97}/page-{i}.html?ref={i % 13}"
            for i in range(1, n)
        ]
        for i in range(0, len(urls), 2000):
            ops: list[object] = []
            for u in urls[i : i + 2000]:
                ops += wire.admission(u, 1, start)
            await call("sync", *wire.sync_args(owner, 0, 0, wire.admit_op(ops)))
        slow = None  # the start page: leased, never finished until the end
        pending: list[object] = []
        while True:
            reply = wire.SyncReply.parse(
                await call("sync", *wire.sync_args(owner, 500, 500, pending))
            )
            pending = []
            for taken in reply.taken:
                if taken.url == start:
                    slow = taken
                    continue
                j = int(taken.url.rsplit("page-", 1)[1].split(".")[0])
                children: list[object] = []
                for k in range(1, links + 1):  # pages already seen
                    children += wire.admission(urls[(j * 7 + k) % len(urls)], 2, taken.url)
                pending += wire.finish_op(taken.digest, taken.token, True, children)
            if not reply.taken and not pending:
                break
        assert slow is not None
        peak = int((await client.info("memory"))["used_memory"]) - base
        kept = await client.hlen(prefix + "dn")
        finish = wire.finish_op(slow.digest, slow.token, True, [])
        await call("sync", *wire.sync_args(owner, 0, 0, finish))
        done = int((await client.info("memory"))["used_memory"]) - base
        print(f"{n:,} pages behind one slow start URL, {links} links each:")
        print(f"  {kept:,} finished pages kept unsettled: {peak / n:.0f} bytes per page")
        print(f"  once the start page is done: {done / n:.1f} bytes per page")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--links", type=int, default=10, help="links of a page in step 4")
    args = parser.parse_args()
    why = redis_available()
    if why:
        sys.exit(why)
    with open_redis() as server:
        trio.run(measure, server.url, args.urls)
        trio.run(measure_unsettled, server.url, args.urls, args.links)


if __name__ == "__main__":
    main()
