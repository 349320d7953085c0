"""The libcurl fetcher: pycurl's multi interface, driven natively by trio.

Rules:

1. libcurl never blocks and never owns a thread of ours. It tells us which
   sockets it wants watched (``M_SOCKETFUNCTION``) and when it wants to be
   called back (``M_TIMERFUNCTION``); one driver task waits for exactly those
   with trio and answers with ``socket_action``. No polling, no threads
   (libcurl's own resolver thread, where built in, is libcurl's business).
2. A fixed pool of easy handles, one per allowed connection
   (``FetchConfig.max_connections``). A fetch borrows one, a cancelled or
   finished fetch gives it back. Connections outlive handles: libcurl keeps
   them alive in the multi's connection cache.
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
6. curl error codes become ``FetchError`` kinds in exactly one place,
   ``error_kind``. The decisions about one response (1xx heads, header
   folding, the HTML-only skip, the size cap) live in the pure ``Collector``.
7. Behaviour matches ``HttpxFetcher``: exceptions leave ``open_curl_fetcher``
   bare, not in an exception group; an unwanted (non-HTML) body is skipped,
   and drained only when its declared length is small enough that keeping
   the connection is cheaper than closing it; a wanted body over
   ``max_bytes`` (declared, or counted after decoding) is
   ``FetchError("too_large")``.
8. Only ``http`` and ``https`` are ever fetched (``PROTOCOLS``). TLS peers are
   verified against the system's CA bundle (``find_ca_bundle``), not the path
   compiled into pycurl's wheel, which most systems lack.

Theory of operation. ``open_curl_fetcher`` starts ``CurlFetcher._drive``,
which loops: wait until one of curl's sockets is ready or curl's timer
expires (the timer is the deadline of a cancel scope, moved by the timer
callback), call ``socket_action`` for what happened, then ``info_read`` to
finish transfers. A new transfer is started by the ``fetch`` that adds it
(``socket_action(SOCKET_TIMEOUT)`` right after ``add_handle``): going
through curl's 0 ms timer instead would cost a driver wake-up per request.
How sockets are waited for is a ``_Watcher``:

- ``_EpollWatcher`` (Linux, the default there): curl's sockets live in a
  private epoll set and the driver waits on that set's one fd; interest
  changes are single ``epoll_ctl`` calls made inside the socket callback.
- ``_TaskWatcher`` (anywhere trio runs): one small task per watched socket
  and direction, calling ``socket_action`` itself. Interest changes cancel
  and restart those tasks; trio's abort unregisters a cancelled wait at once,
  so a closed-and-reused fd never meets a stale waiter (libcurl reports
  ``POLL_REMOVE`` before it closes a socket).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import pycurl
import trio

from ..core.http import FetchConfig, is_html_content_type
from ..core.models import FetchError, FetchResult

__all__ = [
    "Collector",
    "CurlFetcher",
    "CurlFetcherStatistics",
    "error_kind",
    "find_ca_bundle",
    "open_curl_fetcher",
]

WatcherName = Literal["auto", "epoll", "tasks"]

_DRAIN_LIMIT = 16 * 1024  # skipped bodies this small are read to keep the connection

_IN: int = pycurl.CSELECT_IN
_OUT: int = pycurl.CSELECT_OUT
_ERR: int = pycurl.CSELECT_ERR
_POLL_REMOVE: int = pycurl.POLL_REMOVE
_SOCKET_TIMEOUT: int = pycurl.SOCKET_TIMEOUT

# -- the one place curl error codes are translated -------------------------------

_E_WEIRD_SERVER_REPLY: int = pycurl.E_FTP_WEIRD_SERVER_REPLY  # 8, renamed in libcurl 7.51
_E_HTTP2_STREAM = 92  # libcurl >= 7.49; pycurl 7.49 exports no name for it
_E_HTTP3 = 95

_KIND_BY_CODE: dict[int, str] = {
    pycurl.E_OPERATION_TIMEDOUT: "timeout",
    pycurl.E_COULDNT_CONNECT: "connect",
    pycurl.E_COULDNT_RESOLVE_HOST: "connect",
    pycurl.E_COULDNT_RESOLVE_PROXY: "connect",
    pycurl.E_UNSUPPORTED_PROTOCOL: "connect",  # e.g. ftp:// or file://: never fetched
    pycurl.E_URL_MALFORMAT: "connect",
    pycurl.E_SSL_CONNECT_ERROR: "connect",
    pycurl.E_PEER_FAILED_VERIFICATION: "connect",
    pycurl.E_SSL_CACERT_BADFILE: "connect",
    pycurl.E_RECV_ERROR: "reset",
    pycurl.E_SEND_ERROR: "reset",
    pycurl.E_GOT_NOTHING: "reset",
    pycurl.E_PARTIAL_FILE: "protocol",
    _E_WEIRD_SERVER_REPLY: "protocol",
    pycurl.E_HTTP2: "protocol",
    _E_HTTP2_STREAM: "protocol",
    _E_HTTP3: "protocol",
    pycurl.E_BAD_CONTENT_ENCODING: "decode",
    pycurl.E_FILESIZE_EXCEEDED: "too_large",
}


def error_kind(code: int, message: str) -> str:
    """The ``FetchError`` kind for curl error ``code`` (a ``pycurl.E_*`` number).

    libcurl reports malformed chunked encoding as a receive error; the message
    tells it apart from a reset connection. Codes we do not know are a
    server or network failure we cannot classify better: ``protocol``.
    """
    kind = _KIND_BY_CODE.get(code, "protocol")
    if kind == "reset" and "chunk" in message.lower():
        return "protocol"
    return kind


# -- one response, as curl's callbacks deliver it (pure) ---------------------------


class Collector:
    """Builds one response from curl's header and body callbacks.

    Knows nothing of curl or trio: ``header_line`` gets every raw header line
    (status lines included), ``body`` every decoded body piece; each returns
    ``False`` to ask for the transfer to be aborted. ``reset`` readies it for
    the next response (``any_body=True``: keep its body whatever its content
    type). Interim (1xx) heads are forgotten; lines after the final head
    (chunked trailers) are ignored.
    """

    __slots__ = (
        "_last",
        "abort",
        "chunks",
        "declared",
        "drain",
        "head_done",
        "headers",
        "html_only",
        "html_only_default",
        "max_bytes",
        "size",
        "skip",
        "status",
    )

    def __init__(self, *, max_bytes: int, html_only: bool) -> None:
        self.max_bytes = max_bytes
        self.html_only_default = html_only
        self.reset()

    def reset(self, *, any_body: bool = False) -> None:
        self.html_only = self.html_only_default and not any_body
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.size = 0
        self.declared: int | None = None
        self.head_done = False
        self.skip = False  # the body is unwanted (html_only and not HTML)
        self.drain = False  # ...but small: read it and drop it
        #: why we aborted the transfer: "too_large", "skipped", or None
        self.abort: str | None = None
        self._last: str | None = None  # last header name, for obs-fold lines

    def header_line(self, line: bytes) -> bool:
        if self.head_done:
            return True  # trailers of a chunked body: not part of the head
        if line.startswith(b"HTTP/"):
            parts = line.split(None, 2)
            self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            self.headers = {}
            self._last = None
            return True
        if not line.strip():
            if 100 <= self.status < 200:
                return True  # an interim head ends; the real one follows
            return self._end_of_head()
        text = _decode_header(line).rstrip("\r\n")
        if text[:1] in (" ", "\t"):
            if self._last is not None:  # obsolete line folding: continue the last value
                self.headers[self._last] += " " + text.strip()
            return True
        name, sep, value = text.partition(":")
        if not sep:
            return True  # not a header; curl already judged the head acceptable
        key = name.strip().lower()
        value = value.strip()
        old = self.headers.get(key)
        self.headers[key] = value if old is None else f"{old}, {value}"
        self._last = key
        return True

    def _end_of_head(self) -> bool:
        self.head_done = True
        try:
            self.declared = int(self.headers.get("content-length", ""))
        except ValueError:
            self.declared = None
        if self.html_only and not is_html_content_type(self.headers.get("content-type")):
            self.skip = True
            return True  # decided at the first body write: a bodiless answer keeps its connection
        if self.declared is not None and self.declared > self.max_bytes:
            self.abort = "too_large"
            return False
        return True

    def body(self, data: bytes) -> bool:
        if self.skip:
            if self.drain:
                return True
            if self.declared is not None and self.declared <= _DRAIN_LIMIT:
                self.drain = True
                return True
            self.abort = "skipped"
            return False
        self.size += len(data)
        if self.size > self.max_bytes:
            self.abort = "too_large"
            return False
        self.chunks.append(data)
        return True

    def outcome(
        self, url: str, code: int, message: str, elapsed: float
    ) -> FetchResult | FetchError:
        """The result of the finished transfer, given curl's code and message."""
        if self.skip:  # the head was complete; whatever became of the body, we did not want it
            return FetchResult(url, self.status, self.headers, b"", elapsed, body_skipped=True)
        if self.abort == "too_large":
            if self.size > self.max_bytes:
                detail = f"more than {self.max_bytes} bytes once decoded"
            else:
                detail = f"Content-Length {self.declared} > max_bytes {self.max_bytes}"
            return FetchError("too_large", detail)
        if code:
            return FetchError(error_kind(code, message), f"curl error {code}: {message}")
        return FetchResult(url, self.status, self.headers, b"".join(self.chunks), elapsed)


