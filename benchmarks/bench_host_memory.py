"""What one known host costs in memory while its URLs wait (issue #22).

A broad crawl (``--span-hosts``) can know 100,000 hosts at once, most of them
waiting: behind their robots.txt, their Crawl-delay or their per-host
concurrency. This builds that state with the crawl's own objects, one
component at a time, and prints bytes per host (``tracemalloc``: Python
objects; libcurl's DNS cache and connections are C memory, a few hundred
bytes per cached name, not counted here):

* schedule: ``PoliteSchedule`` with ``max_per_host=1``, one request in flight
  and one URL parked per host (its queue, Crawl-delay);
* schedule, finished: the same once both URLs of every host have been
  fetched and the Crawl-delay has passed (what is left: the Crawl-delay of
  each host, since robots.txt is read once per host);
* robots: ``RobotsCache`` holding each host's decided policy (a 404: allow all);
* gate: ``HostGate``'s set of hosts whose Crawl-delay was applied;
* budget: ``HostBudget`` counting each host's admitted URLs;
* frontier: two ``Entry`` s per host (the URLs themselves: per URL, not per host).

Usage: python benchmarks/bench_host_memory.py [--hosts 100000]
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from collections.abc import Callable

import trio

from trio_crawl.core.frontier import Frontier
from trio_crawl.core.host_budget import HostBudget
from trio_crawl.core.models import FetchResult
from trio_crawl.core.scope import Scope
from trio_crawl.engine.robots_gate import RobotsCache
from trio_crawl.engine.schedule import PoliteSchedule


def measure(build: Callable[[], object]) -> tuple[int, object]:
    """Bytes still allocated after ``build()`` (its result kept alive)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, kept


class NotFound:
    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        await trio.lowlevel.checkpoint()
        return FetchResult(url, 404, {}, b"", 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    n = parser.parse_args().hosts
    hosts = [f"h{i}.example.com:80" for i in range(n)]
    urls = [f"http://h{i}.example.com/page" for i in range(n)]

    def schedule() -> PoliteSchedule[str]:
        s = PoliteSchedule[str](max_per_host=1)
        for i, host in enumerate(hosts):
            s.set_crawl_delay(host, 1.0)
            s.try_start(f"a{i}", host, 0.0)  # in flight
            s.try_start(f"b{i}", host, 0.0)  # parked behind it
        return s

    def schedule_finished() -> object:
        s = schedule()
        for host in hosts:
            s.release(host, 0.5)  # the first URL of each host is done
        ready = s.pop_ready(2.0)  # Crawl-delay passed: the parked ones go
        assert len(ready) == n
        for i, host in enumerate(hosts):
            s.try_start(f"b{i}", host, 2.0)
            s.release(host, 2.5)
        s.pop_ready(10.0)  # time passes; the schedule notices as it is used
        assert s.waiting == 0
        return s

    def robots() -> object:
        cache = RobotsCache(NotFound(), "trio-crawl", clock=lambda: 0.0)

        async def fill() -> None:
            for url in urls:
                await cache.policy_for(url)

        trio.run(fill)
        return cache

    def gate() -> object:
        return set(hosts)

    def budget() -> object:
        b = HostBudget(max_pages_per_host=100)
        for url in urls:
            b.admits(url)
        return b

    def frontier() -> object:
        f = Frontier(in_scope=Scope(urls[:1], span_hosts=True).allows)
        for url in urls:
            f.add_start(url)
            f.add_start(url + "2")
        return f

    # Strings the job names and URLs cost are the caller's: build them first.
    jobs = [f"{p}{i}" for i in range(n) for p in "ab"]
    del jobs
    total = 0
    print(f"{n:,} hosts, each with one request in flight and one URL waiting")
    for name, build in [
        ("schedule", schedule),
        ("robots", robots),
        ("gate", gate),
        ("budget", budget),
    ]:
        size, _ = measure(build)
        total += size
        print(f"  {name:<9} {size / n:8.0f} bytes/host")
    print(f"  {'per host':<9} {total / n:8.0f} bytes/host ({total / 1e6:,.1f} MB in all)")
    size, _ = measure(schedule_finished)
    print(f"  schedule, all hosts finished: {size / n:6.0f} bytes/host")
    size, _ = measure(frontier)
    print(f"  frontier  {size / n / 2:8.0f} bytes/URL (two URLs a host, URL text included)")


if __name__ == "__main__":
    main()
