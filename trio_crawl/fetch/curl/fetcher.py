"""The libcurl fetcher: pycurl's multi interface, driven natively by trio.

Rules:

1. libcurl never blocks and never owns a thread of ours. It tells us which
   sockets it wants watched (``M_SOCKETFUNCTION``) and when it wants to be
   called back (``M_TIMERFUNCTION``); one driver task waits for exactly those
   with trio (``watch``) and answers with ``socket_action``. No polling, no
   threads (libcurl's own resolver thread, where built in, is libcurl's
   business).
2. A pool of easy handles (``handle.Slot``), at most one per allowed
   connection (``FetchConfig.max_connections``), made when first needed (a
   sized crawl allows thousands and uses what its workers use). A fetch
   borrows one, a cancelled or finished fetch gives it back. Connections
   outlive handles: libcurl keeps them alive in the multi's connection cache.
3. The driver removes a finished transfer from the multi as soon as
   ``info_read`` reports it (its connection returns to the cache at once) and
   wakes the waiting ``fetch`` through the slot's ``trio.Event``.
4. Cancellation at any checkpoint of ``fetch`` (pool wait, connect, head,
   body) removes the handle from the multi if it is still there, resets it
   and returns it to the pool, synchronously: the cleanup has no checkpoint,
   so it cannot be interrupted half-way. A transfer that has finished is
   delivered even if a cancel arrives before its fetch resumes (the wake-up
   is not a checkpoint); the cancel lands at the caller's next checkpoint.
5. libcurl callbacks never raise into libcurl. An exception inside one is our
   bug: it is kept and re-raised loudly by whoever called into libcurl (the
   driver, ending the crawl, or the ``fetch`` whose transfer it was).
6. A failed transfer is a ``CurlError`` raised inside
   ``errors.translated_errors``, the path every fetcher's failures take, with
   ``curl.errors.error_kind`` as the classifier. Bad input (a control
   character in the URL, a line break in a header) is refused first by
   ``fetch.request``, as in every fetcher. The decisions about one response
   (1xx heads, header folding, the status code, the HTML-only skip, the
   size cap, decoding, one request per transfer) live in the pure
   ``Collector``.
7. Behaviour matches ``HttpxFetcher``: exceptions leave ``open_curl_fetcher``
   bare, not in an exception group; an unwanted (non-HTML) body is skipped,
   and drained only when its declared length is small enough that keeping
   the connection is cheaper than closing it; a wanted body over
   ``max_bytes`` (declared, or counted after decoding) is
   ``FetchError("too_large")``.

Theory of operation. ``open_curl_fetcher`` starts ``CurlFetcher._drive``,
which loops: wait until one of curl's sockets is ready or curl's timer
expires (the timer is the deadline of a cancel scope, moved by the timer
callback), call ``socket_action`` for what happened, then ``info_read`` to
finish transfers. A new transfer is started by the ``fetch`` that adds it
(``socket_action(SOCKET_TIMEOUT)`` right after ``add_handle``): going
through curl's 0 ms timer instead would cost a driver wake-up per request.

The timer only ever moves the driver's deadline earlier (``_wake_by``):
libcurl moves its timer on every transfer (0 ms when one is added, its
connect timeout, none once it is done), and a later or no timer leaves the
deadline where it was; the driver, woken early, finds the timer not due and
waits again with the right deadline. Each move of a deadline costs trio a
re-registration, and a crawl's timer mostly moves later (one spurious wake
per connect timeout, 10 s, instead of three re-registrations per request).
"""

from __future__ import annotations

import math
import os
import select
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pycurl
import trio

from ...core.http import FetchConfig
from ...core.models import FetchResult
from ...core.proxy import ProxyChooser
from ...errors import FetchError
from ..errors import translated_errors
from ..identity import Identity
from ..request import check_url, request_headers
from ..tls import ca_locations
from .errors import error_kind
from .handle import Slot, find_ca_bundle
from .watch import CSELECT_IN, CSELECT_OUT, EpollWatcher, TaskWatcher, Watcher

__all__ = ["CurlFetcher", "CurlFetcherStatistics", "WatcherName", "open_curl_fetcher"]

WatcherName = Literal["auto", "epoll", "tasks"]

