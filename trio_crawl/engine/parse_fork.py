"""Starting the parse co-process by ``fork`` alone, where that is safe.

Why
---
A child started as a new interpreter (``parse_child.BOOTSTRAP``) needs
~0.1 s before it takes a page: the interpreter, then lxml and the parser's
modules. A crawl of a documentation site on 127.0.0.1 parses ~200 pages in
its own process meanwhile, a third of what the crawl's process spends on
postgresql-doc-15. A forked child has all of that loaded already: it is
ready in a millisecond or two, and costs the other core no imports.

When
----
Only on Linux (``pidfd_open``: the child is waited for and signalled
through a descriptor, never a PID that could be reused), and only while
the crawl's process runs no other Python thread (``threading.active_count``):
a thread could hold a lock (libxml2's, logging's) at the fork, which the
child would then wait for for ever. ``can_fork`` is asked twice
(``engine/parse_process.py``, "Lifetime"): as the crawl begins, to choose
between waiting for ``START_AFTER`` pages (a fork is ready at once) and
starting a new interpreter at once; and when the ``START_AFTER``-th page
asks, to fork. A crawl from the command line with the default fetcher
(curl resolves names without a thread) and no file opened in a thread
forks; one that has used a worker thread by then (trio keeps it ~10 s: a big
page's parse, ``--state``'s or ``--warc``'s opening, httpx's name lookups),
or a program that crawls beside threads of its own, gets the new
interpreter: at once if the thread was there as the crawl began, else when
the ``START_AFTER``-th page asks.

The child
---------
It ignores SIGINT and runs in a session of its own (as the other child
does), puts ``/dev/null`` on stdin and stdout, closes every other inherited
descriptor but its socket (outputs, trio's wake-up socket, the epoll), and
freezes the objects it inherited (``gc.freeze``: its collections never walk,
and so never copy, the crawl's pages of memory), then serves
``parse_child.serve`` and leaves with ``os._exit`` (no ``atexit``, no
buffers of the crawl's flushed twice).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import threading

import trio

from .parse_child import main as child_main


def can_fork() -> bool:
    """Whether the parse child may be forked from this process now."""
    return (
        sys.platform == "linux"
        and hasattr(os, "pidfd_open")
        and hasattr(signal, "pidfd_send_signal")
        and threading.active_count() == 1
    )


class ForkedChild:
    """A forked child, waited for and killed through its pidfd (the part of
    ``trio.Process`` that ``parse_process`` uses)."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self.returncode: int | None = None

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # exited; not reaped yet
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def wait(self) -> int:
        """Its exit code (negative: the signal that killed it), once it ended."""
        if self.returncode is None:
            await trio.lowlevel.wait_readable(self._pidfd)
            _, status = os.waitpid(self.pid, 0)  # noqa: ASYNC222 (it has exited: no wait)
            self.returncode = os.waitstatus_to_exitcode(status)
            os.close(self._pidfd)
        return self.returncode


def fork_child(theirs: socket.socket) -> ForkedChild:
    """Fork a parse child serving on ``theirs`` (closed here, in the parent)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's side (coverage does not follow os._exit)
        code = 1
        try:
            code = _serve_in_child(theirs.fileno())
        finally:
            os._exit(code)
    theirs.close()
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # cannot watch it: do without it
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return ForkedChild(pid, pidfd)


def _serve_in_child(fd: int) -> int:  # pragma: no cover - runs in the child
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.closerange(3, fd)  # ``null`` too: it is on 0 and 1 now
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    gc.freeze()
    return child_main(fd)
