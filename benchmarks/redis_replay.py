"""The ceiling of one Redis (issue 37, Part A item 2): a crawl's frontier
traffic without HTTP, from several client processes.

The synthetic site's link graph (``generate_site.plan_site``, the same site
``run.py`` crawls: 20,600 URLs, 30 links a page) is crawled against one
redis-server by K client processes that do everything a ``--redis`` worker
says to Redis and nothing else: each registers (``hello``), then makes one
``sync`` call at a time that carries the finishes of the pages it took in
its previous call, with their links made as a worker makes them
(``page_links.add_links`` with its ``SentLinks``, confirmed when a call
succeeds), and takes up to ``--window`` URLs. A page is "fetched" the moment
it is taken. So the clients spend a few microseconds a page, and what
limits the pages/s is Redis.

Printed: pages/s the one Redis sustained, its CPU per page (``INFO cpu``,
used_cpu_sys + used_cpu_user over the run), the calls (``INFO
commandstats``), the slowest call (``SLOWLOG``, every call over 1 ms
logged; with ``--call-cpu``, by redis-server CPU), and whether the crawl
was exact (every URL once, each at its link distance from ``/``). Pages/s
divided by one worker's pages/s is how many worker processes one Redis
serves, at most; with fewer cores than clients plus Redis, the clients take
CPU from Redis, so the CPU per page is the figure that carries over.

    python benchmarks/redis_replay.py [--pages 20000] [--clients 4] [--window 128] [--call-cpu]

``--call-cpu`` gives each call's own redis-server CPU, a real figure
whatever the machine's load and however many clients: the clients take
turns (a file lock held from before a call to after its answer), so no other
call runs in between, and each reads the CPU time of redis-server's main
thread, which runs every command, to the nanosecond
(``/proc/PID/task/PID/schedstat``) before and after its call. The calls are
the same as without it (the same batches from the same state), only never
at the same time: fewer pages/s, the same CPU per call.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate_site import SiteParams, plan_site, resolve
from servers import open_redis, redis_available

from trio_crawl.frontiers.redis import keys_prefix, wire
from trio_crawl.frontiers.redis import lua as redis_lua
from trio_crawl.frontiers.redis.outbox import Batch, Lease
from trio_crawl.frontiers.redis.page_links import add_links, finish_ops
from trio_crawl.frontiers.redis.sent_links import SentLinks

HOST = "http://replay.test"


def link_graph(pages: int) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Each URL's in-scope links (absolute, as a parser gives them), and
    each URL's link distance from the start page."""
    plan = plan_site(SiteParams(pages=pages))

    def page_of(path: str) -> int:
        bare = path.split("?", 1)[0]
        return 0 if bare == "/" else int(bare.removeprefix("/p/").removesuffix(".html"))

    graph: dict[str, list[str]] = {}
    for path in plan.expected:
        links = [resolve(path, href) for href in plan.hrefs[page_of(path)]]
        graph[HOST + path] = [HOST + t for t in links if t is not None]
    depth = {HOST + "/": 0}
    queue = deque([HOST + "/"])
    while queue:
        url = queue.popleft()
        for target in graph[url]:
            if target not in depth:
                depth[target] = depth[url] + 1
                queue.append(target)
    return graph, depth


def thread_cpu(stat: Path) -> float:
    """Seconds the thread of ``stat`` (a ``schedstat`` file) ran on a CPU."""
    return int(stat.read_bytes().split()[0]) / 1e9


