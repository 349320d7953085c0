"""The cost of cookies per request: the standard jar against ``CrawlCookieJar``.

    python benchmarks/bench_cookie_jar.py [--hosts 0 1000 10000] [--requests 2000]

For each jar size, one cookie is set by each of N hosts (through
``fetch.identity.Identity``, as a fetcher does), then ``--requests`` requests
ask for their Cookie header, spread over the hosts. Figures: microseconds per
request (``Identity.outgoing``: building the request, the jar lookup and its
expiry sweep). No network; single-threaded.
"""

from __future__ import annotations

import argparse
import time
from http.cookiejar import CookieJar, MozillaCookieJar

from trio_crawl.core.http import FetchConfig
from trio_crawl.fetch.cookies import CrawlCookieJar
from trio_crawl.fetch.identity import Identity


def per_request(jar: CookieJar, hosts: int, requests: int) -> float:
    identity = Identity(FetchConfig(cookies=jar))
    for i in range(hosts):
        identity.received(f"http://h{i}.test/", [f"s{i}=v; Path=/"])
    start = time.perf_counter()
    for i in range(requests):
        identity.outgoing(f"http://h{i % max(hosts, 1)}.test/page", None)
    return (time.perf_counter() - start) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[0, 100, 1000, 10000])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'hosts':>7} {'stdlib us/req':>14} {'CrawlCookieJar us/req':>22}")
    for hosts in args.hosts:
        standard = per_request(MozillaCookieJar(), hosts, min(args.requests, 200))
        ours = per_request(CrawlCookieJar(), hosts, args.requests)
        print(f"{hosts:>7} {standard:>14.1f} {ours:>22.1f}")


if __name__ == "__main__":
    main()
