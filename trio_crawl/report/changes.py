"""``trio-crawl report`` of a recrawl: what changed since the previous crawl. Pure.

In a recrawl (``--recrawl``) every record carries ``change``: ``new``,
``changed``, ``unchanged``, ``gone``, ``error``, ``unlinked`` or ``not_due``
(``docs/manual/recrawl.md``); a 304 record also carries ``reused_bytes``, the
size of the body it stands for, which was not downloaded again. This counts
them as the report streams the records. A first crawl has no ``change``
field, and its report has no recrawl section (``RecrawlCounts.result`` gives
None).

Memory stays bounded whatever the file holds: the known kinds are counted by
name, anything else (a kind from a newer trio-crawl, or a crafted file) under
``other``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

#: The kinds in the order a report lists them: what was fetched, then what was not.
CHANGE_KINDS: Final = ("new", "changed", "unchanged", "gone", "error", "unlinked", "not_due")
OTHER: Final = "other"
#: Kinds whose records were not fetched in this crawl.
NOT_FETCHED: Final = frozenset({"unlinked", "not_due"})


@dataclass(frozen=True, slots=True)
class RecrawlData:
    #: records per change kind, in ``CHANGE_KINDS`` order (then ``other``), kinds seen only
    changes: dict[str, int]
    #: bytes not downloaded: the sum of the 304 records' ``reused_bytes``
    reused_bytes: int
    #: 304 records (those that carry ``reused_bytes``)
    reused: int
    #: failed fetches whose previous copy was kept (``"kept": true``)
    kept: int

    @property
    def not_fetched(self) -> int:
        return sum(n for kind, n in self.changes.items() if kind in NOT_FETCHED)


class RecrawlCounts:
    """Feed it every record with ``add``; ``result()`` is None for a first crawl."""

    def __init__(self) -> None:
        self._changes: Counter[str] = Counter()
        self._reused_bytes = 0
        self._reused = 0
        self._kept = 0

    def add(self, record: Mapping[str, Any]) -> None:
        change = record.get("change")
        if change is None:
            return
        self._changes[change if change in CHANGE_KINDS else OTHER] += 1
        reused = record.get("reused_bytes")
        if isinstance(reused, int) and not isinstance(reused, bool) and reused >= 0:
            self._reused_bytes += reused
            self._reused += 1
        if record.get("kept") is True:
            self._kept += 1

    def result(self) -> RecrawlData | None:
        if not self._changes:
            return None
        order = [*CHANGE_KINDS, OTHER]
        return RecrawlData(
            changes={kind: self._changes[kind] for kind in order if self._changes[kind]},
            reused_bytes=self._reused_bytes,
            reused=self._reused,
            kept=self._kept,
        )


def byte_size(size: int) -> str:
    """``1.5 MB``: bytes for a person (the report's own unit)."""
    if size < 1024:
        return f"{size:,} B"
    if size < 1024 * 1024:
        return f"{size / 1024:,.1f} KB"
    return f"{size / 1024 / 1024:,.1f} MB"


def recrawl_line(data: RecrawlData) -> str:
    """One line for the terminal: ``recrawl: 3 new, 40 unchanged, ...; 1.2 MB not downloaded``."""
    kinds = ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in data.changes.items())
    kept = f"; {data.kept:,} failed kept their previous copy" if data.kept else ""
    return f"recrawl: {kinds}; {byte_size(data.reused_bytes)} not downloaded{kept}"
