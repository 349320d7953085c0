"""Lazy lists, endless feeds and galleries under ``--render``, against the
real Chromium (skipped, with the reason, where there is none): a tab is a
visible, focused desktop window, and a page is scrolled to its end, a
window at a time, until it stops growing (bounded: an endless feed ends);
and a page with nothing left to do is read without waiting out the fixed
quiet period.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio

import trio_crawl
from trio_crawl.core.browser import find_browser
from trio_crawl.core.models import CrawlRecord
from trio_crawl.errors import ConfigError
from trio_crawl.fetch.chromium.life import QUIET
from trio_crawl.fetch.chromium.quiet import STILL, is_still
from trio_crawl.fetch.chromium.tab import SCROLL_STEPS, VIEWPORT
from trio_crawl.sites.server import serve_site
from trio_crawl.sites.site import Response, Site, page

try:
    BROWSER = find_browser(None, os.environ)
except ConfigError as exc:
    pytest.skip(f"no Chromium to render with: {exc}", allow_module_level=True)

LIMIT = 60  # seconds: the longest a crawl here may take


def html(body: str) -> Response:
    return Response(body=f"<!doctype html><html><head></head><body>{body}</body></html>".encode())


#: A list whose sentinel (after the list, in the first window while the list
#: is empty) loads 10 items of 150 px each time it comes into view: from the
#: script itself (``more()``) or after a ``fetch()`` (``load()``).
LIST = """
<ul id="list"></ul><div id="sentinel" style="height: 10px"></div>
<script>
let n = 0;
const more = () => {
  const list = document.getElementById('list');
  for (let i = 0; i < 10; i++) {
    n++; const li = document.createElement('li'); li.style.height = '150px';
    li.innerHTML = '<a href="/item/' + n + '">' + n + '</a>'; list.append(li);
  }
};
const load = () => fetch('/more.json').then(() => more());
new IntersectionObserver((entries) => {
  if (entries[0].isIntersecting && n < MOST) STEP();
}).observe(document.getElementById('sentinel'));
</script>
"""

#: 40 tiles of 400 px, each writing its link when it comes into view.
GALLERY = """
<div id="g"></div>
<script>
const seen = new IntersectionObserver((entries) => {
  for (const e of entries) if (e.isIntersecting && !e.target.firstChild) {
    e.target.innerHTML = '<a href="/photo/' + e.target.id + '">p</a>'; }
});
for (let i = 0; i < 40; i++) {
  const tile = document.createElement('div'); tile.id = 't' + i; tile.style.height = '400px';
  document.getElementById('g').append(tile); seen.observe(tile);
}
</script>
"""

#: Tells the server what the page saw of its window.
WINDOW = """
<script>
addEventListener('load', () => {
  fetch('/seen/' + [innerWidth, innerHeight, document.visibilityState, document.hasFocus()]
    .join('/'));
});
</script>
"""

SITE = Site(
    {
        "/": page("/list", "/list-fetch", "/feed", "/gallery", "/window"),
        "/list": html(LIST.replace("MOST", "50").replace("STEP", "more")),
        "/list-fetch": html(LIST.replace("MOST", "50").replace("STEP", "load")),
        "/feed": html(LIST.replace("MOST", "Infinity").replace("STEP", "more")),
        "/gallery": html(GALLERY),
        "/window": html(WINDOW),
        "/more.json": Response(body=b"{}", content_type="application/json", delay=0.1),
    },
    fallback=lambda r: page(),
)


async def crawl(url: str, **options: Any) -> dict[str, CrawlRecord]:
    records: dict[str, CrawlRecord] = {}
    options.setdefault("max_depth", 1)
    with trio.fail_after(LIMIT):
        await trio_crawl.run_crawl(
            url,
            render=True,
            browser=BROWSER,
            on_record=lambda r: records.__setitem__(r.url, r),
            **options,
        )
    return records


async def test_lazy_lists_galleries_and_feeds_are_scrolled_to_their_end() -> None:
    with serve_site(SITE) as server:
        # Five pages at once, each in a tab of its own: every tab is a window.
        # Each ends by itself (scrolled to its end, or SCROLL_STEPS windows:
        # 2 to 4 s); render_wait is only the bound, generous so that a loaded
        # machine (5 fetches of /more.json for /list-fetch) never reaches it.
        records = await crawl(server.url("/"), render_wait=LIMIT / 2)

    def links(path: str) -> int:
        return records[server.url(path)].links

    assert links("/list") == 50 and links("/list-fetch") == 50
    assert links("/gallery") == 40
    # The endless feed ends: at most SCROLL_STEPS windows of 800 px (about
    # 5 items each, plus the batch at the end), then its DOM is read.
    assert 50 < links("/feed") <= 10 * (SCROLL_STEPS * VIEWPORT[1] // 1500 + 2)
    width, height = VIEWPORT
    assert server.count(f"/seen/{width}/{height}/visible/true") == 1
    assert all(r.error is None and "render_error" not in r.extra for r in records.values())


async def test_an_endless_feed_ends_at_the_render_wait() -> None:
    with serve_site(SITE) as server:
        with trio.fail_after(LIMIT):
            start = trio.current_time()
            records = await crawl(server.url("/feed"), render_wait=1.0, max_depth=0)
            took = trio.current_time() - start
    feed = records[server.url("/feed")]
    assert feed.error is None and feed.extra["rendered"] is True and feed.links >= 10
    assert took < LIMIT / 2


# -- settling early ----------------------------------------------------------------


def test_the_watcher_says_still_only_with_nothing_pending() -> None:
    assert is_still({"pending": 0, "still": STILL})
    assert not is_still({"pending": 1, "still": 10.0})  # a short timer or a frame to come
    assert not is_still({"pending": 0, "still": STILL / 2})  # the DOM just changed
    assert not is_still(None) and not is_still({"pending": "0", "still": 1.0})


async def test_a_page_with_nothing_left_to_do_does_not_wait_out_the_quiet_period() -> None:
    """The same page three times with nothing pending, three times with a
    short interval running (never still: the fixed period); one tab, one
    page at a time, so the only difference is the wait."""
    interval = "<script>setInterval(() => {}, 100)</script>"
    site = Site(
        {
            "/": page(*(f"/still/{i}" for i in range(3)), *(f"/busy/{i}" for i in range(3))),
            **{f"/still/{i}": html("<p>done</p>") for i in range(3)},
            **{f"/busy/{i}": html("<p>busy</p>" + interval) for i in range(3)},
        }
    )
    with serve_site(site) as server:
        records = await crawl(server.url("/"), workers=1, render_wait=5.0)

    def median_ms(kind: str) -> float:
        return sorted(records[server.url(f"/{kind}/{i}")].elapsed_ms or 0 for i in range(3))[1]

    assert all(r.extra.get("rendered") for r in records.values())
    # The busy pages wait QUIET (500 ms) after their load; the still ones, STILL.
    assert median_ms("busy") - median_ms("still") > 1000 * (QUIET - STILL) / 2
