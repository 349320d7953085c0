"""What a render keeps in memory, against the real Chromium (skipped, with
the reason, where there is none): one renderer process per tab (no window
left from the browser's start, no renderer started ahead of need), and no
page kept alive after its tab moved on (no back-forward cache: a crawl
never goes back). Issue #34 item 5.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

import trio_crawl
from trio_crawl.core.browser import find_browser
from trio_crawl.core.models import CrawlRecord
from trio_crawl.errors import ConfigError
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

try:
    BROWSER = find_browser(None, os.environ)
except ConfigError as exc:
    pytest.skip(f"no Chromium to render with: {exc}", allow_module_level=True)

LIMIT = 60  # seconds: the longest a crawl here may take
PAGES = 6


def renderers_of(pid: int) -> int:
    """Chromium renderer processes among ``pid``'s descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = 0, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        todo.extend(children.get(child, []))
        try:
            command = (Path("/proc") / str(child) / "cmdline").read_bytes()
        except OSError:
            continue
        found += b"--type=renderer" in command
    return found


#: Each page says, as its tab leaves it (a URL of its own: the crawl asks
#: for each URL once), whether the browser keeps it
#: (``persisted``: in the back-forward cache) or drops it.
LEAVE = (
    "<script>addEventListener('pagehide', (e) =>"
    " fetch('/left/' + e.persisted + location.pathname, {keepalive: true}));</script>"
)
SITE = Site(
    {
        "/": page(*(f"/p/{i}" for i in range(PAGES))),
        **{
            f"/p/{i}": Response(
                body=f"<!doctype html><html><body><p>{i}</p>{LEAVE}</body></html>".encode()
            )
            for i in range(PAGES)
        },
    },
    fallback=lambda r: Response(body=b"{}", content_type="application/json"),
)


async def test_one_tab_has_one_renderer_and_keeps_no_page_it_left() -> None:
    renderers: list[int] = []

    def seen(record: CrawlRecord) -> None:  # the browser is up while records come
        if record.extra.get("rendered"):
            renderers.append(renderers_of(os.getpid()))

    with serve_site(SITE) as server:
        with trio.fail_after(LIMIT):
            await trio_crawl.run_crawl(
                server.url("/"),
                render=True,
                browser=BROWSER,
                workers=1,
                render_wait=2.0,
                on_record=seen,
            )
        left_kept = sum(server.count(f"/left/true/p/{i}") for i in range(PAGES))
        left_dropped = sum(server.count(f"/left/false/p/{i}") for i in range(PAGES))
    assert len(renderers) == PAGES + 1
    # One tab: one renderer (the start's window closed, none started ahead).
    assert max(renderers) == 1, renderers
    # The tab moved from page to page: each page it left was dropped.
    assert left_kept == 0
    assert left_dropped >= PAGES - 1
