"""WARC output (``--warc FILE.warc.gz``), by job.

``records``: ``WarcRecords`` turns each fetched page into WARC 1.1 records,
one gzip member each (the record format, the decoded-body rule, truncation
and dedup are in its docstring). ``writer``: ``WarcWriter`` owns the file
they go to: opened or resumed under a lock, one write per exchange.
``revisit``: ``RevisitOf``, the earlier capture (perhaps in an earlier
crawl's file) that a recrawl's revisit record stands for, and ``Stored``, the
record id and date every exchange is written under. ``members``: the gzip
member each record is written as, the lock that keeps one writer per file,
and ``repair_warc``, which cuts a torn tail so that a resumed crawl appends
safely. ``reader``: ``read_warc_responses`` reads
a file back with warcio, every digest checked (tests, tools). Plain
synchronous file I/O; none of them imports trio.
"""

from .members import LOCK_TIMEOUT, WarcFileBusy, iter_members, lock_warc, repair_warc
from .reader import StoredResponse, read_warc_responses
from .records import (
    DEDUP_MIN_BYTES,
    DEFAULT_COMPRESSLEVEL,
    HAVE_ISAL,
    REVISIT_PROFILE,
    TRUNCATED_REASONS,
    WARC_EXTRA_MESSAGE,
    WARC_VERSION,
    WarcRecords,
    check_revisit,
    new_record_id,
    stored_response_headers,
    warc_date,
)
from .revisit import PROFILES, RevisitOf, Stored, revisit_for
from .writer import WarcWriter

__all__ = [
    "DEDUP_MIN_BYTES",
    "DEFAULT_COMPRESSLEVEL",
    "HAVE_ISAL",
    "LOCK_TIMEOUT",
    "PROFILES",
    "REVISIT_PROFILE",
    "TRUNCATED_REASONS",
    "WARC_EXTRA_MESSAGE",
    "WARC_VERSION",
    "RevisitOf",
    "Stored",
    "StoredResponse",
    "WarcFileBusy",
    "WarcRecords",
    "WarcWriter",
    "check_revisit",
    "iter_members",
    "lock_warc",
    "new_record_id",
    "read_warc_responses",
    "repair_warc",
    "revisit_for",
    "stored_response_headers",
    "warc_date",
]
