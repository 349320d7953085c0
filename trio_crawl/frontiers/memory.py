"""The in-memory frontier: the pure ``Frontier`` behind the backend face.

Everything lives in the process: the seen set, depths (exact, with the
depth gate of ``core/frontier.py`` rule 7), the page budget. URLs are handed
to the crawlers as soon as they are admitted, except those the depth gate
holds: those are this backend's ``waiting`` room. A huge page's links come
in chunks (``admit_links``) and are offered as they come, unless
``max_depth`` is set: then they wait for ``finish``, which stores them with
the page (``core/frontier.py`` rule 3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..core.frontier import Entry, Frontier, FrontierStatistics, RedirectOutcome
from ..core.requisites import REQUISITE
from ..core.scrape import Request
from ..core.url import Scope
from .base import Publish


def _unattached(entry: Entry) -> None:
    raise RuntimeError("frontier used before attach()")


class MemoryFrontier:
    """A ``FrontierBackend`` that keeps everything in memory."""

    def __init__(
        self,
        start_urls: Sequence[str | Request],
        *,
        scope: Scope,
        max_depth: int | None = None,
        max_pages: int | None = None,
    ) -> None:
        self._start_urls = list(start_urls)
        self._scope = scope
        self.core = Frontier(in_scope=scope.allows, max_depth=max_depth, max_pages=max_pages)
        self._publish: Publish = _unattached
        #: With ``max_depth``, a page's links streamed in (``admit_links``)
        #: wait for ``finish``: the core stores them with the page (rule 3).
        self._kept: dict[Entry, list[str]] = {}

    def attach(
        self, publish: Publish, check_idle: Callable[[], None], queued: Callable[[], int]
    ) -> None:
        self._publish = publish

    def _hand_out(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            self._publish(entry)

    async def admit_start_urls(self) -> None:
        for start in self._start_urls:
            if isinstance(start, Request):
                self._hand_out(self.core.add_start(start.url, payload=start))
            else:
                self._hand_out(self.core.add_start(start))

    async def serve(self) -> None:
        return None

    def want_more(self, queued: int) -> None:
        return None

    async def admit_seeds(self, urls: Sequence[str], referrer: str) -> None:
        for url in urls:
            self._hand_out(self.core.add_start(url, referrer=referrer, scoped=True))

    def admit_requisites(self, parent: Entry, urls: Sequence[str]) -> None:
        allows = self._scope.allows
        for url in urls:
            if allows(url):
                entries = self.core.offer(
                    url, parent.depth, parent.url, REQUISITE, beyond_max_depth=True
                )
                self._hand_out(entries)

    def admit_request(self, parent: Entry, url: str, payload: object) -> bool:
        if not self._scope.allows(url):
            return False
        self._hand_out(self.core.offer(url, parent.depth, parent.url, payload))
        return True

    async def admit_redirect(self, entry: Entry, target: str) -> RedirectOutcome:
        outcome, admitted = self.core.redirect(entry, target)
        self._hand_out(admitted)
        return outcome

    def start(self, entry: Entry) -> bool:
        return self.core.start(entry)

    async def admit_links(self, parent: Entry, links: Sequence[str]) -> None:
        if self.core.max_depth is not None:
            self._kept.setdefault(parent, []).extend(links)
        else:
            self._hand_out(self.core.discover(links, parent.depth, parent.url))

    async def finish(self, entry: Entry, links: Sequence[str] | None) -> None:
        kept = self._kept.pop(entry, None)
        self._hand_out(self.core.finish(entry, kept if links is None else links))

    def recorded(self, entry: Entry) -> None:
        return None

    def abandon(self, entry: Entry) -> None:
        self._kept.pop(entry, None)
        self._hand_out(self.core.abandon(entry))

    def stop(self) -> None:
        self.core.abandon_held()

    def was_refetched(self, entry: Entry) -> bool:
        return False

    @property
    def waiting(self) -> int:
        return self.core.held

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
