"""The crawl's state on disk: one SQLite file from which a stopped crawl resumes.

Synchronous, and not pure: it does SQLite and file I/O (``sqlite3``, ``fcntl``)
on top of the pure core (``core/``); no trio, no clock. The engine calls it from
one worker thread (``trio.to_thread.run_sync``, ``disk_backlog.py``) and owns
the memory window.

``CrawlState`` is the face: it holds the open file (``connection.py``: the
connection, its guard, its lock) and the books (``books.py``: what memory
keeps beside the file), and hands each job to a module of its own: the file's
format (``schema.py``), its lock (``lock.py``), the counts (``counts.py``),
the seen-filter (``seen.py``), the marks (``marks.py``), the disk queue
(``disk_queue.py``), an offer (``offering.py``), the host budgets
(``hosts.py``) and recovery (``recovery.py``). The rules below are the whole
store's; each module names the ones it keeps.

Rules
-----
1. The ``urls`` table has one row per admitted canonical URL, never deleted, so a
   URL is admitted at most once per state file, across any number of runs. A row's
   ``state`` only moves forwards, except by ``recover()``::

                   take_queued()             Start              Finish
       QUEUED_DISK -------------> QUEUED_MEM ------> FETCHING -------> DONE
            ^                      |    |             |  ^
            |                      |    +--Finish-----|--|-----------> DONE
            +---- recover() -------+------------------+  +-- Start (a retry)

   ``mark_recorded()``, on resume, moves any unfinished row to DONE. DONE is final.
   (DROPPED, 4, is reserved: no operation makes it. It keeps its row in ``counts``
   and its key in ``progress()``, so files and ``--status`` keep their shape across
   versions.)

   ``Admit`` creates a QUEUED_DISK row, or with ``in_memory=True`` a QUEUED_MEM one
   (a URL the engine keeps in its window at once). ``recover()``, on resume, returns
   the rows that were in memory or in flight when the last process stopped to the
   disk queue. Each Start adds one to ``attempts``.
2. Every mutation is one transaction: a batch of ops (``apply``), one chunk of seeds,
   one take. A crash loses at most the transaction being written, never half of it.
3. Start or Finish of a row that is not QUEUED_MEM or FETCHING (unknown, still on
   disk, done) is the caller's bug: the whole batch is rolled back and RuntimeError
   raised. Admit of a known URL is ignored (INSERT OR IGNORE); only the ``offer_*``
   calls of rule 7 lower a known URL's depth.
4. The number of rows in each state is kept in the ``counts`` table, written in the
   same transactions as the rows, so ``progress()`` is O(1) and exact after a crash.
5. The disk queue is FIFO by rowid (insertion order). A partial index holds only the
   QUEUED_DISK rows, so taking the oldest ones costs O(taken), however many rows
   are done.
6. ``filter_unseen`` answers from memory when it can (``frontiers/bloom.py``): an exact
   set of recently used URLs (admitted or confirmed, not seeds) says "seen", a Bloom
   filter's "no" says "unseen", and only its "maybe" is checked in the database, in
   one query per 256 "maybe"s. The Bloom filter is built from the table on first use
   (16 bits per URL) and fed by every Admit and seed.
7. Depth is the shortest path, as in memory (``core/frontier.py`` rules 3, 7, 8),
   and nothing waits for it. ``offer_links``, ``offer_seeds`` and ``offer_redirect``
   admit what is new and *lower* a known row whose stored depth is greater than the
   offered one (a link costs 1, a redirect hop 0), passing the decrease on through
   the ``out_links`` the row stored when its own links were offered, so links that
   ``max_depth`` cut off before are admitted when a shorter path brings them within
   reach. A page stores its links only while a shorter path to it can still be
   found: while its depth is above the lowest depth of any unfinished row (the
   ``urls_unfinished_depth`` index finds that at once); they are deleted as the
   crawl moves past them. Known URLs are looked up for their depth only when some
   row is deeper than the offered depth, which in a breadth-first crawl without a
   slow shallow page is never. Each lowered row is reported (``Lowered``): the
   engine corrects a record already written, or the entry it holds.
8. Per-host budgets (``use_host_budget``; ``core/host_budget.py``): every URL
   row is counted by its host in the ``hosts`` table (``hosts.py``), in
   the transaction that inserts it. Seeds (``add_seeds``) and ``Admit`` ops are
   counted whatever the budgets; a new URL an ``offer_*`` call finds is
   inserted only if it fits them (``Offered.refused`` counts the others, which
   leave no row: a URL known to the file is never refused).

How the engine uses it
----------------------
1. ``open``; ``load_settings()`` is None for a new crawl (``save_settings``), else
   this is a resume: ``mark_recorded`` the URLs the output file has records for,
   then ``recover()``, whose URLs may have been fetched already (their new records
   say so).
2. ``add_seeds(stream)``: idempotent, so a resume passes the same seeds again.
3. Per page: ``filter_unseen(links)`` gives the new ones; the engine remembers what
   it decided to admit until its batch of ``Admit`` ops has been applied.
4. ``take_queued(room)`` refills the memory window as it drains; ``apply`` a batch
   of Admit / Start / Finish ops every so often.
5. A graceful stop leaves what is queued in memory as it is: it closes, and the
   next ``recover()`` puts those rows back on the disk queue.

Durability is ``schema.py``'s to say (WAL, ``synchronous=NORMAL``), "One crawl
per file" ``lock.py``'s, and "Threads" (one at a time on a connection)
``connection.py``'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ...core.host_budget import HostBudget
from . import disk_queue, offering, recovery
from .books import Books
from .connection import StateFile
from .disk_queue import Row
from .hosts import HostLedger
from .marks import Mark, Op, apply_ops
from .offering import Offered
from .schema import QD, State, load_settings, save_settings, settings_text
from .seen import StateStatistics

T = TypeVar("T")


class CrawlState:
    """The on-disk frontier of a crawl. See the module docstring for the rules.

    Open with ``CrawlState.open(path)``; usable as a context manager (closes).
    Every method holds the connection (``StateFile.using``) and hands the work,
    with the books (``books.py``), to the module whose job it is.
    """

    def __init__(self, file: StateFile, books: Books) -> None:
        """Use ``CrawlState.open``: this takes a file already checked, and its books."""
        self._file = file
        self.path = file.path
        self._books = books
        self._needs_recovery = books.counts.in_memory() > 0

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        create: bool = True,
        lock: bool = True,
        expected_urls: int = 100_000,
        bits_per_url: int = 16,
        recent_urls: int = 32_768,
    ) -> CrawlState:
        """Open the state file at ``path``, creating it (if ``create``) when missing.

        With ``lock`` (the default), hold the file's lock until ``close``: no other
        ``CrawlState`` opened with ``lock=True``, in this process or another, can
        open it meanwhile. Pass ``lock=False`` only to read (``--status``).
        ``expected_urls`` sizes the Bloom filter (it grows past that, a little less
        accurate); ``bits_per_url`` is its memory per URL; ``recent_urls`` bounds the
        exact recent-URL set (it holds up to twice that). Raises what
        ``StateFile.open`` says: FileNotFoundError, ValueError (not a state file
        of ours, or no lock file: a one-line message), StateInUseError.
        """
        file = StateFile.open(Path(path), create=create, lock=lock)
        try:
            assert file.conn is not None
            return cls(file, Books(file.conn, expected_urls, bits_per_url, recent_urls))
        except BaseException:
            file.close()
            raise

    def close(self) -> None:
        """Close the connection, then release the lock (idempotent). Everything
        applied is already committed."""
        self._file.close()

    def __enter__(self) -> CrawlState:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        counts = " ".join(f"{s.name.lower()}={self._books.counts.n[s]}" for s in State)
        closed = " closed" if self._file.conn is None else ""
        return f"<CrawlState {str(self.path)!r} {counts}{closed}>"

    # -- settings ---------------------------------------------------------------

    def load_settings(self) -> dict[str, Any] | None:
        """The settings saved by ``save_settings``, or None for a new file."""
        with self._file.using() as conn:
            return load_settings(conn, self.path)

    def save_settings(self, settings: dict[str, Any]) -> None:
        """Store the crawl's settings (any JSON-able dict), replacing earlier ones.

        Raises TypeError or ValueError (and stores nothing) if ``settings`` is not
        JSON-able (NaN and infinities are refused: they are not JSON)."""
        text = settings_text(settings)
        with self._file.using() as conn:
            save_settings(conn, text)

    def use_host_budget(self, budget: HostBudget) -> None:
        """Keep ``budget`` (rule 8) from now on: seeds and admissions are
        counted in the ``hosts`` table, and offers admit only what fits. The
        table is made, or counted again from ``urls`` if a run without budgets
        added rows since it was last kept (``hosts.py`` rule 3). Call it
        before ``add_seeds``."""
        with self._file.using() as conn:
            self._books.ledger = HostLedger.open(conn, budget, sum(self._books.counts.n))

    # -- questions ----------------------------------------------------------------

    def progress(self) -> dict[str, int]:
        """Rows in each state, by lower-case state name, plus ``total``. O(1).

        Exact for this object's own changes; another process's changes since this
        one opened the file are not seen (``--status`` opens, asks, closes)."""
        with self._file.using():
            n = self._books.counts.n
            counts = {s.name.lower(): n[s] for s in State}
        counts["total"] = sum(n)
        return counts

    def queued_on_disk(self) -> int:
        """Rows in QUEUED_DISK: what ``take_queued`` can still hand out. O(1)."""
        with self._file.using():
            return self._books.counts.n[QD]

    def statistics(self) -> StateStatistics:
        with self._file.using():
            return self._books.seen.statistics()

    def filter_unseen(self, urls: Sequence[str]) -> list[str]:
        """The URLs that have no row, in their first-seen order, without duplicates.

        The first call builds the Bloom filter from the table (O(rows); about a
        second per million URLs). Later calls cost a few microseconds per URL, plus
        one database query if any URL was a Bloom "maybe" not in the recent set.
        """
        with self._file.using() as conn:
            return self._books.seen.unseen(conn, urls)

    def unfinished_among(self, urls: Iterable[str]) -> dict[State, int]:
        """How many of ``urls`` have a row that is not DONE, by state: read only
        (``recovery.unfinished_among``)."""
        with self._file.using() as conn:
            return recovery.unfinished_among(conn, urls)

    # -- changes ------------------------------------------------------------------

    def apply(self, ops: Sequence[Op]) -> None:
        """Apply ``ops`` in order, in one transaction (rules 1-3).

        Raises:
            RuntimeError: (applying none of ``ops``) a Start or Finish names a URL that
                is not QUEUED_MEM or FETCHING; or ``recover()`` is due.
            TypeError: (applying none of ``ops``) an item is not an op.
        """
        with self._file.using() as conn:
            if ops:
                self._require_recovered()
                apply_ops(conn, self._books, ops)

    def take_queued(self, limit: int) -> list[Row]:
        """Hand the ``limit`` oldest QUEUED_DISK rows to memory (-> QUEUED_MEM).

        FIFO by insertion order; a row is handed out once (until ``recover()``)."""
        with self._file.using() as conn:
            self._require_recovered()
            return disk_queue.take_oldest(conn, self._books.counts, limit)

    def mark_recorded(self, urls: Iterable[str], batch: int = 10_000) -> int:
        """Mark DONE the URLs the output file already has records for (call on
        resume, *before* ``recover()``); return how many changed
        (``recovery.mark_recorded``)."""
        with self._file.using() as conn:
            return recovery.mark_recorded(conn, self._books.counts, urls, batch)

    def recover(self) -> list[str]:
        """Return every QUEUED_MEM and FETCHING row to QUEUED_DISK (call on resume);
        return the URLs that were FETCHING, oldest first (``recovery.recover``)."""
        with self._file.using() as conn:
            in_flight = recovery.recover(conn, self._books.counts)
            self._needs_recovery = False
            return in_flight

    def add_seeds(self, urls: Iterable[str], batch: int = 10_000) -> int:
        """Queue start URLs at depth 0, streaming, ``batch`` at a time; return how
        many were new (``disk_queue.add_seeds``)."""
        if batch < 1:
            raise ValueError("batch must be >= 1")
        with self._file.using() as conn:
            return disk_queue.add_seeds(conn, self._books, urls, batch)

    # -- exact depth (rule 7) ---------------------------------------------------------

    def offer_links(
        self,
        parent: str,
        links: Sequence[str],
        *,
        room: int,
        max_depth: int | None,
        settles: bool = True,
        before: Sequence[Mark] = (),
    ) -> Offered:
        """Offer ``parent``'s in-scope ``links`` (or one chunk of them) one link below
        its stored depth, in one transaction (rule 7; ``offering.offer_links``)."""
        with self._file.using() as conn:
            self._require_recovered()
            books = self._books
            return offering.offer_links(
                conn, books, parent, links, room, max_depth, settles, before
            )

    def offer_seeds(
        self,
        urls: Sequence[str],
        referrer: str,
        *,
        room: int,
        before: Sequence[Mark] = (),
    ) -> Offered:
        """Offer seeds found mid-crawl (a sitemap's URLs) at depth 0 (rule 7)."""
        with self._file.using() as conn:
            self._require_recovered()
            return offering.offer_seeds(conn, self._books, urls, referrer, room, before)

    def offer_redirect(
        self,
        parent: str,
        target: str,
        *,
        room: int,
        max_depth: int | None,
        settles: bool = True,
        before: Sequence[Mark] = (),
    ) -> Offered:
        """Offer the target of ``parent``'s redirect at ``parent``'s depth (rule 7;
        ``offering.offer_redirect``)."""
        with self._file.using() as conn:
            self._require_recovered()
            books = self._books
            return offering.offer_redirect(
                conn, books, parent, target, room, max_depth, settles, before
            )

    def stored_out_links(self) -> int:
        """Pages whose links are kept for a shorter path still to come (rule 7)."""
        with self._file.using() as conn:
            return offering.stored_out_links(conn, self._books)

    def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """``job(connection)`` holding the connection: for a table this class
        does not keep (``recrawl/store.py``'s visits), in its transactions."""
        with self._file.using() as conn:
            return job(conn)

    def _require_recovered(self) -> None:
        if self._needs_recovery:
            raise RuntimeError(
                f"{self.path}: the last crawl left URLs in memory or in flight;"
                " call recover() before changing the state"
            )
