"""The engine's marks on the state file: Admit, Start, Finish and Keep ops.

The engine notes what happened to its URLs as ops and applies a batch at a
time (``CrawlState.apply``, or first thing in an offer's transaction: Start
and Finish only). Each
kind is applied as a few ``executemany`` passes over a run of ops of that kind,
and a Start or Finish that finds its row in no state it may leave raises
(``state.py`` rules 1-3). The counts of rows per state each pass moved are
added to a ``delta``, written with the counts (rule 4) in the same transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ...recrawl.store import put_rows
from ...recrawl.visit import Visit
from .books import Books
from .schema import DN, FE, QD, QM, State


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


@dataclass(frozen=True, slots=True)
class Keep:
    """A URL's visit of generation ``generation`` (``recrawl/store.py``):
    written with the marks, before the URL's record is (it goes with the
    page's offer of links when it has one, in that transaction)."""

    url: str
    generation: int
    visit: Visit


Op = Admit | Start | Finish | Keep
#: The ops written behind and with an offer (no Admit: see ``offering.Step.apply``).
Mark = Start | Finish | Keep


def apply_ops(conn: sqlite3.Connection, books: Books, ops: Sequence[Op]) -> None:
    """``CrawlState.apply`` for a caller that holds the connection (``ops`` not
    empty): one transaction, then the books learn of it."""
    delta = [0] * len(State)
    admitted: list[str] = []
    ledger = books.ledger
    with books.counting(conn):
        for kind, run in runs(ops):
            if kind is Admit and ledger is not None:
                last = ledger.last_id(conn)
                _apply_admit(conn, run, delta)
                ledger.count_rows_after(conn, last)
            else:
                APPLY[kind](conn, run, delta)
            if kind is Admit:
                admitted.extend(op.url for op in run)
        books.counts.write(conn, delta)
    books.counts.commit(delta)
    memory = books.depth
    if memory.deepest is not None:
        depths = [op.depth for op in ops if isinstance(op, Admit)]
        memory.deepest = max([memory.deepest, *depths])
    books.seen.admitted(admitted)


def runs(ops: Sequence[Op]) -> Iterator[tuple[type[Op], list[Op]]]:
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
        if kind not in APPLY:
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
    state = QM if isinstance(run[0], Admit) and run[0].in_memory else QD
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
    delta[QM] -= started
    delta[FE] += started
    if retried + started != len(run):
        _broken(conn, "Start", run, State.FETCHING)


def _apply_finish(conn: sqlite3.Connection, run: list[Op], delta: list[int]) -> None:
    params = [(op.url,) for op in run]
    total = 0
    # A row is in one state: the passes match apart, in either order. Most
    # finished URLs were fetched, so the second pass is rarely needed.
    for source in (FE, QM):
        n = conn.executemany(
            f"UPDATE urls SET state = 3 WHERE url = ? AND state = {source}", params
        ).rowcount
        delta[source] -= n
        total += n
        if total == len(run):
            break
    delta[DN] += total
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


def _apply_keep(conn: sqlite3.Connection, run: list[Op], delta: list[int]) -> None:
    put_rows(conn, [(op.generation, op.visit) for op in run if isinstance(op, Keep)])


#: How each kind of op is applied to a run of them.
APPLY = {
    Admit: _apply_admit,
    Start: _apply_start,
    Finish: _apply_finish,
    Keep: _apply_keep,
}
