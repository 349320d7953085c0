"""The parse co-process: a crawl's link extraction on the machine's other core.

Why a process
-------------
A crawl of a documentation site on 127.0.0.1 is bound by one process's CPU,
and parsing a page for links (libxml2, ``core.parse.extract_links``) is the
largest part of it: about 190 µs of 500 per page on postgresql-doc-15.
Threads do not help (the GIL hand-offs cost more than they save,
benchmarks/TWO_PROCESS.md). A child process does: the crawl only sends the
body and reads the links back (``marshal`` both ways), and the parse runs
beside it. ``trio_parallel`` does the same job, with pickling, a worker
context and a pipe per worker; it costs the crawl's process clearly more per
page (benchmarks/bench_coparse.py), so this is a small protocol of its own
(``engine/parse_child.py`` has it and the child's loop).

What the crawl sees
-------------------
``ParseProcess.links`` gives a page's links from the child, or None: then
the caller parses the page itself, as it would without a child. None comes

* before the child has said it is ready (the first pages of a crawl: they
  do not wait for an interpreter to start);
* when the child has its queue's worth of pages already (``MAX_IN_FLIGHT``,
  or a quarter of a large pool: ``queue_size``; or their worth of bytes,
  ``BYTES_PER_PLACE`` a place) and the crawl's
  process has nothing else to do: a page that finds the child's queue full
  waits for a free place, and when no task of the crawl's process can run
  and every crawler with a page waits on the child (``crawl_tasks``; one
  waiting on a server will need the core soon), the page that waited
  longest is handed back and parsed in the crawl's process after all. So
  the crawl's core parses only when it would otherwise be idle: on a site
  of small pages the crawl's own work (fetching, bookkeeping) is the
  bottleneck and the child takes nearly every page; on one of big pages,
  where the child falls behind, the two cores share the parsing. (Parsing in the crawl's process
  whenever the child's queue was full, as before, made it parse a third to a
  half of postgresql-doc-15's pages while the child had time to spare.)
* when the child raised on the page (so the page's ``internal`` record, with
  its traceback under ``--debug``, is the one an inline parse gives);
* when the child has died or said something that is not an answer, or
  has not answered a page within ``ANSWER_WAIT`` (stopped, or stuck: it is
  killed): every waiting page and every later one is parsed in the crawl's
  process, and one warning is logged (``trio_crawl.parse_process``).

So the links are ``extract_links``'s by construction, wherever it ran. A
page's crawler keeps its token while it waits (``docs/termination.md``).

Lifetime
--------
``serve`` runs beside the crawl's workers (a ``WorkPool`` helper). On
Linux, with no other thread in the crawl's process, the child is a ``fork``
of it (``engine/parse_fork.py``: ready at once, nothing to import), made
once ``START_AFTER`` pages have asked: a crawl of a few pages never forks
(a fork and its exit cost a 5-page crawl ~10 ms, 7 %). Else it is a new
interpreter, ``python -c`` (``parse_child.BOOTSTRAP``), ready ~0.1 s after it
starts, so it starts with the crawl, its start overlapping robots.txt and the
first pages; unless the crawl is known to be small (``--max-pages`` under
``EARLY_START_PAGES``, or depth 0: over, or nearly, before such a child is
ready), which starts it after ``START_AFTER`` pages too. Either way it
holds one end of a
``socketpair`` in a session of its own (a terminal's Ctrl-C
is the crawl's to handle; the child ignores SIGINT as well), and when the
crawl ends it closes the socket: the child exits at end-of-file; after a
short wait it is killed (at once if it is still starting: a short crawl
does not wait for its imports). If the crawl's process dies, even by SIGKILL, the
kernel closes the socket and the child exits the same way.
"""

from __future__ import annotations

import logging
import marshal
import os
import signal
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from typing import Final

import outcome
import trio

from ..core.config import CrawlConfig
from ..core.scrape import Request
from .parse_child import BOOTSTRAP, HEAD, READY, frame
from .parse_fork import ForkedChild, can_fork, fork_child

try:  # the same function as trio.testing's, whose import may load pytest (~60 ms)
    from trio._core._run import wait_all_tasks_blocked as all_tasks_blocked
except ImportError:  # pragma: no cover - a trio that moved it
    from trio.testing import wait_all_tasks_blocked as all_tasks_blocked

