"""WARC output (``--warc FILE.warc.gz``): what was fetched, as WARC 1.1 records.

What is written
---------------

* One ``warcinfo`` record when a writer opens the file, new or resumed (WARC 1.1
  §6.1: a warcinfo record describes the records after it, up to the next
  one). It names the software (``trio-crawl/<version>``) and the crawl's
  settings.
* Per fetched page, in one write: a ``response`` record, the ``request`` record
  that produced it and, if the engine passes fields, a ``metadata`` record.
  The last two carry ``WARC-Concurrent-To`` with the response's record id. The
  response comes first, as in warcio and Heritrix: indexers look for a request
  *after* its response.
* With ``dedup=True``, a page whose body is byte-identical to one already
  stored in this session gets a ``revisit`` record instead. The revisit has the
  ``identical-payload-digest`` profile and holds only the HTTP head. It
  points at the first capture with ``WARC-Refers-To``,
  ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date``.

Each record has ``WARC-Block-Digest`` (SHA-1, base32), and each response also has
``WARC-Payload-Digest``. Every record is its own gzip member, as the spec's
annex recommends for ``.warc.gz``.

The decoded-body rule
---------------------

Fetchers hand over the *decoded* body: gzip, deflate and br are already undone.
So the stored HTTP head is rewritten to match the stored bytes.
``Content-Encoding`` and ``Transfer-Encoding`` are dropped, and
``Content-Length`` is set to the stored body's length. When a stored value
differs from what the server sent, the server's value is kept as
``X-Crawler-Original-Content-Encoding``, ``X-Crawler-Original-Transfer-Encoding``
or ``X-Crawler-Original-Content-Length``. A replay tool can then serve the
record as it is. The price is that the record is not the exact bytes that
crossed the wire. Header names are lower case, as the fetcher reports them,
and a header the server repeated is one line, its values joined with ", ".

Truncation
----------

A body that was not fully downloaded is stored as far as it was, with
``WARC-Truncated`` set to one of the values that WARC 1.1 §5.13 defines:

* ``unspecified``: a body the crawler chose not to download. That is a
  non-HTML response without ``--all-bodies`` (``FetchResult.body_skipped``).
  No size or time limit caused it, so "length" and "time" would be false.
  This is the default for ``body_skipped`` results.
* ``length``: the body passed ``--max-bytes``. The engine passes it for a
  partial result it was given.
* ``time``: the body was cut by a deadline.
* ``disconnect``: the peer closed the connection mid-body.

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

This module does plain synchronous file I/O and never imports trio. The
command line runs a ``WarcWriter`` in a child process (``warc_process.py``);
``BackgroundWarcWriter`` runs one in a worker thread instead, which measured
slower in a crawl (the GIL), and is kept for library users with spare cores.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import json
import os
import queue
import stat
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from http import HTTPStatus
from types import TracebackType
from typing import Any, BinaryIO, Final, NamedTuple, Self
from urllib.parse import urlsplit

from ..core.models import FetchResult
from ..core.version import VERSION

try:  # ISA-L deflate: 3-4x faster than zlib at level 1, and smaller output
    from isal import isal_zlib

    _isal_compress: Callable[..., bytes] | None = isal_zlib.compress
except ImportError:  # pragma: no cover - the warc extra installs it
    _isal_compress = None

#: Whether ISA-L (from the ``warc`` extra) is there. Without it the writer uses
#: zlib and costs about twice the CPU; a CLI that wants the fast path can refuse
#: ``--warc`` with ``WARC_EXTRA_MESSAGE`` when this is False.
HAVE_ISAL: Final = _isal_compress is not None

#: The one-line message for a missing optional dependency.
WARC_EXTRA_MESSAGE: Final = "--warc needs the optional dependency: pip install 'trio-crawl[warc]'"

WARC_VERSION: Final = "WARC/1.1"
#: ``WARC-Truncated`` values defined by WARC 1.1 §5.13.
TRUNCATED_REASONS: Final = frozenset({"length", "time", "disconnect", "unspecified"})
REVISIT_PROFILE: Final = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
#: Deflate level of each record. On the benchmark's HTML, zlib's level 1 output
#: is about 13% bigger than level 6, for half the CPU. ISA-L's level 1 output is
#: smaller than zlib's level 1, for half of that CPU again
#: (``benchmarks/bench_warc.py``).
DEFAULT_COMPRESSLEVEL: Final = 1
#: Seconds ``WarcWriter.open`` waits for another writer of the file to finish,
#: and how often it looks.
LOCK_TIMEOUT: Final = 10.0
LOCK_POLL: Final = 0.05
#: With ``dedup``, bodies shorter than this are always stored: a revisit record's
#: head would cost about as much as the body.
DEDUP_MIN_BYTES: Final = 1024

#: The header of every gzip member written here (RFC 1952): magic, CM=deflate,
#: FLG=FEXTRA, MTIME=0, XFL, OS=unknown, XLEN=12, subfield "TC", LEN=8, and the
#: whole member's length as a little-endian uint64.
_GZ_HEADER: Final = struct.Struct("<4sIBBH2sHQ")
_GZ_MAGIC: Final = b"\x1f\x8b\x08\x04"
_GZ_SUBFIELD: Final = b"TC"
#: A plain gzip header (what zlib and isal write), replaced by ours.
_PLAIN_GZ_HEADER_SIZE: Final = 10

_REASONS: Final = {s.value: s.phrase for s in HTTPStatus}
#: Response headers that describe the wire form of a body we store decoded.
_WIRE_HEADERS: Final = frozenset({"content-encoding", "transfer-encoding", "content-length"})
_ORIGINAL_PREFIX: Final = "x-crawler-original-"

# base32 of a SHA-1 (160 bits = 32 characters), ten bits at a time: the standard
# library's b32encode is pure Python and twice as slow.
_B32_PAIRS: Final = [
    a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
]
_B32_SHIFTS: Final = tuple(range(150, -1, -10))


def _b32(digest: bytes) -> str:
    n = int.from_bytes(digest, "big")
    pairs = _B32_PAIRS
    return "".join([pairs[(n >> shift) & 1023] for shift in _B32_SHIFTS])


def _sha1(*parts: bytes) -> str:
    """A ``sha1:<base32>`` digest, as WARC-*-Digest fields carry it."""
    h = hashlib.sha1()
    for part in parts:
        h.update(part)
    return "sha1:" + _b32(h.digest())


def _record_id() -> str:
    """``<urn:uuid:...>`` with a random (version 4) UUID, minus uuid's overhead."""
    h = os.urandom(16).hex()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}>"


