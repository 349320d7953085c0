"""Where the visits live: tables in the crawl's state file (or a file of their own).

Synchronous SQLite, no trio. The state file's frontier writes a page's visit
in the transaction of the page's other marks (``frontiers/sqlite/marks.py``
calls ``put_rows``), before the page's record is written: a crash can lose
a visit only together with its record, and the resumed crawl fetches that
URL again and writes both.

Generations
-----------
Each crawl over a file is a *generation* (``meta.generation``, 1 when
absent: files made before recrawls were kept are generation 1). A recrawl
begins the next generation (``begin_generation``): in one transaction the
counter goes up, the crawl's URL rows are reset (the caller's ``reset``),
and visits older than the one before are deleted. The previous generation's
visits are read only from then on (``previous``); the new generation writes
its own. ``meta.generation_done`` names the last generation that ended
whole, its ``unlinked`` records written: only then may a recrawl begin
another.

The tables are made when first needed (``ensure_schema``, ``IF NOT
EXISTS``), as the state file's other later tables are: a file of schema
version 1 opens in versions that never heard of them, and they of it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .visit import COLUMNS, Visit

#: What a write to a visit file may raise (a full disk: ``sqlite3.OperationalError``),
#: for callers that may not import sqlite3 (``mirror/visits.py``).
WRITE_ERRORS = (OSError, sqlite3.Error)

#: One row per URL and generation: ``Visit``'s columns (``visit.COLUMNS``).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS visits (
    generation INTEGER NOT NULL,
    url TEXT NOT NULL,
    status INTEGER,
    etag TEXT,
    last_modified TEXT,
    digest TEXT,
    size INTEGER,
    links TEXT,
    redirect TEXT,
    fetched_at REAL,
    warc_record_id TEXT,
    warc_date TEXT,
    content_type TEXT,
    schedule TEXT,
    PRIMARY KEY (generation, url)
);
CREATE TABLE IF NOT EXISTS unlinked (
    generation INTEGER NOT NULL,
    url TEXT NOT NULL,
    PRIMARY KEY (generation, url)
)
"""
_PUT = (
    f"INSERT OR REPLACE INTO visits (generation, {', '.join(COLUMNS)})"
    f" VALUES (?{', ?' * len(COLUMNS)})"
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM visits"


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Make the visit tables if this file has none yet."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def has_schema(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'visits'")
    return row.fetchone() is not None


def _meta_int(conn: sqlite3.Connection, key: str) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else None


def generation(conn: sqlite3.Connection) -> int:
    """The file's current generation (1 for a file that never recrawled)."""
    return _meta_int(conn, "generation") or 1


def generation_done(conn: sqlite3.Connection) -> int | None:
    """The last generation that ended whole (None: none said so)."""
    return _meta_int(conn, "generation_done")


def put_rows(conn: sqlite3.Connection, rows: Iterable[tuple[int, Visit]]) -> None:
    """Write ``(generation, visit)`` pairs, replacing a URL's earlier one of
    the same generation (a URL fetched again on resume). The caller's
    transaction."""
    conn.executemany(_PUT, [(gen, *visit.to_row()) for gen, visit in rows])


def previous(conn: sqlite3.Connection, current: int, url: str) -> Visit | None:
    """``url``'s visit in the generation before ``current``."""
    row = conn.execute(
        f"{_SELECT} WHERE generation = ? AND url = ?", (current - 1, url)
    ).fetchone()
    return None if row is None else Visit.from_row(row)


#: URLs per ``previous_many`` query: under SQLite's oldest limit on
#: parameters (999), with room for the generation.
_MANY = 500


def previous_many(conn: sqlite3.Connection, current: int, urls: Sequence[str]) -> dict[str, Visit]:
    """The visits of ``urls`` in the generation before ``current`` (a URL
    without one is left out), a query per ``_MANY`` URLs: the crawl reads
    a page's new links' visits at once, where it admitted them."""
    found: dict[str, Visit] = {}
    for start in range(0, len(urls), _MANY):
        chunk = urls[start : start + _MANY]
        rows = conn.execute(
            f"{_SELECT} WHERE generation = ? AND url IN ({', '.join('?' * len(chunk))})",
            (current - 1, *chunk),
        )
        for row in rows:
            visit = Visit.from_row(row)
            found[visit.url] = visit
    return found