async def client(
    url: str,
    crawl: str,
    name: str,
    graph: dict[str, list[str]],
    window: int,
    call_cpu: str | None,
) -> dict[str, Any]:
    """One worker's traffic: returns what it took (URL -> depth), and with
    ``call_cpu`` (the server's pid and the lock file) the redis-server CPU
    of each of its calls (see the module docstring)."""
    import coredis

    prefix = keys_prefix(crawl)
    conn: Any = coredis.Redis.from_url(url)
    taken_depths: dict[str, int] = {}
    calls = 0
    call_cpus: list[float] = []
    stat = lock = None
    if call_cpu:
        pid, lock_path = call_cpu.split(":", 1)
        stat = Path(f"/proc/{pid}/task/{pid}/schedstat")
        lock = open(lock_path, "rb")  # noqa: SIM115, ASYNC230 (held for the whole run)
    async with conn:

        async def call(fn: str, args: list[object]) -> Any:
            if stat is None or lock is None:
                return await conn.fcall(redis_lua.function(fn), keys=[prefix], args=args)
            fcntl.flock(lock, fcntl.LOCK_EX)  # blocks the process: no other call meanwhile
            try:
                before = thread_cpu(stat)
                reply = await conn.fcall(redis_lua.function(fn), keys=[prefix], args=args)
                call_cpus.append(thread_cpu(stat) - before)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
            return reply

        hello = wire.HelloReply.parse(
            await call(
                "hello",
                wire.hello_args(
                    name, 600, may_create=True, identity_json="{}", max_pages=None, rate=None,
                    per_host_concurrency=None, read_robots=False, max_depth=None, settle=True,
                    starts=wire.admission(HOST + "/", 0, ""),
                ),
            )
        )  # fmt: skip
        owner = hello.owner
        sent = SentLinks()
        batch = Batch()
        first = last = 0.0
        while True:
            # As the worker does: a heavy batch goes a call's worth at a time,
            # the last call takes.
            *early, final = batch.calls()
            for ops in early:
                await call("sync", wire.sync_args(owner, 0, 0, ops))
                calls += 1
            raw = await call("sync", wire.sync_args(owner, window, window, final))
            last = time.time()
            first = first or last
            calls += 1
            reply = wire.SyncReply.parse(raw)
            sent.settle(batch.sent, accepted=not reply.refused)
            batch = Batch()
            for fix in reply.corrections:  # a shorter path found since its take
                taken_depths[fix.url] = fix.depth
            for taken in reply.taken:
                taken_depths[taken.url] = taken.depth
                sent.confirm((taken.url,), taken.depth)
                lease = Lease(taken.digest, taken.token, None, False, started=True)  # type: ignore[arg-type]
                links = graph[taken.url]
                add_links(lease, links, taken.depth + 1, taken.url, bool, sent, None)
                for op, weight in finish_ops(lease):
                    batch.add(op, 0.0, weight)
                if lease.fresh:
                    batch.sent.append(sent.pend(lease.fresh, lease.link_depth, 0))
            if reply.counters.done and not batch.ops:
                break
            if not reply.taken and not batch.ops:
                await trio.sleep(0.002)  # idle: other clients hold the rest
    return {
        "taken": taken_depths, "calls": calls, "first": first, "last": last, "call_cpus": call_cpus
    }  # fmt: skip


def client_main(args: argparse.Namespace) -> None:
    graph = json.loads(Path(args.graph).read_text())
    result = trio.run(
        client, args.url, args.crawl, args.name, graph, args.window, args.cpu_of
    )  # fmt: skip
    json.dump(result, sys.stdout)


def info(server: Any, section: str) -> dict[str, str]:
    text = server.command("INFO", section).decode(errors="replace")
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            out[name] = value
    return out


