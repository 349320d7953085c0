"""The browser's own requests, sent by the crawl, against the real Chromium
(skipped, with the reason, where there is none): they obey the host's
politeness and each URL is fetched once per crawl.

Every server is on 127.0.0.1, port 0; every crawl runs under
``trio.fail_after``. What is asserted is what the server saw: its log of
arrivals, and how many requests it was answering at once (a route holds
each answer a moment, so that two requests in flight together overlap).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio

import trio_crawl
from trio_crawl.core.browser import find_browser
from trio_crawl.core.models import CrawlRecord
from trio_crawl.engine.schedule import RATE_SLACK, PoliteSchedule
from trio_crawl.errors import ConfigError
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Route, Site, SiteRequest, page, redirect

try:
    BROWSER = find_browser(None, os.environ)
except ConfigError as exc:
    pytest.skip(f"no Chromium to render with: {exc}", allow_module_level=True)

LIMIT = 30  # seconds: the longest any crawl here may take
JS = "text/javascript"
JSON = "application/json"


def html(body: str) -> Response:
    return Response(body=f"<!doctype html><html><head></head><body>{body}</body></html>".encode())


def script(code: str) -> str:
    return f"<script>{code}</script>"


async def crawl(url: str, **options: Any) -> tuple[list[CrawlRecord], trio_crawl.CrawlSummary]:
    records: list[CrawlRecord] = []
    with trio.fail_after(LIMIT):
        summary = await trio_crawl.run_crawl(
            url, render=True, browser=BROWSER, render_wait=3.0, on_record=records.append, **options
        )
    return records, summary


def paths(records: list[CrawlRecord], server: SiteServer) -> list[str]:
    return sorted(r.url.removeprefix(server.base_url) for r in records)


class Overlap:
    """Counts the requests a server is answering at once: each route it
    wraps holds its answer ``hold`` seconds."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.active = 0
        self.most = 0
        self._lock = threading.Lock()
        self._never = threading.Event()

    def wrap(self, response: Response) -> Callable[[SiteRequest], Response]:
        def route(request: SiteRequest) -> Response:
            with self._lock:
                self.active += 1
                self.most = max(self.most, self.active)
            self._never.wait(self.hold)
            with self._lock:
                self.active -= 1
            return response

        return route


# The page loads a script (which writes a link), fetches JSON, POSTs, and
# loads a script through a redirect: every way the browser asks for more.
SCRIPTED = {
    "/": html(
        '<script src="/app.js"></script><script src="/old.js"></script>'
        + script(
            """
const add = (list) => { for (const href of list) {
  const a = document.createElement('a'); a.href = href; document.body.append(a); } };
fetch('/posted', {method: 'POST', body: 'x'}).then(r => r.json()).then(add);
setTimeout(() => fetch('/links.json').then(r => r.json()).then(add), 50);  // behind the POST
"""
        )
    ),
    "/app.js": Response(body=b"document.write('<a href=\"/from-script\">s</a>')", content_type=JS),
    "/new.js": Response(body=b"document.write('<a href=\"/moved\">m</a>')", content_type=JS),
    "/links.json": Response(body=b'["/from-json"]', content_type=JSON),
    "/posted": Response(body=b'["/from-post"]', content_type=JSON),
    **{p: page() for p in ("/from-script", "/moved", "/from-json", "/from-post")},
}
FOUND = ["/", "/from-json", "/from-post", "/from-script", "/moved"]
SUBREQUESTS = {"/app.js", "/old.js", "/new.js", "/links.json", "/posted"}


def scripted_site(overlap: Overlap) -> Site:
    routes: dict[str, Route] = {p: overlap.wrap(r) for p, r in SCRIPTED.items()}
    routes["/old.js"] = overlap.wrap(redirect("/new.js", 302))
    return Site(routes)


async def test_the_pages_requests_are_spaced_by_the_hosts_rate() -> None:
    rate = 3.0  # a start every 0.35 s
    with serve_site(scripted_site(Overlap(0.0))) as server:
        records, summary = await crawl(server.url("/"), rate=rate)
    assert paths(records, server) == FOUND
    arrivals = [entry for entry in server.log if entry.target != "/robots.txt"]
    assert {entry.target for entry in arrivals} >= SUBREQUESTS
    assert [e.method for e in arrivals if e.target == "/posted"] == ["POST"]
    # Starts are an interval apart. On a busy machine a request may reach the
    # server late (its start was on time: the next gap looks short by as
    # much), so each span of k gaps must be k intervals, less 0.25 s of that
    # lateness; without the crawl's politeness the browser sends them all at once.
    interval = (1 / rate) * (1 + RATE_SLACK)
    times = [entry.time for entry in arrivals]
    short = [
        (i, j, round(times[j] - times[i], 3))
        for i, j in itertools.combinations(range(len(times)), 2)
        if times[j] - times[i] < (j - i) * interval - 0.25
    ]
    assert short == [], times
    assert summary.render_requests["fetched"] == 4  # app.js, old.js, new.js, links.json
    assert summary.render_requests["sent"] == 1  # the POST, sent by the browser in its turn


