"""Counting distinct strings in 8 bytes each: a huge page's links.

A record's ``links`` is the number of distinct links on the page. When the
links are handed to the frontier in chunks (``parse.iter_link_chunks``), a
set of them all would hold every link string at once, which is what the
chunks avoid. ``DistinctCounter`` keeps only each string's 64-bit hash, in
an ``array`` (8 bytes a string), spread over 16 arrays by its low bits, and
counts each array's distinct values at the end: the peak of that count is a
sixteenth of a set of them all.

Two different strings whose hashes collide count once: among n strings the
chance of any collision is about n^2 / 2^65 (3e-8 for a million; string
hashes are 64-bit on every 64-bit build of Python). A single
chunk, already de-duplicated, is counted exactly without hashing.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

_BUCKETS = 16


class DistinctCounter:
    """How many distinct strings were added (see the module doc)."""

    def __init__(self) -> None:
        self._first: Sequence[str] | None = None
        self._hashes: list[array[int]] | None = None

    def add(self, chunk: Sequence[str]) -> None:
        """Count the strings of ``chunk``, which has no duplicates itself
        (it may repeat strings of earlier chunks)."""
        if self._hashes is None:
            if self._first is None:
                self._first = chunk  # kept until a second chunk comes
                return
            self._hashes = [array("q") for _ in range(_BUCKETS)]
            first, self._first = self._first, None
            self._add_hashes(first)
        self._add_hashes(chunk)

    def _add_hashes(self, chunk: Sequence[str]) -> None:
        buckets = self._hashes
        assert buckets is not None
        mask = _BUCKETS - 1
        for text in chunk:
            value = hash(text)
            buckets[value & mask].append(value)

    def count(self) -> int:
        if self._hashes is None:
            return 0 if self._first is None else len(self._first)
        return sum(len(set(bucket)) for bucket in self._hashes)
