"""How many rows are in each state (``state.py`` rule 4), on disk and in memory.

The ``counts`` table is written in the transaction that moves the rows it
counts, so it is exact after a crash and ``progress()`` never scans ``urls``.
A transaction collects its moves in a ``delta`` (one integer per state):
``write`` puts them in the table before the COMMIT, ``commit`` into memory
after it, so a rolled-back transaction leaves both as they were.
"""

from __future__ import annotations

import sqlite3

from .schema import FE, QM, State


class Counts:
    """The ``counts`` table as last committed, indexed by ``State``."""

    __slots__ = ("n",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        """Read the table (a file checked by ``schema.check_or_create``)."""
        self.n = [0] * len(State)
        for state, n in conn.execute("SELECT state, n FROM counts"):
            self.n[state] = n

    def in_memory(self) -> int:
        """Rows a stopped process had in memory or in flight (``recover`` moves them)."""
        return self.n[QM] + self.n[FE]

    def write(self, conn: sqlite3.Connection, delta: list[int]) -> None:
        """In the open transaction: the counts ``delta`` changes."""
        changed = [(self.n[s] + d, s) for s, d in enumerate(delta) if d]
        if changed:
            conn.executemany("UPDATE counts SET n = ? WHERE state = ?", changed)

    def commit(self, delta: list[int]) -> None:
        """After the COMMIT: memory follows the table."""
        n = self.n
        for s, d in enumerate(delta):
            n[s] += d
