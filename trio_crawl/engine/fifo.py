"""A first-in first-out queue that costs little when it holds little. Pure.

The politeness schedule keeps one queue per host, and a broad crawl has
100,000 hosts with a URL or two each. A ``collections.deque`` allocates a
64-slot block up front (760 bytes empty on CPython 3.11); this queue is a
list and the index of its head, about 130 bytes with one item.

Taking from the front only moves the head; the list drops its taken front
once it is more than half of the list (and at least ``_COMPACT_AT`` items),
so each item is moved at most a constant number of times on average:
``append`` and ``popleft`` are amortized O(1) however long the queue grows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["Fifo"]

T = TypeVar("T")

_COMPACT_AT = 32  # taken items worth a compaction of the list


class Fifo(Generic[T]):
    """``append`` at the back, ``popleft`` from the front, iterate front to back.

    >>> q = Fifo([1, 2]); q.append(3); q.popleft(), list(q), len(q)
    (1, [2, 3], 2)
    """

    __slots__ = ("_head", "_items")

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._items: list[T | None] = list(items)
        self._head = 0

    def __len__(self) -> int:
        return len(self._items) - self._head

    def __bool__(self) -> bool:
        return len(self._items) > self._head

    def __iter__(self) -> Iterator[T]:
        for i in range(self._head, len(self._items)):
            yield self._items[i]  # type: ignore[misc]  # only taken slots hold None

    def __repr__(self) -> str:
        return f"Fifo({list(self)!r})"

    def append(self, item: T) -> None:
        self._items.append(item)

    def popleft(self) -> T:
        """The front item, removed. ``IndexError`` when empty."""
        if not self:
            raise IndexError("popleft from an empty Fifo")
        item = self._items[self._head]
        self._items[self._head] = None  # let it go now, not at the next compaction
        self._head += 1
        if self._head == len(self._items):
            self._items.clear()
            self._head = 0
        elif self._head >= _COMPACT_AT and 2 * self._head >= len(self._items):
            del self._items[: self._head]
            self._head = 0
        return item  # type: ignore[return-value]

    def clear(self) -> None:
        self._items.clear()
        self._head = 0
