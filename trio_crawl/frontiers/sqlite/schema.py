"""The state file's format: its tables, its checks on opening, its settings.

What makes a file ours (``application_id``, ``schema_version``), what a new
one is made of, what an older one gains on first use (rule 7's tables, made
when first needed), and the one transaction shape every change uses. The
rules the rows follow are ``state.py``'s.

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
"""

from __future__ import annotations

import contextlib
import enum
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
#: Written in the SQLite header (``PRAGMA application_id``): "tcrl".
APPLICATION_ID = 0x7463726C

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


QD, QM, FE, DN = (s.value for s in State if s is not State.DROPPED)


def check_or_create(conn: sqlite3.Connection, path: Path) -> None:
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
        with transaction(conn):
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


def ensure_depth_schema(conn: sqlite3.Connection) -> None:
    """Make rule 7's table and indexes if this file has none yet."""
    for statement in _DEPTH_SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def is_disk_failure(exc: sqlite3.OperationalError) -> bool:
    """sqlite3's "database or disk is full" and "disk I/O error"."""
    message = str(exc)
    return "full" in message or "disk I/O" in message


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (rule 2): committed whole, or rolled back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def settings_text(settings: dict[str, Any]) -> str:
    """The JSON text ``save_settings`` stores: TypeError or ValueError (and
    nothing stored) for settings that are not a JSON-able dict (NaN and
    infinities are refused: they are not JSON)."""
    if not isinstance(settings, dict):
        raise TypeError("settings must be a dict")
    return json.dumps(settings, allow_nan=False)


def save_settings(conn: sqlite3.Connection, text: str) -> None:
    """Store ``settings_text``'s text in ``meta``, replacing earlier settings."""
    with transaction(conn):
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('settings', ?)", (text,))


def load_settings(conn: sqlite3.Connection, path: Path) -> dict[str, Any] | None:
    """The settings ``save_settings`` stored, or None for a new file."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
    if row is None:
        return None
    settings = json.loads(row[0])
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: damaged state file (settings are not an object)")
    return settings
