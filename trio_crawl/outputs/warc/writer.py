"""WARC output (``--warc FILE.warc.gz``): the file that a crawl's records go to.

``WarcWriter`` owns one ``.warc.gz`` file: it opens (or resumes) it under a
lock, writes each exchange's records in one write, and counts what it wrote.
Which records a fetch becomes, and what each holds (the decoded-body rule,
truncation, dedup), is ``records.py``'s docstring.

Resume
------

``WarcWriter.open`` appends. First it calls ``repair_warc``, which cuts a torn
last gzip member left by a kill mid-write, so every record already in the file
stays whole. Each gzip member written here names its own compressed length in
an ``FEXTRA`` subfield (id ``TC``, RFC 1952 §2.3.1.1, which every gzip reader
skips). So ``repair_warc`` hops from member to member without inflating them.
It inflates only the last member, and members written by other tools. One
exchange is one ``os.write``, so a kill loses at most the exchange being
written. Call ``write_exchange`` before the page's JSON Lines record is
written, and the WARC holds every page that the output file lists.

``WarcWriter.open`` also takes an exclusive ``flock`` on the file, held as
long as any process has the descriptor open, so two writers never interleave.

This module does plain synchronous file I/O and never imports trio. What the
records hold, and their bytes, are ``records.py`` (``WarcRecords``); the gzip
members' format, the lock and the repair are ``members.py``. A crawl with
``--warc`` (or the library's ``warc=``) runs its ``WarcWriter`` in a child
process (``warc_process.py``), so the records cost the crawl no CPU.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Mapping
from types import TracebackType
from typing import BinaryIO, Self

from ...core.models import FetchResult
from .members import LOCK_TIMEOUT, lock_warc, repair_warc
from .records import DEFAULT_COMPRESSLEVEL, Parts, WarcRecords, truncation
from .revisit import RevisitOf, Stored


class WarcWriter:
    """Writes WARC records to one file, one gzip member per record.

    Not thread-safe: one writer belongs to one thread at a time. In a crawl
    with ``--warc`` (or ``warc=``) there are two, one after the other, in
    ``warc_process.py``: ``WarcProcess.start`` opens the file with
    ``WarcWriter.open`` (in a worker thread of the crawl: it may wait for the
    lock), and the child process it starts writes every exchange through its
    own ``WarcWriter`` on the inherited descriptor. Tests and tools may use
    one directly. Use ``WarcWriter.open``.
    """

    def __init__(
        self,
        file: BinaryIO,
        *,
        filename: str = "",
        request_headers: Mapping[str, str] | None = None,
        compresslevel: int = DEFAULT_COMPRESSLEVEL,
        compressor: str = "auto",
        dedup: bool = False,
        warcinfo_id: str | None = None,
        fresh_start: Mapping[str, object] | None = None,
    ) -> None:
        self._file = file
        self._fd = file.fileno() if _has_fd(file) else None
        self._filename = filename
        self._records = WarcRecords(
            request_headers=request_headers,
            compresslevel=compresslevel,
            compressor=compressor,
            dedup=dedup,
            warcinfo_id=warcinfo_id,
        )
        #: The warcinfo fields of a start put off until the first record
        #: (``open(defer_start=True)``): then the file is emptied first.
        self._fresh_start = None if fresh_start is None else dict(fresh_start)
        self.closed = False
        #: Bytes that ``open`` cut off a torn tail before appending.
        self.repaired_bytes = 0
        #: Statistics: exchanges written and bytes written to the file (records,
        #: revisits and bytes before compression: the properties below).
        self.exchanges = 0
        self.bytes_written = 0

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        info: Mapping[str, object] | None = None,
        request_headers: Mapping[str, str] | None = None,
        compresslevel: int = DEFAULT_COMPRESSLEVEL,
        compressor: str = "auto",
        dedup: bool = False,
        append: bool = True,
        lock_timeout: float = LOCK_TIMEOUT,
        defer_start: bool = False,
    ) -> WarcWriter:
        """Create ``path``, or append to it after ``repair_warc`` has cut a torn
        tail, and write a ``warcinfo`` record. ``append=False`` empties an
        existing file first (a new crawl, not a resumed one); with
        ``defer_start`` too, that and the warcinfo wait for the first exchange
        or metadata record, so a crawl that archives nothing (it reached no
        start URL) leaves an existing file as it was. (Not for a device or a
        pipe: there is nothing to keep, and a failure shows at once.)

        ``info``: the crawl's settings for the warcinfo record (values that are
        not strings are written as JSON); ``resumed: true`` is added when the
        file already held records. ``request_headers``: the headers the fetcher
        sends with every request (User-Agent, Accept-Encoding, ...), written
        into every request record after ``Host`` and before the per-call ones.
        ``compressor``: ``"auto"`` uses ISA-L when installed and the level is at
        most 3, else zlib. ``dedup``: write revisit records for repeated bodies.
        It keeps about 450 bytes per distinct body of at least
        ``DEDUP_MIN_BYTES`` (measured with 36-character URLs), so 1,000,000
        pages need about 450 MB. That is why it is off by default.

        The file is locked (``flock``) for as long as the writer, or a process
        that inherited its descriptor, has it open: a second writer waits up
        to ``lock_timeout`` seconds (a killed crawl's WARC process may still
        be writing what it was sent), then ``WarcFileBusy``.
        """
        file = open(path, "ab", buffering=0)  # noqa: SIM115 - owned by the writer
        try:
            lock_warc(file.fileno(), path, lock_timeout)
            regular = stat.S_ISREG(os.fstat(file.fileno()).st_mode)
            make = functools.partial(
                cls,
                file,
                filename=os.path.basename(os.fspath(path)),
                request_headers=request_headers,
                compresslevel=compresslevel,
                compressor=compressor,
                dedup=dedup,
            )
            if defer_start and not append and regular:
                return make(fresh_start=info or {})
            if not append and regular:
                os.truncate(file.fileno(), 0)  # not /dev/full & co: EINVAL
            repaired = repair_warc(path)
            resumed = os.path.getsize(path) > 0
            writer = make()
            writer.repaired_bytes = repaired
            fields: dict[str, object] = dict(info or {})
            if resumed:
                fields.setdefault("resumed", True)
            writer.write_warcinfo(fields)
        except BaseException:
            file.close()
            raise
        return writer

    # -- records ----------------------------------------------------------------

    def write_warcinfo(self, info: Mapping[str, object]) -> str:
        """A ``warcinfo`` record; the response records written after it refer to
        it with ``WARC-Warcinfo-ID``. Returns its WARC-Record-ID."""
        record_id, parts = self._records.warcinfo(info, self._filename)
        self._write(parts)
        self._records.warcinfo_id = record_id
        return record_id

    def write_exchange(
        self,
        *,
        url: str,
        result: FetchResult,
        request_headers: Mapping[str, str] | None = None,
        method: str = "GET",
        truncated: str | None = None,
        ip: str | None = None,
        protocol: str | None = None,
        metadata: Mapping[str, object] | None = None,
        date: float | None = None,
        revisit_of: RevisitOf | None = None,
    ) -> str:
        """``write_capture``, returning only the response's (or revisit's)
        WARC-Record-ID."""
        return self.write_capture(
            url=url,
            result=result,
            request_headers=request_headers,
            method=method,
            truncated=truncated,
            ip=ip,
            protocol=protocol,
            metadata=metadata,
            date=date,
            revisit_of=revisit_of,
        ).record_id

    def write_capture(
        self,
        *,
        url: str,
        result: FetchResult,
        request_headers: Mapping[str, str] | None = None,
        method: str = "GET",
        truncated: str | None = None,
        ip: str | None = None,
        protocol: str | None = None,
        metadata: Mapping[str, object] | None = None,
        date: float | None = None,
        revisit_of: RevisitOf | None = None,
        record_id: str | None = None,
    ) -> Stored:
        """Write one fetch: response (or revisit), request, optional metadata.

        ``url``: the URL requested (``result.url`` as a rule). ``request_headers``:
        headers sent with this request besides the writer's defaults (a
        recrawl's ``If-None-Match``...); ``Host`` comes from ``url``.
        ``truncated``: a ``WARC-Truncated`` reason; ``None`` means "unspecified"
        for a ``body_skipped`` result and not truncated otherwise.
        ``protocol``: the HTTP version for the status and request lines
        (default ``HTTP/1.1``). ``metadata``: fields for a ``metadata`` record
        (depth, referrer, outcome...). ``date``: when the fetch began (epoch
        seconds); default now minus ``result.elapsed``.

        ``revisit_of``: the page is unchanged since that earlier capture
        (``RevisitOf``, perhaps in another WARC file): a ``revisit`` record
        is written instead of a response, with the 304's own head
        (server-not-modified) or this answer's head without its body
        (identical-payload-digest); ``ValueError`` if ``result`` does not fit
        the profile (not a 304; another digest or a truncated body).
        ``record_id``: the response's (or revisit's) WARC-Record-ID, when the
        caller made it (``new_record_id``); else a new one.

        Returns that record's id and WARC date (``Stored``): what a later
        ``RevisitOf`` names. All records go to the file in one write.
        """
        truncated = truncation(result, truncated)
        if self._fresh_start is not None:
            self._start_fresh()
        stored, parts = self._records.exchange(
            url=url,
            result=result,
            request_headers=request_headers,
            method=method,
            truncated=truncated,
            ip=ip,
            protocol=protocol,
            metadata=metadata,
            date=date,
            revisit_of=revisit_of,
            record_id=record_id,
        )
        self._write(parts)
        self.exchanges += 1
        return stored

    def write_metadata(
        self, url: str, fields: Mapping[str, object], *, concurrent_to: str | None = None
    ) -> str:
        """A lone ``metadata`` record about ``url`` (e.g. a page that failed
        without a response). Returns its WARC-Record-ID."""
        if self._fresh_start is not None:
            self._start_fresh()
        record_id, parts = self._records.metadata(url, fields, concurrent_to=concurrent_to)
        self._write(parts)
        return record_id

    @property
    def pending_start(self) -> dict[str, object] | None:
        """The warcinfo fields of a start put off until the first record, if any."""
        return self._fresh_start

    def _start_fresh(self) -> None:
        """The first record of a deferred start: empty the file, then the warcinfo."""
        fields, self._fresh_start = self._fresh_start, None
        if self._fd is not None and stat.S_ISREG(os.fstat(self._fd).st_mode):
            os.truncate(self._fd, 0)
        self.write_warcinfo(fields or {})

    @property
    def warcinfo_id(self) -> str | None:
        """The record id of the ``warcinfo`` that the next records refer to
        (``warcinfo_id=`` gives a writer on an already started file the same)."""
        return self._records.warcinfo_id

    @property
    def records(self) -> int:
        """Records written (or built for the write under way)."""
        return self._records.records

    @property
    def revisits(self) -> int:
        """Revisit records among them (``dedup``)."""
        return self._records.revisits

    @property
    def raw_bytes(self) -> int:
        """Bytes of those records before compression."""
        return self._records.raw_bytes

    # -- file -------------------------------------------------------------------

    def fileno(self) -> int:
        """The file's descriptor (``WarcProcess`` hands it to its child)."""
        return self._file.fileno()

    def flush(self) -> None:
        """Records reach the OS as they are written (one unbuffered write per
        exchange), so this only flushes the file object; surviving a power loss
        would need ``os.fsync``, which the crawl does not pay for."""
        self._file.flush()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------------

    def _write(self, parts: Parts) -> None:
        if self.closed:
            raise ValueError("write to a closed WarcWriter")
        total = sum(len(p) for p in parts)
        if self._fd is not None:
            written = os.writev(self._fd, parts)
        else:
            written = self._file.write(b"".join(parts)) or 0
        if written < total:  # a short write: finish it with what is left
            rest = memoryview(b"".join(parts))[written:]
            while rest:
                n = self._file.write(rest) or 0
                rest = rest[n:]
        self.bytes_written += total


def _has_fd(file: BinaryIO) -> bool:
    try:
        file.fileno()
    except (OSError, ValueError):
        return False
    # A buffered file would hold bytes that os.writev would overtake.
    return not hasattr(file, "raw")
