"""The crawl's state on disk: one SQLite file from which a stopped crawl resumes.

Pure and synchronous: the standard library (``sqlite3``, ``fcntl``) and the pure
core (``core/``), no trio, no clock. The engine calls it from one worker thread
(``trio.to_thread.run_sync``) and owns the memory window.

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
   row is counted by its host in the ``hosts`` table (``sqlite_hosts.py``), in
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

Durability
----------
WAL journal with ``synchronous=NORMAL``: a commit is appended to the ``-wal`` file
without an fsync, and the database is fsynced only at checkpoints. Once ``COMMIT``
returns, the data is in the operating system's cache, so killing the process (even
``kill -9``) loses nothing committed and never corrupts the file; an open transaction
is simply discarded when the file is next opened. Only an OS crash or power loss can
lose the last commits, and even then the file stays consistent (WAL frames are
checksummed). That trade is right for a crawl: the cost of losing a few seconds of
state is re-fetching a few pages, and an fsync per batch would cost more than the
batch.

One crawl per file
------------------
``open`` (with ``lock=True``, the default) takes an exclusive advisory lock,
``flock(LOCK_EX | LOCK_NB)`` on ``PATH.lock`` beside the file (beside the file a
symlink names, if ``PATH`` is one), and holds it until
``close``; it writes its pid into that file for the message of the next opener, which
fails at once with ``StateInUseError``. flock locks belong to an open file, not a
process, so a second ``open`` in the same process is refused too. The kernel drops
the lock when the process dies, however it dies (``kill -9`` included), so a lock is
never stale; ``close`` removes ``PATH.lock`` while still holding it, and an opener
that locked a file removed under it tries again. Readers (``--status``) open with
``lock=False`` and take no lock: WAL lets them read while the crawl writes. Needs
``fcntl`` (Linux, macOS, the BSDs) and a local file system; on Windows nothing is
locked.

Threads
-------
The connection is opened with ``check_same_thread=False`` so that a worker thread may
use a state opened elsewhere, but one connection must never be used by two threads at
once: every public method holds a non-blocking guard and raises RuntimeError instead
of waiting if it is already held (it is a bug, so it is loud). Other processes may
read the file meanwhile (``--status``): WAL readers do not block the writer.
"""

from __future__ import annotations

import contextlib
import enum
import heapq
import io
import itertools
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..core.host_budget import HostBudget
from ..errors import StateInUseError, StateWriteError
from .bloom import GrowingBloom, RecentDepths, RecentSet
from .sqlite_hosts import HostLedger

if sys.platform != "win32":
    import fcntl

