"""In-memory prefilters for "has this URL been seen?", in front of the state database.

Rules
-----
1. ``BloomFilter.might_contain(key)`` returning False is definitive: the key was never
   added. True only means "maybe": the caller must ask the source of truth (the
   ``urls`` table of ``CrawlState`` in ``frontiers/sqlite/state.py``). There are
   no false negatives, ever.
2. ``RecentSet`` is exact: a key it holds was added; a key it does not hold may or may
   not have been. It remembers a bounded number of recently used keys, so the links
   that every page repeats (navigation, footer) are answered without a database read.
3. Keys are hashed with Python's own ``hash()`` of ``str`` (SipHash, randomised per
   process). That is why a filter is never written to disk: it is rebuilt from the
   database when a state file is opened.
4. Memory is fixed per key: ``bits_per_key`` bits (default 16, i.e. 2 bytes per URL,
   about 0.4 % false positives when full). ``GrowingBloom`` adds a filter twice as
   large when the newest one is full, so an underestimated count costs a little more
   false-positive rate, never a rebuild or a pause.

Theory of operation
-------------------
A classic Bloom filter sets k bits spread over the whole array, which in Python costs
k index computations per key. Here every key lives in one 64-bit word (a "blocked"
Bloom filter): the low 32 bits of its hash choose the word (multiply-shift, so any
array length works) and 14 high bits choose one of 16,384 fixed masks of ``K = 6``
random bits. Adding is one OR, testing one AND and one compare. Crowding keys into a
word costs some accuracy: measured on 200,000 URLs, 12 bits/key give 1.0 % false
positives, 16 give 0.4 % (a classic filter would need about 10 and 12).

On a 32-bit Python (``sys.hash_info.width == 32``) the high hash bits are sign bits,
only two masks are used and the false-positive rate is much higher; the answers stay
correct (rule 1), they just need the database more often.
"""

from __future__ import annotations

import functools
import random
from array import array
from collections.abc import Iterable

#: Bits set per key (within its 64-bit word).
K = 6
_MASK_INDEX_BITS = 14
_MASK_INDEX_SHIFT = 48
_MASK_INDEX_MASK = (1 << _MASK_INDEX_BITS) - 1
_LOW32 = 0xFFFFFFFF


@functools.cache
def _masks() -> array[int]:
    """The fixed table of 64-bit masks with ``K`` bits set (built once).

    Each mask is ``K`` 6-bit fields of one draw, kept when they name ``K``
    different bits (~78 % of draws): every set of ``K`` bits is as likely
    as with ``random.sample``, at a fifth of its cost (~14 ms of CPU, not
    ~65 ms, at the start of every ``--state`` crawl)."""
    assert K == 6  # the fields below
    draw = random.Random(0x7C_B100).getrandbits  # fixed: the table is a constant
    table = array("Q")
    for _ in range(1 << _MASK_INDEX_BITS):
        while True:
            r = draw(36)
            mask = (
                (1 << (r & 63))
                | (1 << (r >> 6 & 63))
                | (1 << (r >> 12 & 63))
                | (1 << (r >> 18 & 63))
                | (1 << (r >> 24 & 63))
                | (1 << (r >> 30))
            )
            if mask.bit_count() == K:
                break
        table.append(mask)
    return table


