"""``--render`` against the real Chromium (skipped, with the reason, where
there is none). Every server is on 127.0.0.1, port 0; every crawl runs under
``trio.fail_after``; what a page's scripts may do is checked by what the
servers received, never by timing.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from processes import alive, wait_gone

import trio_crawl
from trio_crawl.core.browser import find_browser
from trio_crawl.core.models import CrawlRecord
from trio_crawl.errors import ConfigError
from trio_crawl.fetch.chromium import ChromiumFetcher
from trio_crawl.outputs.warc import read_warc_responses
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page

try:
    BROWSER = find_browser(None, os.environ)
except ConfigError as exc:
    pytest.skip(f"no Chromium to render with: {exc}", allow_module_level=True)

LIMIT = 30  # seconds: the longest any crawl here may take


def html(body: str, head: str = "") -> Response:
    return Response(
        body=f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode()
    )


def script(code: str) -> str:
    return f"<script>{code}</script>"


async def crawl(
    url: str, **options: Any
) -> tuple[dict[str, CrawlRecord], trio_crawl.CrawlSummary]:
    records: dict[str, CrawlRecord] = {}
    options.setdefault("render", True)
    options.setdefault("browser", BROWSER)
    options.setdefault("render_wait", 2.0)
    with trio.fail_after(LIMIT):
        summary = await trio_crawl.run_crawl(
            url, on_record=lambda r: records.__setitem__(r.url, r), **options
        )
    return records, summary


def paths(records: dict[str, CrawlRecord], server: SiteServer) -> set[str]:
    return {url.removeprefix(server.base_url) for url in records}


# -- 1 and 2: links written by scripts -----------------------------------------

SCRIPTED = Site(
    {
        "/": html(
            '<a href="/static">static</a><div id="host"></div>'
            + script("document.write('<a href=\"/written\">w</a>')")
            + script(
                """
document.addEventListener('DOMContentLoaded', () => {
  const a = document.createElement('a'); a.href = '/on-ready'; document.body.append(a); });
setTimeout(() => {
  const a = document.createElement('a'); a.href = '/after-timer'; document.body.append(a); }, 150);
fetch('/links.json').then(r => r.json()).then(list => { for (const href of list) {
  const a = document.createElement('a'); a.href = href; document.body.append(a); } });
const root = document.getElementById('host').attachShadow({mode: 'open'});
root.innerHTML = '<a href="/in-shadow">s</a>';
history.pushState({}, '', '/route/pushed');
"""
            )
        ),
        # Slower than the 500 ms of quiet: the page waits for requests in flight.
        "/links.json": Response(
            body=b'["/from-json"]', content_type="application/json", delay=0.8
        ),
        **{p: page() for p in ("/static", "/written", "/on-ready", "/after-timer",
                                "/from-json", "/in-shadow", "/route/pushed")},
    }
)  # fmt: skip
SCRIPT_PAGES = {"/", "/static", "/written", "/on-ready", "/after-timer", "/from-json",
                "/in-shadow", "/route/pushed"}  # fmt: skip


async def test_render_finds_the_links_scripts_write_and_a_static_crawl_does_not() -> None:
    with serve_site(SCRIPTED) as server:
        static, _ = await crawl(server.url("/"), render=False)
        rendered, _summary = await crawl(server.url("/"))
    assert paths(static, server) == {"/", "/static"}
    assert paths(rendered, server) == SCRIPT_PAGES
    assert all(r.extra.get("rendered") is True and r.error is None for r in rendered.values())
    assert "rendered" not in static[server.url("/")].extra
    assert rendered[server.url("/")].links == 7
    # The page itself was requested once per crawl: the browser got the crawler's copy.
    assert server.count("/") == 2


def timers_site(pages: int) -> Site:
    """``pages`` pages, each writing one link from a 300 ms timer set as its
    script runs and one from a 200 ms timer set at its load event: both fire
    inside the documented settle time (load plus 500 ms)."""
    timers = """
setTimeout(() => { const a = document.createElement('a'); a.href = '/t/N';
                   document.body.append(a); }, 300);