SCHEMA_VERSION = 1
#: Written in the SQLite header (``PRAGMA application_id``): "tcrl".
APPLICATION_ID = 0x7463726C
#: URLs per ``SELECT ... IN (...)`` when checking a Bloom filter's "maybe".
_LOOKUP_CHUNK = 256

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE counts (state INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE urls (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    depth INTEGER NOT NULL,
    referrer TEXT,
    state INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX urls_disk_queue ON urls (id) WHERE state = 0;
"""
#: What exact depth needs (rule 7), made when first needed, so files of earlier
#: versions gain them on their first offer and stay schema version 1: the links
#: of pages that a shorter path could still bring closer, and an index that finds
#: the lowest depth of an unfinished row at once.
_DEPTH_SCHEMA = """
CREATE TABLE IF NOT EXISTS out_links (
    id INTEGER PRIMARY KEY,
    depth INTEGER NOT NULL,
    links TEXT NOT NULL DEFAULT '',
    redirect TEXT
);
CREATE INDEX IF NOT EXISTS out_links_depth ON out_links (depth);
CREATE INDEX IF NOT EXISTS urls_unfinished_depth ON urls (depth) WHERE state < 3
"""
# Files made before issue #9 have one more column, ``urls.not_before REAL``, that no
# version ever read or wrote. Every statement names its columns, so those files open
# and resume as they are, and new files open in those versions: both are version 1.


class State(enum.IntEnum):
    """A row's state, as stored in ``urls.state``."""

    QUEUED_DISK = 0
    QUEUED_MEM = 1
    FETCHING = 2
    DONE = 3
    #: Reserved: no operation makes it (rule 1).
    DROPPED = 4


_QD, _QM, _FE, _DN = (s.value for s in State if s is not State.DROPPED)


# -- operations ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admit:
    """A new URL: queued on disk, or (``in_memory``) already in the engine's window.

    Ignored if the URL is known."""

    url: str
    depth: int
    referrer: str | None = None
    in_memory: bool = False


@dataclass(frozen=True, slots=True)
class Start:
    """A fetch attempt begins (QUEUED_MEM or FETCHING -> FETCHING, attempts + 1).
    ``first``: the engine knows it is the URL's first attempt (QUEUED_MEM), so
    one UPDATE finds its row; ``None``: either state, two UPDATEs."""

    url: str
    first: bool | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """The URL has its record (QUEUED_MEM or FETCHING -> DONE)."""

    url: str


Op = Admit | Start | Finish


class Row(NamedTuple):
    """A queued URL handed to memory by ``take_queued``.

    ``attempts > 0`` means a previous run started fetching it (it may have been
    fetched, and its record written, before that run stopped)."""

    url: str
    depth: int
    referrer: str | None
    attempts: int


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


@dataclass(frozen=True, slots=True)
class StateStatistics:
    """How the seen-filter is doing (for benchmarks, tests and debugging)."""

    #: Bytes of Bloom filter (0 until the first ``filter_unseen``).
    prefilter_bytes: int
    #: Bloom filters in the chain (0 until loaded; more than 1 once it grew).
    prefilter_filters: int
    #: URLs in the exact recent-URL set.
    recent_urls: int
    #: URLs that ``filter_unseen`` had to look up in the database ...
    db_checks: int
    #: ... in this many queries ...
    db_queries: int
    #: ... of which this many were not there (Bloom false positives).
    false_positives: int


# -- the lock -----------------------------------------------------------------


class _StateLock:
    """An exclusive ``flock`` on ``PATH.lock`` (see "One crawl per file")."""

    def __init__(self, file: io.FileIO, path: Path) -> None:
        self._file: io.FileIO | None = file
        self.path = path

    @classmethod
    def acquire(cls, db: Path) -> _StateLock | None:
        """Lock ``db`` for this object, or raise StateInUseError (ValueError if the
        lock file cannot be made). None where there is no ``fcntl``."""
        if sys.platform == "win32":
            return None
        real = Path(os.path.realpath(db))  # one lock, whatever symlink names the file
        path = real.with_name(real.name + ".lock")
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise ValueError(f"{db}: cannot lock the state file ({exc})") from None
            file = io.FileIO(fd, "r+", closefd=True)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _read_pid(fd)
                file.close()
                raise StateInUseError(db, pid) from None
            except OSError as exc:
                file.close()
                raise ValueError(f"{db}: cannot lock the state file ({exc})") from None
            if _is_at(fd, path):
                break
            # The holder we waited for removed the file after we opened it: nobody
            # else will open this one, so this lock means nothing. Again.
            file.close()
        data = f"{os.getpid()}\n".encode()
        try:
            os.pwrite(fd, data, 0)  # over the pid of a killed holder, then cut to size
            os.ftruncate(fd, len(data))
        except OSError as exc:
            file.close()
            raise ValueError(f"{db}: cannot lock the state file ({exc})") from None
        return cls(file, path)

    def release(self) -> None:
        """Remove the lock file, then unlock (idempotent)."""
        file, self._file = self._file, None
        if file is None:
            return
        if _is_at(file.fileno(), self.path):
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        file.close()


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).split(b"\n", 1)[0]
    return int(text) if text.isdigit() else None


def _is_at(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the open file ``fd``."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


# -- the store ----------------------------------------------------------------


class CrawlState:
    """The on-disk frontier of a crawl. See the module docstring for the rules.

    Open with ``CrawlState.open(path)``; usable as a context manager (closes).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        expected_urls: int,
        bits_per_url: int,
        recent_urls: int,
        lock: _StateLock | None = None,
    ) -> None:
        """Use ``CrawlState.open``; this takes a connection already checked."""
        self._conn: sqlite3.Connection | None = conn
        self._lock = lock
        self.path = path
        self._guard = threading.Lock()
        self._counts = [0] * len(State)
        for state, n in conn.execute("SELECT state, n FROM counts"):
            self._counts[state] = n
        self._needs_recovery = self._counts[_QM] + self._counts[_FE] > 0
        self._expected_urls = expected_urls
        self._bits_per_url = bits_per_url
        self._bloom: GrowingBloom | None = None
        self._recent = RecentSet(recent_urls)
        self._db_checks = 0
        self._db_queries = 0
        self._false_positives = 0
        #: The greatest depth of any row (rule 7), read on the first offer.
        self._deepest: int | None = None
        #: The depths of URLs offered lately, exact (rule 7): a page's known links
        #: are looked up only when one of them could be deeper than offered.
        self._depths = RecentDepths(recent_urls)
        #: Rule 7's table and indexes are known to exist (set once a transaction
        #: that made them committed): an offer then runs no DDL.
        self._depth_schema = False
        #: The per-host counts (rule 8), with budgets only.
        self._ledger: HostLedger | None = None

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
        exact recent-URL set (it holds up to twice that).

        Raises:
            FileNotFoundError: ``create`` is False and there is no such file.
            ValueError: the file is not a trio-crawl state file (another program's
                database, not a database at all, a newer schema, or damaged); the
                message is one line and names the file. The file is not modified.
                Also raised if the lock file cannot be created.
            StateInUseError: ``lock`` is True and the file is open with a lock.
        """
        path = Path(path)
        if not create and not path.exists():
            raise FileNotFoundError(f"{path}: no such state file")
        try:
            # timeout: wait up to 5 s for another process's lock (a --status reader
            # opening the file during WAL recovery, say) instead of failing at once.
            conn = sqlite3.connect(
                path, timeout=5.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise ValueError(f"{path}: cannot open the state file ({exc})") from None
        held: _StateLock | None = None
        try:
            # Locked before the first read: a second crawl never sees the counts.
            held = _StateLock.acquire(path) if lock else None
            _check_or_create(conn, path)
            return cls(
                conn,
                path,
                expected_urls=expected_urls,
                bits_per_url=bits_per_url,
                recent_urls=recent_urls,
                lock=held,
            )
        except BaseException:
            conn.close()
            if held is not None:
                held.release()
            raise

    def close(self) -> None:
        """Close the connection, then release the lock (idempotent). Everything
        applied is already committed."""
        with self._guard_only():
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> CrawlState:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        counts = " ".join(f"{s.name.lower()}={self._counts[s]}" for s in State)
        closed = " closed" if self._conn is None else ""
        return f"<CrawlState {str(self.path)!r} {counts}{closed}>"

    # -- settings ---------------------------------------------------------------

    def load_settings(self) -> dict[str, Any] | None:
        """The settings saved by ``save_settings``, or None for a new file."""
        with self._using() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        if row is None:
            return None
        settings = json.loads(row[0])
        if not isinstance(settings, dict):
            raise ValueError(f"{self.path}: damaged state file (settings are not an object)")
        return settings

    def save_settings(self, settings: dict[str, Any]) -> None:
        """Store the crawl's settings (any JSON-able dict), replacing earlier ones.

        Raises TypeError or ValueError (and stores nothing) if ``settings`` is not
        JSON-able (NaN and infinities are refused: they are not JSON)."""
        if not isinstance(settings, dict):
            raise TypeError("settings must be a dict")
        text = json.dumps(settings, allow_nan=False)
        with self._using() as conn, _transaction(conn):
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('settings', ?)", (text,)
            )

    def use_host_budget(self, budget: HostBudget) -> None:
        """Keep ``budget`` (rule 8) from now on: seeds and admissions are
        counted in the ``hosts`` table, and offers admit only what fits. The
        table is made, or counted again from ``urls`` if a run without budgets
        added rows since it was last kept (``sqlite_hosts`` rule 3). Call it
        before ``add_seeds``."""
        with self._using() as conn:
            self._ledger = HostLedger.open(conn, budget, sum(self._counts))

    # -- questions ----------------------------------------------------------------

    def progress(self) -> dict[str, int]:
        """Rows in each state, by lower-case state name, plus ``total``. O(1).

        Exact for this object's own changes; another process's changes since this
        one opened the file are not seen (``--status`` opens, asks, closes)."""
        with self._using():
            counts = {s.name.lower(): self._counts[s] for s in State}
        counts["total"] = sum(self._counts)
        return counts

    def queued_on_disk(self) -> int:
        """Rows in QUEUED_DISK: what ``take_queued`` can still hand out. O(1)."""
        with self._using():
            return self._counts[_QD]

    def statistics(self) -> StateStatistics:
        with self._using():
            bloom = self._bloom
            return StateStatistics(
                prefilter_bytes=0 if bloom is None else bloom.nbytes,
                prefilter_filters=0 if bloom is None else len(bloom.filters),
                recent_urls=len(self._recent),
                db_checks=self._db_checks,
                db_queries=self._db_queries,
                false_positives=self._false_positives,
            )

    def filter_unseen(self, urls: Sequence[str]) -> list[str]:
        """The URLs that have no row, in their first-seen order, without duplicates.

        The first call builds the Bloom filter from the table (O(rows); about a
        second per million URLs). Later calls cost a few microseconds per URL, plus
        one database query if any URL was a Bloom "maybe" not in the recent set.
        """
        with self._using() as conn:
            return self._unseen(conn, urls)

    def _unseen(self, conn: sqlite3.Connection, urls: Sequence[str]) -> list[str]:
        """``filter_unseen`` for a caller that holds the connection."""
        bloom = self._load_prefilter(conn)
        recent = self._recent
        unseen: list[str] = []
        maybe: list[str] = []
        this_call: set[str] = set()
        for url in urls:
            if url in this_call:
                continue
            this_call.add(url)
            if recent.check(url):
                continue
            if bloom.might_contain(url):
                maybe.append(url)
            unseen.append(url)
        if not maybe:
            return unseen
        known = self._lookup(conn, maybe)
        self._db_checks += len(maybe)
        self._false_positives += len(maybe) - len(known)
        if not known:
            return unseen
        for url in known:
            recent.add(url)
        return [url for url in unseen if url not in known]

    # -- changes ------------------------------------------------------------------

    def apply(self, ops: Sequence[Op]) -> None:
        """Apply ``ops`` in order, in one transaction (rules 1-3).

        Raises:
            RuntimeError: (applying none of ``ops``) a Start or Finish names a URL that
                is not QUEUED_MEM or FETCHING; or ``recover()`` is due.
            TypeError: (applying none of ``ops``) an item is not an op.
        """
        with self._using() as conn:
            if not ops:
                return
            self._require_recovered()
            delta = [0] * len(State)
            admitted: list[str] = []
            ledger = self._ledger
            with self._counting(conn):
                for kind, run in _runs(ops):
                    if kind is Admit and ledger is not None:
                        last = self._last_id(conn)
                        _apply_admit(conn, run, delta)
                        self._count_rows_after(conn, last)
                    else:
                        _APPLY[kind](conn, run, delta)
                    if kind is Admit:
                        admitted.extend(op.url for op in run)
                self._write_counts(conn, delta)
            self._commit_counts(delta)
            if self._deepest is not None:
                depths = [op.depth for op in ops if isinstance(op, Admit)]
                self._deepest = max([self._deepest, *depths])
            if self._bloom is not None:
                self._bloom.update(admitted)
            recent = self._recent
            for url in admitted:
                recent.add(url)

    def take_queued(self, limit: int) -> list[Row]:
        """Hand the ``limit`` oldest QUEUED_DISK rows to memory (-> QUEUED_MEM).

        FIFO by insertion order; a row is handed out once (until ``recover()``)."""
        with self._using() as conn:
            self._require_recovered()
            if limit <= 0 or self._counts[_QD] == 0:
                return []
            delta = [0] * len(State)
            with _transaction(conn):
                rows = conn.execute(
                    "SELECT id, url, depth, referrer, attempts FROM urls"
                    " INDEXED BY urls_disk_queue WHERE state = 0 ORDER BY id LIMIT ?",
                    (limit,),
                ).fetchall()
                if not rows:
                    raise RuntimeError(
                        f"crawl state: counts say {self._counts[_QD]} rows are queued on disk,"
                        " the table has none"
                    )
                moved = conn.execute(
                    "UPDATE urls INDEXED BY urls_disk_queue SET state = 1"
                    " WHERE state = 0 AND id <= ?",
                    (rows[-1][0],),
                ).rowcount
                if moved != len(rows):
                    raise RuntimeError(f"crawl state: took {len(rows)} rows but moved {moved}")
                delta[_QD] -= moved
                delta[_QM] += moved
                self._write_counts(conn, delta)
            self._commit_counts(delta)
            return [
                Row(url, depth, referrer, attempts) for _, url, depth, referrer, attempts in rows
            ]

    def mark_recorded(self, urls: Iterable[str], batch: int = 10_000) -> int:
        """Mark DONE the URLs the output file already has records for (call on
        resume, *before* ``recover()``); return how many changed.

        Lenient, unlike Finish: rows already DONE, and unknown URLs, are left
        alone. This is what makes a resume exact: a page whose record
        was written just before a kill, but whose Finish was not yet
        committed, is not fetched again.
        """
        with self._using() as conn:
            changed = 0
            it = iter(urls)
            while chunk := list(itertools.islice(it, batch)):
                params = [(url,) for url in chunk]
                delta = [0] * len(State)
                with _transaction(conn):
                    for source in (_QD, _QM, _FE):
                        n = conn.executemany(
                            f"UPDATE urls SET state = 3 WHERE url = ? AND state = {source}",
                            params,
                        ).rowcount
                        delta[source] -= n
                        delta[_DN] += n
                    self._write_counts(conn, delta)
                self._commit_counts(delta)
                changed += delta[_DN]
            return changed

    def unfinished_among(self, urls: Iterable[str]) -> dict[State, int]:
        """How many of ``urls`` have a row that is not DONE, by state: read
        only, so ``--status`` can count as done the records an output file
        already has (a stopping crawl writes no Finish marks; the output,
        reconciled on resume, is what says which records landed)."""
        counts = dict.fromkeys((State.QUEUED_DISK, State.QUEUED_MEM, State.FETCHING), 0)
        with self._using() as conn:
            for url in urls:
                row = conn.execute("SELECT state FROM urls WHERE url = ?", (url,)).fetchone()
                if row is not None and row[0] in (_QD, _QM, _FE):
                    counts[State(row[0])] += 1
        return counts

    def recover(self) -> list[str]:
        """Return every QUEUED_MEM and FETCHING row to QUEUED_DISK (call on resume).

        Returns the URLs that were FETCHING, oldest first: the pages that may have
        been fetched (and recorded) already, so their new records can say so. Their
        ``attempts`` stay > 0, which ``take_queued`` reports too. Idempotent; O(rows)
        when there is something to recover, O(1) otherwise.
        """
        with self._using() as conn:
            if self._counts[_QM] + self._counts[_FE] == 0:
                self._needs_recovery = False
                return []
            delta = [0] * len(State)
            with _transaction(conn):
                in_flight = [
                    url
                    for (url,) in conn.execute("SELECT url FROM urls WHERE state = 2 ORDER BY id")
                ]
                moved = conn.execute("UPDATE urls SET state = 0 WHERE state IN (1, 2)").rowcount
                if moved != self._counts[_QM] + self._counts[_FE]:
                    raise RuntimeError(
                        f"crawl state: counts say {self._counts[_QM] + self._counts[_FE]}"
                        f" rows in memory or fetching, the table has {moved}"
                    )
                delta[_QD] += moved
                delta[_QM] -= self._counts[_QM]
                delta[_FE] -= self._counts[_FE]
                self._write_counts(conn, delta)
            self._commit_counts(delta)
            self._needs_recovery = False
            return in_flight

    def add_seeds(self, urls: Iterable[str], batch: int = 10_000) -> int:
        """Queue start URLs at depth 0, streaming; return how many were new.

        ``urls`` is consumed lazily, ``batch`` at a time, one transaction per batch:
        millions of seeds never sit in memory together. Known URLs are left as they
        are (their state and depth too), so adding the same seeds again on resume
        adds nothing; after a crash half-way it adds the rest.
        """
        if batch < 1:
            raise ValueError("batch must be >= 1")
        with self._using() as conn:
            added = 0
            it = iter(urls)
            while chunk := list(itertools.islice(it, batch)):
                delta = [0] * len(State)
                with self._counting(conn):
                    last = self._last_id(conn)
                    delta[_QD] = conn.executemany(_INSERT_SEED, [(url,) for url in chunk]).rowcount
                    self._count_rows_after(conn, last)
                    self._write_counts(conn, delta)
                self._commit_counts(delta)
                if self._bloom is not None:
                    self._bloom.update(chunk)
                added += delta[_QD]
            return added

    # -- exact depth (rule 7) ---------------------------------------------------------

    def offer_links(
        self,
        parent: str,
        links: Sequence[str],
        *,
        room: int,
        max_depth: int | None,
        settles: bool = True,
        before: Sequence[Start | Finish] = (),
    ) -> Offered:
        """Offer ``parent``'s in-scope ``links`` (or one chunk of them) one link below
        its stored depth, in one transaction (rule 7); the first ``room`` new URLs stay
        in memory. The page keeps its links while a shorter path to it can still be
        found; ``settles=False`` (seeds may still come at depth 0, with a
        ``max_depth``) keeps them for the whole crawl. ``before``: Start and
        Finish ops applied first, in the same transaction (``apply``'s rules; one
        commit instead of two)."""
        with self._using() as conn:
            self._require_recovered()
            with self._counting(conn):
                step = _Offering(self, conn, room, max_depth)
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
            return self._adopt_offer(step, offered)

    def offer_seeds(
        self,
        urls: Sequence[str],
        referrer: str,
        *,
        room: int,
        before: Sequence[Start | Finish] = (),
    ) -> Offered:
        """Offer seeds found mid-crawl (a sitemap's URLs) at depth 0 (rule 7);
        ``before`` as for ``offer_links``."""
        with self._using() as conn:
            self._require_recovered()
            with self._counting(conn):
                step = _Offering(self, conn, room, None)
                step.apply(before)
                step.offer(urls, 0, referrer)
                step.lower_all()
                offered = step.finish()
            return self._adopt_offer(step, offered)

    def offer_redirect(
        self,
        parent: str,
        target: str,
        *,
        room: int,
        max_depth: int | None,
        settles: bool = True,
        before: Sequence[Start | Finish] = (),
    ) -> Offered:
        """Offer the target of ``parent``'s redirect at ``parent``'s depth (a hop
        costs nothing), and remember it with the page's links, so that a shorter
        path to ``parent`` lowers the target too (rule 7). ``room`` should be at
        least 1: a new target is offered first, and stays in memory. ``before``
        as for ``offer_links``."""
        with self._using() as conn:
            self._require_recovered()
            with self._counting(conn):
                step = _Offering(self, conn, room, max_depth)
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
            return self._adopt_offer(step, offered)

    def stored_out_links(self) -> int:
        """Pages whose links are kept for a shorter path still to come (rule 7)."""
        with self._using() as conn:
            _ensure_depth_schema(conn)
            self._depth_schema = True
            return int(conn.execute("SELECT count(*) FROM out_links").fetchone()[0])

    def _adopt_offer(self, step: _Offering, offered: Offered) -> Offered:
        """After the commit: the counts, and the memory of what was admitted."""
        self._depth_schema = True
        self._commit_counts(step.delta)
        if step.admitted:
            if self._bloom is not None:
                self._bloom.update(step.admitted)
            for url in step.admitted:
                self._recent.add(url)
        return offered

    def _deepest_row(self, conn: sqlite3.Connection) -> int:
        if self._deepest is None:
            (deepest,) = conn.execute("SELECT max(depth) FROM urls").fetchone()
            self._deepest = -1 if deepest is None else int(deepest)
        return self._deepest

    # -- internals ------------------------------------------------------------------

    def _last_id(self, conn: sqlite3.Connection) -> int:
        """The greatest row id (0: none), where the host ledger is kept:
        rows are never deleted, so the rows inserted next have greater ids."""
        if self._ledger is None:
            return 0
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0])

    def _count_rows_after(self, conn: sqlite3.Connection, last: int) -> None:
        """Count by host the rows inserted after row ``last`` (rule 8)."""
        ledger = self._ledger
        if ledger is not None:
            rows = conn.execute("SELECT url FROM urls WHERE id > ?", (last,))
            ledger.count(conn, (url for (url,) in rows))

    @contextlib.contextmanager
    def _counting(self, conn: sqlite3.Connection) -> Iterator[None]:
        """A transaction that also writes the host counts it made (rule 8):
        they reach the ledger's memory only if it commits."""
        ledger = self._ledger
        try:
            with _transaction(conn):
                yield
                if ledger is not None:
                    ledger.write(conn)
        except BaseException:
            # What memory learnt in it may be undone: depths, the deepest row.
            self._depths.clear()
            self._deepest = None
            if ledger is not None:
                ledger.rollback()
            raise
        if ledger is not None:
            ledger.commit()

    @contextlib.contextmanager
    def _guard_only(self) -> Iterator[None]:
        if not self._guard.acquire(blocking=False):
            raise RuntimeError("CrawlState used from two threads at once (or re-entered)")
        try:
            yield
        finally:
            self._guard.release()

    @contextlib.contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one thread at a time. A disk that is full or
        failing is the user's to fix, not our bug: sqlite3's error becomes
        ``StateWriteError`` here, the one place that speaks sqlite3."""
        with self._guard_only():
            if self._conn is None:
                raise RuntimeError("CrawlState is closed")
            try:
                yield self._conn
            except sqlite3.OperationalError as exc:
                if not _is_disk_failure(exc):
                    raise
                raise StateWriteError(str(self.path), str(exc)) from exc

    def _require_recovered(self) -> None:
        if self._needs_recovery:
            raise RuntimeError(
                f"{self.path}: the last crawl left URLs in memory or in flight;"
                " call recover() before changing the state"
            )

    def _load_prefilter(self, conn: sqlite3.Connection) -> GrowingBloom:
        bloom = self._bloom
        if bloom is None:
            rows = sum(self._counts)
            capacity = max(rows + max(self._expected_urls, rows // 4), 1024)
            bloom = GrowingBloom(capacity, self._bits_per_url)
            bloom.update(url for (url,) in conn.execute("SELECT url FROM urls"))
            self._bloom = bloom
        return bloom

    def _lookup(self, conn: sqlite3.Connection, urls: list[str]) -> set[str]:
        """The subset of ``urls`` that has rows (one query per 256 URLs)."""
        known: set[str] = set()
        for start in range(0, len(urls), _LOOKUP_CHUNK):
            chunk = urls[start : start + _LOOKUP_CHUNK]
            # Pad to a power of two so that a handful of statements is cached.
            size = 1 << (len(chunk) - 1).bit_length()
            chunk.extend(itertools.repeat(chunk[-1], size - len(chunk)))
            known.update(url for (url,) in conn.execute(_lookup_sql(size), chunk))
            self._db_queries += 1
        return known

    def _write_counts(self, conn: sqlite3.Connection, delta: list[int]) -> None:
        changed = [(self._counts[s] + d, s) for s, d in enumerate(delta) if d]
        if changed:
            conn.executemany("UPDATE counts SET n = ? WHERE state = ?", changed)

    def _commit_counts(self, delta: list[int]) -> None:
        for s, d in enumerate(delta):
            self._counts[s] += d


# -- one offer (rule 7) ------------------------------------------------------------


class _Offering:
    """One ``offer_*`` transaction: admits what is new, lowers what a shorter path
    reaches (shallowest first, each row once), and keeps the tallies that the
    ``CrawlState`` takes over after the commit."""

    def __init__(
        self, state: CrawlState, conn: sqlite3.Connection, room: int, max_depth: int | None
    ) -> None:
        if not state._depth_schema:
            _ensure_depth_schema(conn)
        self._state = state
        self._conn = conn
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

    def apply(self, ops: Sequence[Start | Finish]) -> None:
        """Apply Start and Finish ops in this transaction (``CrawlState.apply``'s
        rules 1-3), their counts joining the offer's. An Admit is refused: it
        would have to reach the seen-filter before the offer reads it."""
        for kind, run in _runs(ops):
            if kind is Admit:
                raise TypeError("only Start and Finish ops can go with an offer")
            _APPLY[kind](self._conn, run, self.delta)

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
        conn, state = self._conn, self._state
        new = [u for u in state._unseen(conn, urls) if u not in self._new]
        ledger = state._ledger
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
            rows = [(u, depth, referrer, _QM) for u in keep]
            rows.extend((u, depth, referrer, _QD) for u in spill)
            conn.executemany(
                "INSERT INTO urls (url, depth, referrer, state) VALUES (?, ?, ?, ?)", rows
            )
            self.delta[_QM] += len(keep)
            self.delta[_QD] += len(spill)
            self.kept.extend(Row(u, depth, referrer, 0) for u in keep)
            self.spilled += len(spill)
            self._new.update(new)
            self.admitted.extend(new)
            depths = state._depths
            for u in new:
                depths.set(u, depth)
            state._deepest = max(state._deepest_row(conn), depth)
        if state._deepest_row(conn) <= depth:
            return  # no row is deeper: nothing known can be lowered
        depths = state._depths
        unsure: list[str] = []
        for u in dict.fromkeys(urls):
            if u in self._new or u in turned_away:
                continue
            known_depth = depths.get(u)
            if known_depth is None:
                unsure.append(u)
            elif known_depth > depth:
                self._push(depth, u, referrer)
        for start in range(0, len(unsure), _LOOKUP_CHUNK):
            chunk = unsure[start : start + _LOOKUP_CHUNK]
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
            self._state._depths.set(url, depth)
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
        self._state._write_counts(self._conn, self.delta)
        return Offered(self.kept, self.spilled, self.lowered, self.refused, self.target_refused)


def _ensure_depth_schema(conn: sqlite3.Connection) -> None:
    """Make rule 7's table and indexes if this file has none yet."""
    for statement in _DEPTH_SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


