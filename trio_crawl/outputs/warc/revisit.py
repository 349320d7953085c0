"""What a revisit record stands for: the earlier capture of an unchanged page.

A recrawl that finds a page unchanged stores no second copy of its body. It
writes a WARC ``revisit`` record that names the capture holding the body,
often in the WARC file of an *earlier* crawl. ``RevisitOf`` is that name, as
the caller kept it from the earlier visit: the capture's target URI, its
WARC-Date, its WARC-Record-ID when known, and the digest of its payload.
``Stored`` is what the writer gives back for every exchange: the id and date
of the response (or revisit) record, for the caller to keep for the next
recrawl.

Two WARC 1.1 profiles (§6.7.2, §6.7.3), by the reason the page is unchanged:

* ``server-not-modified``: the server answered 304 Not Modified to a
  conditional request. The record keeps the 304's own HTTP head.
* ``identical-payload-digest``: the server sent the body again (it ignored
  the validators, or sent none) and its digest equals the earlier one. The
  record keeps the HTTP head of that answer, without the body.

Both carry ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date`` (the only
fields a replay tool such as pywb or wabac.js follows to find the body),
``WARC-Refers-To`` when the record id is known, and ``WARC-Payload-Digest``:
the digest of the body the record stands for. Pure values; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NamedTuple

#: The WARC 1.1 profile URIs (§6.7.2, §6.7.3), by their short names.
PROFILES: Final = {
    "identical-payload-digest": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
    "server-not-modified": "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
}
#: W3C-ISO8601 as WARC 1.1 §5.4 writes it: seconds, optional fraction, UTC.
_WARC_DATE: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z"
)
_RECORD_ID: Final = re.compile(r"<[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>]+>")
_DIGEST: Final = re.compile(r"[A-Za-z0-9\-]+:[A-Za-z0-9/+\-_=]+")


class Stored(NamedTuple):
    """The response or revisit record an exchange was written as: keep both
    to refer to this capture later (a ``RevisitOf`` of the next recrawl)."""

    record_id: str
    warc_date: str


@dataclass(frozen=True, slots=True)
class RevisitOf:
    """The earlier capture an unchanged page refers to (see the module
    docstring). ``profile``: ``"server-not-modified"`` for a 304,
    ``"identical-payload-digest"`` for a body equal to the earlier one.
    ``target_uri``, ``warc_date`` and ``record_id``: the earlier record's
    WARC-Target-URI, WARC-Date (as written, e.g. ``Stored.warc_date``) and
    WARC-Record-ID (``<urn:uuid:...>``, or None when not known).
    ``payload_digest``: that record's WARC-Payload-Digest (``sha1:BASE32``).

    Refer to the record that holds the body (a ``response``): a replay tool
    then finds it in one lookup. Values are checked here, because each one
    ends up in a WARC header line: ``ValueError`` on a malformed one.
    """

    profile: str
    target_uri: str
    warc_date: str
    record_id: str | None
    payload_digest: str

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"revisit profile must be one of {sorted(PROFILES)}")
        if not self.target_uri or any(c.isspace() for c in self.target_uri):
            raise ValueError(f"not a target URI: {self.target_uri!r}")
        if not _WARC_DATE.fullmatch(self.warc_date):
            raise ValueError(f"not a WARC date: {self.warc_date!r}")
        if self.record_id is not None and not _RECORD_ID.fullmatch(self.record_id):
            raise ValueError(f"not a WARC record id: {self.record_id!r}")
        if not _DIGEST.fullmatch(self.payload_digest):
            raise ValueError(f"not a labelled digest: {self.payload_digest!r}")

    @property
    def profile_uri(self) -> str:
        """The ``WARC-Profile`` value."""
        return PROFILES[self.profile]

    def fields(self) -> str:
        """The revisit's own WARC header lines (CRLF after each)."""
        lines = f"WARC-Profile: {self.profile_uri}\r\n"
        if self.record_id is not None:
            lines += f"WARC-Refers-To: {self.record_id}\r\n"
        return lines + (
            f"WARC-Refers-To-Target-URI: {self.target_uri}\r\n"
            f"WARC-Refers-To-Date: {self.warc_date}\r\n"
            f"WARC-Payload-Digest: {self.payload_digest}\r\n"
        )

    def as_tuple(self) -> tuple[str, str, str, str | None, str]:
        """Plain values, for ``marshal`` (the WARC writer process's pipe)."""
        return (self.profile, self.target_uri, self.warc_date, self.record_id, self.payload_digest)


def revisit_for(
    *,
    url: str,
    status: int,
    digest: str | None,
    previous_digest: str | None,
    previous_warc_date: str | None,
    previous_record_id: str | None,
) -> RevisitOf | None:
    """How a recrawl archives an answer for ``url`` whose previous visit is
    known: the ``RevisitOf`` to write, or None to store the answer whole.

    ``status`` and ``digest``: this answer's (``digest`` of the body read,
    ``sha1:BASE32`` as records carry it; None when no body was read). The
    ``previous_*`` values: the previous visit's ``digest``, ``warc_date`` and
    ``warc_record_id``. A 304 is a server-not-modified revisit; a body of
    the previous digest an identical-payload-digest one. None when the
    previous capture is in no WARC (no date or digest kept): a revisit
    would then stand for a body no file holds.
    """
    if previous_warc_date is None or previous_digest is None:
        return None
    if status == 304:
        profile = "server-not-modified"
    elif digest is not None and digest == previous_digest:
        profile = "identical-payload-digest"
    else:
        return None
    return RevisitOf(profile, url, previous_warc_date, previous_record_id, previous_digest)
