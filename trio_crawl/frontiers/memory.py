"""The in-memory frontier: the pure ``Frontier`` behind the backend face.

Everything lives in the process: the seen set, depths, the page budget.
URLs are handed to the crawlers as soon as they are admitted: nothing waits
here (it is no ``HoldsBack`` room), so a slow page holds up nothing else. Depth
is the shortest path in the end (``core/frontier.py`` rules 3 and 8): when
a shorter path lowers a page whose record is already out, the correction
goes to the ``correct`` hook given to ``attach`` (the engine hands it to
``on_depth_update``). A
huge page's links come in chunks (``admit_links``) and are offered as they
come; they are also kept until ``finish``, which hands the whole list to the
core, since a page keeps its links while a shorter path could still lower it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..core.config import CrawlConfig
from ..core.frontier import (
    DepthCorrection,
    Entry,
    Frontier,
    FrontierStatistics,
    RedirectOutcome,
)
from ..core.host_budget import HostBudget
from ..core.payloads import REQUISITE
from ..core.scope import Scope
from ..core.scrape import Request
from .base import Correct, Publish


def _unattached(entry: Entry) -> None:
    raise RuntimeError("frontier used before attach()")


def _ignore(correction: DepthCorrection) -> None:
    return None


class MemoryFrontier:
    """A ``FrontierBackend`` that keeps everything in memory."""

    def __init__(
        self,
        start_urls: Sequence[str | Request],
        *,
        scope: Scope,
        max_depth: int | None = None,
        max_pages: int | None = None,
        late_starts: bool = False,
        host_budget: HostBudget | None = None,
    ) -> None:
        """``late_starts``: sitemap seeds may come mid-crawl (``Frontier``);
        ``host_budget``: per-host budgets (``core/host_budget.py``)."""
        self._start_urls = list(start_urls)
        self._scope = scope
        self.core = Frontier(
            in_scope=scope.allows,
            max_depth=max_depth,
            max_pages=max_pages,
            late_starts=late_starts,
            host_budget=host_budget,
        )
        self._publish: Publish = _unattached
        #: Called, not a checkpoint, for each correction of a written record.
        self._correct: Correct = _ignore
        #: A page's links streamed in (``admit_links``), for ``finish``: the
        #: core keeps them with the page while its depth may still drop.
        self._kept: dict[Entry, list[str]] = {}

    @classmethod
    def of(cls, config: CrawlConfig, scope: Scope, seeds: Sequence[str] = ()) -> MemoryFrontier:
        """The frontier of ``config``'s crawl in ``scope``, with ``seeds``
        (canonical URLs from a ``--seeds`` file small enough to hold) after
        its start URLs. Seeds are start URLs to the scope (their hosts should
        be in it) and to ``--no-parent`` (its filter's roots), to the budgets
        (always fetched, and counted) and to depth (0); not to the redirect
        rule: the URL filters judge where a seed redirects, as with a seeds
        file on disk (docs/manual/scope.md)."""
        return cls(
            [*config.start_urls, *seeds],
            scope=scope,
            max_depth=config.budgets.max_depth,
            max_pages=config.budgets.max_pages,
            late_starts=config.follow.sitemaps,
            host_budget=config.host_budget(),
        )

    def attach(
        self,
        publish: Publish,
        check_idle: Callable[[], None],
        queued: Callable[[], int],
        correct: Correct,
    ) -> None:
        self._publish = publish
        self._correct = correct

    def _hand_out(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            self._publish(entry)
        for correction in self.core.take_corrections():
            self._correct(correction)

    async def admit_start_urls(self) -> None:
        for start in self._start_urls:
            if isinstance(start, Request):
                self._hand_out(self.core.add_start(start.url, payload=start))
            else:
                self._hand_out(self.core.add_start(start))

    async def admit_seeds(self, urls: Sequence[str], referrer: str) -> None:
        for url in urls:
            self._hand_out(self.core.add_start(url, referrer=referrer, scoped=True))

    def admit_requisites(self, parent: Entry, urls: Sequence[str]) -> None:
        allows = self._scope.allows_unfiltered  # URL filters spare requisites
        for url in urls:
            if allows(url):
                entries = self.core.offer(
                    url, parent.depth, parent.url, REQUISITE, beyond_max_depth=True, scoped=False
                )
                self._hand_out(entries)

    def admit_request(self, parent: Entry, url: str, payload: object) -> bool:
        if not self._scope.allows(url):
            return False
        self._hand_out(self.core.offer(url, parent.depth, parent.url, payload))
        return True

    async def admit_redirect(self, entry: Entry, target: str) -> RedirectOutcome:
        judge: Callable[[str], bool]
        if entry.payload is REQUISITE:  # a moved image: URL filters spare it too
            judge = self._scope.allows_unfiltered
        else:
            judge = self._scope.judge_redirect(entry.chain[0] if entry.chain else entry.url)
        outcome, admitted = self.core.redirect(entry, target, in_scope=judge)
        self._hand_out(admitted)
        return outcome

    def start(self, entry: Entry) -> bool:
        return self.core.start(entry)

    async def admit_links(self, parent: Entry, links: Sequence[str]) -> None:
        self._kept.setdefault(parent, []).extend(links)  # references: 8 bytes a link
        self._hand_out(self.core.discover(links, parent.depth, parent.url))

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        kept = self._kept.pop(entry, None)
        self._hand_out(self.core.finish(entry, kept if links is None else links))

    def recorded(self, entry: Entry) -> None:
        return None

    def abandon(self, entry: Entry) -> None:
        self._kept.pop(entry, None)
        self.core.abandon(entry)

    def stop(self) -> None:
        return None

    @property
    def unfinished(self) -> int:
        return self.core.unfinished

    @property
    def budget_spent(self) -> bool:
        return self.core.budget_spent

    def statistics(self) -> FrontierStatistics:
        return self.core.statistics()

    async def aclose(self) -> None:
        return None
