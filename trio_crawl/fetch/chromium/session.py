"""One running browser as the crawl sees it: the request router and its tabs.

Rules:

1. Interception is browser-wide: ``Fetch.enable`` on the browser's own
   session pauses every request of every target (tabs, frames, popups,
   workers) before it is sent. ``route_request`` answers each: the page's
   own document is fulfilled from the crawler's response (``life``), a
   later main-frame navigation is a client-side redirect (failed), anything
   else goes through ``RequestPolicy`` and robots.txt; what is refused is
   failed with ``BlockedByClient`` and counted in ``blocked``; what is
   allowed is sent by the crawl under its politeness (``subrequests``) and
   given to the browser (``Fetch.fulfillRequest``), or, for a method other
   than GET, sent by the browser once its host's turn has come; such a
   request pauses again when its response's head comes (the response
   stage), which frees its host's slot, and goes on. A page's requests
   still waiting when its render ends are abandoned.
2. New targets are auto-attached paused (``waitForDebuggerOnStart``): our
   own tabs are resumed by ``new_tab``; a page we did not create is a popup:
   resumed (its opener's ``window.open`` waits for it) and closed at once,
   before its document loads; what it requests meanwhile, or after (the
   crawl, not the closed window, would send it), is failed. Other
   targets (frames, workers) are resumed, since their requests meet rule 1.
3. Downloads are denied browser-wide, and counted (``download``).
4. A login challenge (``Fetch.authRequired``, ``handleAuthRequests``) from
   the crawl's proxy gets the proxy's login (``proxy.BrowserProxy``), once
   per request (a second challenge means it was refused: cancelled); any
   other, a web server's 401 included, is cancelled: the page sees the 401,
   and no server ever gets the proxy's login.
5. When the pipe closes every render of this browser fails (``BrowserClosed``
   reaches them through their own commands and event channels).
"""

from __future__ import annotations

import base64
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import urlsplit

import trio

from ...core.models import FetchResult
from ...errors import FetchError
from ...robots.policy import RobotsPolicy
from .browser import Browser
from .cdp import BrowserClosed, CdpConnection, CdpError, CdpEvent
from .jar import keep_page_cookies
from .life import DocumentStep, PageLife, fulfilled_headers
from .policy import RequestPolicy, Verdict, resource_kind
from .proxy import BrowserProxy
from .subrequests import BrowserRequests, NoTurn

__all__ = ["BrowserSession", "RobotsLookup"]

#: Closed popups remembered: their late requests are failed (rule 2).
POPUPS_KEPT = 1024

#: Each tab in a window of its own: a background tab in a shared window is
#: hidden, and a hidden page gets no rendering steps (no animation frames, no
#: ``IntersectionObserver`` callbacks: a lazy list would never load).
NEW_TAB = {"url": "about:blank", "newWindow": True}

#: ``FetchError`` kinds as the browser's network error reasons.
_ERROR_REASONS = {
    "timeout": "TimedOut",
    "connect": "ConnectionFailed",
    "reset": "ConnectionReset",
    "too_large": "BlockedByResponse",
}

#: ``RobotsCache``-shaped: the cached policy now, or fetch it.
RobotsLookup = tuple[
    Callable[[str], RobotsPolicy | None], Callable[[str], Awaitable[RobotsPolicy]]
]


