"""Picking up after a stopped process (``state.py`` rule 1's ``recover`` and
``mark_recorded``), and counting what an output file already holds.

A process that stops, however it stops, leaves rows in memory (QUEUED_MEM) or in
flight (FETCHING). On resume the output file is the truth about which of them
were recorded: ``mark_recorded`` moves those to DONE first, then ``recover``
puts the rest back on the disk queue. Each is a function of the connection
and the counts; ``CrawlState`` calls it holding both.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable

from .counts import Counts
from .schema import DN, FE, QD, QM, State, transaction


def mark_recorded(
    conn: sqlite3.Connection, counts: Counts, urls: Iterable[str], batch: int
) -> int:
    """``CrawlState.mark_recorded``: mark DONE the URLs the output file already
    has records for (call on resume, *before* ``recover()``); return how many
    changed. One transaction per ``batch`` URLs.

    Lenient, unlike Finish: rows already DONE, and unknown URLs, are left
    alone. This is what makes a resume exact: a page whose record
    was written just before a kill, but whose Finish was not yet
    committed, is not fetched again.
    """
    changed = 0
    it = iter(urls)
    while chunk := list(itertools.islice(it, batch)):
        params = [(url,) for url in chunk]
        delta = [0] * len(State)
        with transaction(conn):
            for source in (QD, QM, FE):
                n = conn.executemany(
                    f"UPDATE urls SET state = 3 WHERE url = ? AND state = {source}",
                    params,
                ).rowcount
                delta[source] -= n
                delta[DN] += n
            counts.write(conn, delta)
        counts.commit(delta)
        changed += delta[DN]
    return changed


def unfinished_among(conn: sqlite3.Connection, urls: Iterable[str]) -> dict[State, int]:
    """``CrawlState.unfinished_among``: how many of ``urls`` have a row that is
    not DONE, by state. Read only, so ``--status`` can count as done the records
    an output file already has (a stopping crawl writes no Finish marks; the
    output, reconciled on resume, is what says which records landed)."""
    found = dict.fromkeys((State.QUEUED_DISK, State.QUEUED_MEM, State.FETCHING), 0)
    for url in urls:
        row = conn.execute("SELECT state FROM urls WHERE url = ?", (url,)).fetchone()
        if row is not None and row[0] in (QD, QM, FE):
            found[State(row[0])] += 1
    return found


def recover(conn: sqlite3.Connection, counts: Counts) -> list[str]:
    """``CrawlState.recover``: return every QUEUED_MEM and FETCHING row to
    QUEUED_DISK (call on resume).

    Returns the URLs that were FETCHING, oldest first: the pages that may have
    been fetched (and recorded) already, so their new records can say so. Their
    ``attempts`` stay > 0, which ``take_queued`` reports too. Idempotent; O(rows)
    when there is something to recover, O(1) otherwise.
    """
    n = counts.n
    if n[QM] + n[FE] == 0:
        return []
    delta = [0] * len(State)
    with transaction(conn):
        in_flight = [
            url for (url,) in conn.execute("SELECT url FROM urls WHERE state = 2 ORDER BY id")
        ]
        moved = conn.execute("UPDATE urls SET state = 0 WHERE state IN (1, 2)").rowcount
        if moved != n[QM] + n[FE]:
            raise RuntimeError(
                f"crawl state: counts say {n[QM] + n[FE]}"
                f" rows in memory or fetching, the table has {moved}"
            )
        delta[QD] += moved
        delta[QM] -= n[QM]
        delta[FE] -= n[FE]
        counts.write(conn, delta)
    counts.commit(delta)
    return in_flight
