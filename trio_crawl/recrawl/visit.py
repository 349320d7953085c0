"""What a crawl keeps of each URL it recorded, and what a recrawl makes of it.

Pure: no trio, no I/O, no clock (times are passed in). A ``Visit`` is one
URL's last capture as a later crawl needs it: the validators the server sent
(to ask "has it changed?"), the payload digest (to see it changed when the
server cannot say), the size (the bytes a 304 saves) and the links (so a page
that did not change still leads where it led: nothing behind it is lost).

Validators, and what they can and cannot tell
----------------------------------------------
- ``If-None-Match`` carries the ETag exactly as it came, weak ones included
  (``W/"x"``): RFC 9110 13.1.2 compares them weakly, which is what a
  revalidation wants.
- ``If-Modified-Since`` carries the Last-Modified exactly as it came, but
  only when it is not later than the capture (the response's ``Date``, else
  our clock when it came): a date in the future would make a server answer
  304 until that date passes, hiding every change meanwhile (RFC 9110
  8.8.2.1 forbids sending one). Such a page is asked with its ETag alone,
  or unconditionally.
- A kept response with ``Vary: *`` is never revalidated (RFC 9111 4.1: it
  cannot be matched to a later request); other ``Vary`` values are safe,
  since every request of a crawl carries the same headers.
- A 304 may carry new validators (RFC 9111 4.3.4): they replace the kept
  ones (``after_not_modified``).
- A server that ignores validators answers 200: the digest then says
  whether the body changed. A server that changes a page and keeps its
  ETag (or its Last-Modified) is believed when it answers 304: no client
  can see that change without the body. Only a 200 can be compared.
- A 304 to a request that carried no validator means nothing (the server
  cannot know what we have): it is recorded as an error of kind
  ``protocol`` (``classify`` says ``error``), the previous copy kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final

#: Change kinds a recrawl's record carries in ``change``.
NEW: Final = "new"
CHANGED: Final = "changed"
UNCHANGED: Final = "unchanged"
GONE: Final = "gone"
ERROR: Final = "error"
UNLINKED: Final = "unlinked"
NOT_DUE: Final = "not_due"
CHANGE_KINDS: Final = (NEW, CHANGED, UNCHANGED, GONE, ERROR, UNLINKED, NOT_DUE)

_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_GONE: Final = frozenset({404, 410})


@dataclass(frozen=True, slots=True)
class Visit:
    """One URL's last capture (the columns of the visit table, in order).

    ``links``: the page's links as found (canonical URLs; the scope and
    filters of the crawl that reads them decide again), None when they were
    not kept (a page too big to hold its links: it is never revalidated).
    ``schedule``: the revisit history's JSON (the revisit schedule's, when
    one keeps it), None until then.
    """

    url: str
    status: int | None
    etag: str | None = None
    last_modified: str | None = None
    digest: str | None = None
    size: int | None = None
    links: tuple[str, ...] | None = None
    redirect: str | None = None
    fetched_at: float = 0.0
    warc_record_id: str | None = None
    warc_date: str | None = None
    content_type: str | None = None
    schedule: dict[str, Any] | None = field(default=None, compare=False)

    def to_row(self) -> tuple[Any, ...]:
        """The visit as the table's column values (``links``, ``schedule``: JSON)."""
        return (
            self.url,
            self.status,
            self.etag,
            self.last_modified,
            self.digest,
            self.size,
            None if self.links is None else json.dumps(list(self.links)),
            self.redirect,
            self.fetched_at,
            self.warc_record_id,
            self.warc_date,
            self.content_type,
            None if self.schedule is None else json.dumps(self.schedule),
        )

    def but(self, **changes: Any) -> Visit:
        """This visit with ``changes`` (field names): ``dataclasses.replace``
        at ~60 % of its cost (none of its per-field bookkeeping; the frozen
        ``__init__`` is the rest), which a recrawl paid twice a page."""
        row: list[Any] = [
            self.url,
            self.status,
            self.etag,
            self.last_modified,
            self.digest,
            self.size,
            self.links,
            self.redirect,
            self.fetched_at,
            self.warc_record_id,
            self.warc_date,
            self.content_type,
            self.schedule,
        ]
        for name, value in changes.items():
            row[_FIELD_INDEX[name]] = value
        return Visit(*row)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Visit:
        """The inverse of ``to_row`` (positional: a recrawl reads one a URL)."""
        url, status, etag, modified, digest, size, links = row[:7]
        redirect, at, record_id, warc_date, content_type, schedule = row[7:]
        return cls(
            url,
            status,
            etag,
            modified,
            digest,
            size,
            None if links is None else tuple(json.loads(links)),
            redirect,
            at or 0.0,
            record_id,
            warc_date,
            content_type,
            None if schedule is None else json.loads(schedule),
        )


#: The visit table's columns, in ``to_row`` order.
COLUMNS: Final = (
    "url",
    "status",
    "etag",
    "last_modified",
    "digest",
    "size",
    "links",
    "redirect",
    "fetched_at",
    "warc_record_id",
    "warc_date",
    "content_type",
    "schedule",
)
#: ``Visit.but``'s positions (the fields are the columns, in order).
_FIELD_INDEX: Final = {name: i for i, name in enumerate(COLUMNS)}