addEventListener('load', () => setTimeout(() => {
  const a = document.createElement('a'); a.href = '/l/N'; document.body.append(a); }, 200));
"""
    routes: dict[str, Response] = {"/": page(*[f"/p/{i}" for i in range(pages)])}
    for i in range(pages):
        routes[f"/p/{i}"] = html(script(timers.replace("N", str(i))))
        routes[f"/t/{i}"] = page()
        routes[f"/l/{i}"] = page()
    return Site(routes)


async def test_timers_inside_the_settle_time_are_waited_for_in_every_busy_tab() -> None:
    # Issue #36 item 9: with many tabs at once, a 300 ms timer's link was
    # missed in about half the crawls (quiet counted from the last request,
    # not the load event; background tabs' timers were throttled).
    n = 24
    with serve_site(timers_site(n)) as server:
        records, summary = await crawl(server.url("/"), workers=16, render_wait=10.0)
    expected = {"/"} | {f"/{kind}/{i}" for kind in "ptl" for i in range(n)}
    assert paths(records, server) == expected
    assert all(r.status == 200 and r.error is None for r in records.values())
    assert summary.rendered == len(expected)


# -- 3: the browser obeys the crawl's rules ---------------------------------------


def leaky_site(other: str) -> Site:
    """A page that tries every way we know to reach ``other`` (out of scope)
    and ``/private/`` (disallowed by robots.txt)."""
    attempts = f"""