def _warc_date(t: float) -> str:
    """W3C-ISO8601 with microseconds, as WARC 1.1 §5.4 allows."""
    whole = int(t)
    micros = int((t - whole) * 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


def _clean(value: str) -> str:
    """A header value on one line (a CR or LF in it would forge a header)."""
    if "\r" in value or "\n" in value:
        return " ".join(value.splitlines())
    return value


def stored_response_headers(headers: Mapping[str, str], body_length: int) -> list[tuple[str, str]]:
    """The HTTP header lines stored for a decoded body of ``body_length`` bytes.

    Drops ``content-encoding`` and ``transfer-encoding``, sets ``content-length``
    to ``body_length``, and keeps a changed server value as
    ``x-crawler-original-<name>``. Other headers are kept in order, with their
    names lower case.
    """
    out: list[tuple[str, str]] = []
    originals: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name in _WIRE_HEADERS:
            if name != "content-length" or value.strip() != str(body_length):
                originals.append((_ORIGINAL_PREFIX + name, _clean(value)))
            continue
        out.append((name, _clean(value)))
    out.append(("content-length", str(body_length)))
    out.extend(originals)
    return out


def _target_and_host(url: str) -> tuple[str, str]:
    """The request-target (path and query) and Host of an absolute http(s) URL."""
    _, sep, rest = url.partition("://")
    if not sep:
        parts = urlsplit(url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), parts.netloc
    cut = len(rest)
    for ch in "/?#":
        i = rest.find(ch)
        if 0 <= i < cut:
            cut = i
    host, target = rest[:cut], rest[cut:].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target
    return target, host.rpartition("@")[2]


def _header_lines(headers: Mapping[str, str]) -> str:
    """Request header lines; ``Host`` is left out (it is written from the URL)."""
    return "".join(
        f"{name}: {_clean(value)}\r\n" for name, value in headers.items() if name.lower() != "host"
    )


def _gzip_function(level: int, compressor: str) -> Callable[[bytes], bytes]:
    """``data -> one gzip member`` (a plain 10-byte header, deflate, trailer)."""
    if compressor not in ("auto", "isal", "zlib"):
        raise ValueError(f"compressor must be auto, isal or zlib, not {compressor!r}")
    isal_compress = _isal_compress
    if compressor == "isal" and isal_compress is None:
        raise ModuleNotFoundError(WARC_EXTRA_MESSAGE)
    if isal_compress is not None and compressor != "zlib" and level <= 3:
        return lambda data: isal_compress(data, level, wbits=31)
    zlib_compress = zlib.compress
    return lambda data: zlib_compress(data, level, wbits=31)


class WarcFileBusy(OSError):
    """Another writer holds the WARC file (a second crawl, or the writer
    process of one that was killed and has not finished)."""


class _Capture(NamedTuple):
    uri: str
    date: str
    record_id: str


class WarcWriter:
    """Writes WARC records to one file, one gzip member per record.

    Not thread-safe: one writer belongs to one thread at a time (the crawler task,
    or ``BackgroundWarcWriter``'s worker). Use ``WarcWriter.open``.
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
        self._default_request_headers = _header_lines(request_headers or {})
        self._gzip = _gzip_function(compresslevel, compressor)
        self._dedup: dict[str, _Capture] | None = {} if dedup else None
        self._warcinfo_id = warcinfo_id
        #: The warcinfo fields of a start put off until the first record
        #: (``open(defer_start=True)``): then the file is emptied first.
        self._fresh_start = None if fresh_start is None else dict(fresh_start)
        self.closed = False
        #: Bytes that ``open`` cut off a torn tail before appending.
        self.repaired_bytes = 0
        #: Statistics: exchanges written, records written, revisits among them,
        #: bytes before compression, and bytes written to the file.
        self.exchanges = 0
        self.records = 0
        self.revisits = 0
        self.raw_bytes = 0
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
        fields: dict[str, object] = {
            "software": f"trio-crawl/{VERSION}",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
            "warc-format/warc-1.1/",
            "http-body": "decoded: content-encoding removed, content-length of the stored "
            "body; the server's values in x-crawler-original-* headers",
        }
        fields.update(info)
        record_id = _record_id()
        head = f"WARC-Type: warcinfo\r\nWARC-Record-ID: {record_id}\r\n"
        head += f"WARC-Date: {_warc_date(time.time())}\r\n"
        if self._filename:
            head += f"WARC-Filename: {_clean(self._filename)}\r\n"
        self._write(self._record(head, "application/warc-fields", _fields_block(fields)))
        self._warcinfo_id = record_id
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
    ) -> str:
        """Write one fetch: response (or revisit), request, optional metadata.

        ``url``: the URL requested (``result.url`` as a rule). ``request_headers``:
        headers sent with this request besides the writer's defaults; ``Host``
        comes from ``url``. ``truncated``: a ``WARC-Truncated`` reason; ``None``
        means "unspecified" for a ``body_skipped`` result and not truncated
        otherwise. ``protocol``: the HTTP version for the status and request
        lines (default ``HTTP/1.1``). ``metadata``: fields for a ``metadata``
        record (depth, referrer, outcome...). ``date``: when the fetch began
        (epoch seconds); default now minus ``result.elapsed``. Returns the
        response's WARC-Record-ID. All records go to the file in one write.
        """
        if truncated is None and result.body_skipped:
            truncated = "unspecified"
        if truncated is not None and truncated not in TRUNCATED_REASONS:
            raise ValueError(f"WARC-Truncated must be one of {sorted(TRUNCATED_REASONS)}")
        if self._fresh_start is not None:
            self._start_fresh()
        protocol = protocol or "HTTP/1.1"
        warc_date = _warc_date(time.time() - result.elapsed if date is None else date)
        body = result.body if result.network_body is None else result.network_body
        status = result.status
        http_head = "".join(
            [f"{protocol} {status} {_REASONS.get(status, '')}\r\n"]
            + [f"{n}: {v}\r\n" for n, v in stored_response_headers(result.headers, len(body))]
            + ["\r\n"]
        ).encode("utf-8")
        payload_digest = _sha1(body)
        response_id = _record_id()
        common = f"WARC-Record-ID: {response_id}\r\nWARC-Date: {warc_date}\r\n"
        common += f"WARC-Target-URI: {_clean(url)}\r\n"
        if self._warcinfo_id is not None:
            common += f"WARC-Warcinfo-ID: {self._warcinfo_id}\r\n"
        if ip:
            common += f"WARC-IP-Address: {_clean(ip)}\r\n"

        first = self._first_capture(payload_digest, url, warc_date, response_id, body, truncated)
        if first is None:
            head = "WARC-Type: response\r\n" + common
            if truncated is not None:
                head += f"WARC-Truncated: {truncated}\r\n"
            head += f"WARC-Payload-Digest: {payload_digest}\r\n"
            response = self._record(head, "application/http;msgtype=response", http_head, body)
        else:
            head = "WARC-Type: revisit\r\n" + common
            head += (
                f"WARC-Profile: {REVISIT_PROFILE}\r\n"
                f"WARC-Refers-To: {first.record_id}\r\n"
                f"WARC-Refers-To-Target-URI: {_clean(first.uri)}\r\n"
                f"WARC-Refers-To-Date: {first.date}\r\n"
                f"WARC-Payload-Digest: {payload_digest}\r\n"
            )
            response = self._record(head, "application/http;msgtype=response", http_head)
            self.revisits += 1

        target, host = _target_and_host(url)
        request_block = (
            f"{method} {target} {protocol}\r\nHost: {host}\r\n"
            + self._default_request_headers
            + (_header_lines(request_headers) if request_headers else "")
            + "\r\n"
        ).encode("utf-8")
        head = (
            f"WARC-Type: request\r\nWARC-Record-ID: {_record_id()}\r\n"
            f"WARC-Date: {warc_date}\r\nWARC-Target-URI: {_clean(url)}\r\n"
            f"WARC-Concurrent-To: {response_id}\r\n"
        )
        parts = response + self._record(head, "application/http;msgtype=request", request_block)
        if metadata:
            parts += self._metadata(_record_id(), url, metadata, warc_date, response_id)
        self._write(parts)
        self.exchanges += 1
        return response_id

    def write_metadata(
        self, url: str, fields: Mapping[str, object], *, concurrent_to: str | None = None
    ) -> str:
        """A lone ``metadata`` record about ``url`` (e.g. a page that failed
        without a response). Returns its WARC-Record-ID."""
        if self._fresh_start is not None:
            self._start_fresh()
        record_id = _record_id()
        date = _warc_date(time.time())
        self._write(self._metadata(record_id, url, fields, date, concurrent_to))
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
        return self._warcinfo_id

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

    def _first_capture(
        self,
        digest: str,
        url: str,
        warc_date: str,
        record_id: str,
        body: bytes,
        truncated: str | None,
    ) -> _Capture | None:
        """With dedup: the earlier capture of an identical body, else None (and
        remember this one)."""
        if self._dedup is None or truncated is not None or len(body) < DEDUP_MIN_BYTES:
            return None
        first = self._dedup.get(digest)
        if first is None:
            self._dedup[digest] = _Capture(url, warc_date, record_id)
        return first

    def _metadata(
        self,
        record_id: str,
        url: str,
        fields: Mapping[str, object],
        warc_date: str,
        concurrent_to: str | None,
    ) -> list[bytes | memoryview]:
        head = f"WARC-Type: metadata\r\nWARC-Record-ID: {record_id}\r\n"
        head += f"WARC-Date: {warc_date}\r\nWARC-Target-URI: {_clean(url)}\r\n"
        if concurrent_to:
            head += f"WARC-Concurrent-To: {concurrent_to}\r\n"
        return self._record(head, "application/warc-fields", _fields_block(fields))

    def _record(
        self, head: str, content_type: str, block: bytes, payload: bytes = b""
    ) -> list[bytes | memoryview]:
        """One record as a gzip member: ``head`` holds its named fields (CRLF
        after each), and ``block`` followed by ``payload`` is its content block."""
        warc_head = (
            f"{WARC_VERSION}\r\n{head}Content-Type: {content_type}\r\n"
            f"WARC-Block-Digest: {_sha1(block, payload)}\r\n"
            f"Content-Length: {len(block) + len(payload)}\r\n\r\n"
        ).encode()
        data = b"".join((warc_head, block, payload, b"\r\n\r\n"))
        self.raw_bytes += len(data)
        self.records += 1
        member = self._gzip(data)
        length = _GZ_HEADER.size + len(member) - _PLAIN_GZ_HEADER_SIZE
        # XFL=4 ("fastest"), OS=255 ("unknown"); then our subfield with the length.
        header = _GZ_HEADER.pack(_GZ_MAGIC, 0, 4, 255, 12, _GZ_SUBFIELD, 8, length)
        return [header, memoryview(member)[_PLAIN_GZ_HEADER_SIZE:]]

    def _write(self, parts: list[bytes | memoryview]) -> None:
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


def lock_warc(fd: int, path: str | os.PathLike[str], timeout: float) -> None:
    """Take the exclusive ``flock`` on an open WARC file, waiting at most
    ``timeout`` seconds; ``WarcFileBusy`` if another writer keeps it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise WarcFileBusy(errno.EBUSY, "in use by another crawl") from None
            time.sleep(LOCK_POLL)


def _has_fd(file: BinaryIO) -> bool:
    try:
        file.fileno()
    except (OSError, ValueError):
        return False
    # A buffered file would hold bytes that os.writev would overtake.
    return not hasattr(file, "raw")


def _fields_block(fields: Mapping[str, object]) -> bytes:
    """``application/warc-fields``: one ``name: value`` line per field."""
    lines = []
    for name, value in fields.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{_clean(str(name))}: {_clean(text)}\r\n")
    return "".join(lines).encode("utf-8")


# -- resume -----------------------------------------------------------------------


def repair_warc(path: str | os.PathLike[str]) -> int:
    """Cut a torn tail off a ``.warc.gz`` so that appending to it is safe.

    Walks the gzip members from the start. A member written here names its own
    length, so the walk hops over it without reading it. Members from other
    writers, and the last member, are inflated to check them. At the first
    member that is incomplete or corrupt, or at bytes that are not gzip, the
    file is truncated. A kill mid-write leaves exactly such a tail. Returns the
    number of bytes cut (0 for an intact file).

    Raises ``ValueError`` if the file does not start with a gzip member, so that
    a file that is not a WARC is never truncated to nothing.
    """
    size = os.path.getsize(path)
    if size == 0:
        return 0
    with open(path, "r+b") as f:
        good = _intact_prefix(f, size)
        if good == 0:
            f.seek(0)
            if f.read(2) != b"\x1f\x8b":
                raise ValueError(f"{os.fspath(path)} is not a gzipped WARC file")
        if good < size:
            f.truncate(good)
    return size - good


def _intact_prefix(f: BinaryIO, size: int) -> int:
    """The length of the file's longest prefix made of complete gzip members."""
    offset = 0
    while offset < size:
        f.seek(offset)
        length = _own_member_length(f.read(_GZ_HEADER.size))
        if length is not None and offset + length < size:
            offset += length  # ours, not the last: trust the length it names
            continue
        end = _inflate_member(f, offset)
        if end is None:
            return offset
        offset = end
    return offset


def _own_member_length(head: bytes) -> int | None:
    if len(head) < _GZ_HEADER.size or not head.startswith(_GZ_MAGIC):
        return None
    _, _, _, _, xlen, sub, sublen, length = _GZ_HEADER.unpack(head)
    if xlen != 12 or sub != _GZ_SUBFIELD or sublen != 8 or length <= _GZ_HEADER.size:
        return None
    return int(length)


def _inflate_member(f: BinaryIO, offset: int, chunk: int = 1 << 20) -> int | None:
    """The end offset of the complete gzip member at ``offset``, or None. The
    output is thrown away as it comes, at most ``chunk`` bytes at a time."""
    f.seek(offset)
    data = f.read(chunk)
    if not data.startswith(b"\x1f\x8b"):
        return None
    d = zlib.decompressobj(31)
    fed = offset  # file offset of ``data``
    try:
        while data:
            pending = data
            while pending:
                d.decompress(pending, chunk)
                if d.eof:  # what follows the member is in unused_data
                    return fed + len(data) - len(d.unused_data)
                pending = d.unconsumed_tail
            fed += len(data)
            data = f.read(chunk)
    except zlib.error:
        return None
    return None


def iter_members(path: str | os.PathLike[str]) -> Iterator[tuple[int, int]]:
    """``(offset, length)`` of each complete gzip member, inflating each one
    (for tests and tools)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while offset < size:
            end = _inflate_member(f, offset)
            if end is None:
                return
            yield offset, end - offset
            offset = end


# -- reading back (tests, tools) ---------------------------------------------------


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


# -- a worker thread --------------------------------------------------------------


class BackgroundWarcWriter:
    """Hands ``write_exchange`` calls to one worker thread that owns a
    ``WarcWriter``. SHA-1 and deflate release the GIL, so the crawler's thread
    pays only for putting the call on a queue (about 8 µs); the worker needs
    the GIL for about 14 µs of Python per exchange (``benchmarks/bench_warc.py``).

    ``write_exchange`` queues and returns at once. With ``max_pending``
    exchanges waiting it blocks (short sleeps) until the worker catches up,
    so memory stays bounded; an async caller can look at ``pending`` first and
    wait on its own event loop instead. A write error in the worker sticks: it
    is raised by every later call, ``close`` included (after the file is
    closed), and nothing queued after the failed call is run.

    Ordering: what is queued is written in order, and ``submit(fn, *args)``
    runs any callable in that order too. Submit the page's JSON Lines write
    after its exchange and, after a kill, no line in the output names a page
    that is missing from the WARC, as with the inline writer. Written
    directly, a line may outrun up to ``max_pending`` queued exchanges.
    """

    def __init__(self, writer: WarcWriter, *, max_pending: int = 1024) -> None:
        self.writer = writer
        self.max_pending = max_pending
        self._queue: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._submitted = 0  # only the caller's thread writes this
        self._done = 0  # only the worker writes this
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="warc-writer", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Calls queued or being run."""
        return self._submitted - self._done

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
    ) -> None:
        """``WarcWriter.write_exchange``, queued. ``date`` defaults to the time
        of this call minus ``result.elapsed``, not to the time of the write.
        ``truncated`` is checked here, so a bad value raises at the call."""
        if truncated is not None and truncated not in TRUNCATED_REASONS:
            raise ValueError(f"WARC-Truncated must be one of {sorted(TRUNCATED_REASONS)}")
        if date is None:
            date = time.time() - result.elapsed
        args = (url, result, request_headers, method, truncated, ip, protocol, metadata, date)
        self._put(self._write_exchange, args)

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` in the worker after everything queued before it."""
        self._put(fn, args)

    def flush(self) -> None:
        """Wait until everything queued is written."""
        self._wait_below(1)
        self._raise_error()

    def close(self) -> None:
        """Write what is queued, stop the worker, close the file, and raise the
        worker's error if it had one."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
            self.writer.close()
        self._raise_error()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _put(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        if self._error is not None:
            self._raise_error()
        if self._closed:
            raise ValueError("write to a closed BackgroundWarcWriter")
        if self._submitted - self._done >= self.max_pending:
            self._wait_below(self.max_pending)
        self._submitted += 1
        self._queue.put((fn, args))

    def _wait_below(self, limit: int) -> None:
        while self._submitted - self._done >= limit and self._thread.is_alive():
            time.sleep(0.0005)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _write_exchange(
        self,
        url: str,
        result: FetchResult,
        request_headers: Mapping[str, str] | None,
        method: str,
        truncated: str | None,
        ip: str | None,
        protocol: str | None,
        metadata: Mapping[str, object] | None,
        date: float,
    ) -> None:
        self.writer.write_exchange(
            url=url,
            result=result,
            request_headers=request_headers,
            method=method,
            truncated=truncated,
            ip=ip,
            protocol=protocol,
            metadata=metadata,
            date=date,
        )

    def _run(self) -> None:
        failed = False
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                if not failed:
                    fn, args = item
                    fn(*args)
            except BaseException as exc:  # handed to the caller's thread
                failed = True
                self._error = exc
            finally:
                self._done += 1