@lru_cache(maxsize=4096)
def http_date(value: str | None) -> float | None:
    """An HTTP-date as epoch seconds (None: absent or not a date).

    A recrawl reads two a page (the kept Last-Modified, the answer's Date),
    so the form servers send (RFC 9110's IMF-fixdate) is read here directly,
    and each value once (a Date repeats for every answer of its second):
    ``email.utils`` took 10 % of a recrawl's event loop. Other forms, and
    anything the direct reading is unsure of, go to ``email.utils``."""
    if not value:
        return None
    fixed = _FIXDATE.fullmatch(value)
    if fixed is not None:
        day, name, year, hour, minute, second = fixed.groups()
        month = _MONTHS.get(name)
        h, m, s = int(hour), int(minute), int(second)
        # Else (second 60, day 31 of a short month...): as email.utils says.
        if month is not None and h < 24 and m < 60 and s < 60:
            try:
                return _midnight(int(year), month, int(day)) + (h * 3600 + m * 60 + s)
            except ValueError:
                pass
    # Here, not at the top: email.utils costs every crawl's start ~2 ms, and
    # only a recrawl reads dates (``core/retry.py`` does the same).
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # asctime and "-0000" forms: GMT (RFC 9110 5.6.7)
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


@lru_cache(maxsize=1024)
def _midnight(year: int, month: int, day: int) -> float:
    """The day's start in epoch seconds (``ValueError``: no such day). Each
    Last-Modified of a site is its own value, but most share their day with
    others: ``http_date`` reads the rest of a date with integer sums."""
    return datetime(year, month, day, tzinfo=UTC).timestamp()


#: RFC 9110 5.6.7's preferred form, "Sun, 06 Nov 1994 08:49:37 GMT" (a year
#: from 1000: email.utils reads "0094" as 1994).
_FIXDATE: Final = re.compile(
    r"[A-Z][a-z]{2}, (\d\d) ([A-Z][a-z]{2}) ([1-9]\d{3}) (\d\d):(\d\d):(\d\d) GMT"
)
_MONTHS: Final = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}


def validators(headers: dict[str, str]) -> tuple[str | None, str | None]:
    """The ETag and Last-Modified a response lets us revalidate with (lower-
    case header names): none for ``Vary: *`` (never revalidated)."""
    if _varies_by_all(headers):
        return None, None
    etag = headers.get("etag") or None
    modified = headers.get("last-modified") or None
    return (etag.strip() if etag else None), (modified.strip() if modified else None)


def _varies_by_all(headers: dict[str, str]) -> bool:
    return "*" in (part.strip() for part in headers.get("vary", "").split(","))


def conditional_headers(visit: Visit | None) -> dict[str, str]:
    """The request headers that ask whether ``visit``'s capture is still
    current: only validators the server sent, never invented; none for a
    page whose links were not kept (a 304 could not say where it leads)
    or a redirect/error (nothing stored to stand for)."""
    if visit is None or visit.links is None or visit.status is None:
        return {}
    if not 200 <= visit.status < 300:
        return {}
    headers: dict[str, str] = {}
    if visit.etag:
        headers["If-None-Match"] = visit.etag
    modified = http_date(visit.last_modified)
    if modified is not None and modified <= visit.fetched_at:
        assert visit.last_modified is not None
        headers["If-Modified-Since"] = visit.last_modified
    return headers


def capture_time(headers: dict[str, str], received_at: float) -> float:
    """When a response was made: its ``Date`` if it has a usable one not
    after ``received_at`` (a server's clock ahead of ours is not trusted),
    else ``received_at``."""
    date = http_date(headers.get("date"))
    return received_at if date is None or date > received_at else date


def after_not_modified(previous: Visit, headers: dict[str, str], received_at: float) -> Visit:
    """The visit a 304 leaves: the previous capture, its validators updated
    from the 304's own (RFC 9111 4.3.4), its capture time now."""
    if _varies_by_all(headers):  # no longer revalidated
        return previous.but(etag=None, last_modified=None, fetched_at=received_at)
    etag, modified = validators(headers)
    return previous.but(
        etag=etag or previous.etag,
        last_modified=modified or previous.last_modified,
        fetched_at=capture_time(headers, received_at),
    )


def classify(
    previous: Visit | None,
    status: int | None,
    digest: str | None,
    redirect: str | None,
    *,
    asked: bool = True,
) -> str:
    """The change kind of a URL's record in a recrawl.

    ``status`` None: no answer (a network error, a failure after retries).
    ``asked``: whether the request carried a validator (a 304 to a request
    without one is an error: see the module docstring)."""
    if status == 304 and not asked:
        return ERROR
    if previous is None:
        return NEW
    if status is None:
        return ERROR
    if status == 304:
        return UNCHANGED
    before = previous.status
    if status in _GONE:
        return UNCHANGED if before in _GONE else GONE
    if status in _REDIRECTS:
        if before in _REDIRECTS and previous.redirect == redirect:
            return UNCHANGED
        return GONE
    if status >= 400:
        return ERROR
    if before is None or not 200 <= before < 300:
        return CHANGED
    if digest is not None and digest == previous.digest:
        return UNCHANGED
    return CHANGED