# -- helpers --------------------------------------------------------------------


def _check_or_create(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not ours (without writing to it); create a new one."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {
            name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
        }
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path}: not a trio-crawl state file ({exc})") from None
    if app_id == 0 and not tables:
        _set_pragmas(conn, path)
        with _transaction(conn):
            # (not executescript: it would COMMIT first; one statement at a time)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("schema_version", str(SCHEMA_VERSION)), ("format", "trio-crawl state")],
            )
            conn.executemany(
                "INSERT INTO counts (state, n) VALUES (?, 0)", [(s.value,) for s in State]
            )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        return
    if app_id != APPLICATION_ID:
        raise ValueError(
            f"{path}: not a trio-crawl state file (an SQLite database of another program)"
        )
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        conn.execute("SELECT state, n FROM counts").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path}: damaged trio-crawl state file ({exc})") from None
    version = int(row[0]) if row is not None and str(row[0]).isdigit() else None
    if version is None:
        raise ValueError(f"{path}: damaged trio-crawl state file (no schema version)")
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{path}: trio-crawl state file of schema version {version}; this trio-crawl"
            f" reads version {SCHEMA_VERSION}"
        )
    _set_pragmas(conn, path)


def _set_pragmas(conn: sqlite3.Connection, path: Path) -> None:
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path}: cannot use the state file ({exc})") from None
    if str(mode).lower() != "wal":
        raise ValueError(f"{path}: cannot use the state file (journal mode stays {mode})")
    conn.execute("PRAGMA synchronous = NORMAL")
    # Checkpoint (copy the WAL into the database, with an fsync) every ~40 MB of WAL
    # instead of every 4 MB: on a million-row file this doubles the rate of small
    # batches; the WAL is truncated back to that size after a checkpoint.
    conn.execute("PRAGMA wal_autocheckpoint = 10000")
    conn.execute(f"PRAGMA journal_size_limit = {40 * 2**20}")
    # 16 MiB of page cache (the default is 2 MiB): keeps the url index's upper levels
    # in memory for million-row files; a bounded part of the crawl's RSS.
    conn.execute("PRAGMA cache_size = -16384")


