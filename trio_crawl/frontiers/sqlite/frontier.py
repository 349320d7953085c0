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
output file, reconciled on resume, says the URL is done.

Depth is the shortest path, as in memory, and nothing waits for it: the state
file lowers a known URL when a shorter path turns up (``state.py`` rule 7)
and says which rows it lowered. An entry the crawlers hold takes the new
depth (its record will say it); a URL whose record is out gets a correction
(``correct``, given by ``attach``), also when a previous run wrote the record,
and when the record went out while the offer that lowered it was in the
file's thread (the file then still says "in flight": ``_settling``).
The lowered depths are in the file, so a resumed crawl goes on from them.

Per-host budgets (``max_pages_per_host``, ``max_hosts``) are the file's to
keep too (``state.py`` rule 8, ``hosts.py``): it counts each host's
URLs in the transaction that admits them, as the memory frontier counts
them at admission, so a resume goes on from exact counts. A redirect
whose target the budgets refuse is ``BUDGET``, as in memory; the refused
URLs are counted in ``statistics().refused``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

import trio

from ...core.config import CrawlConfig
from ...core.frontier import DepthCorrection, Entry, Frontier, FrontierStatistics, RedirectOutcome
from ...core.scope import Scope
from ..base import Correct, Publish
from .disk_backlog import FLUSH_INTERVAL, DiskBacklog
from .marks import Finish, Start
from .offering import Lowered, Offered
from .resume import PreparedState, prepare_state
from .schema import State
from .visits import StateVisits

#: Queued URLs held in memory by default; the rest wait on disk.
DEFAULT_WINDOW = 10_000


def _unattached(entry: Entry) -> None:
    raise RuntimeError("frontier used before attach()")


