"""Offers to the state file (``state.py`` rule 7): exact depth, nothing waiting.

An ``offer_*`` call admits what is new, and lowers a known row a shorter path
reaches, passing the decrease on through the links the row stored when its own
were offered (``out_links``). ``Offering`` is one such transaction's work;
``offer_links``, ``offer_seeds`` and ``offer_redirect`` run one in a
``Books.counting`` transaction and hand its tallies to the books after the
commit. ``CrawlState`` calls them holding the connection.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .books import Books
from .disk_queue import Row
from .marks import APPLY, Admit, Mark, runs
from .schema import QD, QM, State, ensure_depth_schema
from .seen import LOOKUP_CHUNK


class Lowered(NamedTuple):
    """A known row whose depth a shorter path lowered (rule 7). ``state`` is the
    row's state when it was lowered: DONE means its record is out."""

    url: str
    depth: int
    referrer: str | None
    previous_depth: int
    state: State


@dataclass(frozen=True, slots=True)
class Offered:
    """What an ``offer_*`` call did: the new URLs kept in memory (QUEUED_MEM, to be
    handed to the crawlers), how many new ones were queued on disk, and the known
    rows it lowered, shallowest first; how many new URLs the host budgets
    refused (rule 8), and for ``offer_redirect`` whether its target was one."""

    kept: list[Row]
    spilled: int
    lowered: list[Lowered]
    refused: int = 0
    target_refused: bool = False


class Offering:
    """One ``offer_*`` transaction: admits what is new, lowers what a shorter path
    reaches (shallowest first, each row once), and keeps the tallies that the
    books take over after the commit."""

    def __init__(
        self, conn: sqlite3.Connection, room: int, max_depth: int | None, books: Books
    ) -> None:
        memory = books.depth
        if not memory.schema_made:
            ensure_depth_schema(conn)
        self._conn = conn
        self._memory = memory
        self._seen = books.seen
        self._ledger = books.ledger
        self._counts = books.counts
        self._room = max(room, 0)
        self._max_depth = max_depth
        self._heap: list[tuple[int, int, str, str | None]] = []
        self._pushed = 0
        self._new: set[str] = set()
        self.kept: list[Row] = []
        self.spilled = 0
        self.lowered: list[Lowered] = []
        self.admitted: list[str] = []
        self.delta = [0] * len(State)
        #: New URLs the host budgets refused (rule 8), and whether a
        #: redirect's target was one (``offer_redirect`` says).
        self.refused = 0
        self.target_refused = False

    def apply(self, ops: Sequence[Mark]) -> None:
        """Apply Start and Finish ops in this transaction (``CrawlState.apply``'s
        rules 1-3), their counts joining the offer's. An Admit is refused: it
        would have to reach the seen-filter before the offer reads it."""
        for kind, run in runs(ops):
            if kind is Admit:
                raise TypeError("only Start and Finish ops can go with an offer")
            APPLY[kind](self._conn, run, self.delta)

    def row_of(self, url: str) -> tuple[int, int]:
        """The id and depth of a page the engine holds (a bug if it has no row)."""
        row = self._conn.execute("SELECT id, depth FROM urls WHERE url = ?", (url,)).fetchone()
        if row is None:
            raise RuntimeError(f"crawl state invariant broken: offer from unknown page {url!r}")
        return int(row[0]), int(row[1])

    def offer(self, urls: Sequence[str], depth: int, referrer: str | None) -> None:
        """Admit the new ``urls`` at ``depth``; queue the known ones found deeper."""
        if self._max_depth is not None and depth > self._max_depth:
            return
        conn, memory = self._conn, self._memory
        new = [u for u in self._seen.unseen(conn, urls) if u not in self._new]
        ledger = self._ledger
        turned_away: set[str] = set()
        if ledger is not None and new:
            fitting = [u for u in new if ledger.admits(conn, u)]
            if len(fitting) < len(new):
                self.refused += len(new) - len(fitting)
                turned_away.update(new)
                turned_away.difference_update(fitting)
                new = fitting
        if new:
            keep = new[: self._room]
            self._room -= len(keep)
            spill = new[len(keep) :]
            rows = [(u, depth, referrer, QM) for u in keep]
            rows.extend((u, depth, referrer, QD) for u in spill)
            conn.executemany(
                "INSERT INTO urls (url, depth, referrer, state) VALUES (?, ?, ?, ?)", rows
            )
            self.delta[QM] += len(keep)
            self.delta[QD] += len(spill)
            self.kept.extend(Row(u, depth, referrer, 0) for u in keep)
            self.spilled += len(spill)
            self._new.update(new)
            self.admitted.extend(new)
            depths = memory.known
            for u in new:
                depths.set(u, depth)
            memory.deepest = max(memory.deepest_row(conn), depth)
        if memory.deepest_row(conn) <= depth:
            return  # no row is deeper: nothing known can be lowered
        depths = memory.known
        unsure: list[str] = []
        for u in dict.fromkeys(urls):
            if u in self._new or u in turned_away:
                continue
            known_depth = depths.get(u)
            if known_depth is None:
                unsure.append(u)
            elif known_depth > depth:
                self._push(depth, u, referrer)
        for start in range(0, len(unsure), LOOKUP_CHUNK):
            chunk = unsure[start : start + LOOKUP_CHUNK]
            marks = ", ".join("?" * len(chunk))
            for u, row_depth in conn.execute(
                f"SELECT url, depth FROM urls WHERE url IN ({marks})", chunk
            ):
                depths.set(u, row_depth)
                if row_depth > depth:
                    self._push(depth, u, referrer)

    def _push(self, depth: int, url: str, via: str | None) -> None:
        self._pushed += 1
        heapq.heappush(self._heap, (depth, self._pushed, url, via))

    def lower_all(self) -> None:
        """Lower every queued row, and what its stored links and redirect reach."""
        conn = self._conn
        while self._heap:
            depth, _, url, via = heapq.heappop(self._heap)
            row = conn.execute(
                "SELECT id, depth, state FROM urls WHERE url = ?", (url,)
            ).fetchone()
            if row is None or depth >= row[1]:
                continue
            row_id, previous, row_state = row
            conn.execute(
                "UPDATE urls SET depth = ?, referrer = ? WHERE id = ?", (depth, via, row_id)
            )
            self._memory.known.set(url, depth)
            self.lowered.append(Lowered(url, depth, via, previous, State(row_state)))
            stored = conn.execute(
                "SELECT links, redirect FROM out_links WHERE id = ?", (row_id,)
            ).fetchone()
            if stored is None:
                continue  # not fetched yet: its links will be offered at the new depth
            conn.execute("UPDATE out_links SET depth = ? WHERE id = ?", (depth, row_id))
            links, redirect = stored
            if redirect:
                self._push(depth, redirect, url)
            if links:
                self.offer([link for link in links.split("\n") if link], depth + 1, url)

    def may_be_lowered(self, depth: int) -> bool:
        """Whether a page at ``depth`` can still be reached by a shorter path:
        every path still to be found starts at an unfinished row."""
        low = self.lowest_unfinished()
        return low is not None and depth > low

    def lowest_unfinished(self) -> int | None:
        (low,) = self._conn.execute(
            "SELECT min(depth) FROM urls INDEXED BY urls_unfinished_depth WHERE state < 3"
        ).fetchone()
        return None if low is None else int(low)

    def settle(self, low: int | None) -> None:
        """Forget the links of pages no path still to be found can bring closer:
        every such path starts at an unfinished row, at depth ``low`` or more
        (the lowest now; None: there is none)."""
        if low is None:
            self._conn.execute("DELETE FROM out_links")
        else:
            self._conn.execute("DELETE FROM out_links WHERE depth <= ?", (low,))

    def finish(self) -> Offered:
        self._counts.write(self._conn, self.delta)
        return Offered(self.kept, self.spilled, self.lowered, self.refused, self.target_refused)