fetch('{other}/fetch').catch(() => {{}});
fetch('/private/fetch').catch(() => {{}});
const x = new XMLHttpRequest(); x.open('GET', '{other}/xhr'); x.send();
navigator.sendBeacon('/beacon', 'x'); navigator.sendBeacon('{other}/beacon', 'x');
try {{ new WebSocket('{other.replace("http", "ws")}/socket'); }} catch (e) {{}}
try {{ new EventSource('{other}/events'); }} catch (e) {{}}
window.open('{other}/popup');
window.open('/popup-in-scope');
new Worker('/worker.js');
const f = document.createElement('iframe'); f.src = '{other}/frame'; document.body.append(f);
const i = document.createElement('img'); i.src = '/picture.png'; document.body.append(i);
const l = document.createElement('link'); l.rel = 'prefetch'; l.href = '/prefetched';
document.head.append(l);
alert('a dialog'); confirm('another');
"""
    return Site(
        {
            "/": html(
                f'<a href="/next">next</a><img src="{other}/img.png">'
                f'<script src="{other}/lib.js"></script>'
                f'<link rel="stylesheet" href="{other}/style.css">'
                '<iframe src="/private/frame"></iframe>' + script(attempts)
            ),
            "/next": page(),
            "/worker.js": Response(
                body=f"fetch('{other}/from-worker'); fetch('/private/from-worker');".encode(),
                content_type="text/javascript",
            ),
            "/robots.txt": Response(
                body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain"
            ),
        }
    )


async def test_the_browser_sends_nothing_out_of_scope_or_against_robots() -> None:
    with (
        serve_site(Site({}, fallback=lambda r: page())) as other,
        serve_site(leaky_site(other.base_url)) as server,
    ):
        records, summary = await crawl(server.url("/"))
    assert other.targets() == []  # not one request reached the other server
    assert [t for t in server.targets() if t.startswith("/private/")] == []
    assert "/picture.png" not in server.targets()  # no images without --page-requisites
    assert "/prefetched" not in server.targets() and "/beacon" not in server.targets()
    assert "/popup-in-scope" not in server.targets()
    assert paths(records, server) == {"/", "/next"}
    assert all(r.error is None for r in records.values())
    blocked = summary.render_blocked
    assert blocked["scope"] >= 6 and blocked["robots"] >= 3 and blocked["kind"] >= 4
    assert blocked["requisite"] >= 1 and blocked["dialog"] == 2


# -- 2: client-side redirects ---------------------------------------------------


async def test_client_side_redirects_are_recorded_as_redirects() -> None:
    site = Site(
        {
            "/": page("/by-script", "/by-meta"),
            "/by-script": html(script("location.replace('/landed-script')")),
            "/by-meta": html("", head='<meta http-equiv="refresh" content="0; url=/landed-meta">'),
            "/landed-script": page(),
            "/landed-meta": page(),
        }
    )
    with serve_site(site) as server:
        records, _ = await crawl(server.url("/"))
    assert records[server.url("/by-script")].redirect == server.url("/landed-script")
    assert records[server.url("/by-meta")].redirect == server.url("/landed-meta")
    assert paths(records, server) == {"/", "/by-script", "/by-meta", "/landed-script",
                                      "/landed-meta"}  # fmt: skip
    # The tab never went there itself: each landing page was requested once, by the crawler.
    assert server.count("/landed-script") == 1 and server.count("/landed-meta") == 1


# -- 4: hostile pages end --------------------------------------------------------

HUGE = """
const parts = [];
for (let i = 0; i < 10000; i++) parts.push('<p>' + 'x'.repeat(500) + '</p>');  // 5 MB
document.body.innerHTML = parts.join('') + '<a href="/after-huge">after</a>';
"""
HOSTILE = Site(
    {
        "/": page("/loop", "/busy", "/stuck"),
        "/loop": html('<a href="/never-seen">x</a>' + script("while (true) {}")),
        "/busy": html(
            '<a href="/after-busy">a</a>'
            + script("setInterval(() => fetch('/tick?' + Math.random()), 50)")
        ),
        "/huge": html(script(HUGE)),
        "/stuck": html('<a href="/after-stuck">a</a><script src="/never.js"></script>'),
        "/never.js": Response(delay=LIMIT, content_type="text/javascript"),
        "/after-busy": page(),
        "/after-huge": page(),
        "/after-stuck": page(),
        "/never-seen": page(),
    },
    fallback=lambda r: Response(body=b"{}", content_type="application/json"),
)


async def test_hostile_pages_each_get_a_record_within_their_limits() -> None:
    got: dict[str, tuple[dict[str, CrawlRecord], trio_crawl.CrawlSummary]] = {}

    async def run(name: str, start: str, **options: Any) -> None:
        got[name] = await crawl(start, render_wait=1.0, retries=1, workers=4, **options)

    with serve_site(HOSTILE) as server:
        async with trio.open_nursery() as nursery:  # two crawls, two browsers, at once
            nursery.start_soon(functools.partial(run, "tight", server.url("/"), timeout=4))
            # A 5 MB DOM takes seconds to lay out on a busy machine: its own budget.
            nursery.start_soon(functools.partial(run, "huge", server.url("/huge"), timeout=30))
    records, summary = got["tight"]
    loop = records[server.url("/loop")]
    # The server answered 200 with a link: the record says so and the link is
    # followed; the render's failure has a field of its own. A script that
    # loops would loop again: it is not retried.
    assert loop.status == 200 and loop.error is None and loop.attempts == 1
    assert "rendered" not in loop.extra
    render_error = loop.extra["render_error"]
    assert render_error["kind"] == "timeout" and 1 <= render_error["seconds"] < 5  # --timeout 4
    assert server.count("/loop") == 1
    for path in ("/busy", "/stuck"):
        record = records[server.url(path)]
        assert record.error is None and record.extra["rendered"] is True, path
        assert server.url(f"/after-{path[1:]}") in records, path
    assert "/never-seen" in paths(records, server)
    assert "render" not in summary.failures and summary.render_failures >= 1
    huge, _ = got["huge"]
    assert huge[server.url("/huge")].error is None
    assert huge[server.url("/huge")].extra["rendered"] is True
    assert server.url("/after-huge") in huge


DOWNLOADS = Site(
    {
        "/": page("/to-file", "/to-attachment", "/to-page"),
        # Each page's script navigates; its own links are one to a file, one to a page.
        "/to-file": html('<a href="/file.bin">f</a><a href="/other">o</a>'
                         + script("location.href = '/file.bin'")),
        "/to-attachment": html('<a href="/report.html">r</a><a href="/other">o</a>'
                               + script("setTimeout(() => location.assign('/report.html'), 50)")),
        "/to-page": html('<a href="/other">o</a>' + script("location.replace('/moved')")),
        "/file.bin": Response(body=b"\0" * 64, content_type="application/octet-stream"),
        "/report.html": Response(
            body=b"<p>report</p>", headers=(("Content-Disposition", 'attachment; filename="r"'),)
        ),
        "/other": page(),
        "/moved": page(),
    }
)  # fmt: skip


async def test_a_script_navigating_to_a_download_is_no_redirect_of_the_page() -> None:
    with serve_site(DOWNLOADS) as server:
        records, summary = await crawl(server.url("/"))
    for path in ("/to-file", "/to-attachment"):
        record = records[server.url(path)]
        assert record.status == 200 and record.redirect is None and record.error is None, path
        assert record.extra["rendered"] is True and record.links == 2, path
    # A navigation to a page still is a client-side redirect.
    assert records[server.url("/to-page")].redirect == server.url("/moved")
    assert paths(records, server) == {
        "/", "/to-file", "/to-attachment", "/to-page", "/file.bin", "/report.html",
        "/other", "/moved",
    }  # fmt: skip
    assert summary.render_blocked.get("download") == 2


def crash_site(rendering: threading.Event) -> Site:
    """``/victim`` keeps its tab busy on its first visit (and says so by
    asking for ``/rendering``); the second visit is a plain page."""
    visits = {"victim": 0}

    def victim(request: SiteRequest) -> Response:
        visits["victim"] += 1
        if visits["victim"] > 1:
            return page("/after")
        return html(script("fetch('/rendering'); setInterval(() => fetch('/tick'), 50)"))

    def signal(request: SiteRequest) -> Response:
        rendering.set()
        return Response(body=b"{}", content_type="application/json")

    return Site(
        {"/": page("/victim"), "/victim": victim, "/rendering": signal, "/after": page()},
        fallback=lambda r: Response(body=b"{}", content_type="application/json"),
    )


async def crawl_and_crash(
    crash: Callable[[ChromiumFetcher], Any],
) -> tuple[dict[str, CrawlRecord], trio_crawl.CrawlSummary, SiteServer]:
    rendering = threading.Event()
    records: dict[str, CrawlRecord] = {}
    with serve_site(crash_site(rendering)) as server:
        options: dict[str, Any] = {"render": True, "browser": BROWSER, "render_wait": 5.0}
        config = trio_crawl.CrawlConfig.from_options(
            start_urls=[server.url("/")], retries=1, **options
        )
        with trio.fail_after(LIMIT):
            async with trio_crawl.open_fetcher(config) as fetcher, trio.open_nursery() as nursery:
                assert isinstance(fetcher, ChromiumFetcher)

                async def crash_when_rendering() -> None:
                    await trio.to_thread.run_sync(rendering.wait, LIMIT)
                    await crash(fetcher)

                nursery.start_soon(crash_when_rendering)
                summary = await trio_crawl.run_crawl(
                    server.url("/"),
                    fetcher=fetcher,
                    on_record=lambda r: records.__setitem__(r.url, r),
                    retries=1,
                    **options,
                )
    return records, summary, server


async def test_a_crashed_tab_is_retried_in_a_new_tab() -> None:
    async def crash_tab(fetcher: ChromiumFetcher) -> None:
        session = fetcher._session
        assert session is not None and len(session.lives) == 1
        (target,) = session.lives
        with trio.move_on_after(2):  # a crashing tab does not answer
            await session.cdp.send("Page.crash", {}, session._attached[target])

    records, summary, server = await crawl_and_crash(crash_tab)
    victim = records[server.url("/victim")]
    assert victim.error is None and victim.attempts == 2 and victim.extra["rendered"] is True
    assert server.url("/after") in records
    assert summary.render_failures == 1 and summary.browsers == 1


async def test_a_crashed_browser_is_restarted_and_its_page_retried() -> None:
    async def kill_browser(fetcher: ChromiumFetcher) -> None:
        assert fetcher.browser_pid is not None
        os.kill(fetcher.browser_pid, signal.SIGKILL)

    records, summary, server = await crawl_and_crash(kill_browser)
    victim = records[server.url("/victim")]
    assert victim.error is None and victim.attempts == 2 and victim.extra["rendered"] is True
    assert server.url("/after") in records
    assert summary.render_failures == 1 and summary.browsers == 2


# -- 1: the browser ends with the crawler ---------------------------------------


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
async def test_the_browser_ends_with_the_crawler(how: signal.Signals, tmp_path: Path) -> None:
    rendering = threading.Event()
    with serve_site(crash_site(rendering)) as server:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
        crawler = subprocess.Popen(  # noqa: ASYNC220 (starting it does not block)
            [sys.executable, "-m", "trio_crawl", server.url("/victim"), "--render",
             "--render-wait", "60", "--timeout", "60", "--grace", "0.5", "--browser", BROWSER,
             "-o", str(tmp_path / "out.jsonl")],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            with trio.fail_after(LIMIT):
                await trio.to_thread.run_sync(rendering.wait, LIMIT)
                browsers = descendants(crawler.pid)
                assert browsers, "the browser runs below the crawler"
                crawler.send_signal(how)
                await trio.to_thread.run_sync(crawler.wait)
                await wait_gone(browsers)
        finally:
            crawler.kill()
            crawler.wait()
    assert alive(browsers) == set()
    if how is signal.SIGINT:  # Ctrl-C: a graceful stop, the usual exit
        assert crawler.returncode == 130
        assert b"Traceback" not in (crawler.stderr.read() if crawler.stderr else b"")


async def test_a_warc_keeps_what_came_over_the_network_and_handlers_get_the_dom(
    tmp_path: Path,
) -> None:
    seen: dict[str, str] = {}

    async def handler(page: trio_crawl.Page) -> None:
        seen[page.url] = page.text

    warc = tmp_path / "crawl.warc.gz"
    with serve_site(SCRIPTED) as server:
        await crawl(server.url("/"), warc=str(warc), handler=handler, max_pages=1)
    stored = read_warc_responses(warc)[server.url("/")]
    assert stored.body == SCRIPTED.routes["/"].body  # type: ignore[union-attr]
    assert '<a href="/written">w</a>' in seen[server.url("/")]
    assert '<a href="/in-shadow">s</a>' in seen[server.url("/")]


# -- 6: --render auto -------------------------------------------------------------


def mixed_site() -> Site:
    """``/docs/``: 6 plain pages in a chain; ``/app/``: 3 pages whose next
    link a script writes."""
    routes: dict[str, Any] = {"/": page("/docs/0.html", "/app/0.html")}
    for i in range(6):
        routes[f"/docs/{i}.html"] = page(*([f"/docs/{i + 1}.html"] if i < 5 else []))
    for i in range(3):
        code = f"document.write('<a href=\"/app/{i + 1}.html\">next</a>')" if i < 2 else ""
        routes[f"/app/{i}.html"] = html(script(code))
    return Site(routes)


async def test_render_auto_renders_only_where_scripts_add_links() -> None:
    with serve_site(mixed_site()) as server:
        records, summary = await crawl(server.url("/"), render="auto")
    docs = {f"/docs/{i}.html" for i in range(6)}
    app = {f"/app/{i}.html" for i in range(3)}
    assert paths(records, server) == {"/"} | docs | app  # what --render finds
    rendered = {p for p in paths(records, server) if records[server.url(p)].extra.get("rendered")}
    assert app <= rendered
    assert rendered & docs == {"/docs/0.html", "/docs/1.html", "/docs/2.html"}  # the samples
    host = server.base_url.removeprefix("http://")
    assert summary.render_auto[f"{host}/app/"] == (
        "3 rendered, 0 as served: scripts add links (2 of 3 renders)"
    )
    assert summary.render_auto[f"{host}/docs/"] == (
        "3 rendered, 3 as served: static HTML has every link (3 renders)"
    )