_LOG: Final = logging.getLogger("trio_crawl.parse_process")

#: Pages in the child at once in a small pool; more wait for a place, and
#: are handed back to the crawl's process when it is idle, so both cores
#: parse when the child falls behind. Each place also holds up to
#: ``BYTES_PER_PLACE`` of body on average (``_has_place``): bytes bound the
#: child's backlog in parsing time (lexbor reads ~150 MB/s: 16 places are
#: ~2 ms), which a count of pages does not. With libxml2 in the child, 8
#: pages suited libstdc++-12-doc (16 workers: 1.53 s with 8, 1.83 s with 64,
#: where the queue never filled and nothing was handed back); with lexbor
#: (``core/html_links.py``), 16 places of 16 KiB leave the crawl's process
#: less work on postgresql-doc-15 (13 KB pages: the child takes nearly all)
#: and keep the python3.11 docs (94 KB pages: about 3 at once) and
#: libstdc++'s as fast (benchmarks/README.md).
MAX_IN_FLIGHT: Final = 16
BYTES_PER_PLACE: Final = 16 * 1024
#: A pool of more than ``MAX_IN_FLIGHT * WORKERS_PER_PLACE`` workers gives the
#: child one place per this many workers. A large pool is a latency-bound
#: crawl whose loop, busy with hundreds of tasks, reads the child's answers
#: up to a turn late: a queue of 8 then capped the child at 8 pages a turn
#: (``benchmarks/broad.py``, 1,000 hosts x 100 ms: ~1,600 pages/s, 70% of
#: the crawl's 0 ms rate; with a queue of 64, 87%). A small pool keeps
#: ``MAX_IN_FLIGHT``.
WORKERS_PER_PLACE: Final = 4
#: Pages a crawl known to be small parses itself before it starts the child:
#: a crawl of a few pages never pays for an interpreter's start.
START_AFTER: Final = 10
#: A crawl capped below this many pages (``max_pages``) starts the child only
#: after ``START_AFTER`` pages; others start it with the crawl. The child is
#: ready ~0.1 s after it starts, when a crawl of small pages on 127.0.0.1 has
#: parsed ~200 pages itself.
EARLY_START_PAGES: Final = 200
#: Seconds the child gets to exit after end-of-file before it is killed.
EXIT_WAIT: Final = 2.0
#: Seconds a page waits for its answer before the child counts as hung (it
#: parses a page in milliseconds; pages of ``thread_parse_bytes`` and more
#: never go to it): it is killed, and every page is parsed in the crawl's
#: process from then on.
ANSWER_WAIT: Final = 10.0
_READ_SIZE: Final = 1 << 20


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where there is one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def parse_process_wanted(setting: bool | None, *, auto: bool, links_only: bool, cpus: int) -> bool:
    """Whether a crawl parses in a co-process: as ``setting`` says, or (None)
    where it can pay, if ``auto``: a crawl that reads pages for links alone
    (no handler, no page requisites) on two CPUs or more. ``auto`` is false
    for a ``Crawler`` made directly and for a crawl with the caller's fetcher
    (a fake one may serve pages under a virtual clock, which must not wait
    on a real process): ``engine.build.open_crawl`` sets it otherwise."""
    if setting is not None:
        return setting
    return auto and links_only and cpus >= 2


def parse_process_for(config: CrawlConfig, *, auto: bool) -> ParseProcess | None:
    """The crawl's parse co-process, if ``config.parse_process`` (or, when
    unset and ``auto``, the machine and the crawl) want one."""
    links_only = (
        config.handler is None
        and not config.follow.page_requisites
        and not any(isinstance(s, Request) and s.handler for s in config.start_urls)
    )
    wanted = parse_process_wanted(
        config.pool.parse_process, auto=auto, links_only=links_only, cpus=usable_cpus()
    )
    if not wanted:
        return None
    small = config.budgets.max_depth == 0 or (
        config.budgets.max_pages is not None and config.budgets.max_pages < EARLY_START_PAGES
    )
    return ParseProcess(start_after=START_AFTER if small else None)


