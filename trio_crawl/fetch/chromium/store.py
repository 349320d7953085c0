"""The responses a rendering crawl keeps, so that each URL is fetched once.

With ``--render`` a page's scripts, stylesheets and images are fetched by
the crawl for the browser (``subrequests``); with ``--page-requisites`` the
crawler wants the same files as requisites, and the next page of the site
wants the same stylesheet again. The store answers those from the first
fetch. Pure: no trio, no network.

Rules:

1. Keys are canonical URLs (``core.url.canonicalize``), the crawl's own
   notion of "the same URL"; a URL that has none is kept as written.
2. Only final answers are kept: a status the crawl would retry (429, 502,
   503, 504) is asked again next time, as the crawler would; so is a
   response whose body was skipped.
3. Memory is bounded: a response larger than ``item_bytes`` is not kept,
   and past ``total_bytes`` the least recently used responses go first.
   Each response counts its body plus ``entry_bytes`` for itself (its
   headers, its key), so that a page fetching endless empty answers cannot
   fill memory either. A response that went is fetched again if it is
   wanted again: the bound trades a second request for memory, never
   correctness.
"""

from __future__ import annotations

from collections import OrderedDict

from ...core.models import FetchResult
from ...core.retry import should_retry_status
from ...core.url import canonicalize

__all__ = ["ENTRY_BYTES", "ITEM_BYTES", "TOTAL_BYTES", "ResponseStore", "store_key"]

#: The largest response kept (rule 3).
ITEM_BYTES = 4 * 1024 * 1024
#: The most bytes kept at once (rule 3).
TOTAL_BYTES = 64 * 1024 * 1024
#: What a response costs beside its body (rule 3): a FetchResult, its
#: headers and its key take about a kilobyte.
ENTRY_BYTES = 1024


def store_key(url: str) -> str:
    """The key of ``url`` (rule 1)."""
    return canonicalize(url) or url


class ResponseStore:
    """Responses by URL, least recently used first out. Not thread-safe;
    every method is synchronous."""

    def __init__(
        self,
        *,
        item_bytes: int = ITEM_BYTES,
        total_bytes: int = TOTAL_BYTES,
        entry_bytes: int = ENTRY_BYTES,
    ) -> None:
        self.item_bytes = item_bytes
        self.total_bytes = total_bytes
        self.entry_bytes = entry_bytes
        self._kept: OrderedDict[str, FetchResult] = OrderedDict()
        #: What the responses kept now count (rule 3).
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def __repr__(self) -> str:
        return f"<ResponseStore {len(self._kept)} responses, {self.bytes:,} bytes>"

    @staticmethod
    def keeps(result: FetchResult) -> bool:
        """Whether ``result`` is a final answer worth keeping (rule 2)."""
        return not result.body_skipped and not should_retry_status(result.status)

    def get(self, url: str) -> FetchResult | None:
        """The response kept for ``url``, or None."""
        key = store_key(url)
        result = self._kept.get(key)
        if result is not None:
            self._kept.move_to_end(key)
        return result

    def put(self, url: str, result: FetchResult) -> bool:
        """Keep ``result`` as the answer for ``url`` if rules 2 and 3 allow;
        True if it was kept."""
        size = len(result.body)
        if not self.keeps(result) or size > self.item_bytes:
            return False
        if self._cost(result) > self.total_bytes:
            return False
        key = store_key(url)
        old = self._kept.pop(key, None)
        if old is not None:
            self.bytes -= self._cost(old)
        self._kept[key] = result
        self.bytes += self._cost(result)
        while self.bytes > self.total_bytes:
            _, dropped = self._kept.popitem(last=False)
            self.bytes -= self._cost(dropped)
        return True

    def _cost(self, result: FetchResult) -> int:
        return len(result.body) + self.entry_bytes
