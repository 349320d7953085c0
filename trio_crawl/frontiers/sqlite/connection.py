"""The state file's connection: opened checked and locked, used by one thread at
a time, its disk failures told as the user's to fix.

Threads
-------
The connection is opened with ``check_same_thread=False`` so that a worker thread may
use a state opened elsewhere, but one connection must never be used by two threads at
once: every use holds a non-blocking guard and raises RuntimeError instead of waiting
if it is already held (it is a bug, so it is loud). Other processes may read the file
meanwhile (``--status``): WAL readers do not block the writer.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ...errors import StateWriteError
from .lock import StateLock
from .schema import check_or_create, is_disk_failure


class StateFile:
    """One open state file: its connection, its guard and its lock."""

    def __init__(self, conn: sqlite3.Connection, path: Path, lock: StateLock | None) -> None:
        """Use ``StateFile.open``; this takes a connection already checked."""
        self.conn: sqlite3.Connection | None = conn
        self.path = path
        self._lock = lock
        self._guard = threading.Lock()

    @classmethod
    def open(cls, path: Path, *, create: bool, lock: bool) -> StateFile:
        """Open the state file at ``path`` (see ``CrawlState.open``), locked
        first if ``lock``, creating it (if ``create``) when missing.

        Raises:
            FileNotFoundError: ``create`` is False and there is no such file.
            ValueError: the file is not a trio-crawl state file (another program's
                database, not a database at all, a newer schema, or damaged); the
                message is one line and names the file. The file is not modified.
                Also raised if the lock file cannot be created.
            StateInUseError: ``lock`` is True and the file is open with a lock.
        """
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
        held: StateLock | None = None
        try:
            # Locked before the first read: a second crawl never sees the counts.
            held = StateLock.acquire(path) if lock else None
            check_or_create(conn, path)
        except BaseException:
            conn.close()
            if held is not None:
                held.release()
            raise
        return cls(conn, path, held)

    def close(self) -> None:
        """Close the connection, then release the lock (idempotent)."""
        with self.guard():
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """This thread alone, or RuntimeError at once (see "Threads")."""
        if not self._guard.acquire(blocking=False):
            raise RuntimeError("CrawlState used from two threads at once (or re-entered)")
        try:
            yield
        finally:
            self._guard.release()

    @contextlib.contextmanager
    def using(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one thread at a time. A disk that is full or
        failing is the user's to fix, not our bug: sqlite3's error becomes
        ``StateWriteError`` here, the one place that speaks sqlite3."""
        with self.guard():
            if self.conn is None:
                raise RuntimeError("CrawlState is closed")
            try:
                yield self.conn
            except sqlite3.OperationalError as exc:
                if not is_disk_failure(exc):
                    raise
                raise StateWriteError(str(self.path), str(exc)) from exc
