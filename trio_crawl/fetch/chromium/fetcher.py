"""``ChromiumFetcher``: pages fetched as today, then rendered in Chromium.

Theory of operation. The crawl's own HTTP fetcher (``inner``) fetches every
URL as it would without ``--render``: same identity, proxy, limits and
deadlines, one record per redirect hop, robots.txt, requisites and sitemaps
untouched. An HTML page that came back 2xx is then rendered: a tab
navigates to it and the browser gets, for that one request, the response
already fetched (``Fetch.fulfillRequest``), so the page is requested once
and a WARC keeps what came over the network. What the page's scripts ask for
next is judged by the crawl's rules (``policy``, ``session``). The result's
body is the rendered DOM; ``rendered`` and ``network_body`` say so.

Rules:

1. One browser at a time, started on the first render and restarted when it
   dies.
2. At most ``max_tabs`` tabs (one per busy worker), kept and reused; a tab
   whose render failed is discarded.
3. A page settles within ``render_wait``; then its DOM is read, within
   what the fetch left of ``timeout`` (the page's whole budget: a big DOM on
   a busy machine takes seconds).
4. robots.txt for the browser's own requests comes from a ``RobotsCache``
   over ``inner``; the crawler's robots.txt answers passing through
   ``fetch`` are kept for it, so a host's robots.txt is normally requested
   once per crawl.
5. The browser's other requests are fetched by ``inner`` too, under the
   crawl's politeness once a crawl ``attach``es it, and each URL once per
   crawl: the crawler's fetches and the browser's share one store
   (``subrequests``). A page's own request frees its host's slot before
   the render starts (``Politeness.request_over``): the page's scripts,
   not the page, wait for the host while it renders.
6. A render that fails never loses the page: the result is the page as
   served (its status, headers and bytes, whose links the crawl reads),
   with ``render_failure`` saying why and after how long (a page whose
   scripts never yield: ``timeout`` at the page's budget; a crashed tab or
   browser: ``crash``, which the crawler tries again within
   ``1 + --retries`` attempts).
7. A navigation the page's script starts is a client redirect unless its
   target is a download (``life.is_download``, asked of the crawl once the
   render is over): then the page stays the page.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http.cookiejar import CookieJar
from urllib.parse import urlsplit

import trio

from ...core.http import is_html_content_type
from ...core.models import FetchResult, RenderFailure
from ...core.parse import extract_links
from ...core.retry import RetryPolicy
from ...core.url import resolve
from ...errors import FetchError
from ..base import Fetcher
from .auto import PatternReport, RenderPlanner
from .browser import open_browser
from .cdp import BrowserClosed, CdpError
from .jar import keep_page_cookies
from .life import PageLife, is_download
from .policy import RequestPolicy, Verdict
from .proxy import browser_proxy
from .session import BrowserSession, RobotsLookup
from .store import ResponseStore
from .subrequests import Archive, BrowserRequests, NoTurn, Politeness
from .tab import RenderFailed, Tab

__all__ = ["ChromiumFetcher", "ChromiumStatistics", "RenderSettings", "open_chromium_fetcher"]

#: Seconds a browser gets to start and open a tab (not counted in a page's budget).
START_LIMIT = 30.0
#: ``--render auto`` compares bodies this large in a thread.
_THREAD_PARSE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderSettings:
    """How pages are rendered.

    ``executable``: the browser (``core.browser.find_browser``);
    ``user_agent``: sent by the browser too; ``max_tabs``: tabs
    at once; ``render_wait``: the longest wait for a page to settle;
    ``timeout``: a page's whole budget (fetch and render); ``auto``:
    render only where it adds links (``--render auto``, ``auto.RenderPlanner``);
    ``proxy``: the crawl's (``""``: none; None: the environment's): the
    browser's own requests use it too, its login included (``proxy``);
    ``keep_requisites``: keep what the crawler fetches with ``any_body``
    (requisites) for the browser (``--page-requisites``); ``retries``: the
    crawl's, for the browser's requests too; ``cookies``: the crawl's jar
    (None: no cookies), which gets the cookies a page's scripts set.
    """

    executable: str
    user_agent: str
    max_tabs: int = 16
    render_wait: float = 5.0
    timeout: float = 30.0
    auto: bool = False
    proxy: str | None = None
    keep_requisites: bool = False
    retries: int = 0
    cookies: CookieJar | None = None


@dataclass(frozen=True, slots=True)
class ChromiumStatistics:
    """``rendered``: pages rendered; ``failed``: renders that failed;
    ``browsers``: browsers started (more than one: restarts); ``blocked``:
    browser requests refused, by reason (scope, robots, kind, requisite,
    scheme, popup, dialog, download); ``auto``: with ``--render auto``, what
    was rendered where, and why; ``requests``: the browser's allowed requests,
    by how they were answered (``fetched`` by the crawl, ``reused``: a
    response the crawl already had, for the browser or the crawler;
    ``sent`` by the browser after its turn; ``failed``)."""

    rendered: int
    failed: int
    browsers: int
    blocked: dict[str, int]
    auto: list[PatternReport]
    requests: dict[str, int] = dataclasses.field(default_factory=dict)


class _Robots:
    """The robots.txt fetcher of the browser's ``RobotsCache``: answers the
    crawler already got first, else ``inner`` (rule 4)."""

    def __init__(self, inner: Fetcher) -> None:
        self.inner = inner
        self.kept: dict[str, FetchResult] = {}

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        kept = self.kept.pop(url, None)
        if kept is not None:
            return kept
        return await self.inner.fetch(url, headers, any_body=any_body)

    async def aclose(self) -> None:
        pass


class ChromiumFetcher:
    """A ``Fetcher`` whose HTML pages are rendered. Create it with
    ``open_chromium_fetcher``."""

    def __init__(
        self,
        inner: Fetcher,
        settings: RenderSettings,
        policy: RequestPolicy,
        nursery: trio.Nursery,
        robots: Callable[[Fetcher], RobotsLookup] | None,
    ) -> None:
        self.inner = inner
        self.settings = settings
        self._policy = policy
        self._nursery = nursery
        self._robots_source = _Robots(inner)
        self._robots: RobotsLookup | None = None
        if robots is not None:
            self._robots = robots(self._robots_source)
        self._tabs = trio.CapacityLimiter(settings.max_tabs)
        self._idle: list[Tab] = []
        self._session: BrowserSession | None = None
        self._starting: trio.Event | None = None
        self._stop_browser: trio.CancelScope | None = None
        self._rendered = 0
        self._failed = 0
        self._browsers = 0
        self._blocked: Counter[str] = Counter()
        self._closed = False
        self._planner = RenderPlanner() if settings.auto else None
        self._proxy = browser_proxy(settings.proxy, os.environ)
        self.requests = BrowserRequests(
            inner,
            ResponseStore(),
            keep_crawler=settings.keep_requisites,
            retry=RetryPolicy(retries=settings.retries),
        )

    def attach(self, politeness: Politeness) -> None:
        """Put the browser's requests under a crawl's politeness (rule 5)."""
        self.requests.politeness = politeness

    def archive_to(self, archive: Archive) -> None:
        """Archive the browser's requests (``--warc``; ``subrequests`` rule 7)."""
        self.requests.archive = archive

    def statistics(self) -> ChromiumStatistics:
        blocked = Counter(self._blocked)
        if self._session is not None:
            blocked.update(self._session.blocked)
        auto = self._planner.report() if self._planner is not None else []
        requests = self.requests
        counts = {
            "fetched": requests.fetched,
            "reused": requests.reused,
            "sent": requests.sent,
            "failed": requests.failed,
            "retried": requests.retried,
        }
        return ChromiumStatistics(
            self._rendered, self._failed, self._browsers, dict(blocked), auto, counts
        )

    @property
    def browser_pid(self) -> int | None:
        """The running browser's process id (tests crash it)."""
        return None if self._session is None else self._session.browser.process.pid

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        result = await self.requests.for_crawler(url, headers, any_body=any_body)
        if any_body and urlsplit(url).path == "/robots.txt":
            self._robots_source.kept[url] = result
        if not _wants_render(url, result):
            return result
        if self._planner is not None and not self._planner.decide(url).render:
            return result
        if self.requests.politeness is not None:
            self.requests.politeness.request_over(url)
        started = trio.current_time()
        try:
            async with self._tabs:
                tab = await self._take_tab()
                started = trio.current_time()  # the render's time, not the wait for a tab
                deadline = max(0.0, self.settings.timeout - result.elapsed)  # the page's budget
                with trio.move_on_after(deadline) as scope:
                    rendered = await self._render(tab, url, result)
                if scope.cancelled_caught:
                    raise _Failed("timeout", f"the page gave no DOM within {deadline:g} s")
        except _Failed as exc:  # rule 6: the page as served, and why
            self._failed += 1
            seconds = trio.current_time() - started
            failure = RenderFailure(exc.kind, exc.message, seconds, retry=exc.retry)
            return dataclasses.replace(result, render_failure=failure)
        if rendered.client_redirect is not None and await self._downloads(
            url, rendered.client_redirect
        ):
            rendered = dataclasses.replace(rendered, client_redirect=None)
        if self._planner is not None:
            await self._learn(url, result, rendered)
        return rendered

    async def _downloads(self, url: str, target: str) -> bool:
        """Whether the page's navigation to ``target`` is a download (rule
        7): asked of the crawl, as the browser's own request would be (the
        crawler's request for the target, if it follows it, is answered
        from the store). A target the crawl may not fetch, or that fails,
        stays a redirect: the crawler records what it is."""
        absolute = resolve(target, url)
        if absolute is None or self._policy.judge(absolute, "Document") not in (
            Verdict.ALLOW,
            Verdict.ROBOTS,
        ):
            return False
        if self._robots is not None and self._policy.obey_robots:
            cached, ask = self._robots
            try:
                robots = cached(absolute)
                if robots is None:
                    robots = await ask(absolute)
            except (ValueError, FetchError):
                return False
            if not robots.allows(absolute):
                return False
        try:
            answer = await self.requests.for_browser(absolute, {}, url)
        except (FetchError, NoTurn):
            return False
        if is_download(answer):
            self._blocked["download"] += 1
            return True
        return False

    async def _learn(self, url: str, static: FetchResult, rendered: FetchResult) -> None:
        """Tell the planner what rendering added (links, as the crawl reads them)."""
        big = max(len(static.body), len(rendered.body)) >= _THREAD_PARSE_BYTES
        parse = extract_links
        if big:
            before = await trio.to_thread.run_sync(parse, static.body, url, static.content_type)
            after = await trio.to_thread.run_sync(parse, rendered.body, url, rendered.content_type)
        else:
            before = parse(static.body, url, static.content_type)
            after = parse(rendered.body, url, rendered.content_type)
        assert self._planner is not None
        self._planner.learn(url, before, after)

    async def _take_tab(self) -> Tab:
        """An idle tab, or a new one (in a browser started if need be);
        bounded by ``START_LIMIT``, not by the page's budget."""
        with trio.move_on_after(START_LIMIT) as scope:
            try:
                session = await self._session_now()
                return self._idle.pop() if self._idle else await Tab.open(session)
            except (BrowserClosed, CdpError) as exc:
                raise _Failed("browser", f"no browser tab: {exc}", retry=True) from None
        assert scope.cancelled_caught
        raise _Failed("browser", f"the browser gave no tab within {START_LIMIT:g} s", retry=True)

    async def _render(self, tab: Tab, url: str, result: FetchResult) -> FetchResult:
        """Render the page in ``tab``; the tab goes back to the idle ones
        if all went well, else it is thrown away (rule 2)."""
        ok = False
        try:
            life = PageLife(url, result, trio.current_time())
            jar = self.settings.cookies
            html = await tab.render(life, self.settings.render_wait, cookies=jar is not None)
            ok = True
            keep_page_cookies(jar, life.cookies, url, self._policy.in_scope)
        except RenderFailed as exc:
            raise _Failed(exc.kind, str(exc), retry=exc.kind == "crash") from None
        except BrowserClosed as exc:
            raise _Failed("crash", str(exc) or "the browser closed", retry=True) from None
        except CdpError as exc:
            raise _Failed("no_dom", str(exc) or type(exc).__name__) from None
        finally:
            if ok and tab.session is self._session and not tab.session.cdp.closed:
                self._idle.append(tab)
            else:
                self._nursery.start_soon(tab.discard)
        self._rendered += 1
        return dataclasses.replace(
            result,
            body=encode_dom(html, result.content_type),
            rendered=True,
            network_body=result.body,
            client_redirect=life.client_redirect,
        )

    async def _session_now(self) -> BrowserSession:
        """The running browser, started (again) if there is none (rule 1)."""
        while self._session is None or self._session.cdp.closed:
            if self._closed:
                raise BrowserClosed("the fetcher is closed")
            if self._starting is not None:
                await self._starting.wait()
                continue
            self._starting = trio.Event()
            try:
                if self._session is not None:
                    self._blocked.update(self._session.blocked)
                self._idle.clear()
                self._session = await self._nursery.start(self._run_browser)
                self._browsers += 1
            finally:
                self._starting.set()
                self._starting = None
        return self._session

    async def _run_browser(
        self, *, task_status: trio.TaskStatus[BrowserSession] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with open_browser(
            self.settings.executable, self.settings.user_agent, self._proxy.flags
        ) as browser:
            session = BrowserSession(
                browser,
                self._policy,
                self._robots,
                self.requests,
                request_limit=self.settings.timeout,
                proxy=self._proxy,
                cookies=self.settings.cookies,
            )
            async with trio.open_nursery() as nursery:
                await nursery.start(session.serve)
                task_status.started(session)

    async def aclose(self) -> None:
        self._closed = True


class _Failed(Exception):
    """A render that failed: ``RenderFailure``'s kind, message and retry."""

    def __init__(self, kind: str, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry = retry


def _wants_render(url: str, result: FetchResult) -> bool:
    return (
        200 <= result.status < 300
        and not result.body_skipped
        and is_html_content_type(result.content_type)
        and not is_download(result)  # an attachment: the browser would save it, not show it
        and RequestPolicy.may_navigate(url)
    )


def encode_dom(html: str, content_type: str | None) -> bytes:
    """The rendered DOM as bytes the parser reads right under the page's own
    headers: in the charset the Content-Type names (characters it lacks as
    character references), else UTF-8 behind a ``<meta charset>`` that comes
    before any the page has."""
    match = re.search(r"charset\s*=\s*[\"']?([\w.:-]+)", content_type or "", re.IGNORECASE)
    if match is not None:
        try:
            return html.encode(match.group(1), errors="xmlcharrefreplace")
        except LookupError:
            pass
    return html.replace("<head>", '<head><meta charset="utf-8">', 1).encode("utf-8")


@asynccontextmanager
async def open_chromium_fetcher(
    inner: Fetcher,
    settings: RenderSettings,
    policy: RequestPolicy,
    robots: Callable[[Fetcher], RobotsLookup] | None = None,
) -> AsyncIterator[ChromiumFetcher]:
    """A rendering fetcher over ``inner`` (which the caller owns). ``robots``
    makes the robots.txt lookup of the browser's requests from a fetcher of
    robots.txt files (None: the policy never asks). The browser, if one was
    started, is ended when the block exits."""
    async with trio.open_nursery() as nursery:
        fetcher = ChromiumFetcher(inner, settings, policy, nursery, robots)
        try:
            yield fetcher
        finally:
            fetcher._closed = True
            nursery.cancel_scope.cancel()
