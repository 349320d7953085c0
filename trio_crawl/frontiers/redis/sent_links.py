"""Which links this worker has already told Redis about, and at what depth.

Pure: no trio, no I/O. Most links of a page lead to pages the crawl knows
already (the synthetic site: 28 links a page, one new), and admitting a
known link costs Redis a seen-set probe and two lookups to learn that
nothing changes. So a worker remembers, exactly, the lowest depth at which
Redis *accepted* each recent link (the in-memory frontier's ``seen`` map is
the pattern, bounded here as ``bloom.RecentSet`` bounds its set). A link
found again at that depth or deeper goes as its 8-byte digest only
(``wire.finish_op``'s known links): Redis keeps it with the page, for a
shorter path found later (rule 7 of ``core/frontier.py``), but does no
admission work for it.

Why that is exact: Redis admitted the link at depth ``e`` or less (depths
only decrease), so a path of ``e`` or more through this page changes
nothing, and the link stays among the page's links in Redis, so a shorter
path to the page found later still passes on through it. A URL Redis
hands out counts too, at the depth it comes with. Only links Redis
*confirmed* count: a finish refused (its lease was taken back) admitted
nothing, so a batch with a refusal confirms none of its links, and a link
still on the wire is not known yet. Links beyond ``max_depth`` are never
recorded (Redis keeps those with their URL, to admit them if a shorter path
brings them within reach). A link forgotten (the map is bounded) is sent in
full again: a cost, never a mistake.

Links still in the outbox (``pend``): a link sent in full by a move not yet
confirmed is known to every later move of a lease of the same *join* (the
worker's registration, ``Lease.join``). Redis runs a worker's moves in the
order it made them, so the move that carries the link in full is applied
first, at that depth or lower; and a refusal is never of one lease alone:
Redis refuses a move only once it has taken back every lease of that join
(a worker taken for dead), so the later move is refused with it. (A move
Redis applied before a call failed on the way back is sent again and
refused as done: its link was admitted the first time.) Not with host
budgets: a link over budget is refused, not admitted, and each refusal is
counted where it is sent (``pending=False``).
"""

from __future__ import annotations

from collections.abc import Iterable

from .wire import url_digest

#: Links remembered (two generations of at most this many each): about
#: 300 bytes a URL with its string and digest, so 30 MB at most.
DEFAULT_SIZE = 50_000


class SentLinks:
    """URL -> the lowest depth Redis accepted it at, for recent URLs.

    ``known(url, depth)``: Redis has it at ``depth`` or lower; ``digest``
    says so with the URL's digest, kept with it (a page's known links go as
    digests, some 28 a page: a BLAKE2b each was a fifth of what the links
    cost the worker). ``confirm`` records what a successful call carried.
    Two generations of dicts, as ``RecentSet``: at most ``2 * size`` URLs;
    a URL found in the old one moves to the young one.
    """

    __slots__ = ("_old", "_pending", "_reuse", "_young", "size")

    def __init__(self, size: int = DEFAULT_SIZE, *, pending: bool = True) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        #: URL -> (lowest depth accepted, its digest).
        self._young: dict[str, tuple[int, bytes]] = {}
        self._old: dict[str, tuple[int, bytes]] = {}
        #: URL -> {(depth, join): moves in flight that carry it in full}.
        self._pending: dict[str, dict[tuple[int, int], int]] = {}
        self._reuse = pending

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def known(self, url: str, depth: int, join: int | None = None) -> bool:
        """Whether Redis accepted ``url`` at ``depth`` or lower, or (for a
        move of a lease of ``join``) will have, before that move."""
        return self.digest(url, depth, join) is not None

    def digest(self, url: str, depth: int, join: int | None = None) -> bytes | None:
        """``url``'s digest if it is ``known``, else None."""
        kept = self._young.get(url)
        if kept is None:
            kept = self._old.pop(url, None)
            if kept is not None:
                self._put(url, *kept)
        if kept is not None and kept[0] <= depth:
            return kept[1]
        moves = self._pending.get(url) if join is not None else None
        if moves is not None and any(j == join and d <= depth for d, j in moves):
            return url_digest(url)
        return None

    def pend(self, urls: list[str], depth: int, join: int) -> tuple[list[str], int, int]:
        """A move of a lease of ``join`` carries ``urls`` in full, at
        ``depth``, in the outbox: what ``settle`` takes once its call is over."""
        if self._reuse:
            pending = self._pending
            for url in urls:
                moves = pending.setdefault(url, {})
                moves[depth, join] = moves.get((depth, join), 0) + 1
        return urls, depth, join

    def settle(self, sent: list[tuple[list[str], int, int]], accepted: bool) -> None:
        """The call that carried ``sent`` (``pend``'s) is over: Redis
        accepted them (a call without a refusal), or not."""
        pending = self._pending
        for urls, depth, join in sent:
            if accepted:
                self.confirm(urls, depth)
            if not self._reuse:
                continue
            for url in urls:
                moves = pending.get(url)
                if moves is None:
                    continue
                left = moves.get((depth, join), 0) - 1
                if left > 0:
                    moves[depth, join] = left
                else:
                    moves.pop((depth, join), None)
                    if not moves:
                        del pending[url]

    def confirm(self, urls: Iterable[str], depth: int) -> None:
        """Redis accepted ``urls`` at ``depth`` (within ``max_depth``)."""
        young, old = self._young, self._old
        for url in urls:
            kept = young.get(url)
            if kept is None:
                kept = old.get(url)
            if kept is None:
                self._put(url, depth, url_digest(url))
            elif depth < kept[0]:
                self._put(url, depth, kept[1])

    def _put(self, url: str, depth: int, digest: bytes) -> None:
        if self.size == 0:
            return
        young = self._young
        if len(young) >= self.size and url not in young:
            self._old = young
            self._young = young = {}
        young[url] = (depth, digest)
