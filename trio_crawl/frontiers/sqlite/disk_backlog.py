"""The trio side of ``--state``: the disk backlog the engine feeds from.

``CrawlState`` (``state.py``) is synchronous SQLite; this wraps it for the
engine. Every call runs in a worker thread, one at a time (a limiter of one:
the connection is never used by two threads at once), so the event loop
never waits on the disk.

What the engine relies on
-------------------------
1. ``admit`` is atomic with respect to every other call: the seen-check and
   the insert of a page's new links (or of one chunk of a huge page's) happen
   in one thread call, so two pages that find the same link admit it once.
   It returns only after the rows are committed, so a page's children are on
   disk before its record is written: a crash can lose a record's children
   only together with the record. Its memory is that of the URLs it is given:
   a huge page's links come in chunks (``parse.LINK_CHUNK``), never as one
   list of Admit ops.
2. ``queued_on_disk`` changes only synchronously, right after a thread call
   returns, in the same step in which the engine publishes what came back:
   the termination invariant counts it as a fourth place (docs/termination.md).
3. Start and Finish are written behind: ``note`` keeps them in a list, and
   they are applied, in order and in one transaction, before the next disk
   call (``admit``, ``take``; an offer applies them first in its own
   transaction, one commit per page instead of two) or by ``flush``, which
   the frontier calls every ``FLUSH_INTERVAL`` (0.5 s). Losing the last ones
   in a crash only means a URL looks in flight on resume, and the output
   file, which is reconciled first, says whether it was recorded.
4. Pages' offers share thread calls: the state file's thread is a broad
   crawl's bottleneck (a page's offer finds the thread busy with the
   previous ones nearly always), and a trip to a worker thread costs about
   40 us of CPU. The first ``offer_links`` to find none running leads: it
   takes every offer queued meanwhile into one thread call, where each is
   still its own call of ``CrawlState.offer_links`` (its own transaction, in
   arrival order, its own exception), and again until none is queued. An
   offer is cancellable until a thread call takes it, and then runs to the
   end and returns, as a thread call of its own did (trio does not abandon
   it); the leader's calls are shielded, so no taken offer is left waiting.
5. ``read_ahead`` (a recrawl's: ``visits.StateVisits``) is given, in the
   worker thread, the URLs each call hands to memory, before the call
   returns: the engine asks nothing of a URL before it has it, so what
   ``read_ahead`` reads of them is there when the engine asks.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from .disk_queue import Row
from .marks import Admit, Keep, Mark, Op
from .offering import Offered
from .state import CrawlState

T = TypeVar("T")

#: How often the frontier writes the noted Start/Finish ops (``flush``).
FLUSH_INTERVAL = 0.5


@dataclass(eq=False)
class _Offer:
    """One page's ``offer_links``, waiting for a thread call (rule 4)."""

    call: Callable[[], Offered]
    done: trio.Event = field(default_factory=trio.Event)
    taken: bool = False
    offered: Offered | None = None
    error: BaseException | None = None


