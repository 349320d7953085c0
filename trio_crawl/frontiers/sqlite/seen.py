"""The seen-filter (``state.py`` rule 6): which URLs have no row, mostly from memory.

A crawl asks "is this link new?" for every link of every page, and most
answers are "no, seen already" or "yes, never seen": an exact set of recently
used URLs answers the first kind, a Bloom filter's "no" the second, and only a
Bloom "maybe" costs a database query (one per ``LOOKUP_CHUNK`` of them). The
filter is built from the ``urls`` table on first use and fed by every URL the
store admits.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ..bloom import GrowingBloom, RecentSet
from .counts import Counts

#: URLs per ``SELECT ... IN (...)`` when checking a Bloom filter's "maybe".
LOOKUP_CHUNK = 256


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


class SeenFilter:
    """The Bloom filter and the recent-URL set in front of the ``urls`` table.

    Told of every URL the store inserts (``admitted``, ``seeded``) after its
    transaction commits, so it never says "unseen" of a URL with a row."""

    def __init__(
        self, counts: Counts, expected_urls: int, bits_per_url: int, recent_urls: int
    ) -> None:
        """``counts`` sizes the Bloom filter when it is built (rows it must hold)."""
        self._counts = counts
        self._expected_urls = expected_urls
        self._bits_per_url = bits_per_url
        self._bloom: GrowingBloom | None = None
        self._recent = RecentSet(recent_urls)
        self._db_checks = 0
        self._db_queries = 0
        self._false_positives = 0

    def statistics(self) -> StateStatistics:
        bloom = self._bloom
        return StateStatistics(
            prefilter_bytes=0 if bloom is None else bloom.nbytes,
            prefilter_filters=0 if bloom is None else len(bloom.filters),
            recent_urls=len(self._recent),
            db_checks=self._db_checks,
            db_queries=self._db_queries,
            false_positives=self._false_positives,
        )

    def unseen(self, conn: sqlite3.Connection, urls: Sequence[str]) -> list[str]:
        """``CrawlState.filter_unseen`` for a caller that holds the connection."""
        bloom = self._load(conn)
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

    def admitted(self, urls: Sequence[str]) -> None:
        """URLs a committed transaction admitted: seen, and recently used."""
        if self._bloom is not None:
            self._bloom.update(urls)
        recent = self._recent
        for url in urls:
            recent.add(url)

    def seeded(self, urls: Sequence[str]) -> None:
        """Seeds a committed transaction added: seen (not kept as recent)."""
        if self._bloom is not None:
            self._bloom.update(urls)

    def _load(self, conn: sqlite3.Connection) -> GrowingBloom:
        bloom = self._bloom
        if bloom is None:
            rows = sum(self._counts.n)
            capacity = max(rows + max(self._expected_urls, rows // 4), 1024)
            bloom = GrowingBloom(capacity, self._bits_per_url)
            bloom.update(url for (url,) in conn.execute("SELECT url FROM urls"))
            self._bloom = bloom
        return bloom

    def _lookup(self, conn: sqlite3.Connection, urls: list[str]) -> set[str]:
        """The subset of ``urls`` that has rows (one query per 256 URLs)."""
        known: set[str] = set()
        for start in range(0, len(urls), LOOKUP_CHUNK):
            chunk = urls[start : start + LOOKUP_CHUNK]
            # Pad to a power of two so that a handful of statements is cached.
            size = 1 << (len(chunk) - 1).bit_length()
            chunk.extend(itertools.repeat(chunk[-1], size - len(chunk)))
            known.update(url for (url,) in conn.execute(_lookup_sql(size), chunk))
            self._db_queries += 1
        return known


_LOOKUP_SQL: dict[int, str] = {}


def _lookup_sql(size: int) -> str:
    sql = _LOOKUP_SQL.get(size)
    if sql is None:
        marks = ", ".join("?" * size)
        sql = _LOOKUP_SQL[size] = f"SELECT url FROM urls WHERE url IN ({marks})"
    return sql
