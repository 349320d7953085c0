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
  or a quarter of a large pool: ``queue_size``; or their worth of bytes)
  and the crawl has nothing else to do: a page that finds the child's queue
  full waits for a free place, and when every crawler with a page waits on
  the child (``crawl_tasks``; one waiting on a server will need the core
  soon) and no answer from the child is waiting to be read, the page that
  waited longest is handed back and parsed in the crawl's process after all
  (``engine/parse_places.py``: that idle signal is the crawl's own state,
  not the scheduler's). So the crawl's core parses only when it would
  otherwise be idle: on a site of small pages the crawl's own work
  (fetching, bookkeeping) is the bottleneck and the child takes nearly
  every page; on one of big pages, where the child falls behind, the two
  cores share the parsing. (Parsing in the crawl's process whenever the
  child's queue was full, as before, made it parse a third to a half of
  postgresql-doc-15's pages while the child had time to spare.)
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
``serve`` runs beside the crawl's workers (a ``WorkPool`` helper), from the
crawl's start. Where the child may be a ``fork`` of the crawl's process
(``engine/parse_fork.py``: on Linux, with no other thread in the process;
ready at once, nothing to import), ``serve`` waits until ``START_AFTER``
pages have asked, so that a crawl of a few pages never forks (a fork and
its exit cost a 5-page crawl ~10 ms, 7 %); then it forks if it still may,
and else starts a new interpreter there and then (a thread began meanwhile:
trio keeps a worker thread ~10 s after a ``to_thread`` call, such as a big
page's parse, or opening ``--warc``'s writer). Where it may not fork
at the start, the child is a new interpreter, ``python -c``
(``parse_child.BOOTSTRAP``), ready ~0.1 s after it starts, so it starts at
once, its start overlapping robots.txt and the first pages; unless the
crawl is known to be small (``--max-pages`` under ``EARLY_START_PAGES``,
or depth 0: over, or nearly, before such a child is ready), which starts
it after ``START_AFTER`` pages too. Either way it holds one end of a
``socketpair`` in a session of its own (a terminal's Ctrl-C is the crawl's
to handle; the child ignores SIGINT as well), and when the crawl ends it
closes the socket: the child exits at end-of-file; after a short wait it is
killed (at once if it is still starting: a short crawl does not wait for
its imports). If the crawl's process dies, even by SIGKILL, the kernel
closes the socket and the child exits the same way.

The class ``ParseProcess`` is the crawl's handle on all this; the work is
shared by ``PageExchange`` (pages out, answers in) and ``AnswerWatch``
(the watchdog), in ``engine/parse_exchange.py``, and ``ChildPlaces`` (the
child's queue and the hand-back), in ``engine/parse_places.py``.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Final

import trio

from ..core.config import CrawlConfig
from ..core.scrape import Request
from .parse_child import BOOTSTRAP
from .parse_exchange import AnswerWatch, PageExchange
from .parse_fork import ForkedChild, can_fork, fork_child
from .parse_places import ChildPlaces

_LOG: Final = logging.getLogger("trio_crawl.parse_process")

#: Pages in the child at once in a small pool; more wait for a place, and
#: are handed back to the crawl's process when it is idle, so both cores
#: parse when the child falls behind. Each place also holds up to
#: ``parse_places.BYTES_PER_PLACE`` of body on average: bytes bound the
#: child's backlog in parsing time (lexbor reads ~150 MB/s: 16 places are
#: ~2 ms), which a count of pages does not. With libxml2 in the child, 8
#: pages suited libstdc++-12-doc (16 workers: 1.53 s with 8, 1.83 s with 64,
#: where the queue never filled and nothing was handed back); with lexbor
#: (``core/html_links.py``), 16 places of 16 KiB leave the crawl's process
#: less work on postgresql-doc-15 (13 KB pages: the child takes nearly all)
#: and keep the python3.11 docs (94 KB pages: about 3 at once) and
#: libstdc++'s as fast (benchmarks/README.md). A large pool gets more places
#: (``parse_places.WORKERS_PER_PLACE``).
MAX_IN_FLIGHT: Final = 16
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


class ParseProcess:
    """The crawl's end of a parse co-process (see the module docstring): it
    starts and ends the child (``serve``) and routes each page (``links``)
    through its collaborators: ``PageExchange`` (pages sent, answers read),
    ``ChildPlaces`` (the child's queue, and the hand-back when the crawl is
    idle) and ``AnswerWatch`` (the watchdog).

    ``pages``: pages whose links came from the child; ``pid``: the child's
    process id once started (None before, or if it could not start);
    ``ready``: whether it takes pages now. ``start_after``: pages parsed in
    the crawl's process before the child is started (0: at once, when
    ``serve`` begins; None: ``START_AFTER`` for a forked child, 0 for a new
    interpreter, see the module docstring). ``crawl_tasks`` and
    ``crawl_workers`` are ``ChildPlaces``'.
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
        self._asked = 0
        self._wanted = trio.Event()
        self._warned = False
        self._exchange = exchange = PageExchange()
        self._places = ChildPlaces(exchange, max_in_flight)
        exchange.freed = self._places.freed
        self.pages = 0
        self.pid: int | None = None

    def __repr__(self) -> str:
        exchange = self._exchange
        state = "broken" if exchange.broken else "ready" if exchange.ready else "starting"
        return (
            f"<ParseProcess pid={self.pid} {state} pages={self.pages} "
            f"in_flight={self.in_flight} queued={self.queued}>"
        )

    @property
    def ready(self) -> bool:
        return self._exchange.ready

    @property
    def start_after(self) -> int | None:
        return self._start_after

    @property
    def in_flight(self) -> int:
        """Pages sent to the child and not answered yet."""
        return len(self._exchange.waiting)

    @property
    def queue_size(self) -> int:
        """Pages the child may hold at once (``ChildPlaces.size``)."""
        return self._places.size

    @property
    def queued(self) -> int:
        """Pages waiting for a place in the child's queue."""
        return self._places.queued

    @property
    def crawl_tasks(self) -> Callable[[], int] | None:
        return self._places.crawl_tasks

    @crawl_tasks.setter
    def crawl_tasks(self, count: Callable[[], int] | None) -> None:
        self._places.crawl_tasks = count

    @property
    def crawl_workers(self) -> Callable[[], int] | None:
        return self._places.crawl_workers

    @crawl_workers.setter
    def crawl_workers(self, count: Callable[[], int] | None) -> None:
        self._places.crawl_workers = count

    async def links(self, body: bytes, url: str, content_type: str | None) -> list[str] | None:
        """The page's links from the child, or None: parse it yourself.
        A checkpoint when the child takes the page; cancelling it forgets
        the page (the child's answer is dropped)."""
        if not self._exchange.ready:
            self._asked += 1
            if self._asked >= starts_after(self._start_after, fork=True):
                self._wanted.set()
            return None
        places = self._places
        if not places.has_place() and not await places.wait():
            return None
        links = await self._exchange.ask(body, url, content_type)
        if links is not None:
            self.pages += 1
        return links

    async def serve(self) -> None:
        """Start the child (at once, or when ``start_after`` pages have asked),
        and link it to the crawl until cancelled (the crawl's end); then end
        the child."""
        if starts_after(self._start_after, fork=self._may_fork()) > 0:
            await self._wanted.wait()
        try:
            process, ours = await _start(self._command, fork=self._may_fork())
        except OSError as exc:
            self._give_up(f"the parse process could not start ({exc})")
            return
        self.pid = process.pid
        self._process = process
        exchange = self._exchange
        exchange.sock = ours
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(exchange.write)
                nursery.start_soon(self._places.hand_back_when_idle)
                nursery.start_soon(AnswerWatch(exchange, self._answer_wait, self._hung).run)
                why = await exchange.read()
                nursery.cancel_scope.cancel()
            self._wake_all()
            ours.close()
            with trio.CancelScope(shield=True):  # bounded: the warning says how it ended
                status = await _ended(process)
            self._give_up(f"{why} ({_describe(status)})")
        finally:
            starting = not exchange.ready and not exchange.broken
            self._wake_all()
            ours.close()
            if starting:  # the crawl ended first: no need to wait for its imports
                process.kill()
            with trio.CancelScope(shield=True):
                await _ended(process)

    def _may_fork(self) -> bool:
        return self._command is None and can_fork()

    def _hung(self) -> None:
        """A page waited ``answer_wait`` in vain: every page parses itself
        from now on, and the child is killed (``serve`` then sees it end)."""
        if self._exchange.broken:
            return
        self._wake_all()
        self._give_up(f"the parse process did not answer within {self._answer_wait:g} s (killed)")
        if self._process is not None:
            self._process.kill()

    def _wake_all(self) -> None:
        """Every waiting page parses itself (the child is gone)."""
        self._exchange.wake_all()
        self._places.wake_all()

    def _give_up(self, why: str) -> None:
        """Log why the child is no use (once), and stop sending it pages."""
        self._exchange.broken = True
        if not self._warned:
            self._warned = True
            _LOG.warning("%s; parsing pages in the crawl's process", why)


async def _start(
    command: list[str] | None, *, fork: bool
) -> tuple[trio.Process | ForkedChild, socket.socket]:
    """Start the child on one end of a new socket pair: a fork of this
    process, or ``command`` (default ``child_command()``) in a session of its
    own; the child and the crawl's end (non-blocking). Raises OSError if it
    cannot start."""
    ours, theirs = socket.socketpair()
    process: trio.Process | ForkedChild
    try:
        if fork:
            process = fork_child(theirs)
        else:
            process = await trio.lowlevel.open_process(
                [*(command or child_command()), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
    except BaseException:  # OSError, or cancelled before it started
        ours.close()
        raise
    finally:
        theirs.close()
    ours.setblocking(False)
    return process, ours


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
