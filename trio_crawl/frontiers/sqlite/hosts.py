"""Per-host budgets in the ``--state`` file (``state.py`` rule 8): the ``hosts``
table. Synchronous.

The memory frontier counts admitted URLs per host in a dict
(``core/host_budget.py``); a crawl on a state file keeps the same counts in
the file, so a resumed crawl goes on from them and a kill never lets it
admit more than its budgets, nor fewer.

Rules
-----
1. ``hosts`` has one row per host (``host:port``) with a URL row in ``urls``:
   ``pages`` is how many. The decision is ``HostBudget.fits``, the memory
   frontier's own rule, on the counts of this table.
2. A count is written in the transaction that inserts the URLs it counts
   (``write`` before the COMMIT, ``commit`` after it, ``rollback`` if the
   transaction failed): the table and ``urls`` never disagree, whatever
   moment a crash picks.
3. Only crawls with budgets keep the table. Every row of ``urls`` is counted,
   so ``sum(pages)`` equals the rows of ``urls`` while the table is kept; a
   run without budgets (or of a version that had none) adds rows uncounted.
   ``open`` checks the sum and, if it differs, counts ``urls`` again (once,
   O(rows), 2.3 s for a million URLs): the table is made with
   ``CREATE TABLE IF NOT EXISTS``, so files of every version open.
4. Memory is bounded: counts read from the table are kept for the next URL
   of their host in a cache of ``CACHE_HOSTS`` hosts (emptied when full; one
   transaction's hosts at least), beside the counts of the open
   transaction; the number of hosts is one integer. Hosts are found by a
   URL's text before its path, in a map of as many origins.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable

from ...core.host_budget import HostBudget
from ...core.url import host_port

#: Hosts whose committed counts are kept in memory (rule 4), ~150 bytes each.
CACHE_HOSTS = 65_536

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS hosts ("
    " host TEXT PRIMARY KEY, pages INTEGER NOT NULL) WITHOUT ROWID"
)


def _host_port_or_none(url: str) -> str | None:
    """``host_port`` for SQLite: a row that is not an http(s) URL (none is
    written) counts under no host rather than stopping the count."""
    try:
        return host_port(url)
    except ValueError:
        return None


class HostLedger:
    """A ``HostBudget``'s counts in the state file's ``hosts`` table.

    Kept in the ``CrawlState``'s books, used on its connection, in its
    thread; ``admits`` and ``count`` only inside a transaction, followed by
    ``write`` before the COMMIT and ``commit`` after it (or ``rollback``)."""

    def __init__(self, conn: sqlite3.Connection, budget: HostBudget) -> None:
        """Use ``open``: this takes a table already checked."""
        self.budget = budget
        self._hosts = int(conn.execute("SELECT count(*) FROM hosts").fetchone()[0])
        #: Committed counts read lately (None: the host has no row), rule 4.
        self._cache: dict[str, int | None] = {}
        #: The open transaction's counts, and how many of its hosts are new.
        self._pending: dict[str, int] = {}
        self._new_hosts = 0
        #: ``host_port`` of URLs by their text before the path (``_host_of``).
        self._origins: dict[str, str] = {}

    @classmethod
    def open(cls, conn: sqlite3.Connection, budget: HostBudget, rows: int) -> HostLedger:
        """Make the table if the file has none and count ``urls`` again if
        the table does not count its ``rows`` rows (rule 3), in one
        transaction; the caller holds the connection and no transaction."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_SCHEMA)
            (counted,) = conn.execute("SELECT coalesce(sum(pages), 0) FROM hosts").fetchone()
            if counted != rows:
                conn.create_function(
                    "trio_crawl_host_port", 1, _host_port_or_none, deterministic=True
                )
                conn.execute("DELETE FROM hosts")
                conn.execute(
                    "INSERT INTO hosts (host, pages)"
                    " SELECT h, count(*) FROM (SELECT trio_crawl_host_port(url) AS h FROM urls)"
                    " WHERE h IS NOT NULL GROUP BY h"
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return cls(conn, budget)

    @property
    def hosts(self) -> int:
        """Hosts with a count, the open transaction's included."""
        return self._hosts + self._new_hosts

    def pages(self, conn: sqlite3.Connection, host: str) -> int | None:
        """URLs of ``host`` counted (None: none yet), the open transaction's included."""
        pages = self._pending.get(host)
        if pages is not None:
            return pages
        if host in self._cache:
            return self._cache[host]
        row = conn.execute("SELECT pages FROM hosts WHERE host = ?", (host,)).fetchone()
        if len(self._cache) >= CACHE_HOSTS:
            self._cache.clear()
        pages = self._cache[host] = None if row is None else int(row[0])
        return pages

    def admits(self, conn: sqlite3.Connection, url: str) -> bool:
        """Whether the new canonical ``url`` fits the budgets; if so, count it
        (in the open transaction)."""
        host = self._host_of(url)
        pages = self.pages(conn, host)
        if not self.budget.fits(pages, self.hosts):
            return False
        self._add(host, pages)
        return True

    def _host_of(self, url: str) -> str:
        """``host_port(url)``, known by the URL's text before its path: the
        same text, the same authority (a crawl's links share few origins)."""
        cut = url.find("/", url.find("//") + 2)
        origin = url[:cut] if cut > 0 else url
        host = self._origins.get(origin)
        if host is None:
            host = host_port(url)
            if len(self._origins) >= CACHE_HOSTS:
                self._origins.clear()
            self._origins[origin] = host
        return host

    def count(self, conn: sqlite3.Connection, urls: Iterable[str]) -> None:
        """Count URLs admitted whatever the budgets: start URLs and seeds
        (``host_budget`` rule 4), ``Admit`` ops (in the open transaction)."""
        for host, n in Counter(map(_host_port_or_none, urls)).items():
            if host is not None:
                self._add(host, self.pages(conn, host), n)

    @staticmethod
    def last_id(conn: sqlite3.Connection) -> int:
        """The greatest row id (0: none): rows are never deleted, so the rows
        inserted next have greater ids (``count_rows_after`` counts them)."""
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0])

    def count_rows_after(self, conn: sqlite3.Connection, last: int) -> None:
        """Count by host the rows inserted after row ``last``: the seeds and
        ``Admit`` ops an INSERT OR IGNORE added (in the open transaction)."""
        rows = conn.execute("SELECT url FROM urls WHERE id > ?", (last,))
        self.count(conn, (url for (url,) in rows))

    def _add(self, host: str, pages: int | None, n: int = 1) -> None:
        if pages is None:
            self._new_hosts += 1
            pages = 0
        self._pending[host] = pages + n

    def write(self, conn: sqlite3.Connection) -> None:
        """Write the open transaction's counts (before its COMMIT)."""
        if self._pending:
            conn.executemany(
                "INSERT INTO hosts (host, pages) VALUES (?, ?)"
                " ON CONFLICT (host) DO UPDATE SET pages = excluded.pages",
                self._pending.items(),
            )

    def commit(self) -> None:
        """The transaction committed: its counts are the table's now."""
        if len(self._cache) + len(self._pending) > CACHE_HOSTS:
            self._cache.clear()
        self._cache.update(self._pending)
        self._hosts += self._new_hosts
        self._pending.clear()
        self._new_hosts = 0

    def rollback(self) -> None:
        """The transaction was rolled back: forget its counts."""
        self._pending.clear()
        self._new_hosts = 0
