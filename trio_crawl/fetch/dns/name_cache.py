"""A crawl's cache of host-name lookups: which answers to keep, for how long,
and who looks a name up. Pure: no sockets, no clock (``now`` is an argument).

Theory of operation
-------------------
A broad crawl connects to the same hosts again and again (robots.txt, then
each page, on new connections whenever keep-alive lapses); without a cache
every connection costs one ``getaddrinfo`` in a thread. The trio layer
(``fetch.dns.resolve.CachingResolver``) asks ``begin(name, now)`` before each
lookup and does what the answer says:

- ``Hit(value)``: use the cached answer, no lookup;
- ``Step.RESOLVE``: this caller looks the name up, then reports the result
  with ``finish`` (or ``abandon`` if it was cancelled before an answer);
- ``Step.WAIT``: another caller is looking it up right now; wait until it
  has finished or abandoned, then ask ``begin`` again.

Rules
-----
1. Names compare case-insensitively (DNS does), through ``name_key``.
2. An answer is kept until ``now + ttl``; a failure (the name does not
   resolve) until ``now + negative_ttl``, much shorter, since a host that is
   down for a moment should not stay unknown for the whole crawl.
   ``begin`` at or after that instant starts a new lookup.
3. At most ``max_names`` answers are kept; storing one more forgets the
   least recently used (an expired answer is forgotten when it is next asked
   for, or pushed out in its turn). Memory is bounded whatever the crawl.
4. One lookup per name at a time: between ``Step.RESOLVE`` and its
   ``finish``/``abandon``, every ``begin`` of that name says ``Step.WAIT``.
   After an ``abandon`` the next ``begin`` says ``Step.RESOLVE`` again, so a
   cancelled lookup never leaves the waiters stuck.
5. What a value is (addresses, a failure) is the caller's business; the
   cache only needs to be told, in ``finish``, whether it was a failure.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Hit", "NameCache", "NameCacheStatistics", "Step", "name_key"]

V = TypeVar("V")


def name_key(name: str) -> str:
    """The form a name is cached under (rule 1)."""
    return name.lower()


class Step(enum.Enum):
    """What ``begin`` asks the caller to do when it has no answer to give."""

    RESOLVE = "resolve"  # look the name up, then finish() or abandon()
    WAIT = "wait"  # someone else is looking it up: wait for them, then begin() again


@dataclass(frozen=True, slots=True)
class Hit(Generic[V]):
    """A kept answer (addresses or a failure, as it was ``finish``-ed)."""

    value: V


@dataclass(frozen=True, slots=True)
class NameCacheStatistics:
    """A snapshot of a ``NameCache``.

    ``names``: answers kept; ``pending``: lookups in flight; ``lookups``:
    ``Step.RESOLVE`` answers given (one per real lookup started); ``hits``:
    answers served from the cache; ``waits``: ``Step.WAIT`` answers given;
    ``evicted``: answers forgotten to stay within ``max_names``.
    """

    names: int
    pending: int
    lookups: int
    hits: int
    waits: int
    evicted: int


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    expires: float


class NameCache(Generic[V]):
    """Answers to host-name lookups, with expiry, a size bound, and one
    lookup per name at a time (see the module's rules).

    >>> cache: NameCache[str] = NameCache(ttl=60, negative_ttl=5, max_names=2)
    >>> cache.begin("A.test", now=0)
    <Step.RESOLVE: 'resolve'>
    >>> cache.begin("a.test", now=0)
    <Step.WAIT: 'wait'>
    >>> cache.finish("a.test", "127.0.0.1", now=1, failed=False)
    >>> cache.begin("a.test", now=60)
    Hit(value='127.0.0.1')
    >>> cache.begin("a.test", now=61)
    <Step.RESOLVE: 'resolve'>
    """

    __slots__ = (
        "_entries",
        "_evicted",
        "_hits",
        "_lookups",
        "_pending",
        "_waits",
        "max_names",
        "negative_ttl",
        "ttl",
    )

    def __init__(self, *, ttl: float, negative_ttl: float, max_names: int) -> None:
        if ttl <= 0 or negative_ttl <= 0 or max_names < 1:
            raise ValueError("ttl and negative_ttl must be positive, max_names at least 1")
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self.max_names = max_names
        self._entries: OrderedDict[str, _Entry[V]] = OrderedDict()  # least recently used first
        self._pending: set[str] = set()
        self._lookups = self._hits = self._waits = self._evicted = 0

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<NameCache names={s.names} pending={s.pending} lookups={s.lookups} "
            f"hits={s.hits} waits={s.waits}>"
        )

    def __len__(self) -> int:
        return len(self._entries)

    def statistics(self) -> NameCacheStatistics:
        return NameCacheStatistics(
            names=len(self._entries),
            pending=len(self._pending),
            lookups=self._lookups,
            hits=self._hits,
            waits=self._waits,
            evicted=self._evicted,
        )

    def begin(self, name: str, now: float) -> Hit[V] | Step:
        """The kept answer for ``name``, or what the caller must do instead."""
        key = name_key(name)
        if key in self._pending:
            self._waits += 1
            return Step.WAIT
        entry = self._entries.get(key)
        if entry is not None:
            if now < entry.expires:
                self._entries.move_to_end(key)
                self._hits += 1
                return Hit(entry.value)
            del self._entries[key]
        self._pending.add(key)
        self._lookups += 1
        return Step.RESOLVE

    def finish(self, name: str, value: V, now: float, *, failed: bool) -> None:
        """Keep the answer of the lookup ``begin`` asked for. Raises
        ``ValueError`` if no lookup of ``name`` is in flight (a caller's bug)."""
        key = self._settle(name)
        self._entries[key] = _Entry(value, now + (self.negative_ttl if failed else self.ttl))
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_names:
            self._entries.popitem(last=False)
            self._evicted += 1

    def abandon(self, name: str) -> None:
        """The lookup of ``name`` ended without an answer (cancelled, or an
        error that says nothing about the name): keep nothing; the next
        ``begin`` starts a new lookup. Raises ``ValueError`` as ``finish``."""
        self._settle(name)

    def _settle(self, name: str) -> str:
        key = name_key(name)
        if key not in self._pending:
            raise ValueError(f"no lookup of {name!r} is in flight")
        self._pending.remove(key)
        return key
