"""WorkPool: N workers that consume and produce work, and an exact end.

Rationale
---------
A crawler is both a consumer and a producer: every page it takes may publish
more pages. "When is the job done?" is then the hard part. A queue's
``join()`` or a "queue empty and nobody busy" check read at the wrong moment
stops early, while a URL sits in a worker's hands between ``receive()`` and
the moment the worker counts itself busy. This module is the design card of
trio-crawl as a reusable primitive, with no crawling in it:

* A nursery runs up to N worker tasks. They share cloned receive ends of one
  unbounded memory channel; ``publish()`` puts work in it with
  ``send_nowait`` (synchronous: never a checkpoint, never blocks).
* A worker holds a ``trio.CapacityLimiter`` token while it handles an item.
  N is the limiter's ``total_tokens``: ``resize()`` changes it at any
  moment, and a ``PoolSizer`` (``core/pool_sizing.py``) can turn that knob
  by itself from CPU time, loop lag and busy workers (any ``Sizer``).
* Worker tasks exist only while there is work: ``publish()`` starts one when
  the queued items outnumber the tasks about to take them and a token is
  free; a worker that finds nothing to take (or no free token) ends.
* A supervisor cancels the nursery once no token is borrowed, the buffer is
  empty and every *room* is empty: exactly then, never earlier. It is woken
  by an event, never by polling.

Rooms are the places where work waits outside the channel: a politeness
schedule holding URLs until their host's next slot, a disk or Redis queue, a
gate that holds deep pages back. A room is any object with a ``waiting``
count; it hands items back with ``publish()`` in the same synchronous step
that removes them from its count, and calls ``check_idle()`` after it drops
items without publishing them.

The invariant
-------------
At every checkpoint, every unfinished item is in exactly one place: the
channel's buffer (or the priority heap beside it), a worker holding a token,
or a room. So "no work left" is exactly::

    tokens borrowed == 0 and buffer == 0 and heap == 0 and every room empty

Three rules keep it (docs/termination.md has the race analysis):

1. A worker *takes* an item and *borrows* its token in one synchronous step
   (``receive_nowait`` then ``acquire_nowait``, no checkpoint between).
   ``await receive()`` would not do: a memory channel hands an item straight
   to a parked receiver without it ever showing in the buffer, and the
   receiver checkpoints before it could borrow. A worker first checks that a
   token is free (the count may have been lowered), in the same step.
2. Every move between places is synchronous: a worker publishes what it
   produced before its token goes back; a room publishes in the same step
   that removes an item from its count.
3. Only a token release, or a room dropping work, can make the condition
   true, so those two call ``check_idle()``, which wakes the supervisor; the
   supervisor checks again before it cancels.

And one rule keeps the pool live with tasks that come and go: whenever an
item is queued, a worker task that has not yet looked is pending, or every
token is borrowed (so a busy worker will look when it finishes).
``publish()`` and ``resize()`` start tasks to make that true; a worker ends
only when nothing is queued or no token is free. A resize moves no item, so
rules 1-3 and the idle condition do not depend on the token count.

Example: a recursive directory walk (``examples/directory_walk.py``)::

    async def visit(path: trio.Path) -> None:
        for child in await path.iterdir():
            if await child.is_dir():
                pool.publish(child)
            else:
                sizes.append((await child.stat()).st_size)

    pool = WorkPool[trio.Path](workers=8)
    pool.publish(trio.Path("/usr/share/doc"))
    await pool.run(visit)  # returns when the last directory has been read
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import trio

T = TypeVar("T")

__all__ = ["Room", "Sizer", "WorkPool", "WorkPoolStatistics"]


class Sizer(Protocol):
    """What resizes a pool: ``PoolSizer`` (``core/pool_sizing.py``) is one."""

    @property
    def target(self) -> int:
        """The token count to start with."""
        ...

    def observe(
        self, *, now: float, cpu_seconds: float, busy: float, lag: float, ceiling: float
    ) -> int:
        """Take one sample (trio time, process CPU seconds, tokens borrowed,
        how late the sample's timer fired, the most workers the work can use)
        and return the token count."""
        ...


class Room(Protocol):
    """A place where unfinished work waits outside the pool's channel."""

    @property
    def waiting(self) -> int:
        """How many unfinished items the room holds right now."""
        ...


@dataclass(frozen=True, slots=True)
class WorkPoolStatistics:
    """A snapshot of a pool, exact at the instant it is taken.

    Attributes:
        workers: the number of tokens: the most items handled at once (the
            sizer's target when the pool sizes itself).
        tasks: worker tasks alive now (at most ``workers``, plus those
            finishing after a shrink; 0 when there is no work).
        peak_tasks: the most worker tasks alive at once so far.
        queued: items in the channel's buffer and the priority heap.
        active: tokens borrowed: items being handled.
        waiting: items held by rooms.
        published: items published so far.
        completed: items a worker has finished handling.
        stopping: whether ``stop()`` was called.
    """

    workers: int
    queued: int
    active: int
    waiting: int
    published: int
    completed: int
    stopping: bool
    tasks: int = 0
    peak_tasks: int = 0


class WorkPool(Generic[T]):
    """N workers sharing one queue of work they also add to; ends exactly.

    Args:
        workers: the token count: at most this many items are handled at
            once (a worker holds one token while busy). With ``sizer`` it is
            only the start: the sizer's target replaces it.
        grace: after ``stop()``, how long busy workers get to finish before
            the pool is cancelled.
        on_take: called synchronously after every attempt to take an item,
            with the number still queued (a disk-backed room uses it to
            refill the channel before it runs dry).
        sizer: resize the pool by itself, every ``sample_seconds``, to what
            ``sizer.observe`` returns; ``ceiling`` (called at each sample)
            tells it the most workers the work can use now.
        cpu_time: the process CPU clock the sizer reads (tests simulate it).
        on_resize: called with (seconds since ``run()`` started, new token
            count) after each resize.
    """

    def __init__(
        self,
        workers: int,
        *,
        grace: float = math.inf,
        on_take: Callable[[int], None] | None = None,
        sizer: Sizer | None = None,
        sample_seconds: float = 0.1,
        ceiling: Callable[[], float] | None = None,
        cpu_time: Callable[[], float] = time.process_time,
        on_resize: Callable[[float, int], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.grace = grace
        self._on_take = on_take
        self._sizer = sizer
        self._sample_seconds = sample_seconds
        self._ceiling = ceiling
        self._cpu_time = cpu_time
        self._on_resize = on_resize
        if sizer is not None:
            workers = sizer.target
        self._send, self._receive = trio.open_memory_channel[T](math.inf)
        self._heap: list[tuple[int, int, T]] = []
        self._order = itertools.count()
        self._limiter = trio.CapacityLimiter(workers)
        #: Worker tasks alive, and those started that have not looked yet.
        self._tasks = 0
        self._pending = 0
        self._peak_tasks = 0
        self._nursery: trio.Nursery | None = None
        self._started_at = 0.0
        self._handle: Callable[[T], Awaitable[None]] | None = None
        self._wake_supervisor = trio.Event()
        self._rooms: list[Room] = []
        self._published = 0
        self._in_channel = 0  # items in the channel (publish adds, _take removes)
        self._completed = 0
        self._stopping = False
        self._aborted = False
        self._running = False
        self._cancel_scope: trio.CancelScope | None = None

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<WorkPool workers={s.workers} queued={s.queued} active={s.active} "
            f"waiting={s.waiting} completed={s.completed}>"
        )

    # -- producing ---------------------------------------------------------

    def publish(self, item: T, priority: int = 0) -> None:
        """Add ``item`` to the work; higher ``priority`` is taken first, FIFO
        within a level (0 is the default; negative goes after everything).

        Not a checkpoint and never blocks: the channel is unbounded. Call it
        before giving up the token of the item that produced ``item``.
        """
        if priority:
            # Rare: a heap beside the channel, part of the buffer (rule 1).
            heapq.heappush(self._heap, (-priority, next(self._order), item))
        else:
            self._send.send_nowait(item)
            self._in_channel += 1
        self._published += 1
        self._start_workers()

    @property
    def workers(self) -> int:
        """The token count: the most items handled at once."""
        return int(self._limiter.total_tokens)

    @property
    def busy(self) -> int:
        """Items being handled now (tokens borrowed)."""
        return int(self._limiter.borrowed_tokens)

    @property
    def tasks(self) -> int:
        """Worker tasks alive: the busy ones, and those started and not yet
        run, about to take an item (every other worker task has ended)."""
        return self._tasks

    def resize(self, workers: int) -> None:
        """Set the token count to ``workers`` (at least 1). Not a checkpoint.

        Growing starts tasks for queued work at once; shrinking takes no
        token back: busy workers finish their items and end while more
        tokens are borrowed than there are. No item moves, so no work is
        lost or doubled and the end stays exact (docs/termination.md).
        """
        if workers < 1:
            raise ValueError("workers must be at least 1")
        if workers == self._limiter.total_tokens:
            return
        self._limiter.total_tokens = workers
        if self._on_resize is not None:
            self._on_resize(trio.current_time() - self._started_at, workers)
        self._start_workers()

    def _start_workers(self) -> None:
        """Start a worker task for each queued item that no task is about to
        take, while tokens are free (the liveness rule). Not a checkpoint."""
        nursery = self._nursery
        if nursery is None or self._handle is None:
            return  # run() starts them
        free = int(self._limiter.total_tokens) - int(self._limiter.borrowed_tokens)
        want = min(self.queued, free) - self._pending
        for _ in range(want):
            self._pending += 1
            self._tasks += 1
            nursery.start_soon(self._work, self._handle, self._receive.clone())
        if self._tasks > self._peak_tasks:
            self._peak_tasks = self._tasks

    def add_room(self, room: Room) -> None:
        """Count ``room``'s waiting items as unfinished work. Not a checkpoint."""
        self._rooms.append(room)

    # -- the end -----------------------------------------------------------

    @property
    def queued(self) -> int:
        """Items published and not yet taken. Read twice a page: counted here
        (``_in_channel``) rather than from the channel's ``statistics()``, a new
        object per call; ``is_idle``, the supervisor's test, asks the channel."""
        return self._in_channel + len(self._heap)

    def is_idle(self) -> bool:
        """True when no work is left anywhere (see the invariant)."""
        return (
            self._limiter.borrowed_tokens == 0
            and self._receive.statistics().current_buffer_used == 0
            and not self._heap
            and all(room.waiting == 0 for room in self._rooms)
        )

    def check_idle(self) -> None:
        """Wake the supervisor if no work is left. Not a checkpoint.

        The pool calls it after each token release; call it yourself after a
        room drops items without publishing them.
        """
        if self.is_idle():
            self._wake_supervisor.set()

    @property
    def stopping(self) -> bool:
        return self._stopping

    def stop(self) -> None:
        """Begin a graceful stop; calling it a second time aborts.

        Workers go on taking items (a worker should drop what it takes once
        ``stopping`` is true; rooms should drop theirs), busy workers get
        ``grace`` seconds, then the pool is cancelled. Not a checkpoint.
        """
        if self._stopping:
            self.abort()
            return
        self._stopping = True
        self._wake_supervisor.set()

    def abort(self) -> None:
        """Cancel the pool now. Not a checkpoint."""
        self._stopping = True
        self._aborted = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    def statistics(self) -> WorkPoolStatistics:
        return WorkPoolStatistics(
            workers=self.workers,
            queued=self.queued,
            active=int(self._limiter.borrowed_tokens),
            waiting=sum(room.waiting for room in self._rooms),
            published=self._published,
            completed=self._completed,
            stopping=self._stopping,
            tasks=self._tasks,
            peak_tasks=self._peak_tasks,
        )

    # -- running -----------------------------------------------------------

    async def run(
        self,
        handle: Callable[[T], Awaitable[None]],
        *,
        helpers: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        """Run the workers on ``handle(item)`` until no work is left.

        ``helpers`` run beside the workers (a room's timer, a feeder) and are
        cancelled with them. An exception from ``handle`` or a helper cancels
        the pool and propagates (in an ExceptionGroup, as trio nurseries do).
        A pool runs once. Returns when idle, or after ``stop()`` and its grace
        period; ``abort()`` makes it return at once.
        """
        if self._running:
            raise RuntimeError("a WorkPool runs once")
        self._running = True
        self._started_at = trio.current_time()
        # The original ends stay open until every task is done: ``publish``
        # sends on the original send end, from workers and rooms alike.
        async with self._send, self._receive:
            try:
                async with trio.open_nursery(strict_exception_groups=True) as nursery:
                    self._cancel_scope = nursery.cancel_scope
                    if self._aborted:
                        nursery.cancel_scope.cancel()
                    nursery.start_soon(self._supervise, nursery.cancel_scope)
                    if self._sizer is not None:
                        nursery.start_soon(self._size, self._sizer)
                    for helper in helpers:
                        nursery.start_soon(helper)
                    self._nursery, self._handle = nursery, handle
                    self._start_workers()  # for what was published before run()
                    self.check_idle()  # nothing published: done at once
            finally:
                self._nursery = None  # a late publish starts no task in a closed nursery

    async def _work(
        self, handle: Callable[[T], Awaitable[None]], receive: trio.MemoryReceiveChannel[T]
    ) -> None:
        self._pending -= 1
        try:
            with receive:  # a synchronous close: the count drops as the task ends
                while self._limiter.available_tokens > 0:
                    try:
                        item = self._take(receive)
                    except trio.WouldBlock:
                        return  # no work: this task ends (publish starts another)
                    # Rule 1: no checkpoint between taking the item and the token.
                    self._limiter.acquire_nowait()
                    try:
                        await handle(item)
                    finally:
                        # On an exception the pool is ending anyway: no idle check,
                        # so an "idle" verdict cannot mask the real error.
                        self._limiter.release()
                    self._completed += 1
                    self.check_idle()
        finally:
            self._tasks -= 1

    async def _size(self, sizer: Sizer) -> None:
        """Feed the sizer every ``sample_seconds`` and resize to its target.
        A display-like tick, not part of termination (it is cancelled with
        the workers)."""
        while True:
            due = trio.current_time() + self._sample_seconds
            await trio.sleep_until(due)
            now = trio.current_time()
            ceiling = self._ceiling() if self._ceiling is not None else math.inf
            target = sizer.observe(
                now=now,
                cpu_seconds=self._cpu_time(),
                busy=self._limiter.borrowed_tokens,
                lag=now - due,
                ceiling=ceiling,
            )
            self.resize(target)

    def _take(self, receive: trio.MemoryReceiveChannel[T]) -> T:
        """The next item: positive priorities, then the channel, then negative
        ones. Synchronous (rule 1); raises WouldBlock when nothing is queued."""
        heap = self._heap
        try:
            if heap and heap[0][0] < 0:
                return heapq.heappop(heap)[2]
            try:
                item = receive.receive_nowait()
                self._in_channel -= 1
                return item
            except trio.WouldBlock:
                if heap:
                    return heapq.heappop(heap)[2]
                raise
        finally:
            if self._on_take is not None:
                self._on_take(self.queued)

    async def _supervise(self, cancel_scope: trio.CancelScope) -> None:
        """Cancel the nursery exactly when no work is left (or after a stop's
        grace period). Woken by ``check_idle`` and ``stop``; never polls."""
        while not self._stopping:
            await self._wake_supervisor.wait()
            # A fresh event before looking: a wake-up after this line is kept.
            self._wake_supervisor = trio.Event()
            if self.is_idle():
                cancel_scope.cancel()
                return
        with trio.move_on_after(self.grace):
            while not self.is_idle():
                await self._wake_supervisor.wait()
                self._wake_supervisor = trio.Event()
        cancel_scope.cancel()