def offer_links(
    conn: sqlite3.Connection,
    books: Books,
    parent: str,
    links: Sequence[str],
    room: int,
    max_depth: int | None,
    settles: bool,
    before: Sequence[Mark],
) -> Offered:
    """``CrawlState.offer_links``: ``parent``'s in-scope ``links`` (or one chunk of
    them) one link below its stored depth, in one transaction; the first ``room``
    new URLs stay in memory. The page keeps its links while a shorter path to it
    can still be found; ``settles=False`` (seeds may still come at depth 0, with
    a ``max_depth``) keeps them for the whole crawl. ``before``: Start and Finish
    ops applied first, in the same transaction (``CrawlState.apply``'s rules; one
    commit instead of two)."""
    with books.counting(conn):
        step = Offering(conn, room, max_depth, books)
        step.apply(before)
        page_id, depth = step.row_of(parent)
        step.offer(links, depth + 1, parent)
        step.lower_all()
        low = step.lowest_unfinished()
        if links and (not settles or (low is not None and depth > low)):
            conn.execute(
                "INSERT INTO out_links (id, depth, links) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE"
                " SET links = links || char(10) || excluded.links",
                (page_id, depth, "\n".join(links)),
            )
        if settles:
            step.settle(low)
        offered = step.finish()
    books.offer_committed(step.delta, step.admitted)
    return offered


def offer_seeds(
    conn: sqlite3.Connection,
    books: Books,
    urls: Sequence[str],
    referrer: str,
    room: int,
    before: Sequence[Mark],
) -> Offered:
    """``CrawlState.offer_seeds``: seeds found mid-crawl (a sitemap's URLs) at
    depth 0; ``before`` as for ``offer_links``."""
    with books.counting(conn):
        step = Offering(conn, room, None, books)
        step.apply(before)
        step.offer(urls, 0, referrer)
        step.lower_all()
        offered = step.finish()
    books.offer_committed(step.delta, step.admitted)
    return offered


def offer_redirect(
    conn: sqlite3.Connection,
    books: Books,
    parent: str,
    target: str,
    room: int,
    max_depth: int | None,
    settles: bool,
    before: Sequence[Mark],
) -> Offered:
    """``CrawlState.offer_redirect``: the target of ``parent``'s redirect at
    ``parent``'s depth (a hop costs nothing), remembered with the page's links,
    so that a shorter path to ``parent`` lowers the target too. ``room`` should
    be at least 1: a new target is offered first, and stays in memory.
    ``before`` as for ``offer_links``."""
    with books.counting(conn):
        step = Offering(conn, room, max_depth, books)
        step.apply(before)
        page_id, depth = step.row_of(parent)
        step.offer([target], depth, parent)
        step.target_refused = step.refused > 0
        step.lower_all()
        if not step.target_refused and (not settles or step.may_be_lowered(depth)):
            conn.execute(
                "INSERT INTO out_links (id, depth, redirect) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET redirect = excluded.redirect",
                (page_id, depth, target),
            )
        offered = step.finish()
    books.offer_committed(step.delta, step.admitted)
    return offered


def stored_out_links(conn: sqlite3.Connection, books: Books) -> int:
    """``CrawlState.stored_out_links``: pages whose links are kept (rule 7)."""
    ensure_depth_schema(conn)
    books.depth.schema_made = True
    return int(conn.execute("SELECT count(*) FROM out_links").fetchone()[0])
