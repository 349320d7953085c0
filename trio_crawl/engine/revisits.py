"""The crawl's side of keeping visits and of a recrawl (issue #33).

A crawl whose frontier keeps visits (``frontiers.base.KeepsVisits``: a
``--state`` file) keeps one per record, written before the record is
(``VisitKeeper.keep``, then ``kept``). A recrawl, one with a previous
generation of visits, also:

- asks each URL it knows with the validators it came with (``ask``: the one
  place where a URL's previous visit decides how it is requested);
- takes a 304 as "unchanged": the page's links are the kept ones
  (``kept_links``), so what lies behind an unchanged page is still reached,
  at its shortest depth, without a parse;
- says in every record how the URL ``change``d (``recrawl/visit.py``
  ``classify``), and for a 304 the bytes it did not download
  (``reused_bytes``);
- once the crawl ended whole, records each URL it knew and never reached
  as ``unlinked`` (``end``), then marks the generation done.

A page whose fetch failed keeps its previous visit (``kept: true``): the
next recrawl asks for it with the same validators.

Each visit also keeps the URL's revisit schedule (``core/revisit_schedule.py``,
JSON in the visit's ``schedule``): ``first_visit`` at its first capture,
``after_visit`` at each later one, changed or not (an error is no visit: the
history stays). Every recrawl updates it; ``--recrawl due`` reads it
(``not_due``): a URL whose previous visit is not due yet is not requested,
its record says ``not_due``, its previous visit stays, and its kept links
are followed (new pages behind it are still found). New URLs are always
fetched. ``now`` is the crawl's clock (``RunClock.epoch``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from ..core.frontier import Entry
from ..core.models import CrawlRecord, ErrorInfo, FetchResult
from ..frontiers.base import FrontierBackend, KeepsVisits, VisitKeeper

if TYPE_CHECKING:
    # Loaded by the methods that use them, and only once a keeper is in use:
    # a crawl that keeps no visits (no --state, no --mirror) never imports
    # the recrawl's rules, nor their datetime (issue #36 item 11).
    from ..core.revisit_schedule import RevisitHistory, RevisitPolicy
    from ..recrawl.visit import Visit

from .delivery import Delivery, Responses
from .statistics import RunClock

#: What a 304 to a request without validators is: the server cannot know
#: what we have, so its answer says nothing (``recrawl/visit.py``).
_BLIND_304 = ErrorInfo("protocol", "304 Not Modified to a request without validators")


class Ask(NamedTuple):
    """How to request a URL: with these extra headers (None: as in a first
    crawl). ``--recrawl due`` adds "not at all: record it not_due"."""

    headers: dict[str, str] | None = None


PLAIN = Ask()


class Revisits:
    """Visits kept and compared for one crawl; inert without a keeper."""

    def __init__(
        self,
        keeper: VisitKeeper | None,
        delivery: Delivery,
        responses: Responses,
        clock: RunClock,
    ) -> None:
        self._keeper: VisitKeeper | None = None
        self._recrawl = False
        #: Where ``heard`` listens, once there is a keeper.
        self._responses = responses
        self._delivery = delivery
        self._clock = clock
        #: Per URL between its first request and its record: its previous
        #: visit, whether validators were sent, the last response heard.
        self._previous: dict[str, Visit | None] = {}
        self._asked: set[str] = set()
        self._heard: dict[str, FetchResult] = {}
        #: The validators each asked URL was last requested with (its WARC
        #: request record says them), and the WARC record that holds its
        #: capture, once archived (``engine/archive_visits.py``).
        self._sent: dict[str, dict[str, str]] = {}
        self._archived: dict[str, tuple[str | None, str | None]] = {}
        #: ``--recrawl due``: URLs not due are recorded without a request
        #: (asked for: ``_due``; in force once there are visits to read).
        self._due = False
        self._due_only = False
        self._not_due: dict[str, Visit] = {}
        self._policy: RevisitPolicy | None = None
        #: Whether the copy a previous visit stands for is still there (a
        #: mirror's file: ``MirrorLink.has_copy``); None: nothing to lose.
        self.has_copy: Callable[[str, Visit], bool] | None = None
        if keeper is not None:
            self.use(keeper)

    @classmethod
    def of(
        cls, frontier: FrontierBackend, delivery: Delivery, responses: Responses, clock: RunClock
    ) -> Revisits:
        keeper = frontier.kept_visits() if isinstance(frontier, KeepsVisits) else None
        return cls(keeper, delivery, responses, clock)

    @property
    def policy(self) -> RevisitPolicy:
        """The revisit schedule's numbers (the defaults unless set), made
        on first use: only a crawl that keeps visits schedules them."""
        if self._policy is None:
            from ..core.revisit_schedule import RevisitPolicy

            self._policy = RevisitPolicy()
        return self._policy

    @policy.setter
    def policy(self, policy: RevisitPolicy) -> None:
        self._policy = policy

    def due_only(self, due: bool) -> Revisits:
        """``--recrawl due`` (``due``) or not; returns self."""
        self._due = due
        self._due_only = due and self._recrawl
        return self

    def not_due(self, entry: Entry, t: float) -> CrawlRecord | None:
        """The ``not_due`` record of ``entry`` made at ``t`` (None: request
        it). Not a checkpoint."""
        if not self._due_only:
            return None
        from ..core.revisit_schedule import is_due

        previous = self._previous_of(entry.url)
        history = _history(previous)
        if previous is None or history is None or is_due(history, self._clock.epoch()):
            return None
        if self.has_copy is not None and not self.has_copy(entry.url, previous):
            return None  # its saved copy is gone: fetch it again, due or not
        self._not_due[entry.url] = previous
        return CrawlRecord(
            url=entry.url, status=None, depth=entry.depth, referrer=entry.referrer, attempts=0, t=t
        )

    def use(self, keeper: VisitKeeper) -> None:
        """Keep visits in ``keeper``: the frontier's, or a mirror's own
        (``mirror/visits.py``) for a crawl whose frontier keeps none. Once,
        before the crawl runs."""
        assert self._keeper is None, "visits are kept in one place"
        self._keeper = keeper
        self._recrawl = keeper.recrawl
        self._responses.add(self.heard)
        # A mirror run again with --recrawl due: its own visits say what is due.
        self._due_only = self._due and self._recrawl

    @property
    def active(self) -> bool:
        return self._keeper is not None

    def _previous_of(self, url: str) -> Visit | None:
        if url not in self._previous:
            assert self._keeper is not None
            self._previous[url] = self._keeper.previous(url)
        return self._previous[url]

    def previous_visit(self, url: str) -> Visit | None:
        """``url``'s previous visit in a recrawl (None otherwise): the
        mirror's question (does this body replace the saved one?) and the
        WARC's (is this answer a revisit of an archived capture?)."""
        return self._previous_of(url) if self._recrawl else None

    def ask(self, entry: Entry) -> Ask:
        """How ``entry`` is requested (each attempt): conditionally when its
        previous visit has validators. Not a checkpoint."""
        if not self._recrawl:
            return PLAIN
        from ..recrawl.visit import conditional_headers

        previous = self._previous_of(entry.url)
        headers = conditional_headers(previous)
        if not headers:
            return PLAIN
        if self.has_copy is not None and previous and not self.has_copy(entry.url, previous):
            return PLAIN  # a 304 would leave it missing: fetch the body again
        self._asked.add(entry.url)
        self._sent[entry.url] = headers
        return Ask(headers)

    def sent(self, url: str) -> dict[str, str] | None:
        """The validators ``url``'s last request carried (None: none)."""
        return self._sent.get(url)

    def archived(self, url: str, record_id: str | None, warc_date: str | None) -> None:
        """The WARC record that holds ``url``'s capture (a revisit's: the
        earlier one it refers to), for its visit to keep. Not a checkpoint."""
        if self._keeper is not None:
            self._archived[url] = (record_id, warc_date)

    def heard(self, url: str, result: FetchResult) -> None:
        """An ``on_response`` callback: the last answer of each URL, whose
        validators its visit keeps."""
        self._heard[url] = result

    def kept_links(self, entry: Entry, result: FetchResult) -> list[str] | None:
        """The links of a page that answered 304 to our validators: those of
        its previous visit (None: not such a page, read it as usual)."""
        if result.status != 304 or entry.url not in self._asked:
            return None
        visit = self._previous.get(entry.url)
        return None if visit is None or visit.links is None else list(visit.links)

    def settle(
        self, entry: Entry, record: CrawlRecord, links: Sequence[str] | None
    ) -> tuple[CrawlRecord, Sequence[str] | None, int]:
        """The record as a recrawl says it, the links to admit (a failed
        page's kept ones: what lies behind a page that fails today is not
        unlinked), and the ticket of the visit it leaves (0: none kept).
        Not a checkpoint."""
        if self._keeper is None:
            return record, links, 0
        from ..recrawl.visit import ERROR, NOT_DUE, UNCHANGED, after_not_modified, classify

        url = entry.url
        if url in self._not_due:  # its previous visit stays, its links are followed
            stays = self._not_due.pop(url)
            self._previous.pop(url, None)
            links = list(stays.links or ())
            record = dataclasses.replace(record, links=len(links))
            record.extra["change"] = NOT_DUE
            return record, links, self._keeper.keep(stays)
        result = self._heard.pop(url, None)
        asked = url in self._asked
        self._asked.discard(url)
        self._sent.pop(url, None)
        archived = self._archived.pop(url, None)
        now = self._clock.epoch()
        visit: Visit | None = None
        previous: Visit | None = None
        change = ""
        if self._recrawl:
            if url in self._previous:
                previous = self._previous.pop(url)
            else:  # recorded without a request (robots.txt, a host that fails)
                previous = self._keeper.previous(url)
            change = classify(
                previous, record.status, record.extra.get("digest"), record.redirect, asked=asked
            )
            if record.status == 304 and change == UNCHANGED:
                assert previous is not None and result is not None
                # The body it stands for: its size and type are the kept ones
                # (a 304 carries no Content-Type of its own, RFC 9110 15.4.5).
                kept_type = record.content_type or previous.content_type
                record = dataclasses.replace(record, size=previous.size, content_type=kept_type)
                if previous.digest is not None:
                    record.extra["digest"] = previous.digest
                record.extra["reused_bytes"] = previous.size or 0
                visit = after_not_modified(previous, result.headers, now)
                visit = _scheduled(visit, previous, self.policy, now, changed=False)
            elif record.status == 304:
                record = dataclasses.replace(record, error=_BLIND_304)
            if change == ERROR and previous is not None:
                record.extra["kept"] = True
                visit = previous  # the capture we have stays the one to ask with
                if links is None and previous.links:
                    links = list(previous.links)
                    record = dataclasses.replace(record, links=len(links))
            record.extra["change"] = change
        if visit is None:
            visit = _visit_of(record, result, links, now)
            if record.status is not None and record.status < 500:  # an error is no visit
                visit = _scheduled(visit, previous, self.policy, now, changed=change != UNCHANGED)
            if archived is not None:
                visit = visit.but(warc_record_id=archived[0], warc_date=archived[1])
        return record, links, self._keeper.keep(visit)

    async def kept(self, ticket: int) -> None:
        if ticket and self._keeper is not None:
            await self._keeper.kept(ticket)

    async def end(self, *, stopped: bool) -> None:
        """Once the crawl ended whole (not ``stopped``): write an ``unlinked``
        record for every URL of the previous crawl it never reached, then
        mark it done."""
        if self._keeper is None or stopped:
            return
        if self._recrawl:
            from ..recrawl.visit import UNLINKED

            while batch := await self._keeper.unreached():
                for visit in batch:
                    record = CrawlRecord(
                        url=visit.url,
                        status=None,
                        depth=0,
                        attempts=0,
                        t=self._clock.t(),
                        # Never reached: no depth (the JSON says null).
                        extra={"depth": None, "change": UNLINKED},
                    )
                    self._delivery.write_record(record)
                    await self._delivery.send_record(record)
                await self._keeper.mark_unlinked([visit.url for visit in batch])
        await self._keeper.finish()


