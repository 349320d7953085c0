"""A crawl's WARC and its kept visits (``--warc`` with ``--state``; issue #33).

Every exchange goes to the archive as it arrives. When the crawl keeps
visits, the visit of each page also keeps which WARC record holds its
capture (id and WARC-Date), so the next recrawl can refer to it. In a
recrawl, an answer that says the page is unchanged is archived as a
``revisit`` record pointing at that earlier capture (often in the earlier
crawl's file), instead of a second copy of the body:

- a 304 to our validators: ``server-not-modified``;
- a 200 whose payload digest equals the previous one (a server that
  ignores validators): ``identical-payload-digest``.

The page's new visit then keeps the *earlier* record's id and date (the one
holding the body: a replay tool resolves a revisit in one lookup, never a
chain). Anything else is stored whole and its visit names the new record.
A request record carries the validators the request actually carried.

Imported only for a crawl with ``warc=`` (the WARC modules load on use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.models import FetchResult
from ..outputs.warc.revisit import RevisitOf, revisit_for
from .outcome import payload_digest
from .revisits import Revisits

if TYPE_CHECKING:
    from ..outputs.archive import ArchiveLink, ArchiveTicket


def archive_exchange(
    archive: ArchiveLink, revisits: Revisits, url: str, result: FetchResult
) -> ArchiveTicket:
    """Send one exchange to ``archive`` (a revisit when it stands for an
    earlier capture) and tell ``revisits`` which record holds the capture.
    Not a checkpoint."""
    if not revisits.active:
        return archive.submit(url, result)
    sent = revisits.sent(url)
    revisit = _revisit_of(revisits, url, result, asked=sent is not None)
    ticket = archive.submit(url, result, revisit_of=revisit, request_headers=sent)
    if revisit is not None:  # the body stays where it was
        revisits.archived(url, revisit.record_id, revisit.warc_date)
    else:
        revisits.archived(url, *ticket.stored)
    return ticket


def _revisit_of(
    revisits: Revisits, url: str, result: FetchResult, *, asked: bool
) -> RevisitOf | None:
    """The earlier capture ``result`` stands for, if it is unchanged and
    that capture is in a WARC. A 304 counts only as an answer to our
    validators (one to a bare request says nothing: ``recrawl/visit.py``).
    The digest is computed only for a body that may equal the last one."""
    previous = revisits.previous_visit(url)
    if previous is None or previous.warc_date is None or previous.digest is None:
        return None
    if previous.status is None or not 200 <= previous.status < 300:
        return None  # only a page's body is referred to
    if result.status == 304:
        if not asked:
            return None
        digest = None
    elif 200 <= result.status < 300 and not result.body_skipped:
        digest = payload_digest(result)
    else:
        return None
    return revisit_for(
        url=previous.url,
        status=result.status,
        digest=digest,
        previous_digest=previous.digest,
        previous_warc_date=previous.warc_date,
        previous_record_id=previous.warc_record_id,
    )
