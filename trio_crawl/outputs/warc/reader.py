"""Reading a WARC file back: the responses it holds, every digest checked (tests, tools).

``read_warc_responses`` uses warcio (the ``warc`` extra), an independent
reader, so that what ``WarcWriter`` writes is checked by other code than its own.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from .records import WARC_EXTRA_MESSAGE


class StoredResponse(NamedTuple):
    """A page as ``read_warc_responses`` found it. A revisit's body is the
    body of the capture it refers to."""

    status: int
    headers: dict[str, str]
    body: bytes
    truncated: str | None = None
    record_type: str = "response"


def read_warc_responses(*paths: str | os.PathLike[str]) -> dict[str, StoredResponse]:
    """``{target URI: StoredResponse}`` for every response and revisit record
    in WARC files read in turn (an earlier crawl's file first), read with
    warcio with every digest checked. A later record for a URI replaces an
    earlier one. A revisit's body is the body of the record it refers to
    (``WARC-Refers-To``, in any of the files read before it; a revisit of a
    revisit is followed to the body), and a revisit
    without an HTTP head (server-not-modified) has that record's status and
    headers too (status 0 and no body when that record was not read).
    Raises ``ValueError`` on a digest mismatch, and ``ModuleNotFoundError``
    with ``WARC_EXTRA_MESSAGE`` when warcio is missing."""
    try:
        from warcio.archiveiterator import ArchiveIterator
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(WARC_EXTRA_MESSAGE) from exc

    out: dict[str, StoredResponse] = {}
    captures: dict[str, StoredResponse] = {}  # record id -> what it serves, for revisits
    for path in paths:
        with open(path, "rb") as f:
            for record in ArchiveIterator(f, check_digests=True):
                if record.rec_type not in ("response", "revisit"):
                    continue
                rec_headers: Any = record.rec_headers
                body = record.content_stream().read()
                if record.digest_checker.passed is False:
                    raise ValueError(f"digest mismatch: {record.digest_checker.problems}")
                http: Any = record.http_headers
                stored = StoredResponse(
                    status=int(http.get_statuscode()) if http is not None else 0,
                    headers={} if http is None else {n.lower(): v for n, v in http.headers},
                    body=body,
                    truncated=rec_headers.get_header("WARC-Truncated"),
                    record_type=record.rec_type,
                )
                capture = captures.get(rec_headers.get_header("WARC-Refers-To") or "")
                if record.rec_type == "revisit":
                    stored = _resolved(stored, capture)
                if record.rec_type == "response" or capture is not None:
                    # a revisit may refer to a revisit (a page unchanged twice)
                    captures[rec_headers.get_header("WARC-Record-ID")] = stored
                out[rec_headers.get_header("WARC-Target-URI")] = stored
    return out


def _resolved(revisit: StoredResponse, capture: StoredResponse | None) -> StoredResponse:
    """A revisit as a replay tool serves it: the body of the capture it refers
    to and, when it holds no HTTP head, that capture's status and headers."""
    if capture is None:
        return revisit._replace(body=b"")
    if revisit.status == 0:
        return revisit._replace(status=capture.status, headers=capture.headers, body=capture.body)
    return revisit._replace(body=capture.body)