def _decode_header(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return line.decode("latin-1")


# -- one easy handle ---------------------------------------------------------------


class _Slot:
    """One easy handle, its callbacks, and the transfer it is lent to."""

    __slots__ = (
        "_has_headers",
        "bug",
        "ca_bundle",
        "closed",
        "code",
        "collector",
        "config",
        "curl",
        "done",
        "elapsed",
        "message",
        "started",
        "url",
    )

    def __init__(self, config: FetchConfig, ca_bundle: str | None) -> None:
        self.config = config
        self.ca_bundle = ca_bundle
        self.curl: Any = pycurl.Curl()
        self.collector = Collector(max_bytes=config.max_bytes, html_only=config.html_only)
        self._has_headers = False
        self.url = ""
        self.done = trio.Event()
        self.code = 0
        self.message = ""
        self.started = 0.0
        self.elapsed = 0.0
        self.bug: BaseException | None = None
        self.closed = False  # the fetcher closed while this transfer ran
        self.configure()

    def configure(self) -> None:
        """Options every transfer shares; again after ``curl.reset()``."""
        c, cfg = self.curl, self.config
        c.setopt(pycurl.NOSIGNAL, 1)
        c.setopt(pycurl.FOLLOWLOCATION, 0)
        c.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        if _DECODES:
            c.setopt(pycurl.ACCEPT_ENCODING, "")  # every coding this libcurl decodes
        if self.ca_bundle is not None:
            c.setopt(pycurl.CAINFO, self.ca_bundle)
        c.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, round(cfg.connect_timeout * 1000)))
        c.setopt(pycurl.USERAGENT, cfg.user_agent)
        c.setopt(pycurl.HEADERFUNCTION, self._on_header)
        c.setopt(pycurl.WRITEFUNCTION, self._on_write)
        self._has_headers = False

    def begin(
        self, url: str, headers: dict[str, str] | None, timeout: float, any_body: bool
    ) -> None:
        """Ready the handle for ``url``, with ``timeout`` seconds for everything."""
        c = self.curl
        c.setopt(pycurl.URL, url)
        if headers:
            c.setopt(pycurl.HTTPHEADER, _header_lines(headers))
            self._has_headers = True
        elif self._has_headers:
            c.unsetopt(pycurl.HTTPHEADER)
            self._has_headers = False
        c.setopt(pycurl.TIMEOUT_MS, max(1, round(timeout * 1000)))
        self.url = url
        self.collector.reset(any_body=any_body)
        self.done = trio.Event()
        self.code = 0
        self.message = ""
        self.bug = None
        self.closed = False

    def reset(self) -> None:
        """Forget every option and state (after a cancelled transfer)."""
        self.curl.reset()
        self.configure()

    def finish(self, code: int, message: str, now: float) -> None:
        self.code = code
        self.message = message
        self.elapsed = now - self.started
        self.done.set()

    def outcome(self) -> FetchResult | FetchError:
        if self.bug is not None:
            raise self.bug
        if self.closed:
            raise RuntimeError("the CurlFetcher was closed while this fetch was running")
        return self.collector.outcome(self.url, self.code, self.message, self.elapsed)

    # Callbacks run inside libcurl: they must not raise (rule 5).

    def _on_header(self, line: bytes) -> int | None:
        try:
            return None if self.collector.header_line(line) else 0
        except BaseException as exc:
            self.bug = exc
            return 0

    def _on_write(self, data: bytes) -> int | None:
        try:
            return None if self.collector.body(data) else 0
        except BaseException as exc:
            self.bug = exc
            return 0