_IN, _OUT = CSELECT_IN, CSELECT_OUT
#: libcurl checks an idle connection's life once a second at most: a dead
#: one is pruned by then (``CurlFetcher._bury``).
_DEAD_SECONDS = 5.0
_DEAD_KEPT = 64  # entries kept before the old ones are swept
_POLL_REMOVE: int = pycurl.POLL_REMOVE
_SOCKET_TIMEOUT: int = pycurl.SOCKET_TIMEOUT


@dataclass(frozen=True, slots=True)
class CurlFetcherStatistics:
    """A snapshot of a ``CurlFetcher``.

    ``handles``: easy handles made so far (at most ``max_connections``);
    ``handles_free``: handles no fetch is holding; ``transfers``: handles
    added to the multi right now; ``sockets_watched``: sockets curl asks us
    to watch right now (libcurl 8 watches only busy ones); ``closed``: whether
    ``aclose`` ran.
    """

    handles: int
    handles_free: int
    transfers: int
    sockets_watched: int
    closed: bool


class CurlFetcher:
    """Fetch pages with libcurl. Create it with ``open_curl_fetcher``.

    ``fetch`` may be called from any number of tasks at once; at most
    ``max_connections`` transfers run, the others wait for a handle (that
    wait counts against ``FetchConfig.timeout``).
    """

    def __init__(self, config: FetchConfig, *, watcher: WatcherName = "auto") -> None:
        if watcher == "auto":
            watcher = "epoll" if hasattr(select, "epoll") else "tasks"
        self.config = config
        self._watcher_name = watcher
        self._watcher: Watcher | None = EpollWatcher() if watcher == "epoll" else None
        ca = ca_locations(config.ca_bundle, os.environ, curl=True)
        if ca == (None, None):
            ca = (find_ca_bundle(ssl.get_default_verify_paths().cafile, os.path.isfile), None)
        self._identity = Identity(config)
        self._proxies = ProxyChooser(config.proxy, os.environ)
        self._ca = ca
        self._slots: list[Slot] = []
        self._free: list[Slot] = []
        self._pool = trio.Semaphore(config.max_connections)
        self._running: dict[Any, Slot] = {}  # easy handle -> its slot, while in the multi
        #: dead connections libcurl keeps, by local (address, port): ``_bury``
        self._dead: dict[tuple[str, int], float] = {}
        self._callback_bugs: list[BaseException] = []
        self._timer_at = math.inf
        self._timer_scope: trio.CancelScope | None = None
        self._adding = False  # inside add_handle: the 0 ms timer is served at once
        self._driver_scope: trio.CancelScope | None = None
        self._closed = False
        #: trio's clock; ``_drive`` binds the run's clock itself (one call, not
        #: three frames of ``trio.current_time``: several reads per page)
        self._now: Callable[[], float] = trio.current_time
        multi: Any = pycurl.CurlMulti()
        n = config.max_connections
        multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, n)
        multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, n)  # per-host politeness is the engine's job
        # Idle connections kept for reuse: as many as handles made so far (the
        # most transfers at once), not ``n``: a self-sized crawl allows thousands
        # and would keep an idle connection to every host it met.
        multi.setopt(pycurl.M_MAXCONNECTS, 1)
        multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self._multi = multi

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<CurlFetcher watcher={self._watcher_name} free={s.handles_free}/{s.handles} "
            f"transfers={s.transfers} sockets={s.sockets_watched} closed={s.closed}>"
        )

    def statistics(self) -> CurlFetcherStatistics:
        return CurlFetcherStatistics(
            handles=len(self._slots),
            handles_free=len(self._free),
            transfers=len(self._running),
            sockets_watched=len(self._watcher) if self._watcher is not None else 0,
            closed=self._closed,
        )

    # -- the public surface ----------------------------------------------------

    async def fetch(
        self, url: str, headers: dict[str, str] | None = None, *, any_body: bool = False
    ) -> FetchResult:
        """GET ``url`` once, without following redirects. A checkpoint.

        ``any_body=True`` keeps the body whatever its content type (robots.txt,
        sitemaps), overriding ``FetchConfig.html_only`` for this call.

        Cancellation at any point returns the handle to the pool and leaves
        the fetcher usable. Raises ``FetchError`` for network and protocol
        failures (kinds: ``curl.errors``), ``RuntimeError`` once closed.
        """
        self._check_usable()
        await trio.lowlevel.checkpoint_if_cancelled()
        with translated_errors(error_kind, self.config.timeout):
            check_url(url)
            sent = request_headers(self._identity.outgoing(url, headers))
            outcome = await self._transfer(url, sent, any_body)
            if not isinstance(outcome, FetchResult):
                raise outcome
            return outcome

    async def _transfer(
        self, url: str, headers: dict[str, str] | None, any_body: bool
    ) -> FetchResult | Exception:
        """Borrow a handle, run one transfer on it, give the handle back."""
        deadline = self._now() + self.config.timeout
        try:
            self._pool.acquire_nowait()  # the usual case: no scope needed
        except trio.WouldBlock:
            with trio.move_on_at(deadline) as pool_wait:
                await self._pool.acquire()
            if pool_wait.cancelled_caught:
                raise FetchError(
                    "timeout", f"no free handle within {self.config.timeout} s"
                ) from None
        try:
            self._check_usable()
            if not self._free:  # the semaphore counts the handles not yet made
                self._slots.append(Slot(self.config, self._ca, self._dead))
                self._free.append(self._slots[-1])
                self._multi.setopt(pycurl.M_MAXCONNECTS, len(self._slots))
            slot = self._free.pop()
            try:
                self._start(slot, url, headers, any_body, deadline)
                await slot.done.wait()
                if slot.refused_dead:  # nothing was sent: again, on another connection
                    self._start(slot, url, headers, any_body, deadline)
                    await slot.done.wait()
                outcome = slot.outcome()
                if isinstance(outcome, FetchResult):
                    self._identity.received(url, slot.collector.set_cookies)
                return outcome
            except BaseException:
                self._abandon(slot)
                raise
            finally:
                self._free.append(slot)
        finally:
            self._pool.release()

    def _bury(self, local: tuple[str, int] | None, now: float) -> None:
        """The connection at ``local`` closed mid-head, and libcurl, which saw
        the transfer end without error, keeps it for reuse: the next request
        sent on it would be lost (handle rule 4). Forgotten after
        ``_DEAD_SECONDS``, by when libcurl has pruned it itself."""
        if local is None:
            return
        if len(self._dead) >= _DEAD_KEPT:
            for key, when in list(self._dead.items()):
                if now - when > _DEAD_SECONDS:
                    del self._dead[key]
        self._dead[local] = now

    async def aclose(self) -> None:
        """Stop the driver, close every handle and the multi. Idempotent.

        Fetches still running raise ``RuntimeError``; later ones too.
        """
        self._close()
        await trio.lowlevel.checkpoint()

    # -- lending handles -------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError("fetch() on a closed CurlFetcher")
        if self._driver_scope is None:
            raise RuntimeError("CurlFetcher is not running: create it with open_curl_fetcher()")

    def _start(
        self,
        slot: Slot,
        url: str,
        headers: dict[str, str] | None,
        any_body: bool,
        deadline: float,
    ) -> None:
        now = self._now()
        slot.begin(url, headers, deadline - now, any_body, self._proxies.proxy_for(url))
        slot.started = now
        self._adding = True
        try:
            self._multi.add_handle(slot.curl)
        finally:
            self._adding = False
        self._running[slot.curl] = slot
        self._raise_callback_bugs()
        # Start it now (connect, or send on a kept-alive connection) rather
        # than through curl's timer, which would cost the driver a wake-up.
        self._socket_action(_SOCKET_TIMEOUT, 0)
        self._wake_by(self._timer_at)  # whatever timer curl has now

    def _abandon(self, slot: Slot) -> None:
        """Take back a handle whose fetch left early (rule 4). No checkpoint."""
        if self._closed:
            return
        if self._running.pop(slot.curl, None) is not None:
            self._multi.remove_handle(slot.curl)
        slot.reset()
        self._raise_callback_bugs()

    # -- libcurl callbacks (rule 5: never raise into libcurl) -------------------

    def _on_socket(self, what: int, fd: int, multi: Any, socketp: Any) -> None:
        try:
            watcher = self._watcher
            if watcher is None or self._closed:
                return
            if what == _POLL_REMOVE:
                watcher.unwatch(fd)
            else:
                watcher.watch(fd, what & (_IN | _OUT))
        except BaseException as exc:
            self._callback_bugs.append(exc)

    def _on_timer(self, timeout_ms: int) -> None:
        try:
            if timeout_ms < 0:
                self._timer_at = math.inf
            else:
                self._timer_at = self._now() + timeout_ms / 1000
                if not self._adding:  # _start serves that one itself
                    self._wake_by(self._timer_at)
        except BaseException as exc:
            self._callback_bugs.append(exc)

    def _wake_by(self, at: float) -> None:
        """Have the parked driver wake by ``at``: its deadline only ever moves
        earlier (module docstring); it waits again if woken before the timer."""
        scope = self._timer_scope
        if scope is not None and at < scope.deadline:
            scope.deadline = at

    def _raise_callback_bugs(self) -> None:
        if self._callback_bugs:
            bug = self._callback_bugs[0]
            self._callback_bugs.clear()
            raise bug

    # -- the driver --------------------------------------------------------------

    async def _drive(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Wait for what libcurl asked for, then let it act (rule 1)."""
        self._now = trio.lowlevel.current_clock().current_time
        async with trio.open_nursery() as nursery:
            if self._watcher is None:
                self._watcher = TaskWatcher(nursery, self._socket_action)
            watcher = self._watcher
            self._driver_scope = nursery.cancel_scope
            if self._closed:
                nursery.cancel_scope.cancel()
            task_status.started()
            while True:
                with trio.CancelScope(deadline=self._timer_at) as timer:
                    self._timer_scope = timer
                    await watcher.wait()
                self._timer_scope = None
                if self._closed:
                    return  # woke by readiness just as we were closed
                watcher.dispatch(self._socket_action)
                if self._timer_at <= self._now():
                    self._timer_at = math.inf  # curl sets a new one if it needs it
                    self._socket_action(_SOCKET_TIMEOUT, 0)

    def _socket_action(self, fd: int, bits: int) -> None:
        if self._closed:
            return
        self._multi.socket_action(fd, bits)
        self._raise_callback_bugs()
        self._collect()

    def _collect(self) -> None:
        """Finish every transfer libcurl reports done (rule 3)."""
        while True:
            queued, ok, failed = self._multi.info_read()
            if not (ok or failed):
                return  # most calls: nothing finished (queued is 0 then)
            now = self._now()
            for curl in ok:
                self._finish(curl, 0, "", now)
            for curl, code, message in failed:
                self._finish(curl, int(code), str(message), now)
            if not queued:
                return

    def _finish(self, curl: Any, code: int, message: str, now: float) -> None:
        slot = self._running.pop(curl)
        self._multi.remove_handle(curl)
        if not code and not slot.collector.head_done:  # here, before any other transfer starts
            self._bury(slot.local, now)
        slot.finish(code, message, now)

    # -- closing -----------------------------------------------------------------

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._driver_scope is not None:
            self._driver_scope.cancel()
        for curl, slot in self._running.items():
            self._multi.remove_handle(curl)
            slot.closed = True
            slot.done.set()
        self._running.clear()
        for slot in self._slots:
            slot.curl.close()
        self._multi.close()
        if self._watcher is not None:
            self._watcher.close()
        self._callback_bugs.clear()


@asynccontextmanager
async def open_curl_fetcher(
    config: FetchConfig | None = None, *, watcher: WatcherName = "auto"
) -> AsyncIterator[CurlFetcher]:
    """A running ``CurlFetcher`` for the duration of the block.

    Owns the nursery of the driver task; on exit (even when cancelled)
    removes and closes every handle and the multi. An exception leaving the
    block leaves it bare, as with ``open_httpx_fetcher``, not wrapped in an
    exception group by our nursery. ``watcher`` picks how sockets are waited
    for (module docstring); ``"auto"`` is epoll on Linux, tasks elsewhere.
    """
    fetcher = CurlFetcher(config if config is not None else FetchConfig(), watcher=watcher)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(fetcher._drive)
            try:
                yield fetcher
            finally:
                fetcher._close()
    except BaseExceptionGroup as group:
        single = _only_exception(group)
        if single is None:
            raise
        raise single from single.__cause__
    finally:
        fetcher._close()


def _only_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The exception inside nested one-member groups, or ``None`` if there are several."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        if len(exc.exceptions) != 1:
            return None
        exc = exc.exceptions[0]
    return exc