class DiskBacklog:
    """The queued URLs that do not fit the memory window, and the write log."""

    def __init__(self, state: CrawlState) -> None:
        self.state = state
        self.queued_on_disk = state.queued_on_disk()
        self._limiter = trio.CapacityLimiter(1)
        self._pending: list[Mark] = []
        #: Keep ops noted, and the last of them known to be committed: a
        #: page's record waits for its visit (``keep``, ``kept``).
        self._kept_noted = 0
        self._kept_taken = 0  # in the worker thread
        self._kept_committed = 0
        self._offers: list[_Offer] = []  # queued for the next thread call (rule 4)
        self._leading = False  # an offer_links is running the queued ones
        #: Rule 5: called in the worker thread with the URLs handed to memory.
        self.read_ahead: Callable[[Sequence[str]], None] | None = None

    def _ahead(self, urls: Sequence[str]) -> None:
        """In the worker thread: rule 5. Only a shortcut: should the read
        fail, each URL's visit is read when it is asked for, as without it."""
        if self.read_ahead is not None and urls:
            with contextlib.suppress(Exception):
                self.read_ahead(urls)

    def _ahead_rows(self, offered: Offered) -> Offered:
        """In the worker thread: rule 5 for an offer's kept rows."""
        self._ahead([row.url for row in offered.kept])
        return offered

    async def _run(self, fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn, limiter=self._limiter)

    def _apply_pending(self) -> None:
        """In the worker thread: write the noted ops first (keeps their order)."""
        ops, kept = self._take_pending()
        if ops:
            self.state.apply(ops)
        self._committed(kept)

    def _take_pending(self) -> tuple[list[Mark], int]:
        """In the worker thread: the noted ops, for an offer to apply first,
        and the number of Keep ops noted up to them."""
        ops, self._pending = self._pending, []
        # Takes are one at a time (the limiter) and in order: the Keep ops
        # taken so far are the tickets up to this count.
        self._kept_taken += sum(type(op) is Keep for op in ops)
        return ops, self._kept_taken

    def _committed(self, kept: int) -> None:
        """In the worker thread, once the ops taken with ``kept`` are committed."""
        self._kept_committed = max(self._kept_committed, kept)

    def note(self, op: Mark) -> None:
        """Keep a Start/Finish to be written before the next disk call or by
        ``flush``. Not a checkpoint."""
        self._pending.append(op)

    def keep(self, op: Keep) -> int:
        """Note a visit like a Start/Finish; return its ticket for ``kept``."""
        self._pending.append(op)
        self._kept_noted += 1
        return self._kept_noted

    async def kept(self, ticket: int) -> None:
        """Return once the visit of ``ticket`` is committed: at once when the
        page's offer of links took it (most pages), else after one thread
        call (the limiter lets no call run before those that took earlier
        ops have returned)."""
        if self._kept_committed < ticket:
            await self.flush()

    async def run(self, job: Callable[[], T]) -> T:
        """``job()`` in the worker thread, after the noted ops are written."""

        def work() -> T:
            self._apply_pending()
            return job()

        return await self._run(work)

    async def admit(
        self, urls: Sequence[str], depth: int, referrer: str | None, room: int
    ) -> list[str]:
        """Admit the unseen ``urls`` at ``depth``; the first ``room`` of them stay
        in memory (returned, for the engine to publish), the rest queue on disk."""

        def work() -> tuple[list[str], int]:
            self._apply_pending()
            new = self.state.filter_unseen(urls)
            keep = new[: max(room, 0)]
            spill = new[len(keep) :]
            ops: list[Op] = [Admit(u, depth, referrer, in_memory=True) for u in keep]
            ops.extend(Admit(u, depth, referrer) for u in spill)
            if ops:
                self.state.apply(ops)
            self._ahead(keep)
            return keep, len(spill)

        keep, spilled = await self._run(work)
        self.queued_on_disk += spilled
        return keep

    async def offer_links(
        self,
        parent: str,
        links: Sequence[str],
        *,
        room: int,
        max_depth: int | None,
        settles: bool,
    ) -> Offered:
        """``CrawlState.offer_links`` in the worker thread (atomic, as ``admit``)."""

        def work() -> Offered:
            ops, kept = self._take_pending()
            offered = self.state.offer_links(
                parent, links, room=room, max_depth=max_depth, settles=settles, before=ops
            )
            self._committed(kept)
            return offered  # read ahead with its batch (``_run_offers``)

        offer = _Offer(work)
        self._offers.append(offer)
        if not self._leading:
            await self._lead()
        else:
            await self._wait_for(offer)
        if offer.error is not None:
            raise offer.error
        assert offer.offered is not None
        return self._count(offer.offered)

    async def _lead(self) -> None:
        """Run the queued offers, a thread call for all those queued at once,
        until none is left (rule 4). The thread is held with ``_limiter``, as
        by every call (one thread at a time on the connection)."""
        self._leading = True
        try:
            with trio.CancelScope(shield=True):  # taken offers are never left waiting
                while self._offers:
                    # The batch is taken once the thread is ours: every offer
                    # queued while the previous call ran goes in this one.
                    async with self._limiter:
                        batch, self._offers = self._offers, []
                        for offer in batch:
                            offer.taken = True
                        try:
                            await trio.to_thread.run_sync(
                                functools.partial(_run_offers, batch, self._ahead)
                            )
                        finally:
                            for offer in batch:
                                if offer.offered is None and offer.error is None:
                                    offer.error = RuntimeError("the state file's call failed")
                                offer.done.set()
        finally:
            self._leading = False

    async def _wait_for(self, offer: _Offer) -> None:
        """Wait for the leader to run ``offer``: cancellable until it is taken."""
        try:
            await offer.done.wait()
        except trio.Cancelled:
            if not offer.taken:
                self._offers.remove(offer)
                raise
            with trio.CancelScope(shield=True):
                await offer.done.wait()

    async def offer_seeds(self, urls: Sequence[str], referrer: str, *, room: int) -> Offered:
        """``CrawlState.offer_seeds`` in the worker thread."""

        def work() -> Offered:
            ops, kept = self._take_pending()
            offered = self.state.offer_seeds(urls, referrer, room=room, before=ops)
            self._committed(kept)
            return self._ahead_rows(offered)

        return self._count(await self._run(work))

    async def offer_redirect(
        self, parent: str, target: str, *, room: int, max_depth: int | None, settles: bool
    ) -> Offered:
        """``CrawlState.offer_redirect`` in the worker thread."""

        def work() -> Offered:
            ops, kept = self._take_pending()
            offered = self.state.offer_redirect(
                parent, target, room=room, max_depth=max_depth, settles=settles, before=ops
            )
            self._committed(kept)
            return self._ahead_rows(offered)

        return self._count(await self._run(work))

    def _count(self, offered: Offered) -> Offered:
        self.queued_on_disk += offered.spilled
        return offered

    async def take(self, limit: int) -> list[Row]:
        """Up to ``limit`` of the oldest disk-queued URLs, now in memory."""

        def work() -> list[Row]:
            self._apply_pending()
            rows = self.state.take_queued(limit)
            self._ahead([row.url for row in rows])
            return rows

        rows = await self._run(work)
        self.queued_on_disk -= len(rows)
        return rows

    async def flush(self) -> None:
        """Write the noted ops now."""
        await self._run(self._apply_pending)


def _run_offers(batch: list[_Offer], ahead: Callable[[Sequence[str]], None]) -> None:
    """In the worker thread: each offer in turn, each its own outcome; then
    rule 5 for all their kept rows, in one read."""
    for offer in batch:
        try:
            offer.offered = offer.call()
        except BaseException as exc:  # the caller's to raise, as from its own call
            offer.error = exc
    ahead([row.url for offer in batch if offer.offered is not None for row in offer.offered.kept])