#: Where systems keep their CA bundle, most common first.
_CA_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Arch, Alpine, Gentoo
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL, CentOS
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # RHEL 7+
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, BSDs, Alpine
)


def find_ca_bundle(
    environ: Mapping[str, str], python_cafile: str | None, exists: Callable[[str], bool]
) -> str | None:
    """The CA bundle libcurl should verify TLS peers with, or ``None`` for its default.

    pycurl's wheels carry their own libcurl, built with one distribution's
    bundle path, which other systems lack: left alone, every https fetch on
    them fails verification. Order: ``SSL_CERT_FILE`` / ``CURL_CA_BUNDLE``,
    the file Python's own ``ssl`` module uses (``python_cafile``), then the
    usual system paths.
    """
    candidates = (
        environ.get("SSL_CERT_FILE"),
        environ.get("CURL_CA_BUNDLE"),
        python_cafile,
        *_CA_BUNDLES,
    )
    return next((path for path in candidates if path and exists(path)), None)


def _header_lines(headers: dict[str, str]) -> list[str]:
    """``HTTPHEADER`` lines. curl reads ``"Name:"`` as "drop this header", so an
    empty value is spelled ``"Name;"``; a line break would smuggle a header."""
    lines = []
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n\0"):
            raise ValueError(f"request header {name!r} contains a line break or NUL")
        lines.append(f"{name}: {value}" if value else f"{name};")
    return lines