def starts_after(start_after: int | None, *, fork: bool) -> int:
    """Pages parsed in the crawl's process before its child starts: as
    given, or (None) ``START_AFTER`` for a fork, which is ready at once, and
    0 for a new interpreter, whose start should overlap the crawl's first
    pages."""
    if start_after is not None:
        return start_after
    return START_AFTER if fork else 0


def child_command() -> list[str]:
    """The child's command line: this interpreter, ``parse_child.BOOTSTRAP``."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [sys.executable, "-P", "-c", BOOTSTRAP, package]


class _Broken(Exception):
    """The child is gone or talks nonsense (the message says which)."""


class ParseProcess:
    """The crawl's end of a parse co-process (see the module docstring).

    ``pages``: pages whose links came from the child; ``pid``: the child's
    process id once started (None before, or if it could not start);
    ``ready``: whether it takes pages now. ``start_after``: pages parsed in
    the crawl's process before the child is started (0: at once, when
    ``serve`` begins; None: ``START_AFTER`` for a forked child, 0 for a new
    interpreter, see the module docstring).
    """

    def __init__(
        self,
        command: list[str] | None = None,
        *,
        start_after: int | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        answer_wait: float = ANSWER_WAIT,
    ) -> None:
        self._command = command  # None: fork where safe, else child_command()
        self._answer_wait = answer_wait
        self._process: trio.Process | ForkedChild | None = None
        self._start_after = start_after
        self._max_in_flight = max_in_flight
        self._asked = 0
        self._wanted = trio.Event()
        self._ready = False
        self._broken = False
        self._warned = False
        self._sock: socket.socket | None = None
        self._waiting: dict[int, trio.lowlevel.Task] = {}
        #: for each page of ``_waiting``: when it went to the child
        #: (``_watch_answers``) and its body's size; and the sum of those sizes
        self._sent: dict[int, tuple[float, int]] = {}
        self._bytes = 0
        self._watching = trio.Event()  # set while a page waits for its answer
        self._next = 1
        self._out = bytearray()
        self._writer = trio.lowlevel.ParkingLot()
        #: pages waiting for a place in the child's queue, oldest first
        self._queue: deque[trio.lowlevel.Task] = deque()
        #: places given to pages of ``_queue`` that have not taken them yet
        self._granted = 0
        self._queued = trio.Event()  # set while ``_queue`` holds a page
        self._changed = trio.Event()  # set by each answer and each page queued
        #: How many of the crawl's tasks hold a page now (``WorkPool.busy``),
        #: if the crawl says: then a waiting page is handed back only when
        #: every one of them waits on the child (nothing else will need the
        #: crawl's core soon); else whenever its process is idle.
        self.crawl_tasks: Callable[[], int] | None = None
        #: The crawl's worker count (``WorkPool.workers``), if it says: a large
        #: pool gets a deeper queue (``queue_size``).
        self.crawl_workers: Callable[[], int] | None = None
        self.pages = 0
        self.pid: int | None = None

    def __repr__(self) -> str:
        state = "broken" if self._broken else "ready" if self._ready else "starting"
        return (
            f"<ParseProcess pid={self.pid} {state} pages={self.pages} "
            f"in_flight={len(self._waiting)} queued={len(self._queue)}>"
        )

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def start_after(self) -> int | None:
        return self._start_after

    @property
    def in_flight(self) -> int:
        """Pages sent to the child and not answered yet."""
        return len(self._waiting)

    @property
    def queue_size(self) -> int:
        """Pages the child may hold at once: ``max_in_flight``, or one per
        ``WORKERS_PER_PLACE`` workers of a larger pool."""
        workers = self.crawl_workers() if self.crawl_workers is not None else 0
        return max(self._max_in_flight, workers // WORKERS_PER_PLACE)

    @property
    def queued(self) -> int:
        """Pages waiting for a place in the child's queue."""
        return len(self._queue)

    async def links(self, body: bytes, url: str, content_type: str | None) -> list[str] | None:
        """The page's links from the child, or None: parse it yourself.
        A checkpoint when the child takes the page; cancelling it forgets
        the page (the child's answer is dropped)."""
        if not self._ready:
            self._asked += 1
            if self._asked >= starts_after(self._start_after, fork=True):
                self._wanted.set()
            return None
        if not self._has_place() and not await self._place():
            return None
        number = self._next
        self._next += 1
        self._send(frame((number, url, content_type, body)))
        self._waiting[number] = trio.lowlevel.current_task()
        self._sent[number] = (trio.current_time(), len(body))
        self._bytes += len(body)
        if not self._watching.is_set():
            self._watching.set()

        def abort(_: object) -> trio.lowlevel.Abort:
            if self._waiting.pop(number, None) is not None:
                self._bytes -= self._sent.pop(number)[1]
                self._give_places()
            return trio.lowlevel.Abort.SUCCEEDED

        links: list[str] | None = await trio.lowlevel.wait_task_rescheduled(abort)
        if links is not None:
            self.pages += 1
        return links

    async def _watch_answers(self) -> None:
        """Kill the child once a page has waited ``answer_wait`` for its answer
        (``_hung``). One task and one deadline for every page: a cancel scope
        around each page's wait cost the crawl's process ~4.5 us a page. The
        oldest page waiting is the first to run out of time."""
        while True:
            if not self._waiting:
                self._watching = trio.Event()
                await self._watching.wait()
                continue
            oldest = next(iter(self._waiting))
            await trio.sleep_until(self._sent[oldest][0] + self._answer_wait)
            if oldest in self._waiting:
                self._hung()
                return

    async def _place(self) -> bool:
        """Wait for a place in the child's queue: True once this page has
        one, False if the caller is to parse it (the crawl's process went
        idle, or the child is gone). A checkpoint; cancelling it forgets the
        page."""
        task = trio.lowlevel.current_task()
        self._queue.append(task)
        self._queued.set()
        self._changed.set()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._queue.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        placed: bool = await trio.lowlevel.wait_task_rescheduled(abort)
        if placed:
            self._granted -= 1
        return placed and self._ready

    def _has_place(self) -> bool:
        """Whether one more page may go to the child now: fewer than
        ``queue_size`` pages there, and fewer bytes of bodies than
        ``BYTES_PER_PLACE`` times that (one page always may)."""
        pages = len(self._waiting) + self._granted
        size = self.queue_size
        return pages < size and (pages == 0 or self._bytes < size * BYTES_PER_PLACE)

    def _give_places(self) -> None:
        """Places in the child's queue are free: the pages that waited
        longest have them."""
        while self._queue and self._has_place():
            self._granted += 1
            trio.lowlevel.reschedule(self._queue.popleft(), outcome.Value(True))

    async def _hand_back_when_idle(self) -> None:
        """While pages wait for a place, hand the oldest back to the crawl's
        process whenever nothing else there can run: its core parses only
        what it has time for (module docstring)."""
        while True:
            if not self._queue:
                self._queued = trio.Event()
                await self._queued.wait()
            await all_tasks_blocked()
            if not self._queue:
                continue
            if self.crawl_tasks is None or self._on_child() >= self.crawl_tasks():
                trio.lowlevel.reschedule(self._queue.popleft(), outcome.Value(False))
            else:  # a task waits on a server: its page may need the core first
                self._changed = trio.Event()
                await self._changed.wait()

    def _on_child(self) -> int:
        """Tasks whose page is in the child, or waits for a place there."""
        return len(self._waiting) + len(self._queue) + self._granted

    def _send(self, data: bytes) -> None:
        """Queue ``data`` behind what waits; write what the socket takes now."""
        if self._out:
            self._out += data
            return
        assert self._sock is not None
        try:
            sent = self._sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            return  # the child is gone: the reader sees end-of-file
        if sent < len(data):
            self._out += data[sent:]
            self._writer.unpark_all()

    async def serve(self) -> None:
        """Start the child (at once, or when ``start_after`` pages have asked),
        and link it to the crawl until cancelled (the crawl's end); then end
        the child."""
        if starts_after(self._start_after, fork=self._may_fork()) > 0:
            await self._wanted.wait()
        ours, theirs = socket.socketpair()
        process: trio.Process | ForkedChild
        try:
            if self._may_fork():
                process = fork_child(theirs)
            else:
                process = await trio.lowlevel.open_process(
                    [*(self._command or child_command()), str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    start_new_session=True,
                )
        except OSError as exc:
            ours.close()
            self._give_up(f"the parse process could not start ({exc})")
            return
        except BaseException:  # cancelled before it started
            ours.close()
            raise
        finally:
            theirs.close()
        self.pid = process.pid
        self._process = process
        ours.setblocking(False)
        self._sock = ours
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write)
                nursery.start_soon(self._hand_back_when_idle)
                nursery.start_soon(self._watch_answers)
                why = await self._read()
                nursery.cancel_scope.cancel()
            self._wake_all()
            ours.close()
            with trio.CancelScope(shield=True):  # bounded: the warning says how it ended
                status = await _ended(process)
            self._give_up(f"{why} ({_describe(status)})")
        finally:
            starting = not self._ready and not self._broken
            self._wake_all()
            ours.close()
            if starting:  # the crawl ended first: no need to wait for its imports
                process.kill()
            with trio.CancelScope(shield=True):
                await _ended(process)

    def _may_fork(self) -> bool:
        return self._command is None and can_fork()

    async def _write(self) -> None:
        """Write out what ``_send`` could not, as the socket takes it."""
        assert self._sock is not None
        while True:
            while not self._out:
                await self._writer.park()
            await trio.lowlevel.wait_writable(self._sock)
            try:
                sent = self._sock.send(self._out)
            except BlockingIOError:
                continue
            except OSError:
                return  # the reader sees end-of-file
            del self._out[:sent]

    async def _read(self) -> str:
        """Hand each answer to its page; return why the child stopped."""
        assert self._sock is not None
        sock = self._sock
        buffer = b""
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                chunk = sock.recv(_READ_SIZE)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                return "the parse process ended"
            buffer = buffer + chunk if buffer else chunk
            start = 0
            try:
                while len(buffer) - start >= HEAD.size:
                    (length,) = HEAD.unpack_from(buffer, start)
                    end = start + HEAD.size + length
                    if end > len(buffer):
                        break
                    self._answer(marshal.loads(buffer[start + HEAD.size : end]))
                    start = end
            except (_Broken, ValueError, EOFError, TypeError) as exc:
                return f"the parse process sent something that is not an answer ({exc})"
            buffer = buffer[start:]

    def _answer(self, message: object) -> None:
        if not (isinstance(message, tuple) and len(message) == 2):
            raise _Broken(f"{type(message).__name__}")
        number, links = message
        if message == READY and not self._ready:
            self._ready = True
            return
        if not isinstance(number, int) or not 0 < number < self._next:
            raise _Broken(f"unknown number {number!r}")
        if isinstance(links, str):
            links = None  # the child raised: the caller parses the page again
        elif not isinstance(links, list):
            raise _Broken(f"{type(links).__name__} for links")
        self._changed.set()
        task = self._waiting.pop(number, None)
        if task is not None:  # None: that page was cancelled (its place is given)
            self._bytes -= self._sent.pop(number)[1]
            trio.lowlevel.reschedule(task, outcome.Value(links))
            self._give_places()

    def _hung(self) -> None:
        """A page waited ``answer_wait`` in vain: every page parses itself
        from now on, and the child is killed (``serve`` then sees it end)."""
        if self._broken:
            return
        self._wake_all()
        self._give_up(f"the parse process did not answer within {self._answer_wait:g} s (killed)")
        if self._process is not None:
            self._process.kill()

    def _wake_all(self) -> None:
        """Every waiting page parses itself (the child is gone)."""
        self._ready = False
        self._broken = True
        waiting, self._waiting = self._waiting, {}
        self._sent.clear()
        self._bytes = 0
        for task in waiting.values():
            trio.lowlevel.reschedule(task, outcome.Value(None))
        queue, self._queue = self._queue, deque()
        for task in queue:
            trio.lowlevel.reschedule(task, outcome.Value(False))

    def _give_up(self, why: str) -> None:
        """Log why the child is no use (once), and stop sending it pages."""
        self._broken = True
        if not self._warned:
            self._warned = True
            _LOG.warning("%s; parsing pages in the crawl's process", why)


async def _ended(process: trio.Process | ForkedChild) -> int | None:
    """Wait a little for ``process`` to exit, then kill it; its status."""
    with trio.move_on_after(EXIT_WAIT):
        return await process.wait()
    process.kill()
    with trio.move_on_after(EXIT_WAIT):
        return await process.wait()
    return None


def _describe(status: int | None) -> str:
    if status is None:
        return "it did not exit"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"
