"""Retry accounting under concurrency, seen from the server's own log: a URL
is requested at most 1 + retries times, whatever the number of workers.
Real sockets, both fetchers, every crawl bounded by ``trio.fail_after``."""

from __future__ import annotations

from collections import Counter

import pytest
import trio

from trio_crawl import CrawlRecord, run_crawl
from trio_crawl.testing import Response, Site, page, serve_site

FETCHERS = ["curl", "httpx"]
N = 40


def failing_site() -> Site:
    kinds = ("reset", "slow", "truncated", "503")
    routes: dict[str, Response | list[Response]] = {
        "/": page(*(f"/{kind}/{i}" for kind in kinds for i in range(N))),
        "/robots.txt": Response(body=b"User-agent: *\nDisallow:\n", content_type="text/plain"),
    }
    for i in range(N):
        routes[f"/reset/{i}"] = Response(body=b"x" * 50_000, reset_after=1000)
        routes[f"/slow/{i}"] = Response(body=page().body, delay=2.0)
        routes[f"/truncated/{i}"] = Response(body=b"<p>" * 5000, chunked=True, truncate=True)
        routes[f"/503/{i}"] = Response(status=503)
    return Site(routes)


@pytest.mark.parametrize("backend", FETCHERS)
async def test_each_url_is_requested_at_most_one_plus_retries_times(backend: str) -> None:
    records: list[CrawlRecord] = []
    retries = 2
    with serve_site(failing_site()) as server:
        with trio.fail_after(90):
            await run_crawl(
                [server.url("/")],
                on_record=records.append,
                backend=backend,
                workers=64,
                timeout=0.5,
                retries=retries,
                max_retry_after=0.1,
            )
        hits = Counter(server.targets())
    assert len(records) == 1 + 4 * N
    for record in records:
        path = record.url.removeprefix(server.base_url)
        if path == "/":
            continue
        # Every attempt failed, so each URL used all its tries; the server may
        # have seen fewer (a connection still in its listen backlog when the
        # 0.5 s deadline passed never reached it), never more.
        assert record.attempts == 1 + retries, record
        assert 1 <= hits[path] <= record.attempts, (path, hits[path], record)
    assert hits["/robots.txt"] == 1
