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
"""

from __future__ import annotations

from collections.abc import Iterable

#: Links remembered (two generations of at most this many each): about
#: 200 bytes a URL with its string, so 20 MB at most.
DEFAULT_SIZE = 50_000


class SentLinks:
    """URL -> the lowest depth Redis accepted it at, for recent URLs.

    ``known(url, depth)``: Redis has it at ``depth`` or lower. ``confirm``
    records what a successful call carried. Two generations of dicts, as
    ``RecentSet``: at most ``2 * size`` URLs; a URL found in the old one
    moves to the young one.
    """

    __slots__ = ("_old", "_young", "size")

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def known(self, url: str, depth: int) -> bool:
        """Whether Redis accepted ``url`` at ``depth`` or lower."""
        at = self._young.get(url)
        if at is None:
            at = self._old.pop(url, None)
            if at is None:
                return False
            self._put(url, at)
        return at <= depth

    def confirm(self, urls: Iterable[str], depth: int) -> None:
        """Redis accepted ``urls`` at ``depth`` (within ``max_depth``)."""
        young, old = self._young, self._old
        for url in urls:
            at = young.get(url)
            if at is None:
                at = old.get(url)
            if at is None or depth < at:
                self._put(url, depth)

    def _put(self, url: str, depth: int) -> None:
        if self.size == 0:
            return
        young = self._young
        if len(young) >= self.size and url not in young:
            self._old = young
            self._young = young = {}
        young[url] = depth
