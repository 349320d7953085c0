"""The frontier: which URLs exist for this crawl, at what depth, and in what state.

Pure bookkeeping: no trio, no network, no clock. The engine asks it questions
and tells it what happened; it never waits for anything itself.

Theory of operation
-------------------
Every canonical URL the crawl decides to fetch gets exactly one ``Entry``.
An entry moves through these states, and only forwards::

    QUEUED --start()--> FETCHING --finish()--> DONE
       |                    |
       +---abandon()--------+-----------------> DROPPED

(a retry keeps the entry in FETCHING from the frontier's point of view: the
engine parks it in the schedule, but it is still unfinished work.)

Rules
-----
1. ``seen`` maps each admitted canonical URL to its entry; a URL is admitted at
   most once, so it is fetched at most once per crawl.
2. ``unfinished`` == number of entries in QUEUED or FETCHING. The engine's
   termination invariant cross-checks this count (see docs/termination.md).
3. Depth is the shortest link distance from a start URL. Under concurrency a
   page can be reached by a long path first and by a shorter one later, so an
   entry's depth can *decrease*. When it decreases for a page that is already
   DONE, its stored out-links are offered again at the new depth, which may
   admit pages that ``max_depth`` cut off before. Out-links are kept only when
   ``max_depth`` is set (that is the only case in which depth changes what is
   fetched). A redirect target inherits the depth of the redirecting URL.
4. ``max_pages`` caps fetches started (attempts of one URL count once, each
   redirect hop counts as a page). Once it is spent, nothing new is admitted
   and queued entries are dropped as they come up.
5. Scope is a predicate supplied by the caller; the frontier only admits URLs
   for which it returns True (start URLs are admitted regardless).
6. Without ``max_depth``, a finished URL's entry is replaced in ``seen`` by a
   shared placeholder: the seen set then costs a dict slot per URL (plus the
   string), about 170 bytes for a 60-character URL
   (``benchmarks/bench_memory.py``).
7. The depth gate makes every *record* exact, not only the final state: an
   entry at depth ``k`` is handed out (returned for publishing) only while no
   unfinished entry is shallower than ``k - 1``; until then it is *held*.
   Whoever could still lower it to ``j < k`` would be an unfinished page at
   depth ``j - 1 < k - 1``, so a handed-out entry's depth, and its referrer
   (one link closer to a start URL, rule 8), are final. Pages at two
   adjacent depths still run concurrently; only the tail of depth ``k - 2``
   holds depth ``k`` back. Held entries are unfinished (QUEUED) work: the
   engine's termination invariant counts them (``held``). The gate is on
   when the frontier dedups itself (``remember_seen``); with the ``--state``
   database, depth is the depth at first discovery.
8. When a shorter path lowers an entry's depth, its referrer becomes the page
   on that path, so a record's referrer is always at ``depth - 1``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

MAX_REDIRECT_HOPS = 10


class EntryState(enum.Enum):
    QUEUED = "queued"
    FETCHING = "fetching"
    DONE = "done"
    DROPPED = "dropped"


class Entry:
    """One admitted URL. Mutable, but only the frontier changes ``depth`` and
    ``state``; the engine owns ``attempts``."""

    __slots__ = ("attempts", "chain", "depth", "links", "payload", "referrer", "state", "url")

    def __init__(
        self,
        url: str,
        depth: int,
        referrer: str | None,
        chain: tuple[str, ...] = (),
        payload: object = None,
    ) -> None:
        self.url = url
        self.depth = depth
        self.referrer = referrer
        #: URLs of the redirect chain that led here (empty for a link).
        self.chain = chain
        self.state = EntryState.QUEUED
        self.attempts = 0
        self.links: tuple[str, ...] | None = None
        #: Opaque to the frontier: the engine's per-URL data (a user Request).
        self.payload = payload

    @property
    def hops(self) -> int:
        return len(self.chain)

    def __repr__(self) -> str:
        return f"<Entry {self.url} depth={self.depth} {self.state.value}>"


#: Stands in ``seen`` for finished entries when depths are not tracked:
#: depth -1 means no path is ever shorter, so nothing tries to change it.
_FINISHED = Entry("", -1, None)
_FINISHED.state = EntryState.DONE


class RedirectOutcome(enum.Enum):
    """What became of a redirect's target (see ``Frontier.redirect``)."""

    FOLLOW = "follow"  # a new entry was admitted
    SEEN = "seen"  # the target is already known: nothing new to fetch
    LOOP = "redirect_loop"  # the target is in the chain that led here
    TOO_MANY = "too_many_redirects"
    OUT_OF_SCOPE = "out_of_scope_redirect"
    BUDGET = "budget"  # max_pages is spent