def _no_correction(correction: DepthCorrection) -> None:
    return None


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
        late_starts: bool = False,
    ) -> None:
        """``backlog`` holds the start URLs and seeds already (see ``open``).
        ``already_started`` counts pages a previous run fetched (the page
        budget); URLs in ``refetched`` were in flight when it stopped.
        ``late_starts``: sitemap seeds may come mid-crawl at depth 0, so with a
        ``max_depth`` every page keeps its links (``state.py`` rule 7).
        Per-host budgets are the state's (``CrawlState.use_host_budget``,
        called by ``open`` before the seeds are added): a backlog whose
        state was given none admits whatever the crawl's config says."""
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
        self._settles = not (late_starts and max_depth is not None)
        self._correct: Correct = _no_correction
        #: Entries handed to the crawlers and not recorded or dropped yet, by URL:
        #: a lowered row of theirs lowers them (at most the window, plus retries).
        self._live: dict[str, Entry] = {}
        #: Entries recorded while an offer was in the state file's thread, by
        #: URL, with the ticket of the next offer then: that offer may lower
        #: them as not done yet (a Finish mark is written behind), so they
        #: stay findable until every offer older than them has returned.
        self._settling: dict[str, tuple[int, Entry]] = {}
        #: Rows lowered while on their way to memory, by URL: the file handed
        #: them out (QUEUED_MEM: a feed's ``take`` or another offer kept them)
        #: before a later offer lowered them, but the task that adopts them
        #: may resume after the one that learns of the lowering. ``_adopt``
        #: takes the lower depth.
        self._in_transit: dict[str, Lowered] = {}
        self._offers_open: set[int] = set()
        self._next_ticket = 0
        #: New URLs the host budgets refused (the file decides: ``state.py``
        #: rule 8), as ``Frontier.statistics`` counts them in memory.
        self._refused = 0

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
        ``StateUsageError`` with a one-line message (a crawl this backend
        cannot serve is refused before: ``base.refuse_unservable``).
        Blocking (SQLite): call it before the crawl starts, or in a
        thread."""
        prepared = prepare_state(config, state_path=path, seeds=seeds, output=output, force=force)
        return cls(
            prepared.backlog,
            scope=prepared.scope,
            max_depth=config.budgets.max_depth,
            max_pages=config.budgets.max_pages,
            window=window,
            already_started=prepared.already_started,
            refetched=prepared.refetched,
            prepared=prepared,
            late_starts=config.follow.sitemaps,
        )

    @property
    def notes(self) -> list[str]:
        """What opening the state did (a torn line cut, URLs marked done)."""
        return [] if self._prepared is None else self._prepared.notes

    @property
    def durable(self) -> bool:
        """Kept in a file the user named (``--state``), not a temporary one:
        a stopped crawl can be resumed from it."""
        return self._prepared is not None and self._prepared.temporary_dir is None

    @property
    def complete(self) -> bool:
        """A resumed crawl with nothing left to fetch (nothing queued, or
        its page budget spent): running it again would fetch nothing."""
        if self.visits is not None and self.visits.recrawl and not self.visits.ended:
            return False  # a recrawl owes its unlinked records: it runs to write them
        return self.resumed and (self._backlog.queued_on_disk == 0 or self.core.budget_spent)

    @property
    def recorded_in(self) -> str | None:
        """Where the earlier runs of a resumed crawl wrote their records (None:
        to stdout, or a new crawl)."""
        return None if self._prepared is None else self._prepared.recorded_in

    def keep_recorded_in(self) -> None:
        """Leave the state file naming the earlier runs' output (a run that
        writes nothing: a complete crawl run again with another ``-o``)."""
        if self._prepared is not None:
            self._prepared.keep_recorded_in()

    @property
    def done(self) -> int:
        """URLs the state file has as done (their records are in the output)."""
        return self._backlog.state.progress()["done"]

    @property
    def visits(self) -> StateVisits | None:
        """The visits this crawl keeps, and a recrawl's previous ones."""
        return None if self._prepared is None else self._prepared.visits

    def kept_visits(self) -> StateVisits | None:
        return self.visits

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
        self._correct = correct

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
        if in_scope:
            offer = self._backlog.offer_seeds(in_scope, referrer, room=self._room())
            self._take(await self._ticketed(offer))

    async def admit_redirect(self, entry: Entry, target: str) -> RedirectOutcome:
        judge = self._scope.judge_redirect(entry.chain[0] if entry.chain else entry.url)
        outcome, admitted = self.core.redirect(entry, target, in_scope=judge)
        if outcome is not RedirectOutcome.FOLLOW:
            return outcome
        (child,) = admitted
        offered = await self._ticketed(
            self._backlog.offer_redirect(
                entry.url,
                target,
                room=max(self._room(), 1),
                max_depth=self._max_depth,
                settles=self._settles,
            )
        )
        kept = offered.kept
        if kept and kept[0].url == target:
            # A new target stays in memory, with its redirect chain.
            self._live[target] = child
            self._publish(child)
            kept = kept[1:]
        else:
            # The state file is the seen set, and it knows the target, or
            # its host budgets refused it.
            self.core.abandon(child)
            outcome = RedirectOutcome.BUDGET if offered.target_refused else RedirectOutcome.SEEN
        self._take(Offered(kept, 0, offered.lowered, offered.refused))
        return outcome

    def start(self, entry: Entry) -> bool:
        started = self.core.start(entry)
        if started:
            self._backlog.note(Start(entry.url, first=entry.attempts == 1))
        return started

    async def admit_links(self, parent: Entry, links: Sequence[str]) -> None:
        """The state file decides what is new, at the depth it holds for the page
        (a shorter path may have lowered it meanwhile); as many new URLs as the
        memory window has room for are handed out, the rest wait on disk. With
        the page budget spent they still go to disk: a resumed run with a
        larger budget (--force) must find them. Links ``max_depth`` cuts off
        are kept with the page while a shorter path to it may still come."""
        in_scope = [url for url in links if self._scope.allows(url)]
        if in_scope:
            offered = await self._ticketed(
                self._backlog.offer_links(
                    parent.url,
                    in_scope,
                    room=self._room(),
                    max_depth=self._max_depth,
                    settles=self._settles,
                )
            )
            self._take(offered)

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        if links:
            await self.admit_links(entry, links)
        self.core.finish(entry)

    def recorded(self, entry: Entry) -> None:
        # A stopping crawl notes no more Finish marks: the stop may be there
        # because the output could not be written (disk full), and a URL
        # marked done without its record would never be fetched again. The
        # output file, reconciled on resume, says which records did land.
        self._live.pop(entry.url, None)
        if self._offers_open:
            self._settling[entry.url] = (self._next_ticket, entry)
        if not self._stopping:
            self._backlog.note(Finish(entry.url))

    def abandon(self, entry: Entry) -> None:
        self._live.pop(entry.url, None)
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
        return dataclasses.replace(self.core.statistics(), refused=self._refused)

    async def aclose(self) -> None:
        with trio.move_on_after(30) as cleanup:
            cleanup.shield = True
            await self._backlog.flush()

    # -- internals ---------------------------------------------------------

    def _room(self) -> int:
        """How many new URLs the memory window takes now (none once the
        budget is spent: they wait on disk for a resume)."""
        return 0 if self.core.budget_spent else self._window - self._queued()

    def _adopt(self, url: str, depth: int, referrer: str | None) -> None:
        lowered = self._in_transit.pop(url, None) if self._in_transit else None
        if lowered is not None and lowered.depth < depth:
            depth, referrer = lowered.depth, lowered.referrer
        entry = self.core.adopt(url, depth, referrer)
        self._live[url] = entry
        self._publish(entry)

    async def _ticketed(self, offer: Awaitable[Offered]) -> Offered:
        """Await an offer to the state file, known as open meanwhile (``recorded``)."""
        ticket = self._next_ticket
        self._next_ticket += 1
        self._offers_open.add(ticket)
        try:
            return await offer
        finally:
            self._offers_open.discard(ticket)

    def _take(self, offered: Offered) -> None:
        """Hand out what an offer kept in memory; apply what it lowered."""
        self._refused += offered.refused
        for row in offered.kept:
            self._adopt(row.url, row.depth, row.referrer)
        for lowered in offered.lowered:
            self._lower(lowered)
        # Recorded entries no open offer can have read as unfinished are settled.
        oldest = min(self._offers_open, default=self._next_ticket)
        while self._settling:
            url, (ticket, _) = next(iter(self._settling.items()))
            if ticket > oldest:
                break
            del self._settling[url]

    def _lower(self, lowered: Lowered) -> None:
        """A shorter path to ``lowered.url``: an entry held and not written yet
        takes the depth (its record will say it); a written record is corrected;
        a row the file handed to memory and not adopted yet takes it when adopted.
        Offers come back from the file's thread in any order: one that lowers
        an entry less than another already did is stale, and ignored."""
        entry = self._live.get(lowered.url)
        if entry is None and lowered.url in self._settling:
            entry = self._settling[lowered.url][1]  # recorded while the offer ran
        if entry is None:
            if lowered.state is State.QUEUED_MEM:
                known = self._in_transit.get(lowered.url)
                if known is None or lowered.depth < known.depth:
                    self._in_transit[lowered.url] = lowered
            elif lowered.state is State.DONE:
                self._correct(
                    DepthCorrection(
                        lowered.url, lowered.depth, lowered.referrer, lowered.previous_depth
                    )
                )
            return
        if lowered.depth >= entry.depth:
            return
        previous = entry.depth
        self.core.lower(entry, lowered.depth, lowered.referrer)
        if entry.written:
            self._correct(DepthCorrection(lowered.url, lowered.depth, lowered.referrer, previous))

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
                    self._adopt(row.url, row.depth, row.referrer)
            self._check_idle()

    async def _flush_periodically(self) -> None:
        while True:
            await trio.sleep(FLUSH_INTERVAL)
            await self._backlog.flush()
