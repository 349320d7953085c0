"""The politeness schedule as a ``WorkPool`` room.

``PoliteSchedule`` (pure, ``engine/schedule.py``) decides when a host may get
its next request; this wraps it with trio's clock and a timer task that hands
URLs back to the pool when their time comes. A URL waiting here holds no
crawler and blocks no other host, and it still counts as unfinished work
(the room's ``waiting``). Every hand-over publishes in the same synchronous
step that takes the URL off the schedule.

A request that is not a URL of the crawl (a rendered page's script or
``fetch()``) waits for its host's turn here too (``wait_turn``), ahead of
the URLs parked for the host (the schedule's urgent jobs): its page holds a
crawler and a browser tab while it waits. Such a ``Turn`` is not crawl work
(the task waiting for it holds it) and is not counted in ``waiting``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import trio

from ..core.frontier import Entry
from ..core.payloads import REQUISITE
from ..core.url import host_port
from .schedule import PoliteSchedule


class Turn:
    """A request waiting in ``wait_turn`` (compared by identity)."""

    __slots__ = ("granted", "refused")

    def __init__(self) -> None:
        self.granted = trio.Event()
        self.refused = False


#: What the schedule holds: the crawl's URLs, and other requests' turns.
Job = Entry | Turn


class ScheduleRoom:
    """Per-host rate and concurrency limits, retry back-offs: a pool room."""

    def __init__(
        self,
        schedule: PoliteSchedule[Job],
        publish: Callable[[Entry], None],
    ) -> None:
        self.schedule = schedule
        self._publish = publish
        self._changed = trio.Event()
        #: Turns parked in the schedule (not crawl work: not in ``waiting``).
        self._turns = 0

    @property
    def waiting(self) -> int:
        return self.schedule.waiting - self._turns

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        self.schedule.set_crawl_delay(host, delay)

    def try_start(self, entry: Entry, host: str) -> bool:
        """Reserve a slot of ``host`` for ``entry`` now, or park it (False)."""
        if self.schedule.try_start(entry, host, trio.current_time()):
            return True
        self._changed.set()
        return False

    def release(self, host: str) -> None:
        """A request to ``host`` is over: its slot may go to a parked URL
        (and its Crawl-delay, if any, counts from now)."""
        self.schedule.release(host, trio.current_time())
        if self.schedule.waiting:
            self._hand_over_ready()
            self._changed.set()

    def unreserve(self, entry: Entry, host: str) -> None:
        """``entry`` will not be fetched after all (robots, budget, stop).

        Its host's reserved slot frees a URL parked behind it, at a time the
        timer task must hear about: without this wake-up a crawl whose page
        budget ran out while URLs waited for ``--rate`` never ended (#13)."""
        self.schedule.unreserve(entry, host)
        if self.schedule.waiting:
            self._changed.set()

    def defer(self, entry: Entry, host: str, delay: float) -> None:
        """Park ``entry`` (a retry) for ``delay`` seconds."""
        self.schedule.defer(entry, host, trio.current_time() + delay)
        self._changed.set()

    def remove_unstarted(self) -> list[Entry]:
        """Take the parked URLs that never started off the schedule (the page
        budget is spent: they will not start), leaving retries parked."""
        removed = self.schedule.remove_where(
            lambda job: isinstance(job, Entry) and job.attempts == 0
        )
        self._changed.set()
        return [entry for entry in removed if isinstance(entry, Entry)]

    def drain(self) -> list[Entry]:
        """Take every parked URL off the schedule (a stopping crawl); the
        turns waiting are refused."""
        drained: list[Entry] = []
        for job in self.schedule.drain():
            if isinstance(job, Turn):
                self._turns -= 1
                job.refused = True
                job.granted.set()
            else:
                drained.append(job)
        self._changed.set()
        return drained

    async def wait_turn(self, host: str) -> bool:
        """Wait until a request to ``host`` may start, ahead of the URLs
        parked for it, and record its start: the caller ``release``s the host
        when the request is over. False (and nothing to release) if the crawl
        stopped first. Checkpoint; cancelled, the turn is given up."""
        await trio.lowlevel.checkpoint_if_cancelled()
        turn = Turn()
        if self.schedule.try_start(turn, host, trio.current_time(), urgent=True):
            return True
        self._turns += 1
        self._changed.set()
        try:
            await turn.granted.wait()
        except BaseException:
            if not turn.granted.is_set():
                self._turns -= 1
            self.schedule.withdraw(turn, host)
            self._changed.set()
            raise
        if turn.refused:
            return False
        started = self.schedule.try_start(turn, host, trio.current_time())
        assert started, "a turn handed over is reserved"
        return True

    def _hand_over_ready(self) -> None:
        for job in self.schedule.pop_ready(trio.current_time()):
            if isinstance(job, Turn):
                self._turns -= 1
                job.granted.set()
            else:
                self._publish(job)

    async def serve(self) -> None:
        """Hand parked URLs back to the crawlers when their time comes."""
        while True:
            deadline = self.schedule.next_deadline()
            with trio.move_on_at(math.inf if deadline is None else deadline):
                await self._changed.wait()
            if self._changed.is_set():
                self._changed = trio.Event()
            self._hand_over_ready()


class HostSlots:
    """The host slots the crawler's requests hold, by URL, each released
    once: when its fetch ends or, for a page about to be rendered, when the
    rendering fetcher says its request is over, so that the page's own
    requests can take the slot while it renders (``engine/render.py``)."""

    def __init__(self, schedule: ScheduleRoom) -> None:
        self._schedule = schedule
        self._held: Counter[str] = Counter()
        #: Whether the fetcher has a URL's answer without a request (set
        #: by a rendering fetcher: what the browser already loaded).
        self.answers: Callable[[str], bool] | None = None

    def answered_at_once(self, entry: Entry, host: str) -> bool:
        """Whether ``entry`` (a requisite) is answered without a request; if
        so, its reserved slot, if any, is given back. Nothing between this
        and the fetch is a checkpoint, so the answer is still there."""
        answers = self.answers
        if answers is None or entry.payload is not REQUISITE or not answers(entry.url):
            return False
        self._schedule.unreserve(entry, host)
        return True

    def hold(self, url: str, *, held: bool) -> None:
        """The request for ``url`` started with its host's slot (if ``held``)."""
        if held:
            self._held[url] += 1

    def release(self, url: str) -> None:
        """The request for ``url`` is over: its slot, if still held, is free."""
        count = self._held.pop(url, 0)
        if count:
            self._schedule.release(host_port(url))
            if count > 1:
                self._held[url] = count - 1