def _is_disk_failure(exc: sqlite3.OperationalError) -> bool:
    """sqlite3's "database or disk is full" and "disk I/O error"."""
    message = str(exc)
    return "full" in message or "disk I/O" in message


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


_INSERT_SEED = "INSERT OR IGNORE INTO urls (url, depth, referrer, state) VALUES (?, 0, NULL, 0)"
_LOOKUP_SQL: dict[int, str] = {}


def _lookup_sql(size: int) -> str:
    sql = _LOOKUP_SQL.get(size)
    if sql is None:
        marks = ", ".join("?" * size)
        sql = _LOOKUP_SQL[size] = f"SELECT url FROM urls WHERE url IN ({marks})"
    return sql


def _runs(ops: Sequence[Op]) -> Iterator[tuple[type[Op], list[Op]]]:
    """Split ``ops`` into maximal runs of one kind, kept in order.

    Admits split further by ``in_memory``; Start and Finish runs also split where a
    URL repeats, because each is applied as several passes (one per source state)
    that must see every URL once."""
    run: list[Op] = []
    run_key: object = None
    run_kind: type[Op] = Admit
    urls: set[str] = set()
    for op in ops:
        kind = type(op)
        if kind not in _APPLY:
            raise TypeError(f"not a crawl state operation: {op!r}")
        admit = isinstance(op, Admit)
        key = (kind, op.in_memory) if isinstance(op, Admit) else kind
        if key != run_key or (not admit and op.url in urls):
            if run:
                yield run_kind, run
            run, run_key, run_kind = [], key, kind
            urls.clear()
        run.append(op)
        if not admit:
            urls.add(op.url)
    if run:
        yield run_kind, run


