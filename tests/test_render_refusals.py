"""What the browser refuses, against the real Chromium: popups (opened by a
page's scripts, on load, from a timer, by a click, and by a user gesture),
downloads (``<a download>``, an attachment in a frame), and a proxy's login
given to the proxy alone. Checked by what 127.0.0.1 servers received, the
summary's counters and the exact URL set; skipped where there is no Chromium.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import trio
from test_render_chromium import BROWSER, LIMIT, crawl, html, paths, script

import trio_crawl
from trio_crawl.core.models import CrawlRecord
from trio_crawl.fetch.chromium import ChromiumFetcher
from trio_crawl.sites.server import SiteServer, serve_site
from trio_crawl.sites.site import Response, Site, SiteRequest, page

from forward_proxy import serve_proxy

JSON = "application/json"


def ok(request: SiteRequest) -> Response:
    return Response(body=b"{}", content_type=JSON)


def popup_page(marker: str) -> Response:
    """A page that says it ran by asking for ``marker``."""
    return html(script(f"fetch('{marker}')"))


# -- popups a page opens by itself --------------------------------------------------

POPUPS = ("/popup-on-load", "/popup-timer", "/popup-click")


async def test_popups_a_page_opens_are_never_loaded_and_are_counted() -> None:
    timer_ran = threading.Event()

    def timer_done(request: SiteRequest) -> Response:
        timer_ran.set()
        return ok(request)

    def after_timer(request: SiteRequest) -> Response:
        """Held until the timer ran: the page's load waits for it."""
        timer_ran.wait(LIMIT)
        return Response(body=b"", content_type="text/javascript")

    with serve_site(Site({}, fallback=lambda r: popup_page("/far-popup-ran"))) as other:
        site = Site(
            {
                "/": page("/on-load", "/from-timer", "/by-click"),
                "/on-load": html(
                    script(f"window.open('/popup-on-load'); window.open('{other.url('/far')}')")
                ),
                "/from-timer": html(
                    script("setTimeout(() => { open('/popup-timer'); fetch('/timer-ran') }, 9)")
                    + '<script src="/after-timer.js"></script>'
                ),
                "/timer-ran": timer_done,
                "/after-timer.js": after_timer,
                # A target=_blank link the page's script clicks (and removes: no link to follow).
                "/by-click": html(
                    script(
                        "const a = document.createElement('a'); a.target = '_blank';"
                        " a.href = '/popup-click'; document.body.append(a); a.click(); a.remove();"
                    )
                ),
                **{p: popup_page("/popup-ran") for p in POPUPS},
            },
            fallback=ok,
        )
        with serve_site(site) as server:
            records, summary = await crawl(server.url("/"))
    assert paths(records, server) == {"/", "/on-load", "/from-timer", "/by-click"}
    assert all(r.error is None and r.extra["rendered"] is True for r in records.values())
    assert server.count("/timer-ran") == 1  # the timer ran: its window.open was tried
    assert not [t for t in server.targets() if t.startswith("/popup")]
    assert other.targets() == []
    # Chromium's popup blocker stops them (no user gesture in a crawl); each is counted.
    assert summary.render_blocked["popup"] == 4


# -- a popup that does open (a user gesture) ----------------------------------------

GESTURE = """
setInterval(() => { if (!window.done) fetch('/tick'); }, 50);  // busy until both ran
window.openPage = () => {
  window.open('/popup-page');
  const a = document.createElement('a'); a.href = '/after-popup'; document.body.append(a);
};
window.openWritten = (far) => {
  const w = window.open('');
  w.document.write("<script>fetch('" + far + "')<\\/script>");
  w.document.close();
  const a = document.createElement('a'); a.href = '/after-written'; document.body.append(a);
  window.done = true;
};
fetch('/rendering');
"""


def gesture_site(rendering: threading.Event) -> Site:
    """A page that opens popups when told to (``openPage``, ``openWritten``)
    and says it is rendering."""

    def signal(request: SiteRequest) -> Response:
        rendering.set()
        return ok(request)

    return Site(
        {
            "/": html(script(GESTURE)),
            "/rendering": signal,
            "/popup-page": popup_page("/popup-ran"),
        },
        fallback=ok,
    )