@dataclass(frozen=True, slots=True)
class FrontierStatistics:
    seen: int
    queued: int
    fetching: int
    done: int
    dropped: int
    started: int
    unfinished: int
    held: int


class Frontier:
    """Seen set, depth and page budget, unfinished-work count. See module doc."""

    def __init__(
        self,
        *,
        in_scope: Callable[[str], bool],
        max_depth: int | None = None,
        max_pages: int | None = None,
        remember_seen: bool = True,
    ) -> None:
        """``remember_seen=False``: the caller dedups elsewhere (the ``--state``
        database) and admits through ``adopt``; ``seen`` then stays empty and
        depths are not improved after the fact."""
        if max_depth is not None and max_depth < 0:
            raise ValueError("max_depth must be >= 0")
        if max_pages is not None and max_pages < 0:
            raise ValueError("max_pages must be >= 0")
        self._in_scope = in_scope
        self.max_depth = max_depth
        self.max_pages = max_pages
        self._remember = remember_seen
        self._keep_links = max_depth is not None and remember_seen
        self.seen: dict[str, Entry] = {}
        self._counts = dict.fromkeys(EntryState, 0)
        self.started = 0
        # The depth gate (rule 7): unfinished entries by depth, the lowest
        # depth that may have some, and the entries held back, by depth.
        self._gate = remember_seen
        self._unfinished_at: list[int] = []
        self._low = 0
        self._held: dict[int, dict[Entry, None]] = {}
        self.held = 0

    # -- questions ---------------------------------------------------------

    @property
    def unfinished(self) -> int:
        return self._counts[EntryState.QUEUED] + self._counts[EntryState.FETCHING]

    @property
    def budget_spent(self) -> bool:
        return self.max_pages is not None and self.started >= self.max_pages

    def statistics(self) -> FrontierStatistics:
        c = self._counts
        return FrontierStatistics(
            seen=len(self.seen),
            queued=c[EntryState.QUEUED],
            fetching=c[EntryState.FETCHING],
            done=c[EntryState.DONE],
            dropped=c[EntryState.DROPPED],
            started=self.started,
            unfinished=self.unfinished,
            held=self.held,
        )

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<Frontier seen={s.seen} queued={s.queued} fetching={s.fetching} "
            f"done={s.done} dropped={s.dropped} started={s.started}>"
        )

    # -- admission ---------------------------------------------------------

    def add_start(
        self,
        url: str,
        *,
        referrer: str | None = None,
        scoped: bool = False,
        payload: object = None,
    ) -> list[Entry]:
        """Admit a start URL at depth 0; return the entries this admits.

        That is the new entry, or nothing if the URL is known, or what a
        known URL's new depth 0 admits (rule 3). ``scoped=True`` (seeds from
        sitemaps) admits only in-scope URLs; the user's own start URLs define
        the scope and are always admitted.
        """
        existing = self.seen.get(url)
        admitted: list[Entry] = []
        if existing is not None:
            self._improve(existing, 0, referrer, admitted)
        elif not self.budget_spent and (not scoped or self._in_scope(url)):
            admitted.append(self._admit(url, 0, referrer, payload=payload))
        return self._pass_gate(admitted)

    def offer(
        self,
        url: str,
        depth: int,
        referrer: str,
        payload: object = None,
        *,
        beyond_max_depth: bool = False,
        scoped: bool = True,
    ) -> list[Entry]:
        """Offer one URL found (or asked for) on a page at ``depth``, carrying
        ``payload``; return the entries this admits (like ``discover``).
        ``beyond_max_depth``: a page requisite, fetched whatever the depth
        limit (an image is part of its page, not a link away from it).
        ``scoped=False``: the caller has judged the URL's scope (requisites
        are exempt from URL filters)."""
        child_depth = depth + 1
        admitted: list[Entry] = []
        if not beyond_max_depth and self.max_depth is not None and child_depth > self.max_depth:
            return admitted
        entry = self.seen.get(url)
        if entry is None:
            if not self.budget_spent and (not scoped or self._in_scope(url)):
                admitted.append(self._admit(url, child_depth, referrer, payload=payload))
        elif child_depth < entry.depth:
            self._improve(entry, child_depth, referrer, admitted)
        return self._pass_gate(admitted)

    def discover(self, links: Iterable[str], depth: int, referrer: str) -> list[Entry]:
        """Offer links found on a page at ``depth``; return the newly admitted.

        Links to known URLs may lower their depth (rule 3); the entries that
        this admits transitively are returned too.
        """
        admitted: list[Entry] = []
        child_depth = depth + 1
        if self.max_depth is not None and child_depth > self.max_depth:
            return admitted
        seen = self.seen
        for url in links:
            entry = seen.get(url)
            if entry is None:
                if self.budget_spent:
                    break
                if self._in_scope(url):
                    admitted.append(self._admit(url, child_depth, referrer))
            elif child_depth < entry.depth:
                self._improve(entry, child_depth, referrer, admitted)
        return self._pass_gate(admitted)

    def redirect(
        self, entry: Entry, target: str, *, in_scope: Callable[[str], bool] | None = None
    ) -> tuple[RedirectOutcome, list[Entry]]:
        """Decide about the canonical ``target`` of a 3xx answered for ``entry``.

        Returns the outcome and the entries it admitted: the target itself for
        FOLLOW; for SEEN, whatever a shorter depth for the known target admits.
        ``in_scope`` judges the target instead of the frontier's predicate
        (a requisite's or a start URL's redirect is spared the URL filters).
        """
        chain = (*entry.chain, entry.url)
        if target in chain:
            return RedirectOutcome.LOOP, []
        if len(chain) > MAX_REDIRECT_HOPS:
            return RedirectOutcome.TOO_MANY, []
        if not (in_scope or self._in_scope)(target):
            return RedirectOutcome.OUT_OF_SCOPE, []
        existing = self.seen.get(target)
        if existing is not None:
            admitted: list[Entry] = []
            self._improve(existing, entry.depth, entry.url, admitted)
            return RedirectOutcome.SEEN, self._pass_gate(admitted)
        if self.budget_spent:
            return RedirectOutcome.BUDGET, []
        child = self._admit(target, entry.depth, entry.url, chain, entry.payload)
        return RedirectOutcome.FOLLOW, self._pass_gate([child])

    def adopt(self, url: str, depth: int, referrer: str | None) -> Entry:
        """Count in a URL that the caller has already deduplicated (the
        ``--state`` database did): a QUEUED entry, not put in ``seen``."""
        return self._admit(url, depth, referrer)

    # -- life cycle --------------------------------------------------------

    def start(self, entry: Entry) -> bool:
        """Called just before a fetch attempt of ``entry``.

        Returns False (and drops the entry) when the page budget is spent.
        Repeated attempts of the same entry (retries) do not spend budget.
        """
        if entry.state is EntryState.FETCHING:
            entry.attempts += 1
            return True
        self._expect(entry, EntryState.QUEUED)
        if self.budget_spent:
            self._move(entry, EntryState.DROPPED)
            return False
        self.started += 1
        entry.attempts = 1
        self._move(entry, EntryState.FETCHING)
        if self.budget_spent:
            self.abandon_held()  # the gate would only hand them out to be dropped
        return True

    def finish(self, entry: Entry, links: Sequence[str] | None = None) -> list[Entry]:
        """Mark a tried entry done; offer its links; return the newly admitted.

        ``links`` is None when the page had no links to follow (an error, a
        redirect, a non-HTML body).
        """
        if entry.state is EntryState.QUEUED:
            # Finished without a fetch (robots disallowed it): counts as tried.
            self._move(entry, EntryState.FETCHING)
        self._expect(entry, EntryState.FETCHING)
        self._move(entry, EntryState.DONE)
        if self._keep_links:
            entry.links = tuple(links) if links else None
        elif self._remember:
            # Nothing will ever change a finished entry's depth: keep only the
            # key (rule 6), ~100 bytes a URL less for big crawls.
            self.seen[entry.url] = _FINISHED
        admitted = self.discover(links, entry.depth, entry.url) if links else []
        return admitted + self._release_held()

    def abandon(self, entry: Entry) -> list[Entry]:
        """Drop an unfinished entry without a record (stop, budget); return
        the held entries this lets through the depth gate."""
        if entry.state not in (EntryState.QUEUED, EntryState.FETCHING):
            return []
        held = self._held.get(entry.depth)
        if held is not None and entry in held:
            del held[entry]
            self.held -= 1
        self._move(entry, EntryState.DROPPED)
        return self._release_held()

    def abandon_held(self) -> None:
        """Drop every entry the depth gate holds (a stopping crawl)."""
        for bucket in self._held.values():
            for entry in bucket:
                self._move(entry, EntryState.DROPPED)
        self._held.clear()
        self.held = 0

    # -- internals ---------------------------------------------------------

    def _admit(
        self,
        url: str,
        depth: int,
        referrer: str | None,
        chain: tuple[str, ...] = (),
        payload: object = None,
    ) -> Entry:
        entry = Entry(url, depth, referrer, chain, payload)
        if self._remember:
            self.seen[url] = entry
        self._counts[EntryState.QUEUED] += 1
        self._count_at(depth, +1)
        return entry

    def _improve(
        self, entry: Entry, depth: int, referrer: str | None, admitted: list[Entry]
    ) -> None:
        """Lower ``entry``'s depth (``referrer`` is the page on the shorter
        path) and propagate through stored out-links."""
        work = [(entry, depth, referrer)]
        while work:
            current, new_depth, via = work.pop()
            if new_depth >= current.depth:
                continue
            if current.state in (EntryState.QUEUED, EntryState.FETCHING):
                self._count_at(current.depth, -1)
                self._count_at(new_depth, +1)
                held = self._held.get(current.depth)
                if held is not None and current in held:
                    del held[current]  # re-judged at its new depth by _pass_gate
                    self.held -= 1
                    admitted.append(current)
            current.depth = new_depth
            current.referrer = via
            if current.state is not EntryState.DONE or not current.links:
                # Not fetched yet (its links will be offered at the new depth
                # when it finishes), or nothing to propagate.
                continue
            child_depth = new_depth + 1
            if self.max_depth is not None and child_depth > self.max_depth:
                continue
            for url in current.links:
                child = self.seen.get(url)
                if child is None:
                    if not self.budget_spent and self._in_scope(url):
                        admitted.append(self._admit(url, child_depth, current.url))
                elif child_depth < child.depth:
                    work.append((child, child_depth, current.url))

    def _move(self, entry: Entry, state: EntryState) -> None:
        unfinished = (EntryState.QUEUED, EntryState.FETCHING)
        if entry.state in unfinished and state not in unfinished:
            self._count_at(entry.depth, -1)
        self._counts[entry.state] -= 1
        self._counts[state] += 1
        entry.state = state

    # -- the depth gate (rule 7) -------------------------------------------

    def _count_at(self, depth: int, delta: int) -> None:
        counts = self._unfinished_at
        while len(counts) <= depth:
            counts.append(0)
        counts[depth] += delta
        if delta > 0 and depth < self._low:
            self._low = depth

    def lowest_unfinished_depth(self) -> int | None:
        """The smallest depth of any unfinished entry (None: nothing unfinished)."""
        counts = self._unfinished_at
        while self._low < len(counts) and counts[self._low] == 0:
            self._low += 1
        return self._low if self._low < len(counts) else None

    def _pass_gate(self, admitted: list[Entry]) -> list[Entry]:
        """The entries that may be handed out now; hold the others."""
        if not self._gate or not admitted:
            return admitted
        low = self.lowest_unfinished_depth()
        limit = 0 if low is None else low + 1
        ready: list[Entry] = []
        for entry in admitted:
            if entry.state is not EntryState.QUEUED or entry.depth <= limit:
                ready.append(entry)
            else:
                self._held.setdefault(entry.depth, {})[entry] = None
                self.held += 1
        return ready

    def _release_held(self) -> list[Entry]:
        """Hand out the held entries the lowest unfinished depth now allows."""
        if not self.held:
            return []
        low = self.lowest_unfinished_depth()
        limit = 0 if low is None else low + 1
        released: list[Entry] = []
        for depth in sorted(d for d in self._held if d <= limit):
            bucket = self._held.pop(depth)
            self.held -= len(bucket)
            released.extend(bucket)
        return released

    @staticmethod
    def _expect(entry: Entry, state: EntryState) -> None:
        if entry.state is not state:
            raise RuntimeError(
                f"frontier invariant broken: {entry!r} is {entry.state.value}, "
                f"expected {state.value}"
            )