def _apply_admit(conn: sqlite3.Connection, run: list[Op], delta: list[int]) -> None:
    state = _QM if isinstance(run[0], Admit) and run[0].in_memory else _QD
    params = [(op.url, op.depth, op.referrer, state) for op in run if isinstance(op, Admit)]
    delta[state] += conn.executemany(
        "INSERT OR IGNORE INTO urls (url, depth, referrer, state) VALUES (?, ?, ?, ?)", params
    ).rowcount


def _apply_start(conn: sqlite3.Connection, run: list[Op], delta: list[int]) -> None:
    # A first attempt (``Start.first``) is QUEUED_MEM: one pass finds it. The
    # others take both, retries first, then first attempts: a URL of the run
    # matches one pass only.
    first = [(op.url,) for op in run if isinstance(op, Start) and op.first]
    either = [(op.url,) for op in run if not (isinstance(op, Start) and op.first)]
    retried = 0
    if either:
        retried = conn.executemany(
            "UPDATE urls SET attempts = attempts + 1 WHERE url = ? AND state = 2", either
        ).rowcount
    started = conn.executemany(
        "UPDATE urls SET state = 2, attempts = attempts + 1 WHERE url = ? AND state = 1",
        first + either,
    ).rowcount
    delta[_QM] -= started
    delta[_FE] += started
    if retried + started != len(run):
        _broken(conn, "Start", run, State.FETCHING)


