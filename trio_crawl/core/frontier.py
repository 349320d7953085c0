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
3. Depth is the shortest path from a start URL, where a link costs 1 and a
   redirect hop 0: a redirect target has the depth of the redirecting URL
   (a redirect is the same page moved, not a link away from it), and its
   referrer is that URL. Under concurrency a page can be reached by a long
   path first and by a shorter one later, so an entry's depth can
   *decrease*. When it decreases for a page that is already DONE, the
   decrease is passed on through its stored out-links (and its redirect
   target), which may admit pages that ``max_depth`` cut off before.
4. ``max_pages`` caps fetches started (attempts of one URL count once, each
   redirect hop counts as a page). Once it is spent, nothing new is admitted
   and queued entries are dropped as they come up.
5. Scope is a predicate supplied by the caller; the frontier only admits URLs
   for which it returns True (start URLs are admitted regardless).
6. Nothing is ever held back for the sake of depth: an admitted entry is
   handed out at once, so a slow page delays nothing else. Fetch decisions
   are exact all the same: an entry is admitted only at a depth within
   ``max_depth`` (a path that short exists), and rule 3 admits what a
   shorter path brings within reach later, so exactly the pages within
   ``max_depth`` links are fetched, each once.
7. A DONE entry is *settled* once its depth is at most the lowest depth of
   any unfinished entry: every path still to be found starts from an
   unfinished entry, so it is no shorter (a redirect hop costs 0, a link 1).
   A settled entry's out-links are dropped and its slot in ``seen`` becomes
   a shared placeholder, about 170 bytes a URL with the string for a
   60-character URL (``benchmarks/bench_memory.py``). Until then a DONE
   entry keeps its out-links: references to the entries they lead to (8
   bytes a link), and as strings only the in-scope links ``max_depth`` cut
   off. Pages of the deepest level finished while the level above still
   runs are unsettled for a while; a slow shallow page keeps more so.
   With ``late_starts`` (sitemap seeds arrive at depth 0 mid-crawl) and
   ``max_depth``, entries are never settled, so a late seed still
   admits what its links reach; without ``max_depth``, a seed that comes
   after its URL settled leaves it at its link depth.
