"""Sync a paginated JSON API without going over its rate limit.

The API serves several collections (``/api/users?page=1``, ...). Each page is
JSON: ``{"items": [...], "next": URL or null}``. One handler reads a page with
``page.json()``, yields its items, and yields a ``Request`` for the next page.

Two separate limits, both per host:

* ``rate=20``: request *starts* are spaced at least 1/20 s apart, so no
  one-second window ever holds more than 20 of them;
* ``per_host_concurrency=2``: at most two requests are in flight at once.

The collections are synced side by side, within those limits. The server logs
the time of every request, and from that log we print the rate achieved.

Run it: ``python examples/rate_limited_api.py`` (a local server, no network).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import trio

import trio_crawl
from trio_crawl import Page, Request
from trio_crawl.testing import LoggedRequest, Response, Site, SiteRequest, serve_site

PAGE_SIZE = 10


# --8<-- [start:sync]
async def sync_page(page: Page) -> AsyncIterator[object]:
    """One page of a collection: its items, then a request for the next page."""
    data = page.json()
    for item in data["items"]:
        yield item
    if data["next"] is not None:
        # An absolute URL, as APIs usually give. For a relative one,
        # page.follow(href, sync_page) resolves it against this page.
        yield Request(data["next"], sync_page)


async def sync(
    start_urls: list[str], *, rate: float = 20, per_host_concurrency: int = 2
) -> list[dict[str, object]]:
    """Fetch every page of every collection; return all the items."""
    items: list[dict[str, object]] = []
    async with trio_crawl.open_crawler(
        [Request(url, sync_page) for url in start_urls],
        rate=rate,
        per_host_concurrency=per_host_concurrency,
        ignore_robots=True,  # an API client, not a web crawler
    ) as crawl:
        async for item in crawl.items():
            assert isinstance(item, dict)
            items.append(item)
    return items


# --8<-- [end:sync]


# -- the API: served on 127.0.0.1 -------------------------------------------


class ItemsApi:
    """A route function for ``/api/<collection>?page=N``.

    Each answer takes ``latency`` seconds. It keeps count of the requests in
    flight (route functions run in the server's connection threads), so we can
    check the concurrency cap from the server's side.
    """

    def __init__(self, sizes: dict[str, int], latency: float = 0.08) -> None:
        self.sizes = sizes
        self.latency = latency
        self.in_flight = 0
        self.peak_in_flight = 0
        self._lock = threading.Lock()

    def __call__(self, request: SiteRequest) -> Response:
        url = urlsplit(request.target)
        name = url.path.removeprefix("/api/")
        if name not in self.sizes:
            return Response(status=404, content_type="application/json", body=b"{}")
        number = int(parse_qs(url.query)["page"][0])
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        time.sleep(self.latency)  # the work of a real API
        with self._lock:
            self.in_flight -= 1
        first = (number - 1) * PAGE_SIZE
        last = min(first + PAGE_SIZE, self.sizes[name])
        next_url = f"http://{request.headers['host']}{url.path}?page={number + 1}"
        body = {
            "items": [{"collection": name, "id": i} for i in range(first, last)],
            "next": next_url if last < self.sizes[name] else None,
        }
        return Response(content_type="application/json", body=json.dumps(body).encode())


def request_rate(log: list[LoggedRequest]) -> tuple[float, int]:
    """The average rate of requests, and the most that started in any one
    second (measured from each request's arrival)."""
    times = sorted(entry.time for entry in log)
    average = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    busiest = max(sum(1 for t in times if start <= t < start + 1) for start in times)
    return average, busiest


def main() -> None:
    sizes = {"users": 95, "orders": 100, "products": 90, "invoices": 100}
    api = ItemsApi(sizes)
    with serve_site(Site(routes={}, fallback=api)) as server:
        start = time.monotonic()
        items = trio.run(sync, [server.url(f"/api/{name}?page=1") for name in sizes])
        elapsed = time.monotonic() - start
    average, busiest = request_rate(server.log)
    print(f"items: {len(items)} from {len(server.log)} requests in {elapsed:.1f} s")
    print(f"rate:  {average:.1f} requests/s, at most {busiest} in any second (rate=20)")
    print(f"in flight at once: at most {api.peak_in_flight} (per_host_concurrency=2)")


if __name__ == "__main__":
    main()