class BloomFilter:
    """A blocked Bloom filter sized for ``capacity`` keys (see the module doc)."""

    __slots__ = ("_masks", "_nwords", "_words", "capacity", "count")

    def __init__(self, capacity: int, bits_per_key: int = 16) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        if bits_per_key < 1:
            raise ValueError("bits_per_key must be >= 1")
        self.capacity = capacity
        #: Keys added (a key added twice counts twice: the filter cannot tell).
        self.count = 0
        self._nwords = -(-capacity * bits_per_key // 64)
        self._words = array("Q", bytes(8 * self._nwords))
        self._masks = _masks()

    @property
    def full(self) -> bool:
        return self.count >= self.capacity

    @property
    def nbytes(self) -> int:
        return self._nwords * 8

    def add(self, key: str) -> None:
        h = hash(key)
        self._words[((h & _LOW32) * self._nwords) >> 32] |= self._masks[
            (h >> _MASK_INDEX_SHIFT) & _MASK_INDEX_MASK
        ]
        self.count += 1

    def might_contain(self, key: str) -> bool:
        h = hash(key)
        mask = self._masks[(h >> _MASK_INDEX_SHIFT) & _MASK_INDEX_MASK]
        return self._words[((h & _LOW32) * self._nwords) >> 32] & mask == mask

    def __repr__(self) -> str:
        return f"<BloomFilter {self.count}/{self.capacity} keys, {self.nbytes} bytes>"


class GrowingBloom:
    """A chain of ``BloomFilter``s: each new one twice the size of the last.

    Keys go into the newest filter; a lookup asks all of them (normally one, since
    the first is sized from the expected count).
    """

    __slots__ = ("_bits_per_key", "_masks", "filters")

    def __init__(self, capacity: int, bits_per_key: int = 16) -> None:
        self._bits_per_key = bits_per_key
        self._masks = _masks()
        self.filters = [BloomFilter(capacity, bits_per_key)]

    @property
    def count(self) -> int:
        return sum(f.count for f in self.filters)

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.filters)

    def add(self, key: str) -> None:
        last = self.filters[-1]
        if last.count >= last.capacity:
            last = BloomFilter(2 * last.capacity, self._bits_per_key)
            self.filters.append(last)
        last.add(key)

    def update(self, keys: Iterable[str]) -> None:
        """``add`` every key (the loop is inlined: this is how a file is loaded)."""
        masks = self._masks
        last = self.filters[-1]
        words, nwords, room = last._words, last._nwords, last.capacity - last.count
        added = 0
        for key in keys:
            if added >= room:
                last.count += added
                last = BloomFilter(2 * last.capacity, self._bits_per_key)
                self.filters.append(last)
                words, nwords, room, added = last._words, last._nwords, last.capacity, 0
            h = hash(key)
            words[((h & _LOW32) * nwords) >> 32] |= masks[
                (h >> _MASK_INDEX_SHIFT) & _MASK_INDEX_MASK
            ]
            added += 1
        last.count += added

    def might_contain(self, key: str) -> bool:
        h = hash(key)
        mask = self._masks[(h >> _MASK_INDEX_SHIFT) & _MASK_INDEX_MASK]
        low = h & _LOW32
        for f in self.filters:  # noqa: SIM110 (the hot path: hash once, no generator)
            if f._words[(low * f._nwords) >> 32] & mask == mask:
                return True
        return False

    def __repr__(self) -> str:
        return (
            f"<GrowingBloom {self.count} keys in {len(self.filters)} filters, {self.nbytes} bytes>"
        )


class RecentSet:
    """An exact, bounded set of recently used keys (two generations of ``set``).

    ``add`` puts a key in the young generation; when that holds ``size`` keys it
    becomes the old one and the previous old one is forgotten. A key found in the
    old generation is moved back to the young one, so keys in steady use stay.
    At most ``2 * size`` keys are held; O(1) per operation.
    """

    __slots__ = ("_old", "_young", "size")

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        self._young: set[str] = set()
        self._old: set[str] = set()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def __contains__(self, key: object) -> bool:
        """Membership only (no promotion); ``check`` is the lookup that keeps keys."""
        return key in self._young or key in self._old

    def check(self, key: str) -> bool:
        if key in self._young:
            return True
        if key in self._old:
            self._old.discard(key)
            self.add(key)
            return True
        return False

    def add(self, key: str) -> None:
        if self.size == 0:
            return
        young = self._young
        if len(young) >= self.size and key not in young:
            self._old = young
            self._young = young = set()
        young.add(key)


class RecentDepths:
    """An exact, bounded map from recently used URLs to their depth (two
    generations of ``dict``, like ``RecentSet``): what the state file knows
    of a URL's depth without asking the database. The caller keeps it exact
    by writing every depth it stores or lowers; a URL it has forgotten is
    simply looked up again. At most ``2 * size`` keys are held."""

    __slots__ = ("_old", "_young", "size")

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, key: str) -> int | None:
        depth = self._young.get(key)
        if depth is not None:
            return depth
        depth = self._old.pop(key, None)
        if depth is not None:
            self.set(key, depth)
        return depth

    def clear(self) -> None:
        """Forget every depth (what was written may have been undone)."""
        self._young, self._old = {}, {}

    def set(self, key: str, depth: int) -> None:
        if self.size == 0:
            return
        young = self._young
        if len(young) >= self.size and key not in young:
            self._old = young
            self._young = young = {}
        young[key] = depth
        self._old.pop(key, None)