8. A record states the depth known when it is written (the engine sets
   ``written`` then). When a shorter path lowers a written entry, the
   frontier queues a ``DepthCorrection`` (``take_corrections``): the new
   depth and referrer, which the engine hands to ``on_depth_update`` (the
   CLI's ``--depth-updates`` file; never among the records).
   So a record, corrected by its updates, says the shortest depth, and its
   referrer is a page one link closer to a start URL (or, for a redirect
   target, the redirecting URL, at the same depth). Corrections are rare:
   they need a shallow page slower than a whole chain of deeper ones.
   With ``remember_seen=False`` the ``--state`` database dedups and lowers
   depths itself (``frontiers/sqlite/state.py`` rule 7); ``lower`` applies
   what it found to the entries in memory.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .host_budget import HostBudget

MAX_REDIRECT_HOPS = 10


class EntryState(enum.Enum):
    QUEUED = "queued"
    FETCHING = "fetching"
    DONE = "done"
    DROPPED = "dropped"

    #: Members are singletons compared by identity: the identity hash is
    #: right, and C-fast (``Enum.__hash__`` is Python code, run by every
    #: state change through ``Frontier._counts``).
    __hash__ = object.__hash__


class Entry:
    """One admitted URL. Mutable, but only the frontier changes ``depth``,
    ``referrer`` and ``state``; the engine owns ``attempts`` and ``written``."""

    __slots__ = (
        "attempts",
        "chain",
        "depth",
        "links",
        "payload",
        "redirect",
        "referrer",
        "state",
        "url",
        "written",
    )

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
        #: Kept while DONE and not settled (rule 7): the entries its links
        #: lead to, and the in-scope URLs ``max_depth`` cut off (not admitted).
        self.links: tuple[Entry | str, ...] | None = None
        #: The admitted (or known) target of its 3xx: it shares this depth.
        self.redirect: str | None = None
        #: Its record is out: a shorter path now needs a correction (rule 8).
        self.written = False
        #: Opaque to the frontier: the engine's per-URL data (a user Request).
        self.payload = payload

    @property
    def hops(self) -> int:
        return len(self.chain)

    def __repr__(self) -> str:
        return f"<Entry {self.url} depth={self.depth} {self.state.value}>"


#: Stands in ``seen`` for settled entries (rule 7): depth -1 means no path
#: is ever shorter, so nothing tries to change it.
_FINISHED = Entry("", -1, None)
_FINISHED.state = EntryState.DONE


class RedirectOutcome(enum.Enum):
    """What became of a redirect's target (see ``Frontier.redirect``)."""

    FOLLOW = "follow"  # a new entry was admitted
    SEEN = "seen"  # the target is already known: nothing new to fetch
    LOOP = "redirect_loop"  # the target is in the chain that led here
    TOO_MANY = "too_many_redirects"
    OUT_OF_SCOPE = "out_of_scope_redirect"
    BUDGET = "budget"  # max_pages is spent, or the target's host budget


@dataclass(frozen=True, slots=True)
class DepthCorrection:
    """A written record's depth was lowered by a shorter path (rule 8)."""

    url: str
    depth: int
    referrer: str | None
    previous_depth: int


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
    #: New URLs the host budgets turned away (``core/host_budget.py``), one
    #: per offer: a link found on two pages is refused twice.
    refused: int = 0
    #: Pages given back unstarted because their ``--rate`` turn had passed
    #: (Redis: ``frontiers/redis/turns.py``): a crawler came too late for them.
    missed_turns: int = 0


class Frontier:
    """Seen set, depth and page budget, unfinished-work count. See module doc."""

    def __init__(
        self,
        *,
        in_scope: Callable[[str], bool],
        max_depth: int | None = None,
        max_pages: int | None = None,
        remember_seen: bool = True,
        late_starts: bool = False,
        host_budget: HostBudget | None = None,
    ) -> None:
        """``remember_seen=False``: the caller dedups elsewhere (the ``--state``
        database) and admits through ``adopt``; ``seen`` then stays empty and
        depths are not improved after the fact. ``late_starts``: start URLs
        may be added mid-crawl (sitemap seeds), see rule 7."""
        if max_depth is not None and max_depth < 0:
            raise ValueError("max_depth must be >= 0")
        if max_pages is not None and max_pages < 0:
            raise ValueError("max_pages must be >= 0")
        self._in_scope = in_scope
        #: Per-host page and host-count budgets, asked once per new URL.
        self.host_budget = host_budget
        self.max_depth = max_depth
        self.max_pages = max_pages
        self._remember = remember_seen
        self._settles = remember_seen and not (late_starts and max_depth is not None)
        self.seen: dict[str, Entry] = {}
        self._counts = dict.fromkeys(EntryState, 0)
        self.started = 0
        # Rule 7: unfinished entries by depth, the lowest depth that may have
        # some, and the DONE entries not settled yet, by depth.
        self._unfinished_at: list[int] = []
        self._low = 0
        self._unsettled: dict[int, dict[Entry, None]] = {}
        self._corrections: list[DepthCorrection] = []

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
            held=0,  # nothing is held back (rule 6)
            refused=0 if self.host_budget is None else self.host_budget.refused,
        )

    @property
    def unsettled(self) -> int:
        """DONE entries that still keep their out-links (rule 7)."""
        return sum(len(bucket) for bucket in self._unsettled.values())

    def take_corrections(self) -> list[DepthCorrection]:
        """The corrections of written records queued since the last call."""
        corrections, self._corrections = self._corrections, []
        return corrections

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
            if self.host_budget is not None:
                if scoped and not self.host_budget.admits(url):
                    return admitted
                if not scoped:
                    self.host_budget.count(url)
            admitted.append(self._admit(url, 0, referrer, payload=payload))
        return admitted

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
            if (
                not self.budget_spent
                and (not scoped or self._in_scope(url))
                and (self.host_budget is None or self.host_budget.admits(url))
            ):
                admitted.append(self._admit(url, child_depth, referrer, payload=payload))
        elif child_depth < entry.depth:
            self._improve(entry, child_depth, referrer, admitted)
        return admitted

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
        budget = self.host_budget
        for url in links:
            entry = seen.get(url)
            if entry is None:
                if self.budget_spent:
                    break
                if self._in_scope(url) and (budget is None or budget.admits(url)):
                    admitted.append(self._admit(url, child_depth, referrer))
            elif child_depth < entry.depth:
                self._improve(entry, child_depth, referrer, admitted)
        return admitted

    def redirect(
        self, entry: Entry, target: str, *, in_scope: Callable[[str], bool] | None = None
    ) -> tuple[RedirectOutcome, list[Entry]]:
        """Decide about the canonical ``target`` of a 3xx answered for ``entry``.

        Returns the outcome and the entries it admitted: the target itself for
        FOLLOW; for SEEN, whatever a shorter depth for the known target admits.
        The target shares ``entry``'s depth from now on (rule 3).
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
            entry.redirect = target
            admitted: list[Entry] = []
            self._improve(existing, entry.depth, entry.url, admitted)
            return RedirectOutcome.SEEN, admitted
        if self.budget_spent or (
            self.host_budget is not None and not self.host_budget.admits(target)
        ):
            return RedirectOutcome.BUDGET, []
        entry.redirect = target
        child = self._admit(target, entry.depth, entry.url, chain, entry.payload)
        return RedirectOutcome.FOLLOW, [child]

    def adopt(self, url: str, depth: int, referrer: str | None) -> Entry:
        """Count in a URL that the caller has already deduplicated (the
        ``--state`` database did): a QUEUED entry, not put in ``seen``."""
        return self._admit(url, depth, referrer)

    def lower(self, entry: Entry, depth: int, referrer: str | None) -> None:
        """Give an adopted entry the shorter depth its store found (the
        ``--state`` database decides depth with ``remember_seen=False``)."""
        if entry.state in (EntryState.QUEUED, EntryState.FETCHING):
            self._count_at(entry.depth, -1)
            self._count_at(depth, +1)
        entry.depth = depth
        entry.referrer = referrer

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
            self._settle()
            return False
        self.started += 1
        entry.attempts = 1
        self._move(entry, EntryState.FETCHING)
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
        admitted = self.discover(links, entry.depth, entry.url) if links else []
        if self._remember:
            low = self.lowest_unfinished_depth()
            if self._settles and (low is None or entry.depth <= low):
                # Settled already (rule 7): keep only the key.
                self.seen[entry.url] = _FINISHED
            else:
                entry.links = self._out_links(links, entry.depth + 1, low) if links else None
                if self._settles:
                    self._unsettled.setdefault(entry.depth, {})[entry] = None
        self._settle()
        return admitted

    def abandon(self, entry: Entry) -> None:
        """Drop an unfinished entry without a record (stop, budget)."""
        if entry.state not in (EntryState.QUEUED, EntryState.FETCHING):
            return
        self._move(entry, EntryState.DROPPED)
        self._settle()

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
        path) and propagate through its redirect and stored out-links,
        shallowest first, so that each entry is lowered (and corrected) once."""
        work = [(depth, 0, entry, referrer)]
        pushed = 0
        while work:
            new_depth, _, current, via = heapq.heappop(work)
            if new_depth >= current.depth:
                continue
            if current.written:
                self._corrections.append(
                    DepthCorrection(current.url, new_depth, via, current.depth)
                )
            if current.state in (EntryState.QUEUED, EntryState.FETCHING):
                self._count_at(current.depth, -1)
                self._count_at(new_depth, +1)
            elif current.state is EntryState.DONE and self._settles:
                del self._unsettled[current.depth][current]
                self._unsettled.setdefault(new_depth, {})[current] = None
            current.depth = new_depth
            current.referrer = via
            if current.redirect is not None:
                # A redirect hop costs nothing: its target moves with it,
                # even while this entry's own record is still being made.
                target = self.seen.get(current.redirect)
                if target is not None:
                    pushed += 1
                    heapq.heappush(work, (new_depth, pushed, target, current.url))
            if current.state is not EntryState.DONE or not current.links:
                # Not fetched yet (its links will be offered at the new depth
                # when it finishes), or nothing to propagate.
                continue
            child_depth = new_depth + 1
            if self.max_depth is not None and child_depth > self.max_depth:
                continue
            for link in current.links:
                if isinstance(link, str):
                    # Cut off by max_depth before; maybe admitted since.
                    known = self.seen.get(link)
                    if known is None:
                        if not self.budget_spent and (
                            self.host_budget is None or self.host_budget.admits(link)
                        ):
                            admitted.append(self._admit(link, child_depth, current.url))
                        continue
                    child = known
                else:
                    child = link
                if child_depth < child.depth:
                    pushed += 1
                    heapq.heappush(work, (child_depth, pushed, child, current.url))

    def _out_links(
        self, links: Sequence[str], child_depth: int, low: int | None
    ) -> tuple[Entry | str, ...]:
        """What a DONE entry keeps of its links until it settles (rule 7):
        the entries they lead to that it could still bring closer, and the
        in-scope URLs ``max_depth`` cut off. Every path still to be found
        through this entry starts at an unfinished entry, at depth ``low``
        or more, so a child already at ``low + 1`` or less gains nothing."""
        seen = self.seen
        cut = self.max_depth is not None and child_depth > self.max_depth
        floor = (low or 0) + 1
        kept: list[Entry | str] = []
        for url in links:
            child = seen.get(url)
            if child is None:
                if cut and self._in_scope(url):
                    kept.append(url)
            elif child.depth > floor:
                kept.append(child)  # (settled ones have depth -1)
        return tuple(kept)

    def _move(self, entry: Entry, state: EntryState) -> None:
        unfinished = (EntryState.QUEUED, EntryState.FETCHING)
        if entry.state in unfinished and state not in unfinished:
            self._count_at(entry.depth, -1)
        self._counts[entry.state] -= 1
        self._counts[state] += 1
        entry.state = state

    # -- settling (rule 7) ---------------------------------------------------

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

    def _settle(self) -> None:
        """Settle the DONE entries no path still to be found can shorten."""
        if not self._unsettled:
            return
        low = self.lowest_unfinished_depth()
        for depth in [d for d in self._unsettled if low is None or d <= low]:
            for entry in self._unsettled.pop(depth):
                entry.links = None
                self.seen[entry.url] = _FINISHED

    @staticmethod
    def _expect(entry: Entry, state: EntryState) -> None:
        if entry.state is not state:
            raise RuntimeError(
                f"frontier invariant broken: {entry!r} is {entry.state.value}, "
                f"expected {state.value}"
            )
