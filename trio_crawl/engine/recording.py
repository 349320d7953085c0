"""A tried entry's last steps: its children admitted, its record written and
delivered, then the frontier told it is done (rule 2 of the design card:
all before the crawler's token is released)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..core.frontier import Entry, RedirectOutcome
from ..core.models import CrawlRecord, FetchResult
from ..core.url import resolve
from ..frontiers.base import FrontierBackend, ReportsRefetch
from .delivery import Delivery, Responses
from .outcome import make_record
from .revisits import Revisits
from .statistics import RunClock

_FAILED_REDIRECTS = (RedirectOutcome.LOOP, RedirectOutcome.TOO_MANY, RedirectOutcome.OUT_OF_SCOPE)


class Recorder:
    """Turns a tried entry into its record and hands it on."""

    def __init__(
        self,
        frontier: FrontierBackend,
        delivery: Delivery,
        responses: Responses,
        clock: RunClock,
    ) -> None:
        self._frontier = frontier
        #: The frontier if it can hand a URL out twice (else no record is refetched).
        self._refetch = frontier if isinstance(frontier, ReportsRefetch) else None
        self._delivery = delivery
        self._responses = responses
        self._clock = clock
        #: Called with each record just before it is written (the crawl adds
        #: the worker count when it changed).
        self.before_write: Callable[[CrawlRecord], None] | None = None
        #: Keeps each URL's visit when the frontier keeps visits, and says
        #: what changed in a recrawl (inert otherwise).
        self.revisits = Revisits.of(frontier, delivery, responses, clock)

    async def finish(
        self, entry: Entry, record: CrawlRecord, links: Sequence[str] | None = None
    ) -> None:
        """Admit the children, deliver the record, then let the frontier store
        the URL as done. Awaiting a slow record reader is safe: the entry is
        still held. A kept visit is in the frontier before the record is out."""
        record, links, ticket = self.revisits.settle(entry, record, links)
        await self._frontier.finish(entry, links)  # writes the visit with the links
        await self.revisits.kept(ticket)
        if self._refetch is not None and self._refetch.was_refetched(entry):
            record.extra["refetched"] = True
        await self._responses.settle(entry)
        if record.depth != entry.depth or record.referrer != entry.referrer:
            # A shorter path turned up while the record was being made.
            record = dataclasses.replace(record, depth=entry.depth, referrer=entry.referrer)
        if self.before_write is not None:
            self.before_write(record)
        self._delivery.write_record(record)
        entry.written = True  # from now on, a shorter path writes an update
        await self._delivery.send_record(record)
        # Only now is the record out of our hands (a file sink has written it,
        # a stream reader has taken it): a durable frontier may store it done.
        self._frontier.recorded(entry)

    async def redirect(self, entry: Entry, result: FetchResult, elapsed_ms: float) -> None:
        """Admit a redirect's target (if it may be followed) and record the hop."""
        location = result.client_redirect or result.headers.get("location")
        target = resolve(location, entry.url) if location else None
        error: tuple[str, str] | None = None
        if target is None:
            error = ("bad_redirect", f"unusable Location: {location!r}")
        else:
            outcome = await self._frontier.admit_redirect(entry, target)
            if outcome in _FAILED_REDIRECTS:
                error = (outcome.value, f"redirect to {target}")
        record = make_record(entry, error, result, elapsed_ms, redirect=target, t=self._clock.t())
        await self.finish(entry, record)
