"""What the store keeps in memory beside the file, and the transaction that keeps
them in step.

Four things answer questions without a query: the counts (``counts.py``, rule
4), the seen-filter (``seen.py``, rule 6), rule 7's memory of depths
(``DepthMemory``) and, with budgets, the host counts (``hosts.py``, rule 8).
Each learns of a transaction's rows only once it has committed, so none of them
ever says what the file does not: ``counting`` is the transaction that makes
sure of it for the depths and the host counts, and each change commits its
counts and feeds the seen-filter after its COMMIT.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence

from ..bloom import RecentDepths
from .counts import Counts
from .hosts import HostLedger
from .schema import transaction
from .seen import SeenFilter


class DepthMemory:
    """Rule 7's memory between offers."""

    def __init__(self, recent_urls: int) -> None:
        #: The depths of URLs offered lately, exact (rule 7): a page's known links
        #: are looked up only when one of them could be deeper than offered.
        self.known = RecentDepths(recent_urls)
        #: The greatest depth of any row (rule 7), read on the first offer.
        self.deepest: int | None = None
        #: Rule 7's table and indexes are known to exist (set once a transaction
        #: that made them committed): an offer then runs no DDL.
        self.schema_made = False

    def deepest_row(self, conn: sqlite3.Connection) -> int:
        if self.deepest is None:
            (deepest,) = conn.execute("SELECT max(depth) FROM urls").fetchone()
            self.deepest = -1 if deepest is None else int(deepest)
        return self.deepest

    def forget(self) -> None:
        """A transaction rolled back: what memory learnt in it may be undone."""
        self.known.clear()
        self.deepest = None


class Books:
    """The counts, the seen-filter, the depths and the host ledger of one file."""

    def __init__(
        self, conn: sqlite3.Connection, expected_urls: int, bits_per_url: int, recent_urls: int
    ) -> None:
        """Read the counts of ``conn``'s file; size the seen-filter (``CrawlState.open``)."""
        self.counts = Counts(conn)
        self.seen = SeenFilter(self.counts, expected_urls, bits_per_url, recent_urls)
        self.depth = DepthMemory(recent_urls)
        #: The per-host counts (rule 8), with budgets only.
        self.ledger: HostLedger | None = None

    @contextlib.contextmanager
    def counting(self, conn: sqlite3.Connection) -> Iterator[None]:
        """A transaction that also writes the host counts it made (rule 8):
        they reach the ledger's memory only if it commits."""
        ledger = self.ledger
        try:
            with transaction(conn):
                yield
                if ledger is not None:
                    ledger.write(conn)
        except BaseException:
            # What memory learnt in it may be undone: depths, the deepest row.
            self.depth.forget()
            if ledger is not None:
                ledger.rollback()
            raise
        if ledger is not None:
            ledger.commit()

    def offer_committed(self, delta: list[int], admitted: Sequence[str]) -> None:
        """After an offer's commit: the counts, and the memory of what was admitted."""
        self.depth.schema_made = True
        self.counts.commit(delta)
        if admitted:
            self.seen.admitted(admitted)