def _libcurl_decodes() -> bool:
    features = int(pycurl.version_info()[4])
    return bool(features & (pycurl.VERSION_LIBZ | pycurl.VERSION_BROTLI))


_DECODES = _libcurl_decodes()


# -- waiting for curl's sockets ------------------------------------------------------


class _Watcher(Protocol):
    def watch(self, fd: int, wanted: int) -> None:
        """Watch ``fd`` for the ``CSELECT_IN``/``CSELECT_OUT`` bits in ``wanted``."""

    def unwatch(self, fd: int) -> None:
        """Forget ``fd`` (libcurl is about to close it). Unknown fds are ignored."""

    async def wait(self) -> None:
        """Park the driver until ``dispatch`` may have work (or for ever)."""

    def dispatch(self, action: Callable[[int, int], None]) -> None:
        """Call ``action(fd, cselect_bits)`` for every ready watched fd."""

    def close(self) -> None: ...

    def __len__(self) -> int: ...


class _EpollWatcher:
    """Curl's sockets in a private, level-triggered epoll set (Linux)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._wanted: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._wanted)

    def watch(self, fd: int, wanted: int) -> None:
        events = (select.EPOLLIN if wanted & _IN else 0) | (
            select.EPOLLOUT if wanted & _OUT else 0
        )
        if fd in self._wanted:
            try:
                self._epoll.modify(fd, events)
            except FileNotFoundError:  # closed and reused behind our back
                self._epoll.register(fd, events)
        else:
            try:
                self._epoll.register(fd, events)
            except FileExistsError:
                self._epoll.modify(fd, events)
        self._wanted[fd] = wanted

    def unwatch(self, fd: int) -> None:
        if self._wanted.pop(fd, None) is not None:
            with contextlib.suppress(OSError):  # already closed: the kernel forgot it
                self._epoll.unregister(fd)

    async def wait(self) -> None:
        await trio.lowlevel.wait_readable(self._epoll.fileno())

    def dispatch(self, action: Callable[[int, int], None]) -> None:
        for fd, events in self._epoll.poll(0):
            wanted = self._wanted.get(fd)
            if wanted is None:
                continue  # unwatched by an earlier action of this batch
            bits = (_IN if events & select.EPOLLIN else 0) | (
                _OUT if events & select.EPOLLOUT else 0
            )
            if events & (select.EPOLLERR | select.EPOLLHUP):
                bits |= wanted | _ERR
            action(fd, bits)

    def close(self) -> None:
        if not self._epoll.closed:
            trio.lowlevel.notify_closing(self._epoll.fileno())
            self._epoll.close()
        self._wanted.clear()


@dataclass(slots=True)
class _Watch:
    fd: int
    wanted: int
    scope: trio.CancelScope


class _TaskWatcher:
    """One task per watched socket and direction; each calls ``action`` itself."""

    def __init__(self, nursery: trio.Nursery, action: Callable[[int, int], None]) -> None:
        self._nursery = nursery
        self._action = action
        self._watches: dict[int, _Watch] = {}

    def __len__(self) -> int:
        return len(self._watches)

    def watch(self, fd: int, wanted: int) -> None:
        old = self._watches.get(fd)
        if old is not None:
            if old.wanted == wanted:
                return
            old.scope.cancel()  # a blocked wait is unregistered right here
        watch = _Watch(fd, wanted, trio.CancelScope())
        self._watches[fd] = watch
        for direction in (_IN, _OUT):
            if wanted & direction:
                self._nursery.start_soon(self._watch_one, watch, direction)

    def unwatch(self, fd: int) -> None:
        watch = self._watches.pop(fd, None)
        if watch is not None:
            watch.scope.cancel()

    async def _watch_one(self, watch: _Watch, direction: int) -> None:
        wait = trio.lowlevel.wait_readable if direction == _IN else trio.lowlevel.wait_writable
        with watch.scope:
            # A cancelled watch must not even start a wait: trio registers the
            # waiter before the wait's first checkpoint, and the watch that
            # replaced this one may already be waiting on the same fd.
            while not watch.scope.cancel_called:
                try:
                    await wait(watch.fd)
                except (trio.ClosedResourceError, OSError):
                    # closed behind our back: let curl find out, then stop
                    if not watch.scope.cancel_called:
                        self._action(watch.fd, direction | _ERR)
                    return
                if not watch.scope.cancel_called:  # else curl changed its mind meanwhile
                    self._action(watch.fd, direction)

    async def wait(self) -> None:
        await trio.sleep_forever()

    def dispatch(self, action: Callable[[int, int], None]) -> None:
        pass  # the watch tasks call ``action`` themselves

    def close(self) -> None:
        for watch in self._watches.values():
            watch.scope.cancel()
        self._watches.clear()


# -- the fetcher -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CurlFetcherStatistics:
    """A snapshot of a ``CurlFetcher``.

    ``handles``: easy handles in the pool (``max_connections``);
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
        self._watcher: _Watcher | None = _EpollWatcher() if watcher == "epoll" else None
        ca_bundle = find_ca_bundle(
            os.environ, ssl.get_default_verify_paths().cafile, os.path.isfile
        )
        self._slots = [_Slot(config, ca_bundle) for _ in range(config.max_connections)]
        self._free = list(self._slots)
        self._pool = trio.Semaphore(len(self._slots))
        self._running: dict[Any, _Slot] = {}  # easy handle -> its slot, while in the multi
        self._callback_bugs: list[BaseException] = []
        self._timer_at = math.inf
        self._timer_scope: trio.CancelScope | None = None
        self._driver_scope: trio.CancelScope | None = None
        self._closed = False
        multi: Any = pycurl.CurlMulti()
        n = config.max_connections
        multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, n)
        multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, n)  # per-host politeness is the engine's job
        multi.setopt(pycurl.M_MAXCONNECTS, n)  # idle connections kept for reuse
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
        failures (kinds: ``error_kind``), ``RuntimeError`` once closed.
        """
        self._check_usable()
        await trio.lowlevel.checkpoint_if_cancelled()
        deadline = trio.current_time() + self.config.timeout
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
            slot = self._free.pop()
            try:
                self._start(slot, url, headers, any_body, deadline)
                await slot.done.wait()
                outcome = slot.outcome()
            except BaseException:
                self._abandon(slot)
                raise
            finally:
                self._free.append(slot)
        finally:
            self._pool.release()
        if isinstance(outcome, FetchError):
            raise outcome
        return outcome

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
        slot: _Slot,
        url: str,
        headers: dict[str, str] | None,
        any_body: bool,
        deadline: float,
    ) -> None:
        now = trio.current_time()
        slot.begin(url, headers, deadline - now, any_body)
        slot.started = now
        self._multi.add_handle(slot.curl)
        self._running[slot.curl] = slot
        self._raise_callback_bugs()
        # Start it now (connect, or send on a kept-alive connection) rather
        # than through curl's timer, which would cost the driver a wake-up.
        self._socket_action(_SOCKET_TIMEOUT, 0)

    def _abandon(self, slot: _Slot) -> None:
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
                self._timer_at = trio.current_time() + timeout_ms / 1000
            if self._timer_scope is not None:
                self._timer_scope.deadline = self._timer_at
        except BaseException as exc:
            self._callback_bugs.append(exc)

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
        async with trio.open_nursery() as nursery:
            if self._watcher is None:
                self._watcher = _TaskWatcher(nursery, self._socket_action)
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
                if self._timer_at <= trio.current_time():
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
            now = trio.current_time()
            for curl in ok:
                self._finish(curl, 0, "", now)
            for curl, code, message in failed:
                self._finish(curl, int(code), str(message), now)
            if not queued:
                return

    def _finish(self, curl: Any, code: int, message: str, now: float) -> None:
        slot = self._running.pop(curl)
        self._multi.remove_handle(curl)
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