def _apply_finish(conn: sqlite3.Connection, run: list[Op], delta: list[int]) -> None:
    params = [(op.url,) for op in run]
    total = 0
    # A row is in one state: the passes match apart, in either order. Most
    # finished URLs were fetched, so the second pass is rarely needed.
    for source in (_FE, _QM):
        n = conn.executemany(
            f"UPDATE urls SET state = 3 WHERE url = ? AND state = {source}", params
        ).rowcount
        delta[source] -= n
        total += n
        if total == len(run):
            break
    delta[_DN] += total
    if total != len(run):
        _broken(conn, "Finish", run, State.DONE)


def _broken(conn: sqlite3.Connection, name: str, run: list[Op], target: State) -> None:
    """Raise for a Start/Finish whose row was not in memory (rule 3), naming one."""
    found: dict[str, int] = {}
    for op in run:
        row = conn.execute("SELECT state FROM urls WHERE url = ?", (op.url,)).fetchone()
        if row is None or row[0] != target:
            found[op.url] = -1 if row is None else row[0]
            break
    if found:
        ((url, state),) = found.items()
        where = "unknown" if state < 0 else State(state).name
        detail = f"{url!r} is {where}"
    else:
        detail = f"a URL was named twice or is already {target.name}"
    raise RuntimeError(
        f"crawl state invariant broken: {name} of a URL that is not QUEUED_MEM or"
        f" FETCHING: {detail}"
    )


_APPLY = {
    Admit: _apply_admit,
    Start: _apply_start,
    Finish: _apply_finish,
}