async def test_the_pages_requests_keep_to_the_hosts_concurrency() -> None:
    overlap = Overlap(0.2)
    with serve_site(scripted_site(overlap)) as server:
        records, _ = await crawl(server.url("/"), per_host_concurrency=1)
    # The page's own request frees its slot for its scripts while it renders:
    # the links they write are there, and never two requests at once.
    assert paths(records, server) == FOUND
    assert {entry.target for entry in server.log} >= SUBREQUESTS
    assert overlap.most == 1


def requisites_site() -> Site:
    """Two pages that share a stylesheet, a script, an image and a JSON
    fetch, and each have an image of their own."""

    def one(name: str, more: str) -> Response:
        return html(
            '<link rel="stylesheet" href="/style.css"><script src="/app.js"></script>'
            f'<img src="/logo.png"><img src="/{name}.png">{more}'
            + script("fetch('/data.json').then(r => r.json())")
        )

    return Site(
        {
            "/": one("first", '<a href="/second">2</a>'),
            "/second": one("second", ""),
            "/style.css": Response(
                body=b"body { background: url(/bg.png) }", content_type="text/css"
            ),
            "/app.js": Response(body=b"1", content_type=JS),
            "/data.json": Response(body=b"[]", content_type=JSON),
        },
        fallback=lambda r: Response(body=b"\x89PNG", content_type="image/png"),
    )


async def test_a_requisite_the_browser_loaded_is_fetched_once_and_recorded_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    starts: list[str] = []
    record_start = PoliteSchedule._record_start

    def counted(schedule: PoliteSchedule[Any], host: Any, now: float) -> None:
        starts.append("start")
        record_start(schedule, host, now)

    monkeypatch.setattr(PoliteSchedule, "_record_start", counted)
    with serve_site(requisites_site()) as server:
        records, summary = await crawl(server.url("/"), page_requisites=True, workers=2, rate=50.0)
        received = Counter(server.targets())
    requisites = ["/app.js", "/bg.png", "/first.png", "/logo.png", "/second.png", "/style.css"]
    assert paths(records, server) == sorted(["/", "/second", *requisites])  # each once
    assert all(r.error is None and r.status == 200 for r in records)
    assert {t: n for t, n in received.items() if n != 1} == {}, received
    # (Chromium asks for /favicon.ico by itself: once too, if at all.)
    assert set(received) - {"/favicon.ico"} == {
        "/robots.txt", "/", "/second", "/data.json", *requisites
    }  # fmt: skip
    assert summary.render_requests["reused"] >= len(requisites)
    # Every request took its host's slot under --rate (robots.txt is asked
    # before the schedule); a requisite answered from what the browser
    # loaded is no request and took none.
    assert len(starts) == received.total() - received["/robots.txt"]


async def test_a_request_the_crawl_could_not_fetch_fails_in_the_page() -> None:
    site = Site(
        {
            "/": html(
                script(
                    """
const s = document.createElement('script'); s.src = '/big.js';
s.onerror = () => { const a = document.createElement('a'); a.href = '/failed';
                    document.body.append(a); };
document.head.append(s);
"""
                )
            ),
            "/big.js": Response(body=b"//" + b"x" * 5000, content_type=JS),
            "/failed": page(),
        }
    )
    with serve_site(site) as server:
        records, summary = await crawl(server.url("/"), max_bytes=4000)
    # Too large for the crawl's fetcher: the browser's request failed, and the page saw it.
    assert paths(records, server) == ["/", "/failed"]
    assert server.count("/big.js") == 1
    assert summary.render_requests["failed"] == 1


async def test_a_host_only_the_browser_reaches_gets_its_crawl_delay() -> None:
    delay = 0.4
    scripts = [f"/lib{i}.js" for i in range(4)]
    cdn_site = Site(
        {
            "/robots.txt": Response(
                body=f"User-agent: *\nCrawl-delay: {delay}\n".encode(), content_type="text/plain"
            ),
            **{p: Response(body=b"1", content_type=JS) for p in scripts},
        }
    )
    with serve_site(cdn_site) as cdn:
        # The CDN is another port of 127.0.0.1: allowed, and never a URL of the crawl.
        tags = "".join(f'<script src="{cdn.url(p)}"></script>' for p in scripts)
        with serve_site(Site({"/": html(tags)})) as server:
            records, _ = await crawl(server.url("/"), allow_domains=["127.0.0.1"])
        arrivals = [entry.time for entry in cdn.log if entry.target in scripts]
    assert paths(records, server) == ["/"]
    assert sorted(cdn.targets()) == sorted(["/robots.txt", *scripts])
    # The Crawl-delay counts from the end of the previous request (rule 9 of
    # engine/schedule.py): the server sees at least the delay between two
    # arrivals, however late one of them was, so no allowance for lateness.
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert all(gap >= delay for gap in gaps), gaps
