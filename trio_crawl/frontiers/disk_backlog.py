"""The trio side of ``--state``: the disk backlog the engine feeds from.

``CrawlState`` (``sqlite_state.py``) is synchronous SQLite; this wraps it for the
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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import trio

from .sqlite_state import Admit, CrawlState, Finish, Offered, Op, Row, Start

T = TypeVar("T")

#: How often the frontier writes the noted Start/Finish ops (``flush``).
FLUSH_INTERVAL = 0.5


class DiskBacklog:
    """The queued URLs that do not fit the memory window, and the write log."""

    def __init__(self, state: CrawlState) -> None:
        self.state = state
        self.queued_on_disk = state.queued_on_disk()
        self._limiter = trio.CapacityLimiter(1)
        self._pending: list[Start | Finish] = []

    async def _run(self, fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn, limiter=self._limiter)

    def _apply_pending(self) -> None:
        """In the worker thread: write the noted ops first (keeps their order)."""
        ops = self._take_pending()
        if ops:
            self.state.apply(ops)

    def _take_pending(self) -> list[Start | Finish]:
        """In the worker thread: the noted ops, for an offer to apply first."""
        ops, self._pending = self._pending, []
        return ops

    def note(self, op: Start | Finish) -> None:
        """Keep a Start/Finish to be written before the next disk call or by
        ``flush``. Not a checkpoint."""
        self._pending.append(op)

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
            return self.state.offer_links(
                parent,
                links,
                room=room,
                max_depth=max_depth,
                settles=settles,
                before=self._take_pending(),
            )

        return self._count(await self._run(work))

    async def offer_seeds(self, urls: Sequence[str], referrer: str, *, room: int) -> Offered:
        """``CrawlState.offer_seeds`` in the worker thread."""

        def work() -> Offered:
            return self.state.offer_seeds(urls, referrer, room=room, before=self._take_pending())

        return self._count(await self._run(work))

    async def offer_redirect(
        self, parent: str, target: str, *, room: int, max_depth: int | None, settles: bool
    ) -> Offered:
        """``CrawlState.offer_redirect`` in the worker thread."""

        def work() -> Offered:
            return self.state.offer_redirect(
                parent,
                target,
                room=room,
                max_depth=max_depth,
                settles=settles,
                before=self._take_pending(),
            )

        return self._count(await self._run(work))

    def _count(self, offered: Offered) -> Offered:
        self.queued_on_disk += offered.spilled
        return offered

    async def take(self, limit: int) -> list[Row]:
        """Up to ``limit`` of the oldest disk-queued URLs, now in memory."""

        def work() -> list[Row]:
            self._apply_pending()
            return self.state.take_queued(limit)

        rows = await self._run(work)
        self.queued_on_disk -= len(rows)
        return rows

    async def flush(self) -> None:
        """Write the noted ops now."""
        await self._run(self._apply_pending)


def seed_lines(
    path: Path,
    canonical: Callable[[str], str | None],
    on_bad_line: Callable[[int, str], None] | None = None,
) -> Iterable[str]:
    """Canonical URLs from a seeds file, one per line, read lazily. Blank lines
    and ``#`` comments are skipped; lines that are not http(s) URLs too, and
    ``on_bad_line(line_number, text)`` hears of each of those."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            url = canonical(text)
            if url is not None:
                yield url
            elif on_bad_line is not None:
                on_bad_line(number, text)
