"""The SQLite frontier (``--state``): resumable, with bounded memory.

The state file is the seen set and the queue. At most ``window`` queued URLs
live in memory (handed to the crawlers); the rest wait on disk and are fed in
as the crawlers drain the channel. Disk-queued URLs are this backend's
``waiting`` room, so the engine's termination invariant counts them
(docs/termination.md, the fourth place).

Order of writes for one page (``disk_backlog`` has the details):

1. ``finish``: the page's new links are committed in one transaction (a
   huge page's in one per chunk, ``admit_links``, as they are parsed);
2. the engine writes the page's record;
3. ``recorded``: a Finish mark is noted, written behind in a batch.

A crash between 1 and 2 (or between two chunks) leaves children whose
parent has no record (it is fetched again on resume); between 2 and 3 the
output file, reconciled on resume, says the URL is done. Depth is the depth at first discovery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import trio

from ..core.config import CrawlConfig
from ..core.frontier import Entry, Frontier, FrontierStatistics, RedirectOutcome
from ..core.url import Scope
from ..errors import StateUsageError
from .base import Correct, Publish
from .disk_backlog import FLUSH_INTERVAL, DiskBacklog
from .resume import PreparedState, prepare_state
from .sqlite_state import Finish, Start

#: Queued URLs held in memory by default; the rest wait on disk.
DEFAULT_WINDOW = 10_000


def _unattached(entry: Entry) -> None:
    raise RuntimeError("frontier used before attach()")


class SqliteFrontier:
    """A ``FrontierBackend`` on a ``CrawlState`` file."""

    def __init__(
        self,
        backlog: DiskBacklog,
        *,
        scope: Scope,
        max_depth: int | None = None,
        max_pages: int | None = None,
        window: int = DEFAULT_WINDOW,
        already_started: int = 0,
        refetched: Sequence[str] = (),
        prepared: PreparedState | None = None,
    ) -> None:
        """``backlog`` holds the start URLs and seeds already (see ``open``).
        ``already_started`` counts pages a previous run fetched (the page
        budget); URLs in ``refetched`` were in flight when it stopped."""
        if window < 1:
            raise ValueError("window must be at least 1")
        self._backlog = backlog
        self._scope = scope
        self._max_depth = max_depth
        self._window = window
        self._refetched = set(refetched)
        self._prepared = prepared
        self.core = Frontier(
            in_scope=scope.allows, max_depth=max_depth, max_pages=max_pages, remember_seen=False
        )
        self.core.started = already_started
        self._publish: Publish = _unattached
        self._check_idle: Callable[[], None] = lambda: None
        self._queued: Callable[[], int] = lambda: 0
        self._feed_wanted = trio.Event()
        self._stopping = False

    @classmethod
    def open(
        cls,
        config: CrawlConfig,
        path: str | None,
        *,
        seeds: str | None = None,
        output: str | None = None,
        force: bool = False,
        window: int = DEFAULT_WINDOW,
    ) -> SqliteFrontier:
        """Open (or create) the state file at ``path`` (None: a temporary
        one) for this crawl, resuming what it holds: the same settings are
        required unless ``force``; ``output``, if it exists, is reconciled
        (a torn last line cut, recorded URLs marked done). Raises
        ``StateUsageError`` with a one-line message. Blocking (SQLite): call
        it before the crawl starts, or in a thread."""
        if config.handler is not None or any(
            not isinstance(url, str) for url in config.start_urls
        ):
            raise StateUsageError(
                "handlers cannot be combined with a state file: their requests "
                "carry Python functions"
            )
        if config.page_requisites:
            raise StateUsageError(
                "--page-requisites cannot be combined with a state file yet: "
                "the file does not record which URLs are requisites"
            )
        prepared = prepare_state(config, state_path=path, seeds=seeds, output=output, force=force)
        return cls(
            prepared.backlog,
            scope=prepared.scope,
            max_depth=config.max_depth,
            max_pages=config.max_pages,
            window=window,
            already_started=prepared.already_started,
            refetched=prepared.refetched,
            prepared=prepared,
        )

    @property
    def notes(self) -> list[str]:
        """What opening the state did (a torn line cut, URLs marked done)."""
        return [] if self._prepared is None else self._prepared.notes

    @property
    def resumed(self) -> bool:
        return self._prepared is not None and self._prepared.resumed

    def close(self) -> None:
        """Close the state file (and remove a temporary one)."""
        if self._prepared is not None:
            self._prepared.close()
        else:
            self._backlog.state.close()

    # -- the face ----------------------------------------------------------

    def attach(
        self,
        publish: Publish,
        check_idle: Callable[[], None],
        queued: Callable[[], int],
        correct: Correct,
    ) -> None:
        self._publish = publish
        self._check_idle = check_idle
        self._queued = queued

    async def admit_start_urls(self) -> None:
        self._want_feed()  # they are on disk already: feed the first window

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._flush_periodically)
            await self._feed_from_disk()

    def want_more(self, queued: int) -> None:
        if queued == 0 or queued < self._window // 2:
            self._want_feed()

    async def admit_seeds(self, urls: Sequence[str], referrer: str) -> None:
        in_scope = [url for url in urls if self._scope.allows(url)]
        await self._admit(in_scope, 0, referrer)

    def admit_requisites(self, parent: Entry, urls: Sequence[str]) -> None:
        raise RuntimeError("--page-requisites cannot be combined with a state file")

    def admit_request(self, parent: Entry, url: str, payload: object) -> bool:
        raise RuntimeError("handlers cannot be combined with a state file")

    async def admit_redirect(self, entry: Entry, target: str) -> RedirectOutcome:
        judge = self._scope.judge_redirect(entry.chain[0] if entry.chain else entry.url)
        outcome, admitted = self.core.redirect(entry, target, in_scope=judge)
        if outcome is RedirectOutcome.FOLLOW and not await self._backlog.admit(
            [target], entry.depth, entry.url, room=1
        ):
            # The state file is the seen set, and it knows the target. (A new
            # target stays in memory, with its redirect chain.)
            for child in admitted:
                self.core.abandon(child)
            return RedirectOutcome.SEEN
        for child in admitted:
            self._publish(child)
        return outcome

    def start(self, entry: Entry) -> bool:
        started = self.core.start(entry)
        if started:
            self._backlog.note(Start(entry.url))
        return started

    async def admit_links(self, parent: Entry, links: Sequence[str]) -> None:
        child_depth = parent.depth + 1
        if self._max_depth is None or child_depth <= self._max_depth:
            in_scope = [url for url in links if self._scope.allows(url)]
            await self._admit(in_scope, child_depth, parent.url)

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        if links:
            await self.admit_links(entry, links)
        self.core.finish(entry)

    def recorded(self, entry: Entry) -> None:
        # A stopping crawl notes no more Finish marks: the stop may be there
        # because the output could not be written (disk full), and a URL
        # marked done without its record would never be fetched again. The
        # output file, reconciled on resume, says which records did land.
        if not self._stopping:
            self._backlog.note(Finish(entry.url))

    def abandon(self, entry: Entry) -> None:
        self.core.abandon(entry)

    def stop(self) -> None:
        # Disk-queued URLs stay queued in the file for the next run.
        self._stopping = True
        self._feed_wanted.set()

    def was_refetched(self, entry: Entry) -> bool:
        if entry.url in self._refetched:
            self._refetched.discard(entry.url)
            return True
        return False

    @property
    def waiting(self) -> int:
        """Disk-queued URLs that still count as work: none once the crawl is
        stopping or its page budget is spent (they stay in the file)."""
        if self._stopping or self.core.budget_spent:
            return 0
        return self._backlog.queued_on_disk

    @property
    def unfinished(self) -> int:
        return self.core.unfinished + self.waiting

    @property
    def budget_spent(self) -> bool:
        return self.core.budget_spent

    def statistics(self) -> FrontierStatistics:
        return self.core.statistics()

    async def aclose(self) -> None:
        with trio.move_on_after(30) as cleanup:
            cleanup.shield = True
            await self._backlog.flush()

    # -- internals ---------------------------------------------------------

    async def _admit(self, urls: list[str], depth: int, referrer: str) -> None:
        """The state file decides what is new; as many new URLs as the memory
        window has room for are handed out, the rest wait on disk. With the
        page budget spent they still go to disk: a resumed run with a larger
        budget (--force) must find them."""
        if not urls:
            return
        room = 0 if self.core.budget_spent else self._window - self._queued()
        for url in await self._backlog.admit(urls, depth, referrer, room):
            self._publish(self.core.adopt(url, depth, referrer))

    def _want_feed(self) -> None:
        if self._backlog.queued_on_disk:
            self._feed_wanted.set()

    async def _feed_from_disk(self) -> None:
        """Refill the memory window from the disk queue as crawlers drain it.

        ``queued_on_disk`` drops in the same synchronous step that hands out
        what was taken (``DiskBacklog.take``), so nothing is ever in neither
        place."""
        while True:
            await self._feed_wanted.wait()
            self._feed_wanted = trio.Event()
            while self.waiting and self._queued() < self._window:
                rows = await self._backlog.take(self._window - self._queued())
                if self._stopping:
                    break  # taken rows stay QUEUED_MEM: recovered next run
                for row in rows:
                    if row.attempts:
                        self._refetched.add(row.url)
                    self._publish(self.core.adopt(row.url, row.depth, row.referrer))
            self._check_idle()

    async def _flush_periodically(self) -> None:
        while True:
            await trio.sleep(FLUSH_INTERVAL)
            await self._backlog.flush()