def slowest_calls(server: Any) -> list[int]:
    """Durations (us) of the calls SLOWLOG kept, longest first."""
    raw = server.command("SLOWLOG", "GET", "1000").decode(errors="replace").split("\r\n")
    # Each entry: *6, :id, :timestamp, :duration, ...: the third integer of each.
    durations, ints = [], 0
    for line in raw:
        if line.startswith("*6"):
            ints = 0
        elif line.startswith(":"):
            ints += 1
            if ints == 3:
                durations.append(int(line[1:]))
    return sorted(durations, reverse=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=20_000)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--window", type=int, default=128, help="URLs a client takes per call")
    p.add_argument(
        "--call-cpu",
        action="store_true",
        help="also measure each call's own redis-server CPU (the clients take turns; see the "
        "docstring): the slowest call, on a machine too loaded for SLOWLOG's wall times",
    )
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--crawl", help=argparse.SUPPRESS)
    p.add_argument("--name", help=argparse.SUPPRESS)
    p.add_argument("--graph", help=argparse.SUPPRESS)
    p.add_argument("--cpu-of", help=argparse.SUPPRESS)  # a client's: server pid:lock file
    args = p.parse_args()
    if args.client:
        client_main(args)
        return 0
    why = redis_available()
    if why:
        sys.exit(why)
    graph, depth = link_graph(args.pages)
    with tempfile.TemporaryDirectory() as tmp, open_redis() as server:
        graph_file = Path(tmp) / "graph.json"
        graph_file.write_text(json.dumps(graph))
        lock_file = Path(tmp) / "calls.lock"
        lock_file.touch()
        server.command("FUNCTION", "LOAD", "REPLACE", redis_lua.LIBRARY)
        server.command("CONFIG", "SET", "slowlog-log-slower-than", "1000")
        server.command("CONFIG", "SET", "slowlog-max-len", "1000")
        server.command("CONFIG", "RESETSTAT")
        server.command("SLOWLOG", "RESET")
        cpu0 = server.cpu_seconds()
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--client",
                    "--url",
                    server.url,
                    "--crawl",
                    "replay",
                    "--name",
                    f"c{i}",
                    "--graph",
                    str(graph_file),
                    "--window",
                    str(args.window),
                    *(["--cpu-of", f"{server.process.pid}:{lock_file}"] if args.call_cpu else []),
                ],
                stdout=subprocess.PIPE,
            )
            for i in range(args.clients)
        ]
        results = [json.loads(proc.communicate()[0]) for proc in procs]
        wall = time.perf_counter() - t0
        cpu = server.cpu_seconds() - cpu0
        stats = info(server, "commandstats")
        slow = slowest_calls(server)
    span = max(r["last"] for r in results) - min(r["first"] for r in results)
    taken: dict[str, int] = {}
    twice = 0
    for result in results:
        for url, d in result["taken"].items():
            twice += url in taken
            taken[url] = d
    exact = not twice and taken == depth
    fcall = dict(kv.split("=") for kv in stats.get("cmdstat_fcall", "calls=0").split(","))
    n = len(taken)
    print(f"{n:,} pages, {args.clients} clients, window {args.window}: "
          f"{'exact' if exact else 'NOT EXACT'} (taken twice: {twice}, "
          f"missing: {len(depth.keys() - taken.keys())})")  # fmt: skip
    print(f"  {span:.2f} s from the first call to the last: {n / span:,.0f} pages/s "
          f"(wall {wall:.1f} s with the clients' start-up)")  # fmt: skip
    print(f"  redis-server CPU {cpu:.2f} s: {cpu / n * 1e6:.1f} us per page, "
          f"so one Redis core sustains at most {n / cpu:,.0f} pages/s")  # fmt: skip
    print(f"  FCALL: {fcall.get('calls')} calls, {float(fcall.get('usec_per_call', 0)):.0f} us "
          f"per call on average")  # fmt: skip
    print(f"  calls over 1 ms: {len(slow)}; slowest: {slow[0] / 1000 if slow else 0:.2f} ms "
          "(SLOWLOG: wall time in redis-server, longer on a loaded machine)")  # fmt: skip
    if args.call_cpu:
        each = sorted((c for r in results for c in r["call_cpus"]), reverse=True)
        print(f"  slowest call by its own redis-server CPU: {each[0] * 1000:.2f} ms "
              f"(then {', '.join(f'{c * 1000:.2f}' for c in each[1:5])}; median "
              f"{each[len(each) // 2] * 1000:.2f} ms of {len(each)} calls)")  # fmt: skip
    # Every command a call ran (Lua's redis.call counts too), the costliest
    # first: where a page's CPU goes.
    rows = []
    for key, value in stats.items():
        if key.startswith("cmdstat_") and key != "cmdstat_fcall":
            fields = dict(kv.split("=") for kv in value.split(",") if "=" in kv)
            rows.append((float(fields["usec"]), int(fields["calls"]), key[8:].upper()))
    for usec, calls, name in sorted(rows, reverse=True):
        if calls >= n / 100:
            print(f"  {name}: {calls / n:.2f} per page, {usec / n:.1f} us per page")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
