"""Waiting for the sockets libcurl asks us to watch, without threads or polling.

libcurl tells the fetcher which sockets it wants watched, and for what
(``M_SOCKETFUNCTION``); the fetcher hands that to a ``Watcher``, and its
driver task parks in ``Watcher.wait`` until one is ready. Two watchers:

- ``EpollWatcher`` (Linux, the default there): curl's sockets live in a
  private, level-triggered epoll set and the driver waits on that set's one
  fd; interest changes are single ``epoll_ctl`` calls made inside the socket
  callback. ``dispatch`` reports every ready socket.
- ``TaskWatcher`` (anywhere trio runs): one small task per watched socket
  and direction, calling the action itself. Interest changes cancel and
  restart those tasks; trio's abort unregisters a cancelled wait at once, so
  a closed-and-reused fd never meets a stale waiter (libcurl reports
  ``POLL_REMOVE`` before it closes a socket).
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pycurl
import trio

__all__ = ["CSELECT_ERR", "CSELECT_IN", "CSELECT_OUT", "EpollWatcher", "TaskWatcher", "Watcher"]

CSELECT_IN: int = pycurl.CSELECT_IN
CSELECT_OUT: int = pycurl.CSELECT_OUT
CSELECT_ERR: int = pycurl.CSELECT_ERR
_IN, _OUT, _ERR = CSELECT_IN, CSELECT_OUT, CSELECT_ERR


class Watcher(Protocol):
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


class EpollWatcher:
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


class TaskWatcher:
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
