"""The browser's own requests under ``--render``, against the real Chromium
(skipped, with the reason, where there is none): archived with ``--warc``
(read back with ``warcio``, as replay tools read it), retried as the crawl
retries, and sent with the cookies a page's script set.
"""

from __future__ import annotations

import os
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest
import trio
from warcio.archiveiterator import ArchiveIterator

import trio_crawl
from trio_crawl.core.browser import find_browser
from trio_crawl.core.models import CrawlRecord
from trio_crawl.errors import ConfigError
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page

try:
    BROWSER = find_browser(None, os.environ)
except ConfigError as exc:
    pytest.skip(f"no Chromium to render with: {exc}", allow_module_level=True)

LIMIT = 30  # seconds: the longest a crawl here may take


def html(body: str, head: str = "") -> Response:
    return Response(
        body=f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode()
    )


async def crawl(url: str, **options: Any) -> dict[str, CrawlRecord]:
    records: dict[str, CrawlRecord] = {}
    options.setdefault("render_wait", 2.0)
    with trio.fail_after(LIMIT):
        await trio_crawl.run_crawl(
            url,
            render=True,
            browser=BROWSER,
            on_record=lambda r: records.__setitem__(r.url, r),
            **options,
        )
    return records


ARCHIVED = Site(
    {
        "/": html(
            '<iframe src="/frame.html"></iframe><script src="/app.js"></script>',
            head='<link rel="stylesheet" href="/style.css">',
        ),
        "/app.js": Response(
            body=b"fetch('/data.json').then(r => r.json()).then(d => {"
            b" const a = document.createElement('a'); a.href = d.next;"
            b" document.body.append(a); });",
            content_type="text/javascript",
        ),
        "/data.json": Response(body=b'{"next": "/found"}', content_type="application/json"),
        "/style.css": Response(body=b"body { color: black }", content_type="text/css"),
        "/frame.html": html("<p>frame</p>"),
        "/found": html("<p>found</p>"),
    }
)


async def test_the_browsers_requests_are_archived_and_tied_to_their_page(
    tmp_path: Path,
) -> None:
    warc = tmp_path / "crawl.warc.gz"
    with serve_site(ARCHIVED) as server:
        records = await crawl(server.url("/"), warc=str(warc), max_depth=1)
    assert server.url("/found") in records  # the script's fetch() worked
    responses: dict[str, str] = {}  # URL -> response record id
    requests: set[str] = set()
    via: dict[str, tuple[str, str]] = {}  # URL -> (page, concurrent-to)
    with warc.open("rb") as stream:
        for record in ArchiveIterator(stream):
            uri = record.rec_headers.get_header("WARC-Target-URI")
            if record.rec_type == "response":
                responses.setdefault(uri, record.rec_headers.get_header("WARC-Record-ID"))
            elif record.rec_type == "request":
                requests.add(uri)
            elif record.rec_type == "metadata":
                fields = record.content_stream().read().decode()
                for line in fields.splitlines():
                    if line.startswith("via: "):
                        concurrent = record.rec_headers.get_header("WARC-Concurrent-To")
                        via[uri] = (line.removeprefix("via: "), concurrent)
    page_url = server.url("/")
    for path in ("/app.js", "/data.json", "/style.css", "/frame.html"):
        url = server.url(path)
        assert url in responses and url in requests, path
    # What the page's main frame asked for names the page, in a metadata
    # record about that response (a frame's requests are archived without).
    for path in ("/app.js", "/data.json", "/style.css"):
        url = server.url(path)
        assert via[url] == (page_url, responses[url]), path
    assert page_url in responses and server.url("/found") in responses
    # Each once: the browser's answers are archived when fetched, not when reused.
    assert server.count("/app.js") == 1


FLAKY = Site(
    {
        "/": html(
            "<script>fetch('/flaky.json').then(r => r.json()).then(d => {"
            " const a = document.createElement('a'); a.href = d.next;"
            " document.body.append(a); });</script>"
        ),
        "/flaky.json": [
            Response(status=503, body=b"busy", content_type="text/plain"),
            Response(body=b'{"next": "/after-retry"}', content_type="application/json"),
        ],
        "/after-retry": page(),
    }
)


async def test_a_subrequest_that_fails_once_gets_the_crawls_retries() -> None:
    with serve_site(FLAKY) as server:
        records = await crawl(server.url("/"), retries=1, render_wait=5.0)
    assert server.count("/flaky.json") == 2
    assert server.url("/after-retry") in records
    with serve_site(FLAKY) as server:  # without retries: the page sees the 503
        records = await crawl(server.url("/"), retries=0)
    assert server.count("/flaky.json") == 1
    assert server.url("/after-retry") not in records


def cookie_site(seen: list[tuple[str, str]]) -> Site:
    def echo(request: SiteRequest) -> Response:
        seen.append((request.target, request.headers.get("cookie", "")))
        return page()

    return Site(
        {
            "/": page("/sets"),
            "/sets": html(
                '<a href="/later">later</a>'
                "<script>document.cookie = 'chosen=blue; path=/';"
                " fetch('/echo-during');</script>"
            ),
            "/later": echo,
            "/echo-during": echo,
        }
    )


async def test_a_cookie_a_script_sets_is_sent_on_later_requests_to_its_host() -> None:
    seen: list[tuple[str, str]] = []
    with serve_site(cookie_site(seen)) as server:
        await crawl(server.url("/"), cookies=CookieJar())
    sent = dict(seen)
    assert "chosen=blue" in sent["/later"]  # the crawler's next request to the host
    assert "chosen=blue" in sent["/echo-during"]  # the page's own, after the script set it
    seen.clear()
    with serve_site(cookie_site(seen)) as server:  # a crawl without cookies keeps none
        await crawl(server.url("/"))
    assert all(cookie == "" for _, cookie in seen)
