"""Places in the parse child's queue, and who parses a page that finds none.

``engine/parse_process.py`` explains the co-process. The child holds a
bounded backlog of pages (``queue_size`` pages, and their worth of bytes:
``BYTES_PER_PLACE`` a place). A page that finds it full waits here for a
place, oldest first; and the crawl's core parses a waiting page itself only
when it would otherwise be idle.

The idle signal
---------------
"Idle" is read from what the crawl knows, not from the scheduler: every
task of the crawl that holds a page (``crawl_tasks``: the pool's worker
tasks, busy or about to take an item) has it in the child or waiting for a
place there, and no answer from the child is waiting to be read (it would
free a place first). A task waiting on a server is not idle: its page will
need the core soon. Then the page that waited longest is handed back to its
task, which parses it in the crawl's process. The check runs when something
changes it (a page queued, an answer read), never on a timer, and it looks
at no task but the crawl's (a program's own tasks beside the crawl neither
hold nor hurry it). The scheduler's own test, "every task blocked"
(``wait_all_tasks_blocked``), was the signal before: it is public only in
``trio.testing`` (which may import pytest), watches every task of the run,
a library user's too, and is woken where a MockClock's autojump would be.
Without ``crawl_tasks``, the pages that wait on the
child are taken for all the crawl's work. Either way one page is handed
back per change at most: its task has the core's work until it asks again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

import outcome
import trio

from .parse_exchange import PageExchange

#: A place in the child's queue holds up to this much body on average
#: (``parse_process.MAX_IN_FLIGHT`` says how it was chosen).
BYTES_PER_PLACE: Final = 16 * 1024
#: A pool of more than ``max_in_flight * WORKERS_PER_PLACE`` workers gives the
#: child one place per this many workers. A large pool is a latency-bound
#: crawl whose loop, busy with hundreds of tasks, reads the child's answers
#: up to a turn late: a queue of 8 then capped the child at 8 pages a turn
#: (``benchmarks/broad.py``, 1,000 hosts x 100 ms: ~1,600 pages/s, 70% of
#: the crawl's 0 ms rate; with a queue of 64, 87%). A small pool keeps
#: ``max_in_flight``.
WORKERS_PER_PLACE: Final = 4


class ChildPlaces:
    """The child's queue: its places, the pages waiting for one, and the
    hand-back of the oldest when the crawl is idle (module docstring).

    ``crawl_tasks``: how many of the crawl's tasks hold a page now, if the
    crawl says; ``crawl_workers``: its worker count, if it says (a large
    pool gets a deeper queue: ``size``).
    """

    def __init__(self, exchange: PageExchange, max_in_flight: int) -> None:
        self._exchange = exchange
        self._max_in_flight = max_in_flight
        #: pages waiting for a place, oldest first
        self._queue: deque[trio.lowlevel.Task] = deque()
        #: places given to pages of ``_queue`` that have not taken them yet
        self._granted = 0
        #: set when a page is queued, and by each answer while pages are queued
        self._changed = trio.Event()
        self.crawl_tasks: Callable[[], int] | None = None
        self.crawl_workers: Callable[[], int] | None = None

    @property
    def size(self) -> int:
        """Pages the child may hold at once: ``max_in_flight``, or one per
        ``WORKERS_PER_PLACE`` workers of a larger pool."""
        workers = self.crawl_workers() if self.crawl_workers is not None else 0
        return max(self._max_in_flight, workers // WORKERS_PER_PLACE)

    @property
    def queued(self) -> int:
        """Pages waiting for a place."""
        return len(self._queue)

    def has_place(self) -> bool:
        """Whether one more page may go to the child now: fewer than ``size``
        pages there, and fewer bytes of bodies than ``BYTES_PER_PLACE`` times
        that (one page always may)."""
        pages = len(self._exchange.waiting) + self._granted
        size = self.size
        return pages < size and (pages == 0 or self._exchange.bytes < size * BYTES_PER_PLACE)

    async def wait(self) -> bool:
        """Wait for a place: True once this page has one, False if its task
        is to parse it (the crawl went idle, or the child is gone). A
        checkpoint; cancelling it forgets the page."""
        task = trio.lowlevel.current_task()
        self._queue.append(task)
        self._changed.set()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._queue.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        placed: bool = await trio.lowlevel.wait_task_rescheduled(abort)
        if placed:
            self._granted -= 1
        return placed and self._exchange.ready

    def freed(self) -> None:
        """Places may be free (an answer came, a page was cancelled): the
        pages that waited longest have them."""
        queue = self._queue
        while queue and self.has_place():
            self._granted += 1
            trio.lowlevel.reschedule(queue.popleft(), outcome.Value(True))
        if queue:
            self._changed.set()

    def wake_all(self) -> None:
        """Every page waiting for a place parses itself (the child is gone)."""
        queue, self._queue = self._queue, deque()
        for task in queue:
            trio.lowlevel.reschedule(task, outcome.Value(False))

    async def hand_back_when_idle(self) -> None:
        """While pages wait for a place, hand the oldest back to its task
        whenever the crawl is idle (module docstring). Runs beside the
        crawl's workers until cancelled."""
        while True:
            self._changed = trio.Event()
            if self._queue and self.idle():
                # One page at a time: its task is the crawl's work until it
                # asks again (or ends), which is a change.
                trio.lowlevel.reschedule(self._queue.popleft(), outcome.Value(False))
            await self._changed.wait()

    def idle(self) -> bool:
        """Every crawl task with a page waits on the child, and no answer is
        on its way (the order of the tests: cheapest first)."""
        on_child = len(self._exchange.waiting) + len(self._queue) + self._granted
        if self.crawl_tasks is not None and on_child < self.crawl_tasks():
            return False  # a task waits on a server: its page may need the core first
        return not self._exchange.answer_waiting()
