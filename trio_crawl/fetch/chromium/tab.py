"""One tab and one page's life in it: navigate, settle, read the DOM.

Rules:

1. ``render`` arms the tab for the page (``session.lives``), navigates, and
   while it runs watches the tab's events: a dialog is dismissed at once, a
   window the page opens is counted as a refused ``popup``, a
   crash ends the render (``RenderFailed``), the ``load`` lifecycle event of
   this navigation (matched by its loader id) starts the quiet wait.
2. The page settles ``QUIET`` seconds after the later of its load event,
   its last scroll and its last request, with no request in flight (the
   tab's ``Network`` events; ``PageLife`` rule 3), or as soon as it is
   still (``quiet``: nothing in flight, no short timer or animation frame
   pending, the DOM unchanged), or when ``render_wait`` runs out,
   whichever comes first; the DOM is read then, whatever the page is doing.
3. The DOM is read by one ``Runtime.evaluate``: the document serialised
   with its open shadow roots (``getHTML``), a ``<base>`` with the
   document's URL (a ``pushState`` route changes it) and, when the URL
   changed, a link to it. A page whose scripts never yield cannot answer:
   the caller's deadline ends the render and the tab is thrown away
   (``discard`` stops the script first).
4. A tab that failed is never reused.
5. A tab is a visible, focused desktop window (``VISIBLE``; each in a
   window of its own, ``session.NEW_TAB``), and a settled page is scrolled
   to its end a window at a time until it stops growing (``SCROLL``, at
   most ``SCROLL_STEPS`` windows, within ``render_wait``), each scroll
   followed by the wait of rule 2: what a lazy list's observer fetches is
   waited for. Measured on lazy lists, feeds and a gallery, a 1280x12000
   window without scrolling found the first batch of each list only (its
   sentinel never left the window) and 30 of 40 gallery tiles; a 1280x800
   window with scrolling found all of them, for 1 to 2 s more per list.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import trio

from .cdp import BrowserClosed, CdpError, CdpEvent
from .life import PageLife
from .quiet import PROBE, STILL, WATCH, is_still
from .session import BrowserSession

__all__ = ["READ_DOM", "RenderFailed", "Tab"]


class RenderFailed(Exception):
    """A render gave nothing usable; ``kind`` as ``RenderFailure`` names it
    (``crash``, ``no_dom``)."""

    def __init__(self, message: str, kind: str = "no_dom") -> None:
        super().__init__(message)
        self.kind = kind


#: Serialise the rendered document (rule 3); ``(URL)`` is the URL navigated to.
READ_DOM = r"""
((navigated) => {
  const roots = [];
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      if (el.shadowRoot) { roots.push(el.shadowRoot); walk(el.shadowRoot); }
    }
  };
  walk(document);
  const root = document.documentElement;
  if (!root) return '';
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  const inner = root.getHTML ? root.getHTML({serializableShadowRoots: true, shadowRoots: roots})
                             : root.innerHTML;
  const base = document.querySelector('base[href]') ? '' :
    '<base href="' + esc(document.baseURI) + '">';
  const moved = location.href === navigated ? '' : '<a href="' + esc(location.href) + '"></a>';
  return '<!DOCTYPE html><html><head>' + base + '</head>' + inner + moved + '</html>';
})"""


#: Width and height of a tab's window, in CSS pixels: a desktop browser's.
VIEWPORT = (1280, 800)

#: Make the tab a visible, focused desktop window (rule 5): a tab the browser
#: created for us is hidden and unfocused, and a hidden page's rendering
#: steps (where ``IntersectionObserver`` callbacks run) may never come.
VISIBLE: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "Emulation.setDeviceMetricsOverride",
        {"width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False},
    ),
    ("Emulation.setFocusEmulationEnabled", {"enabled": True}),
    ("Page.setWebLifecycleState", {"state": "active"}),
)


#: The most windows a page is scrolled by (rule 5): an endless feed ends.
SCROLL_STEPS = 40

#: Scroll down a window at a time, up to ``(steps)`` windows, waiting a
#: rendering step after each (``IntersectionObserver`` callbacks run
#: there). At the end, wait for the page to grow (two rendering steps, each
#: followed by an idle moment: observers' callbacks have run by then,
#: however busy the machine; 300 ms at most each); if it does not, scroll a
#: window up and down again once (a sentinel that never left the window
#: fires again when it comes back) and wait again. Say how many windows
#: were scrolled and the height at the end.
SCROLL = r"""
(async (most) => {
  const frame = () => new Promise((done) => {
    requestAnimationFrame(() => requestAnimationFrame(done)); setTimeout(done, 100); });
  const root = document.scrollingElement || document.documentElement;
  if (!root) return {steps: 0, height: 0};
  const idle = () => new Promise((done) => requestIdleCallback(done, {timeout: 300}));
  const grew = async (height) => {
    for (let i = 0; i < 2 && root.scrollHeight === height; i++) { await frame(); await idle(); }
    return root.scrollHeight !== height;
  };
  let steps = 0;
  while (steps < most) {
    if (root.scrollTop + innerHeight < root.scrollHeight - 1) {
      root.scrollTop = root.scrollTop + innerHeight; steps++; await frame(); continue;
    }
    if (steps === 0) break;  // it fits in its window
    const height = root.scrollHeight;
    if (await grew(height)) continue;
    root.scrollTop = root.scrollTop - innerHeight; await frame();
    root.scrollTop = root.scrollHeight; steps++; await frame();
    if (!(await grew(height))) break;
  }
  return {steps, height: root.scrollHeight};
})"""

#: The document's height now (has it grown since the last scroll?).
GROWN = "(document.scrollingElement || document.documentElement || {}).scrollHeight"


class Tab:
    """A tab of one browser session, reused for page after page."""

    def __init__(self, session: BrowserSession, target: str, session_id: str) -> None:
        self.session = session
        self.target = target
        self.session_id = session_id
        self._events = session.cdp.subscribe(session_id)
        self._changed = trio.Event()
        self.renders = 0

    @classmethod
    async def open(cls, session: BrowserSession) -> Tab:
        """A new tab, set up and resumed. Checkpoint."""
        target, session_id = await session.new_tab()
        tab = cls(session, target, session_id)
        setup: tuple[tuple[str, dict[str, Any]], ...] = (
            ("Page.enable", {}),
            ("Page.setLifecycleEventsEnabled", {"enabled": True}),
            ("Inspector.enable", {}),
            ("Network.enable", {"maxPostDataSize": 0}),
            ("Network.setBlockedURLs", {"urls": ["ws://*", "wss://*"]}),
            *VISIBLE,
            ("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH}),
            ("Runtime.runIfWaitingForDebugger", {}),
        )
        for method, params in setup:
            await tab._send(method, params)
        return tab

    async def _send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.session.cdp.send(method, params, self.session_id)

    async def render(self, life: PageLife, render_wait: float, cookies: bool = False) -> str:
        """The page's rendered DOM (rules 1-3). Checkpoint; the caller owns
        the overall deadline. Raises ``RenderFailed``, ``BrowserClosed``."""
        self.renders += 1
        self._drain()
        self.session.lives[self.target] = life
        loaded = trio.Event()
        loader: list[str] = []
        loads: set[str] = set()
        html: str | None = None
        failure: Exception | None = None
        try:
            async with trio.open_nursery() as nursery:

                def on_event(event: CdpEvent) -> None:
                    if event.method == "Page.javascriptDialogOpening":
                        self.session.blocked["dialog"] += 1
                        self.session.cdp.send_nowait_ignored(
                            nursery,
                            "Page.handleJavaScriptDialog",
                            {"accept": False},
                            self.session_id,
                        )
                    elif event.method == "Page.windowOpen":
                        # A popup: stopped by Chromium's blocker (no user
                        # gesture) or closed by the session before it runs.
                        self.session.blocked["popup"] += 1
                    elif event.method == "Inspector.targetCrashed":
                        life.crashed = True
                        nursery.cancel_scope.cancel()
                    elif event.method == "Network.requestWillBeSent":
                        life.request_sent(event.params["requestId"], trio.current_time())
                        self._changed.set()
                    elif event.method in ("Network.loadingFinished", "Network.loadingFailed"):
                        life.request_ended(event.params["requestId"], trio.current_time())
                        self._changed.set()
                    elif event.method == "Page.lifecycleEvent":
                        params = event.params
                        if params.get("name") == "load" and params.get("frameId") == self.target:
                            loads.add(params.get("loaderId", ""))
                            if loader and loader[0] in loads:
                                loaded.set()

                async def watch() -> None:
                    async for event in self._events:
                        on_event(event)
                    life.crashed = True  # the browser went away
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                try:
                    html = await self._steps(life, render_wait, loaded, loader, loads, cookies)
                except (RenderFailed, BrowserClosed, CdpError) as exc:
                    failure = exc  # raised bare below, not in the nursery's group
                nursery.cancel_scope.cancel()
        finally:
            self.session.page_ended(self.target)
        if life.crashed:
            raise RenderFailed("the tab crashed", "crash")
        if failure is not None:
            raise failure
        if html is None:
            raise RenderFailed("the render was cut short", "crash")
        return html

    async def _steps(
        self,
        life: PageLife,
        render_wait: float,
        loaded: trio.Event,
        loader: list[str],
        loads: set[str],
        cookies: bool,
    ) -> str:
        """Navigate, wait for the page to settle, read its DOM (rules 1-3)
        and, if asked, its cookies (``life.cookies``)."""
        answer = await self._send("Page.navigate", {"url": life.url})
        error = answer.get("errorText")
        if error and life.client_redirect is None:
            raise RenderFailed(f"navigation failed: {error}")
        loader.append(str(answer.get("loaderId", "")))
        if loader[0] in loads:
            loaded.set()
        life.on_leave = loaded.set
        if life.client_redirect is not None:  # it left while we navigated
            loaded.set()
        with trio.move_on_after(render_wait):
            await loaded.wait()
            life.load(trio.current_time())
            await self._settle(life)
            await self._scroll(life)
        if cookies:
            with contextlib.suppress(CdpError):  # then: none read, the jar as it is
                answer = await self._send("Network.getCookies", {"urls": [life.url]})
                life.cookies = list(answer.get("cookies", []))
        return await self._read_dom(life.url)

    async def _settle(self, life: PageLife) -> None:
        """Wait until the page counts as settled (rule 2), or is still
        sooner (``quiet``: nothing in flight or pending, the DOM unchanged)."""
        while True:  # each request seen moves the settling time on
            at = life.settled_at()
            now = trio.current_time()
            if at is not None and now >= at:
                return
            wake = math.inf if at is None else at
            if at is not None:  # loaded, nothing in flight
                quiet_from = life.last_request_at + STILL
                if now >= quiet_from:
                    if await self._still():
                        return
                    quiet_from = trio.current_time() + STILL
                wake = min(wake, quiet_from)
            self._changed = trio.Event()  # set by the next network event
            with trio.move_on_at(wake):
                await self._changed.wait()

    async def _still(self) -> bool:
        """Whether the page's watcher says nothing is left to do (``quiet``)."""
        try:
            probe = {"expression": PROBE, "returnByValue": True}
            answer = await self._send("Runtime.evaluate", probe)
        except CdpError:
            return False
        return is_still(answer.get("result", {}).get("value"))

    async def _scroll(self, life: PageLife) -> None:
        """Scroll to the end of the page, a window at a time, until it stops
        growing (rule 5); bounded by ``SCROLL_STEPS`` windows and by the
        caller's ``render_wait``. A page that fits in its window, or that
        is leaving, is not scrolled; one whose scripts broke the scrolling
        (an error answer) is read as it is."""
        with contextlib.suppress(CdpError):
            await self._scroll_steps(life)

    async def _scroll_steps(self, life: PageLife) -> None:
        steps = SCROLL_STEPS
        while steps > 0 and life.client_redirect is None:
            answer = await self._send(
                "Runtime.evaluate",
                {"expression": f"{SCROLL}({steps})", "awaitPromise": True, "returnByValue": True},
            )
            value = answer.get("result", {}).get("value")
            if not isinstance(value, dict) or not value.get("steps"):
                return  # nothing to scroll (or a page that broke the script)
            steps -= int(value["steps"])
            height = value.get("height")
            life.moved(trio.current_time())
            await self._settle(life)  # what the last windows asked for
            answer = await self._send(
                "Runtime.evaluate",
                {"expression": GROWN, "returnByValue": True},
            )
            if answer.get("result", {}).get("value") == height:
                return  # it stopped growing

    async def _read_dom(self, url: str) -> str:
        expression = f"{READ_DOM}({json.dumps(url)})"
        try:
            answer = await self._send(
                "Runtime.evaluate", {"expression": expression, "returnByValue": True}
            )
        except CdpError as exc:
            raise RenderFailed(f"cannot read the DOM: {exc}") from None
        if "exceptionDetails" in answer:
            raise RenderFailed("cannot read the DOM: the serialiser threw")
        value = answer.get("result", {})
        html = value.get("value") if isinstance(value, dict) else None
        if not isinstance(html, str):
            raise RenderFailed("cannot read the DOM: no document")
        return html

    def _drain(self) -> None:
        """Drop events left over from the previous page."""
        while True:
            try:
                self._events.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return

    async def discard(self) -> None:
        """Stop whatever the page runs and close the tab. Bounded; never raises."""
        self.session.cdp.unsubscribe(self.session_id)
        with trio.move_on_after(2):
            with contextlib.suppress(Exception):
                await self._send("Runtime.terminateExecution", {})
        with trio.move_on_after(2):
            with contextlib.suppress(Exception):
                await self.session.close_tab(self.target)