def begin_generation(conn: sqlite3.Connection, reset: Callable[[sqlite3.Connection], None]) -> int:
    """Start the next generation (see the module docstring), in one
    transaction with ``reset`` (the crawl's URL rows emptied); return it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        ensure_schema(conn)
        new = generation(conn) + 1
        conn.execute("DELETE FROM visits WHERE generation < ?", (new - 1,))
        conn.execute("DELETE FROM unlinked WHERE generation < ?", (new,))
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', ?)", (str(new),)
        )
        reset(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return new


def unreached(conn: sqlite3.Connection, current: int, limit: int = 1000) -> list[Visit]:
    """Up to ``limit`` previous visits, in URL order, whose URL this
    generation never reached (no URL row, no visit) and has not recorded as
    unlinked yet."""
    has_urls = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'urls'"
    ).fetchone()
    reached = " AND NOT EXISTS (SELECT 1 FROM urls WHERE urls.url = v.url)" if has_urls else ""
    rows = conn.execute(
        f"{_SELECT} AS v WHERE generation = ?{reached}"
        " AND NOT EXISTS (SELECT 1 FROM visits AS n WHERE n.generation = ? AND n.url = v.url)"
        " AND NOT EXISTS (SELECT 1 FROM unlinked AS u WHERE u.generation = ? AND u.url = v.url)"
        " ORDER BY url LIMIT ?",
        (current - 1, current, current, limit),
    ).fetchall()
    return [Visit.from_row(row) for row in rows]


def mark_unlinked(conn: sqlite3.Connection, current: int, urls: Iterable[str]) -> int:
    """Note that these URLs' ``unlinked`` records are written (the caller's
    transaction); return how many were new."""
    return conn.executemany(
        "INSERT OR IGNORE INTO unlinked (generation, url) VALUES (?, ?)",
        [(current, url) for url in urls],
    ).rowcount


def mark_generation_done(conn: sqlite3.Connection, current: int) -> None:
    """The generation ended whole (the caller's transaction)."""
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('generation_done', ?)", (str(current),)
    )


class VisitStore:
    """The visits of one file, on a connection of its own: the previous
    generation's read while the crawl's own connection writes (WAL readers
    never wait for the writer), or a standalone file (a mirror's)."""

    def __init__(self, conn: sqlite3.Connection, current: int) -> None:
        self._conn = conn
        #: The generation this crawl writes; ``previous`` reads the one before.
        self.generation = current

    @classmethod
    def open(cls, path: str | Path) -> VisitStore:
        """Open the visits of the file at ``path`` (made if missing: a
        standalone file gets the ``meta`` table the counter needs), in WAL
        mode."""
        conn = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        # One transaction per visit: in WAL mode with synchronous=NORMAL a
        # commit is a write to the log, no fsync (a kill -9 loses nothing;
        # a power cut may lose the last visits, which a mirror's rerun
        # does again anyway).
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        ensure_schema(conn)
        return cls(conn, generation(conn))

    def close(self) -> None:
        self._conn.close()

    def previous(self, url: str) -> Visit | None:
        return previous(self._conn, self.generation, url)

    def put(self, visit: Visit) -> None:
        """Write one visit of this generation, in its own transaction."""
        self.put_many([visit])

    def put_many(self, visits: Iterable[Visit]) -> None:
        """Write visits of this generation, in one transaction."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            put_rows(self._conn, [(self.generation, visit) for visit in visits])
            self._conn.execute("COMMIT")
        except BaseException:
            self._roll_back()
            raise

    def begin_generation(self, reset: Callable[[sqlite3.Connection], None] | None = None) -> int:
        self.generation = begin_generation(self._conn, reset or _nothing)
        return self.generation

    def unreached(self, limit: int = 1000) -> list[Visit]:
        return unreached(self._conn, self.generation, limit)

    def done(self) -> bool:
        """Whether this generation ended whole (its unlinked records written)."""
        return generation_done(self._conn) == self.generation

    def restart_generation(self) -> None:
        """Forget what this (unfinished) generation wrote, so a crawl that
        cannot resume it (a mirror kept without ``--state``) does it again
        from the start, against the same previous generation."""
        self._in_transaction(
            lambda conn: (
                conn.execute("DELETE FROM visits WHERE generation >= ?", (self.generation,)),
                conn.execute("DELETE FROM unlinked WHERE generation >= ?", (self.generation,)),
            )
        )

    def mark_unlinked(self, urls: Iterable[str]) -> None:
        self._in_transaction(lambda conn: mark_unlinked(conn, self.generation, urls))

    def finish(self) -> None:
        """This generation ended whole: the next crawl may begin another."""
        self._in_transaction(lambda conn: mark_generation_done(conn, self.generation))

    def _in_transaction(self, job: Callable[[sqlite3.Connection], object]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            job(self._conn)
            self._conn.execute("COMMIT")
        except BaseException:
            self._roll_back()
            raise

    def _roll_back(self) -> None:
        # SQLite has already rolled back after some errors (SQLITE_FULL: the
        # disk is full); a second ROLLBACK would hide that error behind
        # "cannot rollback - no transaction is active".
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


def _nothing(conn: sqlite3.Connection) -> None:
    pass
