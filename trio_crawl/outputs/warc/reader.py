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


def read_warc_responses(path: str | os.PathLike[str]) -> dict[str, StoredResponse]:
    """``{target URI: StoredResponse}`` for every response and revisit record
    in a WARC file, read with warcio with every digest checked. A later record
    for a URI replaces an earlier one. Raises ``ValueError`` on a digest
    mismatch, and ``ModuleNotFoundError`` with ``WARC_EXTRA_MESSAGE`` when
    warcio is missing."""
    try:
        from warcio.archiveiterator import ArchiveIterator
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(WARC_EXTRA_MESSAGE) from exc

    out: dict[str, StoredResponse] = {}
    bodies: dict[str, bytes] = {}  # record id -> body, for revisits
    with open(path, "rb") as f:
        for record in ArchiveIterator(f, check_digests=True):
            if record.rec_type not in ("response", "revisit"):
                continue
            rec_headers: Any = record.rec_headers
            body = record.content_stream().read()
            if record.digest_checker.passed is False:
                raise ValueError(f"digest mismatch: {record.digest_checker.problems}")
            uri = rec_headers.get_header("WARC-Target-URI")
            if record.rec_type == "revisit":
                body = bodies.get(rec_headers.get_header("WARC-Refers-To"), b"")
            else:
                bodies[rec_headers.get_header("WARC-Record-ID")] = body
            http: Any = record.http_headers
            out[uri] = StoredResponse(
                status=int(http.get_statuscode()),
                headers={name.lower(): value for name, value in http.headers},
                body=body,
                truncated=rec_headers.get_header("WARC-Truncated"),
                record_type=record.rec_type,
            )
    return out
