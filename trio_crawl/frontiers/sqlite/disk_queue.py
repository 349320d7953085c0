"""The disk queue (``state.py`` rule 5): seeds in, the oldest rows out to memory.

Seeds are queued in batches, one transaction each, so a seeds file of millions
of URLs never sits in memory. The queue is FIFO by rowid, through the partial
index ``urls_disk_queue``, which holds only the queued rows: taking the oldest
costs O(taken), however many rows are done.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable
from typing import NamedTuple

from .books import Books
from .counts import Counts
from .schema import QD, QM, State, transaction

_INSERT_SEED = "INSERT OR IGNORE INTO urls (url, depth, referrer, state) VALUES (?, 0, NULL, 0)"


class Row(NamedTuple):
    """A queued URL handed to memory by ``take_queued``.

    ``attempts > 0`` means a previous run started fetching it (it may have been
    fetched, and its record written, before that run stopped)."""

    url: str
    depth: int
    referrer: str | None
    attempts: int


def take_oldest(conn: sqlite3.Connection, counts: Counts, limit: int) -> list[Row]:
    """``CrawlState.take_queued`` for a caller that holds the connection."""
    if limit <= 0 or counts.n[QD] == 0:
        return []
    delta = [0] * len(State)
    with transaction(conn):
        rows = conn.execute(
            "SELECT id, url, depth, referrer, attempts FROM urls"
            " INDEXED BY urls_disk_queue WHERE state = 0 ORDER BY id LIMIT ?",
            (limit,),
        ).fetchall()
        if not rows:
            raise RuntimeError(
                f"crawl state: counts say {counts.n[QD]} rows are queued on disk,"
                " the table has none"
            )
        moved = conn.execute(
            "UPDATE urls INDEXED BY urls_disk_queue SET state = 1 WHERE state = 0 AND id <= ?",
            (rows[-1][0],),
        ).rowcount
        if moved != len(rows):
            raise RuntimeError(f"crawl state: took {len(rows)} rows but moved {moved}")
        delta[QD] -= moved
        delta[QM] += moved
        counts.write(conn, delta)
    counts.commit(delta)
    return [Row(url, depth, referrer, attempts) for _, url, depth, referrer, attempts in rows]


def add_seeds(conn: sqlite3.Connection, books: Books, urls: Iterable[str], batch: int) -> int:
    """``CrawlState.add_seeds``: queue start URLs at depth 0, streaming; return
    how many were new.

    ``urls`` is consumed lazily, ``batch`` at a time, one transaction per batch:
    millions of seeds never sit in memory together. Known URLs are left as they
    are (their state and depth too), so adding the same seeds again on resume
    adds nothing; after a crash half-way it adds the rest.
    """
    counts = books.counts
    added = 0
    it = iter(urls)
    while chunk := list(itertools.islice(it, batch)):
        delta = [0] * len(State)
        ledger = books.ledger
        with books.counting(conn):
            last = 0 if ledger is None else ledger.last_id(conn)
            delta[QD] = conn.executemany(_INSERT_SEED, [(url,) for url in chunk]).rowcount
            if ledger is not None:
                ledger.count_rows_after(conn, last)
            counts.write(conn, delta)
        counts.commit(delta)
        books.seen.seeded(chunk)
        added += delta[QD]
    return added