def _history(visit: Visit | None) -> RevisitHistory | None:
    """The revisit history ``visit`` keeps (None: none, or not one we can read)."""
    if visit is None or visit.schedule is None:
        return None
    from ..core.revisit_schedule import RevisitHistory

    try:
        return RevisitHistory.from_json(visit.schedule)
    except ValueError:
        return None  # due: a damaged history is never a reason to skip a page


def _scheduled(
    visit: Visit, previous: Visit | None, policy: RevisitPolicy, now: float, *, changed: bool
) -> Visit:
    """``visit`` with its revisit history: the first, or the previous one
    after this visit, which found the page ``changed`` or not."""
    from ..core.revisit_schedule import after_visit, first_visit

    history = _history(previous)
    if history is None:
        history = first_visit(policy, now)
    else:
        history = after_visit(policy, history, changed=changed, now=now)
    return visit.but(schedule=history.to_json())


def _visit_of(
    record: CrawlRecord, result: FetchResult | None, links: Sequence[str] | None, now: float
) -> Visit:
    """The visit a record leaves. Its links: those found, none for a page
    with none (or no page), unknown (None) when they went to the frontier
    in chunks as parsed (a huge page: then it is never revalidated)."""
    from ..recrawl.visit import Visit, capture_time, validators

    headers = {} if result is None else result.headers
    etag, modified = validators(headers) if result is not None else (None, None)
    kept: tuple[str, ...] | None = tuple(links) if links is not None else ()
    if links is None and record.links:
        kept = None
    return Visit(
        url=record.url,
        status=record.status,
        etag=etag,
        last_modified=modified,
        digest=record.extra.get("digest"),
        size=record.size,
        links=kept,
        redirect=record.redirect,
        fetched_at=capture_time(headers, now),
        content_type=record.content_type,
    )
