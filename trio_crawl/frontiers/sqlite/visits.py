"""The visits a ``--state`` file keeps, for the engine (``recrawl/store.py``
has the tables, ``engine/revisits.py`` the use).

Every crawl on a state file keeps a visit per recorded URL, so that any
finished crawl can be recrawled. A recrawl (``recrawl=True``) over a
finished file begins the next generation before the crawl opens it
(``start_generation``): its URL rows are emptied, its settings forgotten
(it is a new crawl: its own arguments), the previous visits kept to be
read. The same command over an unfinished recrawl resumes it, as any
``--state`` crawl resumes.

Order of writes for one page (the frontier's, ``frontier.py``, plus one):
its visit is noted as a ``Keep`` mark and written with the page's offer of
links (the same transaction) or, with no offer, by one thread call; only
then is the record written. A crash can lose a visit only with its record:
the resumed crawl fetches the URL again (conditionally, from the previous
generation, as the first try did) and writes both.

``unlinked`` records come last, once the crawl ended whole: a batch of
records is written, then marked in the file; a crash between the two is
reconciled on resume from the output (``reconcile_unlinked``), as
``mark_recorded`` reconciles the pages' records.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence

from ...errors import StateUsageError
from ...recrawl import store
from ...recrawl.visit import UNLINKED, Visit
from .disk_backlog import DiskBacklog
from .marks import Keep
from .schema import State, transaction
from .state import CrawlState


def _reset(conn: sqlite3.Connection) -> None:
    """Empty the crawl's URL rows, their counts and its settings (the
    caller's transaction: ``store.begin_generation``)."""
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    for table in ("urls", "out_links", "hosts"):
        if table in tables:
            conn.execute(f"DELETE FROM {table}")
    conn.execute("UPDATE counts SET n = 0")
    conn.execute("DELETE FROM meta WHERE key = 'settings'")


def _finished(conn: sqlite3.Connection) -> bool:
    """Whether the file's crawl ended whole: said so (``generation_done``),
    or, for a file of an earlier version, nothing left unfinished."""
    current = store.generation(conn)
    done = store.generation_done(conn)
    if done is not None or current > 1:
        return done == current
    left = conn.execute(
        "SELECT sum(n) FROM counts WHERE state IN (?, ?, ?)",
        (State.QUEUED_DISK, State.QUEUED_MEM, State.FETCHING),
    ).fetchone()[0]
    return not left


def start_generation(state: CrawlState) -> bool:
    """For ``recrawl=True``: begin the next generation if the file holds a
    finished crawl (True: reopen the file, its books are stale); go on with
    an unfinished recrawl, or a new file, as they are (False). Refuses a
    first crawl not finished yet: ``StateUsageError``."""

    def job(conn: sqlite3.Connection) -> bool:
        if conn.execute("SELECT 1 FROM meta WHERE key = 'settings'").fetchone() is None:
            return False  # a new file: its first crawl
        if _finished(conn):
            store.begin_generation(conn, _reset)
            return True
        if store.generation(conn) > 1:
            return False  # a recrawl that stopped: resume it
        raise StateUsageError(
            f"{state.path} holds a crawl that is not finished: run the same command"
            " without --recrawl to finish it first"
        )

    return state.run(job)


def prepare_visits(state: CrawlState) -> tuple[int, bool]:
    """Make the visit tables if needed; the generation this crawl writes,
    and whether it ended whole already."""

    def job(conn: sqlite3.Connection) -> tuple[int, bool]:
        if not store.has_schema(conn):
            with transaction(conn):
                store.ensure_schema(conn)
        current = store.generation(conn)
        return current, store.generation_done(conn) == current

    return state.run(job)


def generation_line(state: CrawlState) -> str | None:
    """What ``--status`` says of the file's generations: None for a file
    that was never recrawled (its first crawl is all there is), else the
    generation and whether its recrawl is still in progress."""

    def job(conn: sqlite3.Connection) -> tuple[int, int | None]:
        return store.generation(conn), store.generation_done(conn)

    current, done = state.run(job)
    if current < 2:
        return None
    if done == current:
        then = f"--recrawl begins generation {current + 1}"
        return f"recrawl: generation {current}, ended whole ({then})"
    return (
        f"recrawl: generation {current}, in progress (run the same --recrawl command to resume it)"
    )