class BrowserSession:
    """Routes one browser's events; creates its tabs. Run ``serve`` in a
    nursery for the browser's lifetime."""

    def __init__(
        self,
        browser: Browser,
        policy: RequestPolicy,
        robots: RobotsLookup | None,
        requests: BrowserRequests,
        *,
        request_limit: float = 30.0,
        proxy: BrowserProxy | None = None,
        cookies: CookieJar | None = None,
    ) -> None:
        self.browser = browser
        self._proxy = proxy or BrowserProxy()
        #: The crawl's cookie jar (None: no cookies), and the browser's
        #: ``Cookie`` header last synced into it, by host.
        self._jar = cookies
        self._synced: dict[str, str] = {}
        #: Requests already given a proxy login (a second challenge: it was refused).
        self._logged_in: set[str] = set()
        self.cdp: CdpConnection = browser.cdp
        self._policy = policy
        self._robots = robots
        self._requests = requests
        #: Seconds an allowed request may take, its turn included.
        self._request_limit = request_limit
        #: The cancel scopes of the requests each render is waiting for, by tab.
        self._pending: dict[str, set[trio.CancelScope]] = {}
        #: Requests the browser sends itself, until their response (by request id).
        self._answered: dict[str, trio.Event] = {}
        self._events = self.cdp.subscribe(None)
        #: Renders in progress, by their tab's main frame id (= target id).
        self.lives: dict[str, PageLife] = {}
        self._own: set[str] = set()
        self._attached: dict[str, str] = {}
        self._attach_events: dict[str, trio.Event] = {}
        #: Popups we closed, the newest ``POPUPS_KEPT``: a request of one
        #: may still come after it is gone, and is failed, not sent.
        self._popups: dict[str, None] = {}
        #: Refused requests by reason, for the summary.
        self.blocked: Counter[str] = Counter()
        self._nursery: trio.Nursery | None = None
        #: The window Chromium opens at its start (``about:blank``): closed
        #: once our first tab is open, a window and a renderer less.
        self._first_window: list[str] = []

    async def serve(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Set the browser up, then route its events until the pipe closes."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.cdp.send(
                "Browser.setDownloadBehavior", {"behavior": "deny", "eventsEnabled": True}
            )
            await self.cdp.send(
                "Fetch.enable",
                {
                    "patterns": [
                        {"urlPattern": "*", "requestStage": "Request"},
                        # Only requests we let the browser send get here again (rule 1).
                        {"urlPattern": "*", "requestStage": "Response"},
                    ],
                    "handleAuthRequests": True,
                },
            )
            await self.cdp.send(
                "Target.setAutoAttach",
                {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
            )
            answer = await self.cdp.send("Target.getTargets", {})
            self._first_window = [
                info["targetId"]
                for info in answer.get("targetInfos", [])
                if info.get("type") == "page"
            ]
            task_status.started()
            async for event in self._events:
                if event.method == "Fetch.requestPaused":
                    self.route_request(event.params)
                elif event.method == "Fetch.authRequired":
                    self._authenticate(event.params)
                elif event.method == "Target.attachedToTarget":
                    self._attached_to(event)
                elif event.method == "Target.detachedFromTarget":
                    self._attached.pop(event.params.get("targetId", ""), None)
                elif event.method == "Browser.downloadWillBegin":
                    self.blocked["download"] += 1  # denied: nothing is written
            nursery.cancel_scope.cancel()

    # -- targets -------------------------------------------------------------

    async def new_tab(self) -> tuple[str, str]:
        """A new blank tab: ``(target id, session id)``, resumed. Checkpoint."""
        target = (await self.cdp.send("Target.createTarget", NEW_TAB))["targetId"]
        self._own.add(target)
        if target not in self._attached:
            event = self._attach_events.setdefault(target, trio.Event())
            await event.wait()
            self._attach_events.pop(target, None)
        if target not in self._attached:
            raise BrowserClosed("the browser is gone")
        while self._first_window:  # now that a window of ours is open
            with contextlib.suppress(CdpError):
                await self.cdp.send("Target.closeTarget", {"targetId": self._first_window.pop()})
        return target, self._attached[target]

    async def close_tab(self, target: str) -> None:
        self._own.discard(target)
        self.page_ended(target)
        with contextlib.suppress(CdpError):
            await self.cdp.send("Target.closeTarget", {"targetId": target})

    def page_ended(self, target: str) -> None:
        """The render in ``target`` is over: what it still waits for is abandoned."""
        self.lives.pop(target, None)
        for scope in self._pending.pop(target, ()):
            scope.cancel()

    def _attached_to(self, event: CdpEvent) -> None:
        info = event.params["targetInfo"]
        session = event.params["sessionId"]
        target = info["targetId"]
        self._attached[target] = session
        if info.get("type") == "page" and (info.get("openerId") or info.get("openerFrameId")):
            return self._close_popup(target, session, info)
        waiter = self._attach_events.get(target)
        if waiter is not None:  # ours: new_tab waits for it
            waiter.set()
        if info.get("type") == "page":
            return  # ours (Tab.open resumes it), or a stray page: left paused
        if event.params.get("waitingForDebugger"):
            self._fire("Runtime.runIfWaitingForDebugger", {}, session)

    def _close_popup(self, target: str, session: str, info: dict[str, Any]) -> None:
        """Close a page we did not open (rule 2). It is resumed first: its
        opener's ``window.open`` waits for it, and the opener's scripts would
        stop for good if it were closed while paused. Whatever it requests
        in the moment before it closes is failed (``route_request``). A tab
        counts the windows its page opens (``Page.windowOpen``, also those
        Chromium's popup blocker stops); a popup whose opener is not one of
        our tabs is counted here."""
        self._popups[target] = None
        if len(self._popups) > POPUPS_KEPT:
            del self._popups[next(iter(self._popups))]
        if info.get("openerId") not in self._own:
            self.blocked["popup"] += 1
        assert self._nursery is not None
        self._nursery.start_soon(self._resume_and_close, target, session)

    async def _resume_and_close(self, target: str, session: str) -> None:
        """In this order: a popup closed while paused leaves its opener stuck."""
        with contextlib.suppress(CdpError, BrowserClosed):
            await self.cdp.send("Runtime.runIfWaitingForDebugger", {}, session)
        with contextlib.suppress(CdpError, BrowserClosed):
            await self.cdp.send("Target.closeTarget", {"targetId": target})

    # -- logins --------------------------------------------------------------

    def _authenticate(self, params: dict[str, Any]) -> None:
        """Answer a login challenge (rule 4): the proxy's login to the
        proxy, once per request; nothing to a web server (its 401 reaches
        the page as it is)."""
        request_id = params["requestId"]
        challenge = params.get("authChallenge", {})
        login = None
        if challenge.get("source") == "Proxy" and request_id not in self._logged_in:
            login = self._proxy.login_for(challenge.get("origin", ""))
        if login is None:
            self._logged_in.discard(request_id)
            answer: dict[str, str] = {"response": "CancelAuth"}
        else:
            self._logged_in.add(request_id)
            answer = {"response": "ProvideCredentials", "username": login[0], "password": login[1]}
        self._fire(
            "Fetch.continueWithAuth", {"requestId": request_id, "authChallengeResponse": answer}
        )

    # -- requests ------------------------------------------------------------

    def route_request(self, params: dict[str, Any]) -> None:
        """Answer one paused request (rule 1). Not a checkpoint."""
        request_id = params["requestId"]
        if "responseStatusCode" in params or "responseErrorReason" in params:
            return self._response_came(request_id, params)
        url: str = params["request"]["url"]
        kind = resource_kind(params.get("resourceType"), params["request"].get("headers", {}))
        frame = params.get("frameId", "")
        life = self.lives.get(frame)
        if frame in self._popups:  # a popup's navigation, or a script written into it
            return self._fire(
                "Fetch.failRequest", {"requestId": request_id, "errorReason": "BlockedByClient"}
            )
        if life is None and kind == "Document" and frame in self._own:
            # A tab between pages (a late timer of the last one): it goes nowhere.
            return self._fail(request_id, "client_redirect", None)
        if life is not None:
            life.request_started(trio.current_time())
            if kind == "Document":
                step = life.document_request(url, navigation="networkId" in params)
                if step is DocumentStep.FULFILL:
                    return self._fulfill(request_id, life.result)
                if step is DocumentStep.CLIENT_REDIRECT:
                    # 204 to a navigation: the tab stays on the page, whose DOM
                    # is still read (its links count if the target is a download).
                    return self._fire(
                        "Fetch.fulfillRequest",
                        {"requestId": request_id, "responseCode": 204, "responseHeaders": []},
                    )
                return self._fail(request_id, "client_redirect", life)  # a download
        verdict = self._policy.judge(url, kind)
        if verdict is Verdict.ALLOW:
            return self._send(request_id, params, life)
        if verdict is not Verdict.ROBOTS:
            return self._fail(request_id, verdict.value, life)
        assert self._robots is not None
        cached, fetch = self._robots
        try:
            policy = cached(url)
        except ValueError:
            return self._fail(request_id, "scheme", life)
        if policy is not None:
            return self._robots_answer(request_id, params, policy, life)
        assert self._nursery is not None

        async def ask_robots() -> None:
            try:
                answer = await fetch(url)
            except ValueError:
                return self._fail(request_id, "scheme", life)
            self._robots_answer(request_id, params, answer, life)

        self._nursery.start_soon(ask_robots)

    def _robots_answer(
        self, request_id: str, params: dict[str, Any], policy: RobotsPolicy, life: PageLife | None
    ) -> None:
        url = params["request"]["url"]
        if policy.allows(url):
            self._requests.robots_read(url, policy.crawl_delay)
            self._send(request_id, params, life)
        else:
            self._fail(request_id, "robots", life)

    def _send(self, request_id: str, params: dict[str, Any], life: PageLife | None) -> None:
        """An allowed request goes out through the crawl (rule 1), bounded
        by ``request_limit`` and, for a page's own, by its render."""
        assert self._nursery is not None
        scope = trio.CancelScope(deadline=trio.current_time() + self._request_limit)
        frame = params.get("frameId", "") if life is not None else ""
        if frame:
            self._pending.setdefault(frame, set()).add(scope)
        page = None if life is None else life.url
        self._nursery.start_soon(self._forward, request_id, params["request"], scope, frame, page)

    async def _forward(
        self,
        request_id: str,
        request: dict[str, Any],
        scope: trio.CancelScope,
        frame: str,
        page: str | None,
    ) -> None:
        url: str = request["url"]
        headers: dict[str, str] = request.get("headers", {})
        reason = "Aborted"  # the render ended, or the request took too long
        continued = False
        try:
            with scope:
                await self._sync_cookies(url, headers)
                if request.get("method", "GET") != "GET":  # held until its response
                    async with self._requests.turn(url):
                        self._requests.sent += 1
                        continued = True  # from now on the browser's to finish
                        answered = self._answered[request_id] = trio.Event()
                        try:
                            self._fire("Fetch.continueRequest", {"requestId": request_id})
                            await answered.wait()
                        finally:
                            self._answered.pop(request_id, None)
                    return
                answer = await self._requests.for_browser(url, headers, page)
                return self._fulfill(request_id, answer)
        except FetchError as exc:
            reason = _ERROR_REASONS.get(exc.kind, "Failed")
        except NoTurn:
            pass
        finally:
            pending = self._pending.get(frame)
            if pending is not None:
                pending.discard(scope)
        if not continued:
            self._requests.failed += 1
            self._fire("Fetch.failRequest", {"requestId": request_id, "errorReason": reason})

    async def _sync_cookies(self, url: str, headers: dict[str, str]) -> None:
        """The browser would send cookies the crawl's jar may lack (a
        script's ``document.cookie``): the jar gets the browser's cookies
        for ``url`` first, within the crawl's scope (``jar``), so the crawl's
        request carries them. Once per change of the browser's header."""
        sent = next((v for k, v in headers.items() if k.lower() == "cookie"), "")
        if self._jar is None or not sent:
            return
        host = urlsplit(url).netloc
        if self._synced.get(host) == sent:
            return
        self._synced[host] = sent
        with contextlib.suppress(CdpError, BrowserClosed):  # then: the jar as it is
            answer = await self.cdp.send("Storage.getCookies", {})
            keep_page_cookies(self._jar, answer.get("cookies", []), url, self._policy.in_scope)

    def _response_came(self, request_id: str, params: dict[str, Any]) -> None:
        """A request the browser sent itself has its answer: its host's slot
        is free, and the answer goes on to the page."""
        answered = self._answered.pop(request_id, None)
        if answered is not None:
            answered.set()
        error = params.get("responseErrorReason")
        if error:
            self._fire("Fetch.failRequest", {"requestId": request_id, "errorReason": error})
        else:
            self._fire("Fetch.continueRequest", {"requestId": request_id})

    def _fulfill(self, request_id: str, result: FetchResult) -> None:
        self._fire(
            "Fetch.fulfillRequest",
            {
                "requestId": request_id,
                "responseCode": result.status,
                "responseHeaders": fulfilled_headers(result),
                "body": base64.b64encode(result.body).decode("ascii"),
            },
        )

    def _fail(self, request_id: str, reason: str, life: PageLife | None) -> None:
        if reason != "client_redirect":
            self.blocked[reason] += 1
            if life is not None:
                life.blocked[reason] += 1
        self._fire(
            "Fetch.failRequest", {"requestId": request_id, "errorReason": "BlockedByClient"}
        )

    def _fire(self, method: str, params: dict[str, Any], session: str | None = None) -> None:
        assert self._nursery is not None
        self.cdp.send_nowait_ignored(self._nursery, method, params, session)