async def crawl_with(
    site: Site,
    during: Callable[[ChromiumFetcher], Awaitable[Any]] | None = None,
    rendering: threading.Event | None = None,
    after: Callable[[ChromiumFetcher], Any] | None = None,
    **options: Any,
) -> tuple[dict[str, CrawlRecord], trio_crawl.CrawlSummary, SiteServer, list[Any]]:
    """Crawl ``site`` from ``/`` through a rendering fetcher of our own:
    once a page asks for something that sets ``rendering``, ``during`` runs
    on it (its result is kept); ``after`` runs once the crawl is over, while
    the browser still runs."""
    records: dict[str, CrawlRecord] = {}
    kept: list[Any] = []
    options = {"render": True, "browser": BROWSER, "render_wait": 10.0, **options}
    with serve_site(site) as server:
        config = trio_crawl.CrawlConfig.from_options(start_urls=[server.url("/")], **options)
        with trio.fail_after(LIMIT):
            async with trio_crawl.open_fetcher(config) as fetcher, trio.open_nursery() as nursery:
                assert isinstance(fetcher, ChromiumFetcher)
                if during is not None and rendering is not None:

                    async def when_rendering() -> None:
                        await trio.to_thread.run_sync(rendering.wait, LIMIT)
                        kept.append(await during(fetcher))

                    nursery.start_soon(when_rendering)
                summary = await trio_crawl.run_crawl(
                    server.url("/"),
                    fetcher=fetcher,
                    on_record=lambda r: records.__setitem__(r.url, r),
                    **options,
                )
                if after is not None:
                    after(fetcher)
    return records, summary, server, kept


async def test_a_popup_that_opens_is_closed_before_it_loads_and_its_opener_goes_on() -> None:
    async def click(fetcher: ChromiumFetcher) -> list[Any]:
        session = fetcher._session
        assert session is not None
        (target,) = session.lives
        answers = []
        far = json.dumps(other.url("/written-into-popup"))
        for call in ("window.openPage()", f"window.openWritten({far})"):
            with trio.move_on_after(10):  # the opener is stuck if its popup never ends
                answers.append(
                    await session.cdp.send(
                        "Runtime.evaluate",
                        {"expression": call, "userGesture": True},
                        session._attached[target],
                    )
                )
        return answers

    rendering = threading.Event()
    with serve_site(Site({}, fallback=ok)) as other:
        records, summary, server, kept = await crawl_with(
            gesture_site(rendering), click, rendering
        )
    assert len(kept[0]) == 2 and all("exceptionDetails" not in a for a in kept[0])
    # The opener went on after each window.open returned: its later links were found.
    assert paths(records, server) == {"/", "/after-popup", "/after-written"}
    # Neither popup loaded anything: not its URL, not a script written into it.
    assert "/popup-page" not in server.targets() and "/popup-ran" not in server.targets()
    # A script the opener writes into its popup may run (in the closed
    # window, as the opener's), but only under the crawl's rules.
    assert other.targets() == []
    assert summary.render_blocked["popup"] == 2  # counted once each, by their opener's tab


# -- downloads ------------------------------------------------------------------------

MARK = "tc-download-marker"