def recorded_unlinked(output: str) -> Iterator[str]:
    """URLs of the ``unlinked`` records in an output file."""
    try:
        with open(output, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if UNLINKED not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("change") == UNLINKED:
                    yield str(record.get("url"))
    except FileNotFoundError:
        return


def reconcile_unlinked(state: CrawlState, output: str) -> int:
    """On resume: mark the ``unlinked`` records the output already has."""

    def job(conn: sqlite3.Connection) -> int:
        current = store.generation(conn)
        if current < 2 or not store.has_schema(conn):
            return 0
        with transaction(conn):
            return store.mark_unlinked(conn, current, recorded_unlinked(output))

    return state.run(job)


class StateVisits:
    """The engine's face on the visits of a state file (``KeepsVisits``)."""

    def __init__(self, backlog: DiskBacklog, current: int, ended: bool = False) -> None:
        self._backlog = backlog
        self._state = backlog.state
        #: The generation this crawl writes (2 or more: a recrawl).
        self.generation = current
        #: It ended whole (its unlinked records written): ``finish`` was called.
        self.ended = ended
        # A connection of its own for reading: the crawl's is the worker
        # thread's, and a previous visit is read in the event loop (one
        # indexed lookup, in pages SQLite already holds).
        self._reader: store.VisitStore | None = None
        #: Previous visits read ahead in the state file's thread (None: the
        #: URL has none), each taken by its one ``previous`` call.
        self._ahead: dict[str, Visit | None] = {}
        #: The read ahead's own connection (the state file's thread only):
        #: not the crawl's, whose statement cache its offers keep busy.
        self._ahead_conn: sqlite3.Connection | None = None
        if current > 1:
            self._ahead_conn = sqlite3.connect(
                self._state.path, timeout=5.0, isolation_level=None, check_same_thread=False
            )
            backlog.read_ahead = self._read_ahead
            self._reader = store.VisitStore(
                sqlite3.connect(
                    self._state.path, timeout=5.0, isolation_level=None, check_same_thread=False
                ),
                current,
            )

    @property
    def recrawl(self) -> bool:
        """Whether there is a previous generation to compare with."""
        return self.generation > 1

    def previous(self, url: str) -> Visit | None:
        """``url``'s previous visit: read ahead (most), else read now."""
        if url in self._ahead:
            return self._ahead.pop(url)
        return None if self._reader is None else self._reader.previous(url)

    def _read_ahead(self, urls: Sequence[str]) -> None:
        """In the state file's thread, as it hands ``urls`` to memory: their
        previous visits, so the event loop reads none itself. A query for
        the new URLs of a thread call's offers instead of one per URL, and
        off the event loop, a recrawl's busiest thread (this read was ~7 %
        of its samples, ~10 % of its CPU with the decoding; the state
        file's thread does it for about as much CPU, beside the loop).
        Sound because the previous generation is never written meanwhile."""
        assert self._ahead_conn is not None
        found = store.previous_many(self._ahead_conn, self.generation, urls)
        for url in urls:
            self._ahead[url] = found.get(url)

    def keep(self, visit: Visit) -> int:
        """Note ``visit`` (written behind); its ticket for ``kept``."""
        return self._backlog.keep(Keep(visit.url, self.generation, visit))

    async def kept(self, ticket: int) -> None:
        """Return once the visit of ``ticket`` is in the file."""
        await self._backlog.kept(ticket)

    async def unreached(self, limit: int = 1000) -> list[Visit]:
        """Previous visits this crawl has not reached nor recorded unlinked."""
        current = self.generation
        return await self._backlog.run(
            lambda: self._state.run(lambda conn: store.unreached(conn, current, limit))
        )

    async def mark_unlinked(self, urls: Iterable[str]) -> None:
        await self._write(lambda conn: store.mark_unlinked(conn, self.generation, urls))

    async def finish(self) -> None:
        """The crawl ended whole: a recrawl may begin the next generation."""
        await self._write(lambda conn: store.mark_generation_done(conn, self.generation))
        self.ended = True

    async def _write(self, job: Callable[[sqlite3.Connection], object]) -> None:
        def in_transaction(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                job(conn)

        await self._backlog.run(lambda: self._state.run(in_transaction))

    def close(self) -> None:
        if self._ahead_conn is not None:
            self._ahead_conn.close()
        if self._reader is not None:
            self._reader.close()
