"""One tab and one page's life in it: navigate, settle, read the DOM.

Rules:

1. ``render`` arms the tab for the page (``session.lives``), navigates, and
   while it runs watches the tab's events: a dialog is dismissed at once, a
   window the page opens is counted as a refused ``popup``, a
   crash ends the render (``RenderFailed``), the ``load`` lifecycle event of
   this navigation (matched by its loader id) starts the quiet wait.
2. The page settles ``QUIET`` seconds after the later of its load event
   and its last request, with no request in flight (the tab's ``Network``
   events; ``PageLife`` rule 3), or when ``render_wait`` runs out,
   whichever comes first; the DOM is read then, whatever the page is doing.
3. The DOM is read by one ``Runtime.evaluate``: the document serialised
   with its open shadow roots (``getHTML``), a ``<base>`` with the
   document's URL (a ``pushState`` route changes it) and, when the URL
   changed, a link to it. A page whose scripts never yield cannot answer:
   the caller's deadline ends the render and the tab is thrown away
   (``discard`` stops the script first).
4. A tab that failed is never reused.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import trio

from .cdp import BrowserClosed, CdpError, CdpEvent
from .life import PageLife
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
        for method, params in (
            ("Page.enable", {}),
            ("Page.setLifecycleEventsEnabled", {"enabled": True}),
            ("Inspector.enable", {}),
            ("Network.enable", {"maxPostDataSize": 0}),
            ("Network.setBlockedURLs", {"urls": ["ws://*", "wss://*"]}),
            ("Runtime.runIfWaitingForDebugger", {}),
        ):
            await tab._send(method, params)
        return tab

    async def _send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.session.cdp.send(method, params, self.session_id)

    async def render(self, life: PageLife, render_wait: float) -> str:
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
                    html = await self._steps(life, render_wait, loaded, loader, loads)
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
    ) -> str:
        """Navigate, wait for the page to settle, read its DOM (rules 1-3)."""
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
            while True:  # each request seen moves the settling time on
                at = life.settled_at()
                if at is not None and trio.current_time() >= at:
                    break
                self._changed = trio.Event()  # set by the next network event
                with trio.move_on_at(math.inf if at is None else at):
                    await self._changed.wait()
        return await self._read_dom(life.url)

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