async def test_downloads_are_refused_counted_and_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    went_on = threading.Event()

    def clicked(request: SiteRequest) -> Response:
        went_on.set()
        return ok(request)

    def hold(request: SiteRequest) -> Response:
        went_on.wait(LIMIT)
        return Response(body=b"", content_type="text/javascript")

    attachment = Response(
        body=MARK.encode() * 100,
        content_type="text/plain",
        headers=(("Content-Disposition", f'attachment; filename="{MARK}-frame.txt"'),),
    )
    site = Site(
        {
            "/": page("/link-download", "/frame-download"),
            # <a download> clicked by the page's script (and removed: no link to follow).
            "/link-download": html(
                script(
                    f"const a = document.createElement('a'); a.download = '{MARK}-link.bin';"
                    " a.href = '/file.bin'; document.body.append(a); a.click(); a.remove();"
                    " setTimeout(() => { const b = document.createElement('a');"
                    " b.href = '/after-click'; document.body.append(b); fetch('/clicked'); }, 99);"
                )
                + '<script src="/hold.js"></script>'  # the page loads once the timer ran
            ),
            "/clicked": clicked,
            "/hold.js": hold,
            "/after-click": page(),
            "/frame-download": html(
                script(
                    "const f = document.createElement('iframe'); f.src = '/attachment';"
                    " document.body.append(f);"
                )
            ),
            "/file.bin": Response(body=MARK.encode() * 100, content_type="application/x-binary"),
            "/attachment": attachment,
        },
        fallback=ok,
    )
    written: list[str] = []
    cwd: list[Path] = []

    def look_in_profile(fetcher: ChromiumFetcher) -> None:
        """Every file in the running browser's profile (its HOME, so also
        ~/Downloads) named for a download."""
        session = fetcher._session
        assert session is not None
        profile = Path(session.browser.profile)
        written.extend(
            str(p) for p in profile.rglob("*") if MARK in p.name or p.suffix == ".crdownload"
        )
        cwd.extend(tmp_path.iterdir())

    records, summary, server, _ = await crawl_with(site, after=look_in_profile, render_wait=2.0)
    # The <a download> click is no navigation of the page (no client redirect): the
    # page went on (its later link was found), and the file was never requested.
    assert records[server.url("/link-download")].redirect is None
    assert paths(records, server) == {"/", "/link-download", "/after-click", "/frame-download"}
    assert server.count("/file.bin") == 0
    # The frame's request is in scope and was sent; its answer became a download.
    assert server.count("/attachment") == 1
    assert summary.render_blocked["download"] == 2
    assert written == [] and cwd == []


# -- a proxy with a login ---------------------------------------------------------------

LOGIN = ("proxy-user", "pr0xy:pass word")  # a colon and a space: sent percent-encoded
PROXIED = """
fetch('/links.json', {method: 'POST', body: 'x'}).then(r => r.json()).then(list => {
  for (const href of list) {
    const a = document.createElement('a'); a.href = href; document.body.append(a); } });
fetch('/secret', {method: 'POST', body: 'x'}).then(r => {
  const a = document.createElement('a'); a.href = '/status-' + r.status; document.body.append(a);
});
"""


@pytest.mark.parametrize("given", ["--proxy", "http_proxy"])
async def test_the_browser_logs_in_to_the_crawls_proxy_and_gives_its_login_to_nobody_else(
    given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    site = Site(
        {
            "/": html('<script src="/lib.js"></script>' + script(PROXIED)),
            "/lib.js": Response(
                body=b"const a = document.createElement('a'); a.href = '/from-script';"
                b" document.currentScript.after(a);",
                content_type="text/javascript",
            ),
            "/links.json": Response(body=b'["/from-post"]', content_type=JSON),
            # A server's own challenge: the page gets the 401, the server no login.
            "/secret": Response(
                status=401,
                body=b"{}",
                content_type=JSON,
                headers=(("WWW-Authenticate", 'Basic realm="site"'),),
            ),
            **{p: page() for p in ("/from-script", "/from-post", "/status-401")},
        }
    )
    with serve_site(site) as server, serve_proxy(server.port, login=LOGIN) as proxy:
        user, password = (quote(part, safe="") for part in LOGIN)
        with_login = proxy.url.replace("http://", f"http://{user}:{password}@")
        if given == "--proxy":  # loopback included
            records, summary = await crawl(server.url("/"), proxy=with_login)
            base = server.base_url
        else:  # never for loopback: a name only the proxy can reach
            monkeypatch.setenv("http_proxy", with_login)
            records, summary = await crawl("http://site.invalid/")
            base = "http://site.invalid"
    assert {url.removeprefix(base) for url in records} == {
        "/",
        "/from-script",
        "/from-post",
        "/status-401",
    }
    assert all(r.error is None for r in records.values())
    # The browser's own requests went through the proxy, after a challenge it answered.
    forwarded = [path for _, path in proxy.forwarded]
    assert ("POST", "/links.json") in proxy.forwarded and "/lib.js" in forwarded
    assert proxy.refused >= 1
    # Everything the site received came through the proxy.
    assert sorted(forwarded) == sorted(server.targets())
    # No server got the proxy's login, not even the one that asked for a login.
    secret = base64.b64encode(":".join(LOGIN).encode()).decode()
    for request in server.log:
        assert "authorization" not in request.headers, request.target
        assert not any(secret in value for value in request.headers.values())
    assert summary.render_blocked.get("scope", 0) == 0
