"""``--render --redis``: the browser's own requests take their host's turns
from Redis as the crawl's pages do (issue #34 item 4), so that two workers
rendering pages of one rate-limited host keep, together, to its rate, as
the server sees it. Against the real Chromium (skipped, with the reason,
where there is none) and a real redis-server.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from trio_crawl.core.browser import find_browser
from trio_crawl.engine.schedule import RATE_SLACK
from trio_crawl.errors import ConfigError
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site

import redis_fixture
from cli_helpers import records_in, start_cli
from redis_fixture import RedisServer

try:
    BROWSER = find_browser(None, os.environ)
except ConfigError as exc:
    pytest.skip(f"no Chromium to render with: {exc}", allow_module_level=True)

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id

PAGES = 4
JS = "text/javascript"


def html(head: str, code: str = "") -> Response:
    body = f"<!doctype html><html><head>{head}</head><body><script>{code}</script></body></html>"
    return Response(body=body.encode())


def links(*hrefs: str) -> str:
    return "".join(
        f"{{const a = document.createElement('a'); a.href = '{h}'; document.body.append(a);}}"
        for h in hrefs
    )


#: The start page loads a script and a stylesheet and its script links to
#: PAGES pages; each of those loads a script of its own.
SITE = Site(
    {
        "/": html(
            '<script src="/app.js"></script><link rel="stylesheet" href="/site.css">',
            links(*(f"/p/{i}" for i in range(PAGES))),
        ),
        "/app.js": Response(body=b"var app = 1;", content_type=JS),
        "/site.css": Response(body=b"body { color: black }", content_type="text/css"),
        "/robots.txt": Response(status=404),
        **{f"/p/{i}": html(f'<script src="/p{i}.js"></script>') for i in range(PAGES)},
        **{f"/p{i}.js": Response(body=b"var p = 1;", content_type=JS) for i in range(PAGES)},
    }
)
PAGE_PATHS = {"/", *(f"/p/{i}" for i in range(PAGES))}
SUBREQUESTS = {"/app.js", "/site.css", *(f"/p{i}.js" for i in range(PAGES))}


@pytest.mark.timeout(300)
def test_two_rendering_workers_keep_the_hosts_rate_with_the_browsers_requests(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    pytest.importorskip("coredis", reason="coredis is not installed (trio-crawl[redis])")
    rate = 4.0
    with serve_site(SITE) as server:
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
        common = [
            "--redis", redis_server.url, "--crawl-id", crawl_id, "--rate", f"{rate:g}",
            "--render", "--browser", BROWSER, "--render-wait", "1s", "--workers", "4",
        ]  # fmt: skip
        processes = [start_cli(server.url("/"), *common, "-o", str(out)) for out in outputs]
        for process in processes:
            _, stderr = process.communicate(timeout=240)
            assert process.returncode == 0, stderr
        arrivals = [entry for entry in server.log if entry.target != "/robots.txt"]
    got = [r for out in outputs for r in records_in(out.read_text())]
    assert {r["url"].removeprefix(server.base_url) for r in got} == PAGE_PATHS
    assert all(r.get("rendered") is True for r in got)
    targets = {entry.target for entry in arrivals}
    assert targets >= SUBREQUESTS, targets
    # Pages and the browser's requests together, as the server saw them:
    # each span of k gaps is k intervals, less 0.25 s for a request that
    # reached the server late (as in test_render_requests.py); without the
    # turns from Redis, a page's script and stylesheet came at once after it.
    interval = (1 / rate) * (1 + RATE_SLACK)
    times = [entry.time for entry in arrivals]
    short = [
        (arrivals[i].target, arrivals[j].target, round(times[j] - times[i], 3))
        for i, j in itertools.combinations(range(len(times)), 2)
        if times[j] - times[i] < (j - i) * interval - 0.25
    ]
    assert short == [], [(e.target, round(e.time - times[0], 3)) for e in arrivals]
